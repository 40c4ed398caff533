"""Row lengths outside the row suite where auto takes a route that measured
weak elsewhere, against the routes that may serve them better, side by side
on the same data with the device copy of the same bytes:

    python benchmarks/softmax_route_gaps.py [--json PATH] [--reps 20]
        [--precisions fp32,bf16] [--shapes 1024x65536,...] [--torch]

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

Added after the thirty-sixth round's run (which changed both routes above):
- 16-bit rows of 10241..11468 vectors (~82K..91K elements), many rows: still
  rung 08 (no rung 11 config holds them 0.7 full). Candidates: rung 11 slices of
  11264 / 12288 vectors (256 x 22 x 2, 512 x 6 x 4 with 2 or 3 stages).
- aligned 16-bit rows past a packed cluster (> 262144), many rows: rung 04's
  stream against rung 09's chunks, packed (8 vectors) and unpacked (4).

The first candidate of each shape is auto's choice today. Every output is
checked on sampled rows and whole-row sums."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax.registry import STREAM_CONFIG, WindowConfig  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402


def _c08(threads, items, cluster, min_blocks):
    return WindowConfig("softmax_08_any_row_cluster", threads, items, 8, cluster=cluster,
                        min_blocks=min_blocks, packed=True)


def _c11(threads, items, cluster, stages):
    return WindowConfig("softmax_11_any_row_pipelined", threads, items, 8, cluster=cluster,
                        stages=stages, packed=True)


def _split(items, shared_items=0):
    return WindowConfig("softmax_09_split_row", 512, items, 4, min_blocks=2,
                        shared_items=shared_items)


def _split16(items, packed=False):
    return WindowConfig("softmax_09_split_row", 512, items, 8, min_blocks=2, packed=packed)


_VOCAB_16 = [_c08(256, 8, 4, 4), _c11(512, 8, 2, 3), _c11(256, 16, 2, 3), _c11(512, 10, 2, 2),
             _c11(256, 8, 4, 3), _c11(512, 5, 4, 3)]
_LONG_32 = [STREAM_CONFIG, _split(7, 9), _split(8)]
_NEAR_90K_16 = [_c08(256, 8, 6, 4), _c11(256, 22, 2, 2), _c11(512, 6, 4, 3), _c11(512, 6, 4, 2)]
_LONG_16 = [STREAM_CONFIG, _split16(8, packed=True), _split16(4)]

# precision -> (rows, cols) -> candidates; the first is auto's choice today.
CANDIDATES = {
    "bf16": {(1024, 65536): _VOCAB_16, (8192, 64000): _VOCAB_16,
             (8192, 88000): _NEAR_90K_16, (2048, 90000): _NEAR_90K_16,
             (1024, 393216): _LONG_16, (512, 524288): _LONG_16},
    "fp32": {(1024, 262144): _LONG_32, (1024, 200064): _LONG_32, (2048, 163840): _LONG_32},
}


def main(argv=None) -> int:
    return side_by_side(CANDIDATES, argv, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
