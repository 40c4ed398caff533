"""Row lengths outside the row suite where auto takes a route that measured
weak elsewhere, against the routes that may serve them better, side by side
on the same data with the device copy of the same bytes:

    python benchmarks/softmax_route_gaps.py [--json PATH] [--reps 20]
        [--precisions bf16,fp32] [--shapes 1024x200064,...] [--torch] [--b2b]

Found with ``drvgemm plan --softmax`` over common vocabulary sizes:
- 16-bit rows of ~57K..91K elements (64000, 65536), many rows: no rung 11
  config holds them at least 0.7 full (512 x 7 x 2 holds 7168 vectors, 256 x
  8 x 8 16384), so auto takes rung 08's cluster a row with nothing of the next
  row in flight (0.71-0.80 of copy on the vocabulary rows before rung 11;
  the planner's model says 0.72). Candidates: rung 11 slices of 8192 and
  10240 vectors on clusters of 2 and 4.
- aligned fp32 rows past 131072 (163840, 200064, 262144), many rows: rung 04's
  two-pass stream (2 reads + 1 write: 0.63-0.65 of copy at 512 x 151936 in the
  sixteenth round), against rung 09's split rows in passes of the resident
  grid (1 read + 1 write; 0.75-0.77 at 64 x 262144 / 16 x 1048576 in two
  passes, unmeasured at 30).

The thirty-sixth round measured both (`results/h200-softmax-route-gaps.json`)
and moved both routes: rung 11's 512 x 8 x 2 (0.86-0.92 of copy against rung
08's 0.84-0.85), rung 09's passes (0.83-0.88 against the stream's 0.64); their
shapes left the list. Added after that run:
- 16-bit rows of 10241..11468 vectors (~82K..91K elements), many rows: still
  rung 08 (no rung 11 config holds them 0.7 full). Candidates: rung 11 slices of
  11264 / 12288 vectors (256 x 22 x 2, 512 x 6 x 4 with 2 or 3 stages).
- aligned 16-bit rows past a packed cluster (> 262144), many rows: rung 04's
  stream against rung 09's chunks, packed (8 vectors) and unpacked (4).

Added in the fortieth round:
- 16-bit rows of ~196K..202K elements (200064; 200019, odd; 202048), many
  rows: rung 11's 512 x 8 x 8 holds them 0.76-0.77 full (the planner's model:
  0.81 of copy). Candidates: slices the row fills whole -- 512 x 7 x 7 (25088
  vectors, two and three stages; not 202048), 512 x 10 x 5 (25600), 256 x 14 x
  7, 512 x 8 x 7 (the model: 0.87-0.93; clusters of 7 and 5 leave 2 and 1 of a
  GPC's 16 SMs idle). No spills under NVRTC 13.0 or 13.5 (100-128 registers a
  thread at 512).
- 16-bit rows of 152064 / 200064 with 64 rows: rung 08, a cluster a row (the
  model: 0.69 / 0.59; clusters of 7 pack badly), against rung 09's chunks
  (packed and unpacked; 0.74) and, for 152064, rung 11's 512 x 10 x 4 with
  two rows a cluster.
- vocabulary rows with 64-256 rows (bf16 256 x 50257, 128 x 151936; fp32 128 x
  50257, 64 x 128256): rung 08, a cluster a row (the model: 0.63-0.71, but rung
  08 measured 0.84-0.85 on 1024 / 8192 rows of 64K, where many clusters'
  phases overlap), against the rung-11 (fp32 128256: rung 06) config auto
  takes for 1024 rows of the same length, ~4 rows a resident cluster here, and
  rung 09's chunks (0.74).
- lengths between the rung-11 slices, where auto falls back to rung 08 with a
  cluster's window part empty (the model: 0.53-0.71): bf16 rows of ~33K..40K
  (4096 x 36001: past rung 07's block, under 0.7 of 512 x 7 x 2), fp32 odd rows
  of ~17K..37K, ~53K..91K and ~155K..199K (4096 x 28001, 4096 x 72001, 2048 x
  180001). Candidates: slices each row fills 0.85-1.0 (the model: 0.86-0.93),
  96-234 registers a thread, no spills.

Added in the forty-second round, the suite's own 64 x 262144 (below 0.85 of copy
back to back on the H200 in both precisions):
- bf16: rung 08, a cluster of 8 a row (0.72 / 0.74), against rung 11's 512 x 8
  x 8 (held whole, ~4 rows a resident cluster where auto asks for 8; the
  fortieth round measured 256 x 50257 on ~4 rows a cluster at +0.05 over rung
  08 on the H100), rung 11 on clusters of 16 with 4 vectors a thread (~9 rows a
  cluster), and rung 09's chunks with a shared part (0.86 / 0.84 against rung
  08's 0.82 / 0.85 on the H100).
- fp32: rung 09 in two passes (0.80 / 0.78), against rung 11 on clusters of 16
  (the non-portable size: 512 x 8 x 16 holds the row's 65536 vectors; ~9 rows a
  resident cluster, the next row landing while this one is written).
Measured (H200, forty-second round, of copy, one call / back to back): no route
wins. bf16 rung 08 0.716 / 0.720, rung 09's chunks 0.731 / 0.690, rung 11 0.650-
0.703 / 0.638-0.716; fp32 rung 09 0.811 / 0.780, rung 11 on 16 0.753-0.775 /
0.744-0.771. The shapes stay listed for the next change to either rung.

The first candidate of each shape is auto's choice today (since the fortieth
round's run, rung 11's 512 x 5 x 2, 512 x 9 x 4 (fp32), 512 x 7 x 7 and 512 x 8
x 7 on the shapes they measured best on, what auto took before them second). Every output is
checked on sampled rows and whole-row sums."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax.registry import (  # noqa: E402
    PIPELINED_CONFIGS, STREAM_CONFIG, WindowConfig)
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402


def _c08(threads, items, cluster, min_blocks):
    return WindowConfig("softmax_08_any_row_cluster", threads, items, 8, cluster=cluster,
                        min_blocks=min_blocks, packed=True)


def _c11(threads, items, cluster, stages):
    return WindowConfig("softmax_11_any_row_pipelined", threads, items, 8, cluster=cluster,
                        stages=stages, packed=True)


def _f08(threads, items, cluster, min_blocks):
    return WindowConfig("softmax_08_any_row_cluster", threads, items, 4, cluster=cluster,
                        min_blocks=min_blocks)


def _f11(threads, items, cluster, stages):
    return WindowConfig("softmax_11_any_row_pipelined", threads, items, 4, cluster=cluster,
                        stages=stages)


def _split16(items, packed=False):
    return WindowConfig("softmax_09_split_row", 512, items, 8, min_blocks=2, packed=packed)


_NEAR_90K_16 = [_c08(256, 8, 6, 4), _c11(256, 22, 2, 2), _c11(512, 6, 4, 3), _c11(512, 6, 4, 2)]
_LONG_16 = [STREAM_CONFIG, _split16(8, packed=True), _split16(4)]
_VOCAB_200K_16 = [_c11(512, 7, 7, 2), _c11(512, 8, 8, 3), _c11(512, 7, 7, 3), _c11(512, 10, 5, 2),
                  _c11(256, 14, 7, 3)]
_VOCAB_202K_16 = [_c11(512, 8, 7, 3), _c11(512, 8, 8, 3), _c11(512, 10, 5, 2)]
_FEW_200K_16 = [_c08(512, 8, 7, 2), _split16(8, packed=True), _split16(4)]
_GAP_36K_16 = [_c11(512, 5, 2, 2), _c08(512, 8, 2, 2), _c11(512, 5, 2, 3), _c11(256, 10, 2, 3)]
_GAP_28K_32 = [_f08(512, 7, 2, 2), _f11(256, 14, 2, 3), _f11(512, 7, 2, 3), _f11(256, 8, 4, 3)]
_GAP_72K_32 = [_f11(512, 9, 4, 2), _f08(512, 5, 8, 2), _f11(256, 12, 6, 3), _f11(256, 10, 8, 3)]
_GAP_180K_32 = [_f08(512, 12, 8, 1), _f11(256, 22, 8, 2), _f11(512, 11, 8, 2)]
_MID_50K_16 = [_c08(256, 8, 4, 4), _c11(512, 7, 2, 3), _split16(8, packed=True)]
_MID_152K_16 = [WindowConfig("softmax_08_any_row_cluster", 512, 5, 8, cluster=8, min_blocks=1),
                _c11(512, 10, 4, 2), _split16(8, packed=True)]
_MID_50K_32 = [WindowConfig("softmax_08_any_row_cluster", 256, 8, 4, cluster=7, min_blocks=4),
               WindowConfig("softmax_11_any_row_pipelined", 256, 13, 4, cluster=4, stages=3),
               WindowConfig("softmax_09_split_row", 512, 8, 4, min_blocks=2)]
_MID_128K_32 = [WindowConfig("softmax_08_any_row_cluster", 512, 8, 4, cluster=8, min_blocks=2),
                PIPELINED_CONFIGS[-1],
                WindowConfig("softmax_09_split_row", 512, 8, 4, min_blocks=2)]
_SUITE_64_262K_16 = [_c08(512, 8, 8, 2), _c11(512, 8, 8, 3), _c11(512, 8, 8, 2),
                     _c11(512, 4, 16, 3), _c11(256, 8, 16, 3),
                     WindowConfig("softmax_09_split_row", 512, 6, 8, min_blocks=2, packed=True,
                                  shared_items=11)]
_SUITE_64_262K_32 = [WindowConfig("softmax_09_split_row", 512, 7, 4, min_blocks=2, shared_items=9),
                     _f11(512, 8, 16, 2), _f11(512, 8, 16, 3), _f11(256, 16, 16, 2)]
_FEW_152K_16 = [WindowConfig("softmax_08_any_row_cluster", 512, 5, 8, cluster=8, min_blocks=1),
                _split16(8, packed=True), _split16(4), _c11(512, 10, 4, 2)]

# precision -> (rows, cols) -> candidates; the first is auto's choice today.
CANDIDATES = {
    "bf16": {(8192, 88000): _NEAR_90K_16, (2048, 90000): _NEAR_90K_16,
             (1024, 393216): _LONG_16, (512, 524288): _LONG_16,
             (1024, 200064): _VOCAB_200K_16, (8192, 200019): _VOCAB_200K_16,
             (2048, 202048): _VOCAB_202K_16,
             (64, 200064): _FEW_200K_16, (64, 152064): _FEW_152K_16,
             (256, 50257): _MID_50K_16, (128, 151936): _MID_152K_16,
             (4096, 36001): _GAP_36K_16, (64, 262144): _SUITE_64_262K_16},
    "fp32": {(128, 50257): _MID_50K_32, (64, 128256): _MID_128K_32,
             (4096, 28001): _GAP_28K_32, (4096, 72001): _GAP_72K_32,
             (2048, 180001): _GAP_180K_32, (64, 262144): _SUITE_64_262K_32},
}


def main(argv=None) -> int:
    return side_by_side(CANDIDATES, argv, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
