"""Split rows with more of each chunk held on chip (rung 09): 16-bit chunks
held packed (PACKED=1, two elements a register), fp32 chunks with a part in
shared memory (SITEMS, copied there by cp.async), and 16-bit packed chunks
with a part in shared memory as well (the thirty-eighth round), so the
resident grid holds more of the rows at once and they take fewer passes
(bf16 16 x 1048576: one instead of two); one 1024-thread block an SM against
two of 512; 16-bit rows of 1048576 on one cluster of 16 (rung 08). Each
against what auto took before, side by side on the same data with the device copy of the same bytes (the
twenty-second round's 16-bit rows of 8 on one lane of rung 04, measured and
routed, left the list in the thirty-eighth):

    python benchmarks/softmax_split_held.py [--json PATH] [--reps 20] [--torch] [--b2b]
        [--precisions fp32,bf16,fp16] [--shapes 16x1048576,...]

Every output is checked on sampled rows and whole-row sums (the sweep's
``max_rel_err`` / ``row_sum_err``)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax.registry import WindowConfig  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402


def _c09(items, packed=False, shared_items=0, threads=512):
    return WindowConfig("softmax_09_split_row", threads, items, 8, min_blocks=1024 // threads,
                        packed=packed, shared_items=shared_items)


_HELD = _c09(6, True, 11)    # packed, with 11 vectors a thread in shared memory


def _f09(items, shared_items=0, threads=512):
    return WindowConfig("softmax_09_split_row", threads, items, 4, min_blocks=1024 // threads,
                        shared_items=shared_items)


_STREAM = WindowConfig("softmax_09_split_row_stream", 512, 2, 8, min_blocks=2)
_STREAM_FP32 = WindowConfig("softmax_09_split_row_stream", 512, 4, 4, min_blocks=2)
_C08 = WindowConfig("softmax_08_any_row_cluster", 512, 8, 8, cluster=8, min_blocks=2, packed=True)
# a 16-bit row of 1048576 (aligned) in the registers of one cluster of 16 whole SMs: the
# row's wait is a cluster's exchange through distributed shared memory, not the grid's
# through L2, at the price of 64 SMs loading 4 rows (an SM pulls up to ~2x its share)
_C08_16 = WindowConfig("softmax_08_any_row_cluster", 1024, 8, 8, cluster=16, min_blocks=1,
                       packed=True)


# (rows, cols): candidates; the first is what auto took before this change. The
# 1024-thread blocks (one an SM, the same bytes a thread) ask whether a block's
# fold waits behind the stores of the other row's block on its SM (the split
# timeline: the last block of fp32 4 x 1048576 folds 2.2 us after the median);
# the cluster of 16 whether a cluster's exchange beats the grid's wait.
FP32_CANDIDATES = {
    (4, 1048576): [_f09(8), _f09(8, threads=1024)],
    (16, 1048576): [_f09(7, 9), _f09(7, 9, threads=1024)],
    (64, 262144): [_f09(7, 9), _f09(7, 9, threads=1024)],
    (2, 8388608): [_f09(7, 9), _STREAM_FP32],
}
CANDIDATES = {
    (16, 1048576): [_c09(8, True), _HELD, _c09(7, True, 10, threads=1024), _C08_16],
    (32, 1048576): [_c09(8, True), _HELD],
    (8, 2097152): [_c09(8, True), _HELD],
    (4, 1048576): [_c09(4), _c09(8, True), _c09(4, threads=1024), _C08_16],
    (64, 262144): [_C08, _c09(8, True), _HELD],
    (2, 8388608): [_c09(8, True), _HELD, _STREAM],
}


def main(argv=None):
    return side_by_side({"fp32": FP32_CANDIDATES, "bf16": CANDIDATES, "fp16": CANDIDATES}, argv,
                        __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
