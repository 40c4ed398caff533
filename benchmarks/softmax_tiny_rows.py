"""Rows of 1..3 elements (1048576 x 1 is the one small shape of the suite
slower per call than torch): rung 04's lane a row (what auto takes, one
4-byte or 2-byte access a lane) against rung 10's row tile, whose block copies
its run of rows in 16-byte vectors into shared memory and writes them back
the same way, side by side on the same data with the device copy of the same
bytes:

    python benchmarks/softmax_tiny_rows.py [--json PATH] [--reps 20] [--torch]
        [--precisions fp32,bf16] [--shapes 1048576x1,...]

Every output is checked on sampled rows and whole-row sums."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax.registry import SoftmaxConfig  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402

_RUNG04 = SoftmaxConfig("softmax_04_vectorized_rows", 128, 1, elems=4, vector=True)


def _tile(threads, elems, min_blocks=4):
    return SoftmaxConfig("softmax_10_row_tile", threads, 1, elems=elems, min_blocks=min_blocks,
                         walks=True)


# (rows, cols): candidates; the first is what auto takes.
CANDIDATES = {(1048576, c): [_RUNG04, _tile(256, 4), _tile(256, 16), _tile(128, 4, 8)]
              for c in (1, 2, 3)}


def main(argv=None):
    return side_by_side({prec: CANDIDATES for prec in ("fp32", "bf16")}, argv,
                        __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
