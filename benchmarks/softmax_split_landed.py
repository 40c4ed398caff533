"""Split rows whose chunks land by bulk copies (rung 09, STAGES > 0): a
block's chunk of the slot's next row arrives in a landing buffer while this
row waits for its peers and is written, so the reads of one pass overlap the
writes of the last. Each against what auto takes without it, side by side on
the same data with the device copy of the same bytes:

    python benchmarks/softmax_split_landed.py [--json PATH] [--reps 20] [--torch]
        [--precisions fp32,bf16,fp16] [--shapes 16x1048576,...]

Every output is checked on sampled rows and whole-row sums (the sweep's
``max_rel_err`` / ``row_sum_err``)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax.registry import WindowConfig  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402


def _f09(items, shared_items=0, stages=0):
    return WindowConfig("softmax_09_split_row", 512, items, 4, min_blocks=2,
                        shared_items=shared_items, stages=stages)


def _h09(items, packed=False, stages=0):
    return WindowConfig("softmax_09_split_row", 512, items, 8, min_blocks=2, packed=packed,
                        stages=stages)


_C08 = WindowConfig("softmax_08_any_row_cluster", 512, 8, 8, cluster=8, min_blocks=2, packed=True)

# (rows, cols): candidates; the first is what auto takes without landing buffers.
FP32_CANDIDATES = {
    (16, 1048576): [_f09(7, 9), _f09(7, stages=1), _f09(4, stages=2), _f09(4, stages=3)],
    (64, 262144): [_f09(7, 9), _f09(7, stages=1), _f09(4, stages=2), _f09(4, stages=3)],
    (4, 1048576): [_f09(8), _f09(7, stages=1), _f09(4, stages=2)],
    (3, 777777): [_f09(8), _f09(7, stages=1), _f09(4, stages=2)],
}
CANDIDATES = {
    (16, 1048576): [_h09(8, True), _h09(8, True, 1), _h09(4, True, 2), _h09(4, True, 3)],
    (64, 262144): [_C08, _h09(8, True, 1), _h09(4, True, 2), _h09(4, True, 3)],
    (4, 1048576): [_h09(4), _h09(8, True, 1), _h09(4, True, 2)],
    (3, 777777): [_h09(4), _h09(8, True, 1), _h09(4, True, 2)],
}


def main(argv=None):
    return side_by_side({"fp32": FP32_CANDIDATES, "bf16": CANDIDATES, "fp16": CANDIDATES}, argv,
                        __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
