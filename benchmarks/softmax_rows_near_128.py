"""fp32 rows of 127 and 128, the two large suite shapes where torch.softmax is
still faster (0.966 / 0.971 of its time): rung 10 with more lanes a row
(fewer rows a warp, so fewer rows start on the same banks: 4 lanes of 32
slots at 131072 x 127 took 3.1 bank conflicts a load) against auto, rung
07's lane configs and rung 04's warp a row, side by side on the same data
with the device copy and torch.softmax; bf16 on the same shapes (131072 x
127 is rung 10's weakest 16-bit row left, 0.69 of copy):

    python benchmarks/softmax_rows_near_128.py [--json PATH] [--reps 20]
        [--precisions fp32,bf16] [--shapes 131072x127,100000x128]

Every output is checked on sampled rows and whole-row sums."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax import plan as smplan  # noqa: E402
from drvgemm.ladders.softmax.registry import RESIDENT_CONFIGS, WINDOW_REGISTRY, SoftmaxConfig  # noqa: E402
from drvgemm.tools.softmax_sweep import side_by_side  # noqa: E402

SHAPES = ((131072, 127), (100000, 128))


def _tile(threads, row_threads, elems, min_blocks):
    return SoftmaxConfig("softmax_10_row_tile", threads, row_threads, elems=elems,
                         min_blocks=min_blocks, walks=True)


# Rung 10 at 128 slots a row: lanes x slots, rows a block = threads / lanes.
# 32 lanes: a warp is one row, its loads cover 32 consecutive words (no
# conflict); 16 lanes: two rows a warp; 8 lanes: four. The block sizes keep
# the tile (rows a block x the row) at 4-16 KiB.
TILES = (_tile(256, 32, 4, 8), _tile(512, 32, 4, 4), _tile(1024, 32, 4, 2),
         _tile(256, 16, 8, 4), _tile(512, 16, 8, 2), _tile(256, 8, 16, 4))


def candidates(prec: str) -> dict:
    """(rows, cols): auto's config, the rung-10 tiles above that hold the
    row, rung 07's registered lane configs and rung 04's first config of a
    warp a row (4 vectors a lane; auto's for aligned fp32 rows of 129..256)."""
    vec, size = (4, 4) if prec == "fp32" else (8, 2)
    out = {}
    for rows, cols in SHAPES:
        auto = smplan.plan(rows, cols, prec).config
        tiles = [c for c in TILES if c.fits(cols, (9, 0), size)]
        lanes = [c for c in WINDOW_REGISTRY[vec] if c.entry == "softmax_07_any_row"
                 and c.row_threads <= 32 and c.fits(cols, aligned=cols % vec == 0)]
        warp = [next(c for c in RESIDENT_CONFIGS if c.row_threads == 32 and c.fits(cols, (9, 0), size))]
        out[(rows, cols)] = [auto] + [c for c in tiles + lanes + warp if c != auto]
    return out


def main(argv=None):
    return side_by_side({prec: candidates(prec) for prec in ("fp32", "bf16")}, argv,
                        __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
