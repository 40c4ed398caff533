"""Softmax rung 10's lane groups on 16-bit rows one past a config's slots
(17, 33, 65, 129: a row of row_threads * elems + 1 fits that config, as its
lanes hold the row's lone first and last elements beside their whole words),
against the config the rung took before (twice the lanes, half of its slots
empty) and rung 07's config for the shape, side by side on the same data with
the device copy of the same bytes, bf16 and fp16; and for fp32 rows of 33..40
rung 10's one lane of 40 slots against its two lanes of 32 and rung 07:

    python benchmarks/softmax_row_tile_lanes.py [--json PATH] [--reps 20]
        [--precisions bf16] [--shapes 262144x33,65536x129]

Every output is checked on sampled rows and whole-row sums (the sweep's
``max_rel_err`` / ``row_sum_err``)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax import plan as smplan  # noqa: E402
from drvgemm.ladders.softmax.registry import ROW_TILE_CONFIGS  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402

SHAPES = ((524288, 17), (262144, 33), (131072, 65), (65536, 129), (262144, 31), (131072, 127),
          (262144, 36), (262144, 37), (262144, 41))
# fp32 rows of 33..40: rung 10's one lane of 40 slots (128-thread blocks), its two
# lanes of 32, and rung 07 (auto's before; still for even rows, whose one-lane
# slots share banks: 32 / gcd(cols, 32) banks for a warp's 32 rows).
FP32_SHAPES = ((262144, 33), (262144, 34), (262144, 35), (262144, 39), (262144, 40))


def _tile(row_threads, elems):
    return next(c for c in ROW_TILE_CONFIGS if (c.row_threads, c.elems) == (row_threads, elems))


def candidates(prec: str) -> dict:
    """(rows, cols): rung 10 at the lanes the 16-bit fit gives and at the
    next lane count up, and rung 07's config for the shape."""
    out = {}
    for rows, cols in SHAPES:
        tight = next(c for c in ROW_TILE_CONFIGS if c.fits(cols, (9, 0), 2))
        wider = [c for c in ROW_TILE_CONFIGS
                 if c.row_threads == 2 * tight.row_threads and c.elems == 32]
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
        out[(rows, cols)] = [_tile(1, 40), _tile(2, 32), window]
    return out


def main(argv=None):
    cands = {prec: candidates(prec) for prec in ("bf16", "fp16")}
    cands["fp32"] = fp32_candidates()
    return side_by_side(cands, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
