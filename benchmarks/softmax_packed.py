"""16-bit rows held packed (two elements a register, PACKED=1) against the
unpacked configs auto took before, side by side on the same data with the
device copy of the same bytes, bf16 and fp16:

    python benchmarks/softmax_packed.py [--json PATH] [--reps 20]

For each shape: the config auto took before packed configs existed, the one
it takes now, and neighbours (other cluster sizes and block shapes). Every
output is checked on sampled rows and whole-row sums (the sweep's
``max_rel_err`` / ``row_sum_err``)."""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax import dispatch as sm  # noqa: E402
from drvgemm.ladders.softmax.registry import WindowConfig  # noqa: E402
from drvgemm.runtime import driver  # noqa: E402
from drvgemm.tools.records import device_json  # noqa: E402
from drvgemm.tools.softmax_sweep import print_sweep_report, sweep_softmax  # noqa: E402


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
    (777, 12345): [_c07(512, 4), _c07(256, 7, True), _c07(256, 6, True)],
    (2048, 16384): [_c07(512, 4), _c07(256, 8, True)],
    (4096, 4097): [_c07(256, 4), _c07(128, 5, True), _c07(128, 6, True), _c07(256, 3)],
    (512, 151936): [_c08(512, 5, 8, 1), _c08(512, 6, 8, 2, True), _c08(512, 8, 6, 2, True),
                    _c08(512, 8, 5, 2, True), _c08(512, 8, 8, 2, True)],
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--precisions", default="bf16,fp16")
    p.add_argument("--shapes", default=None,
                   help="rows x cols to run, e.g. 4096x4097,8192x50257 (default: all)")
    args = p.parse_args(argv)
    recs = []
    for prec in args.precisions.split(","):
        for shape, cfgs in CANDIDATES.items():
            if args.shapes and f"{shape[0]}x{shape[1]}" not in args.shapes.split(","):
                continue
            recs += sweep_softmax([shape], cfgs, precision=prec, reps=args.reps)
    for prec in args.precisions.split(","):
        print(f"\n== {prec}")
        print_sweep_report([r for r in recs if r["precision"] == prec])
    now = {f"{prec} {m}x{n}": sm.plan(m, n, prec).describe()
           for prec in args.precisions.split(",") for (m, n) in CANDIDATES}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_json(driver.device()), "auto": now, "records": recs},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
