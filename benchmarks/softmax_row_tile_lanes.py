"""Softmax rung 10's lane groups on 16-bit rows one past a config's slots
(17, 33, 65, 129: a row of row_threads * elems + 1 fits that config, as its
lanes hold the row's lone first and last elements beside their whole words),
against the config the rung took before (twice the lanes, half of its slots
empty) and rung 07's config for the shape, side by side on the same data with
the device copy of the same bytes, bf16 and fp16; and for fp32 rows of 33..40
rung 10's one lane of 40 slots against its two lanes of 32 and rung 07:

    python benchmarks/softmax_row_tile_lanes.py [--json PATH] [--reps 20]
        [--precisions bf16] [--shapes 262144x33,65536x129] [--wide]

``--wide``: 64 slots a lane at 128 registers (WIDE below) against auto and rung 07.

Every output is checked on sampled rows and whole-row sums (the sweep's
``max_rel_err`` / ``row_sum_err``)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax import plan as smplan  # noqa: E402
from drvgemm.ladders.softmax.registry import ROW_TILE_CONFIGS, SoftmaxConfig  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402

SHAPES = ((524288, 17), (262144, 33), (131072, 65), (65536, 129), (262144, 31), (131072, 127),
          (262144, 36), (262144, 37), (262144, 41),
          # 16-bit rows whose one lane crowds the banks (auto: two lanes)
          (262144, 40), (262144, 48), (131072, 64))
# fp32 rows of 33..40: rung 10's one lane of 40 slots (128-thread blocks), its two
# lanes of 32, and rung 07 (auto's before; still for even rows, whose one-lane
# slots share banks: 32 / gcd(cols, 32) banks for a warp's 32 rows).
FP32_SHAPES = ((262144, 33), (262144, 34), (262144, 35), (262144, 39), (262144, 40))


def _tile(row_threads, elems):
    return next(c for c in ROW_TILE_CONFIGS if (c.row_threads, c.elems) == (row_threads, elems))


# Two lanes of 32 slots: rung 10's config for rows of 33..64 before the one-lane
# configs replaced it (no longer registered; compiled here for the comparison).
TWO_LANES = SoftmaxConfig("softmax_10_row_tile", 256, 2, elems=32, min_blocks=4, walks=True)


def candidates(prec: str) -> dict:
    """(rows, cols): rung 10 at the lanes the 16-bit fit gives and at the
    next lane count up, and rung 07's config for the shape."""
    out = {}
    for rows, cols in SHAPES:
        tight = next(c for c in ROW_TILE_CONFIGS if c.fits(cols, (9, 0), 2))
        # (a crowded row on the wider lanes needs their vectors' room: those that
        # cannot hold it are left out, as the sweep would skip them)
        wider = [c for c in ROW_TILE_CONFIGS + (TWO_LANES,)
                 if c.row_threads == 2 * tight.row_threads and c.elems == 32
                 and c.fits(cols, (9, 0), 2)]
        if tight.elems == 16:   # rows of 17: the 32-slot single lane the rung took before
            wider = [_tile(1, 32)]
        window = smplan.plan(rows, cols, prec, kernel="softmax_07_any_row").config
        out[(rows, cols)] = [tight] + wider + [window]
    return out


def fp32_candidates() -> dict:
    """(rows, cols): rung 10's configs of one lane of 40 and two lanes of 32,
    and rung 07's config for the shape."""
    out = {}
    for rows, cols in FP32_SHAPES:
        window = smplan.plan(rows, cols, "fp32", kernel="softmax_07_any_row").config
        out[(rows, cols)] = [_tile(1, 40), TWO_LANES, window]
    return out


# Wider lanes at two blocks' registers: 64 slots a lane in 128-thread blocks at
# 128 registers (four blocks an SM; compiled here without spills, the rotated
# 16-bit build too): 16-bit rows of up to 129 on two lanes, 65 on one; fp32 rows
# of up to 64 on one lane (one tile buffer).
WIDE = (SoftmaxConfig("softmax_10_row_tile", 128, 2, elems=64, min_blocks=4, walks=True),
        SoftmaxConfig("softmax_10_row_tile", 128, 1, elems=64, min_blocks=4, walks=True))
WIDE_SHAPES = {"bf16": ((131072, 127), (65536, 129), (131072, 100), (131072, 65), (262144, 48)),
               "fp32": ((262144, 41), (262144, 63), (262144, 48))}


def wide_candidates(prec: str) -> dict:
    """(rows, cols): the wide configs that hold the row, auto's plan and rung 07's."""
    out = {}
    size = 4 if prec == "fp32" else 2
    for rows, cols in WIDE_SHAPES["fp32" if prec == "fp32" else "bf16"]:
        auto = smplan.plan(rows, cols, prec).config
        window = smplan.plan(rows, cols, prec, kernel="softmax_07_any_row").config
        fits = [c for c in WIDE if c.fits(cols, (9, 0), size)]
        out[(rows, cols)] = fits + [auto] + ([window] if window != auto else [])
    return out


def main(argv=None):
    if "--wide" in (argv if argv is not None else sys.argv[1:]):
        argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--wide"]
        return side_by_side({prec: wide_candidates(prec) for prec in ("bf16", "fp16", "fp32")},
                            argv, __doc__.splitlines()[0])
    cands = {prec: candidates(prec) for prec in ("bf16", "fp16")}
    cands["fp32"] = fp32_candidates()
    return side_by_side(cands, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
