"""``drvgemm bench``: every rung against cuBLAS (or, with --memory, the
memory-bound kernels), as the seed's report, JSON and a roofline plot."""
from __future__ import annotations

import argparse
import sys

from ..runtime import driver
from ..tools import bench, ceilings, memory_bench, records
from ..tools.plots import plot_bench
from . import compile as compile_cli


def sizes(text):
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be integers separated by commas: {text!r}")


def names(text):
    return [s.strip() for s in text.split(",") if s.strip()]


def add(sub) -> None:
    b = sub.add_parser("bench", help="time every rung against cuBLAS (seed report format)")
    b.add_argument("--sizes", type=sizes, default=[256, 3072, 4096],
                   help="square sizes, comma separated (default 256,3072,4096)")
    b.add_argument("--kernels", type=names, default=None,
                   help="rungs to run, comma separated (default: all)")
    b.add_argument("--json", metavar="PATH", help="write the results as JSON")
    b.add_argument("--plot", metavar="PATH", help="draw the roofline with every rung (PNG)")
    b.add_argument("--memory", action="store_true",
                   help="memory-bound kernels (softmax, copies, transposes) instead of GEMM")
    b.add_argument("--no-baseline", action="store_true", help="skip cuBLAS")
    b.add_argument("--reps", type=int, default=None, help="timed repetitions per point")
    b.add_argument("--arch", default="sm_90", help=argparse.SUPPRESS)
    b.set_defaults(func=run)


def run(args) -> int:
    reason = driver.no_gpu_reason()
    if reason:
        print(f"no GPU found ({reason}); showing the compile-only report for "
              f"{args.arch} instead of timings.")
        print(compile_cli.report(args.arch, progress=lambda m: print(m, file=sys.stderr))[0])
        return 0
    print(f"device: {driver.device()}", flush=True)
    if args.memory:
        recs = memory_bench.run_memory_bench()
        memory_bench.print_memory_report(recs)
        results = {"device": records.device_json(driver.device()), "records": recs}
    else:
        results = bench.run_bench(args.kernels, args.sizes, baseline=not args.no_baseline,
                                  reps=args.reps)
        # Measured once per process: the roofs of the report, the plot and the JSON.
        results["ceilings"] = ceilings.device_ceilings()
        bench.annotate_roofline(results, results["ceilings"])
        print(bench.format_report(results))
    if args.plot and not args.memory:
        plot_bench(results, args.plot, measured=bench.roofline_measured(results["ceilings"]))
        print(f"roofline plot written to {args.plot} (measured ceilings: "
              + ", ".join(f"{k} {v / 1e12:.1f} T" if k != "dram_bw" else f"copy {v / 1e9:.0f} GB/s"
                          for k, v in results["ceilings"].items()) + ")")
    if args.json:
        records.write_json(results, args.json)
        print(f"results written to {args.json}")
    return 0
