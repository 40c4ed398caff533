"""Short contiguous rows: rung 10 (the shared-memory row tile) next to the
rungs ``auto`` chose before it (07 window, 04 registers) on the same data,
with the device copy of the same bytes and torch.softmax, fp32 and bf16:

    python benchmarks/softmax_short_rows.py [--json PATH] [--reps 20] [--precisions bf16]
        [--shapes 65536x129 ...]

Prints each kernel's fraction of the copy bandwidth and its time against
torch's; every output is checked on sampled rows (max_rel_err)."""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.runtime import driver  # noqa: E402
from drvgemm.tools.memory_bench import bench_softmax  # noqa: E402
from drvgemm.tools.records import device_json, write_json  # noqa: E402

SHAPES = [(1048576, 9), (524288, 31), (262144, 33), (131072, 127), (100000, 128),
          (65536, 129), (65536, 256), (32768, 1000), (16384, 1024), (8, 31), (128, 128)]
KERNELS = ["softmax_04_vectorized", "softmax_07_any_row", "softmax_10_row_tile"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--shapes", nargs="*", help="ROWSxCOLS ... (default: the list above)")
    args = p.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] if args.shapes else SHAPES
    recs = []
    for prec in args.precisions.split(","):
        for r in bench_softmax(shapes, precision=prec, kernels=KERNELS, reps=args.reps):
            recs.append(r)
    torch = {(r["precision"], r["m"], r["n"]): r["median_ms"] for r in recs
             if r["kernel"] == "torch_softmax"}
    for r in recs:
        if r.get("baseline") and r["kernel"] != "torch_softmax":
            continue
        t = torch.get((r["precision"], r["m"], r["n"]))
        vs = f"{t / r['median_ms']:.2f}x torch" if t and r["kernel"] != "torch_softmax" else ""
        print(f"{r['precision']} {r['m']:>8}x{r['n']:<5} {r['kernel']:24s} "
              f"{1e3 * r['median_ms']:8.1f} us  {r.get('copy_fraction', 0):.3f} of copy  {vs:14s}"
              f" err {r.get('max_rel_err')}  {'auto ' if r.get('auto') else ''}{r.get('config', '')}")
    if args.json:
        write_json({"device": device_json(driver.device()), "records": recs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
