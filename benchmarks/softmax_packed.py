"""16-bit rows held packed (two elements a register, PACKED=1) against the
unpacked configs auto took before, side by side on the same data with the
device copy of the same bytes, bf16 and fp16:

    python benchmarks/softmax_packed.py [--json PATH] [--reps 20]

For each shape: the config auto took before packed configs existed, the one
it takes now, and neighbours (other cluster sizes and block shapes). Every
output is checked on sampled rows and whole-row sums (the sweep's
``max_rel_err`` / ``row_sum_err``)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax.registry import WindowConfig  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402


def _c08(threads, items, cluster, min_blocks, packed=False):
    return WindowConfig("softmax_08_any_row_cluster", threads, items, 8, cluster=cluster,
                        min_blocks=min_blocks, packed=packed)


def _c07(threads, items, packed=False):
    return WindowConfig("softmax_07_any_row", threads, items, 8, row_threads=threads,
                        min_blocks=1024 // threads, packed=packed)


# (rows, cols): candidates; the first is auto's choice before packed configs.
CANDIDATES = {
    (8192, 50257): [_c08(256, 4, 7, 4), _c08(512, 8, 2, 2, True), _c08(256, 8, 4, 4, True),
                    _c08(512, 6, 3, 2, True), _c08(256, 6, 5, 4, True)],
    (1024, 50257): [_c08(256, 4, 7, 4), _c08(512, 8, 2, 2, True), _c08(256, 8, 4, 4, True)],
    (1024, 128256): [_c08(512, 4, 8, 2), _c08(256, 8, 8, 4, True), _c08(512, 8, 4, 2, True),
                     _c08(512, 6, 6, 2, True)],
    (2048, 32000): [_c08(512, 4, 2, 2), _c07(512, 8, True), _c08(256, 8, 2, 4, True)],
    (777, 12345): [_c07(512, 4), _c07(256, 7, True)],   # 256 x 6 x 8 holds 12288: never ran
    (2048, 16384): [_c07(512, 4), _c07(256, 8, True)],
    (4096, 4097): [_c07(256, 4), _c07(128, 5, True), _c07(128, 6, True), _c07(256, 3)],
    (512, 151936): [_c08(512, 5, 8, 1), _c08(512, 6, 8, 2, True), _c08(512, 8, 6, 2, True),
                    _c08(512, 8, 5, 2, True), _c08(512, 8, 8, 2, True)],
}


def main(argv=None):
    return side_by_side({prec: CANDIDATES for prec in ("bf16", "fp16")}, argv,
                        __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
