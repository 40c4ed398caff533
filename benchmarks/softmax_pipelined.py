"""Softmax rung 11 (persistent window clusters, bulk-copied landing buffers)
against the configs auto took before it, side by side on the same data with
the device copy of the same bytes:

    python benchmarks/softmax_pipelined.py [--json PATH] [--reps 20]
        [--precisions fp32,bf16] [--shapes 8192x50257,...]

For each shape: the config auto took before rung 11 first, then rung 11's
registered config and neighbours (other cluster sizes, slices and stage
counts), and for aligned fp32 rows rung 06 (what auto keeps there). Every
output is checked on sampled rows and whole-row sums (the sweep's
``max_rel_err`` / ``row_sum_err``)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax.registry import STREAM_CONFIG, WindowConfig, pipelined  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402


def _c08(vec, threads, items, cluster, min_blocks, packed=False):
    return WindowConfig("softmax_08_any_row_cluster", threads, items, vec, cluster=cluster,
                        min_blocks=min_blocks, packed=packed)


def _c11(vec, threads, items, cluster, stages):
    return WindowConfig("softmax_11_any_row_pipelined", threads, items, vec, cluster=cluster,
                        stages=stages, packed=vec == 8)


# precision -> (rows, cols) -> candidates; the first is auto's choice before rung 11.
CANDIDATES = {
    "fp32": {
        (8192, 50257): [_c08(4, 256, 8, 7, 4), _c11(4, 256, 13, 4, 3), _c11(4, 256, 7, 8, 3),
                        _c11(4, 512, 7, 4, 2), _c11(4, 512, 7, 4, 3), _c11(4, 384, 9, 4, 3),
                        _c11(4, 256, 7, 8, 4), _c11(4, 512, 4, 8, 3), _c11(4, 1024, 4, 4, 3)],
        (1024, 50257): [_c08(4, 256, 8, 7, 4), _c11(4, 256, 13, 4, 3), _c11(4, 256, 7, 8, 3),
                        _c11(4, 512, 7, 4, 3), _c11(4, 384, 9, 4, 3), _c11(4, 256, 7, 8, 4)],
        (512, 151936): [STREAM_CONFIG, _c11(4, 256, 19, 8, 2), _c11(4, 512, 10, 8, 2),
                        _c11(4, 1024, 5, 8, 2), _c11(4, 384, 13, 8, 2)],
        (1024, 128256): [pipelined(256, 64, 8, 3), _c11(4, 256, 16, 8, 3), _c11(4, 512, 8, 8, 3)],
        (2048, 32000): [pipelined(512, 32, 2, 3), _c11(4, 512, 8, 2, 3)],
        # few rows of 1 MiB: the split rung (auto) against non-portable clusters of 16
        (64, 262144): [WindowConfig("softmax_09_split_row", 512, 8, 4, min_blocks=2),
                       _c11(4, 256, 16, 16, 3), _c11(4, 512, 8, 16, 3)],
    },
    "bf16": {
        (8192, 50257): [_c08(8, 256, 8, 4, 4, True), _c11(8, 512, 7, 2, 3), _c11(8, 256, 13, 2, 3),
                        _c11(8, 1024, 4, 2, 3)],
        (1024, 50257): [_c08(8, 256, 8, 4, 4, True), _c11(8, 512, 7, 2, 3), _c11(8, 256, 7, 4, 3)],
        (1024, 128256): [_c08(8, 256, 8, 8, 4, True), _c11(8, 256, 8, 8, 3), _c11(8, 512, 8, 4, 3),
                         _c11(8, 256, 16, 4, 3), _c11(8, 384, 6, 8, 3)],
        (512, 151936): [_c08(8, 512, 8, 5, 2, True), _c11(8, 512, 5, 8, 3), _c11(8, 512, 10, 4, 2),
                        _c11(8, 256, 10, 8, 3), _c11(8, 512, 8, 5, 3), _c11(8, 512, 7, 6, 3)],
        (64, 262144): [_c08(8, 512, 8, 8, 2, True), _c11(8, 512, 8, 8, 3), _c11(8, 256, 16, 8, 3),
                       _c11(8, 256, 8, 16, 3), _c11(8, 512, 4, 16, 3)],
    },
}


def main(argv=None):
    return side_by_side(CANDIDATES, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
