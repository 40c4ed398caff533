"""``drvgemm bench``: every rung against cuBLAS (or, with --memory, the
memory-bound kernels; with --shapes, gemm(kernel="auto") over the shape
suite), as the seed's report, JSON and a plot."""
from __future__ import annotations

import argparse
import sys

from ..ladders.gemm.registry import by_name
from ..runtime import driver
from ..tools import bench, ceilings, memory_bench, records, shape_bench, shape_suite
from ..tools.plots import plot_bench, plot_shape_ratios
from . import compile as compile_cli


DEFAULT_SIZES = [256, 3072, 4096]


def sizes(text):
    try:
        out = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be integers separated by commas: {text!r}")
    if not out or any(n < 1 for n in out):
        raise argparse.ArgumentTypeError(f"sizes must be positive integers: {text!r}")
    return out


def names(text):
    return [s.strip() for s in text.split(",") if s.strip()]


def row_shapes(text):
    """``--softmax-rows 8x50257,4x1048576``: (rows, cols) pairs."""
    out = []
    for part in names(text):
        try:
            rows, cols = (int(v) for v in part.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"shapes must be ROWSxCOLS separated by commas (e.g. 8x50257,4x1048576): {text!r}")
        if rows < 1 or cols < 1:
            raise argparse.ArgumentTypeError(f"rows and columns must be >= 1: {part!r}")
        out.append((rows, cols))
    if not out:
        raise argparse.ArgumentTypeError(f"no shape given: {text!r}")
    return out


def precisions(text):
    got = names(text)
    bad = [p for p in got if p not in shape_suite.PRECISIONS]
    if bad or not got:
        raise argparse.ArgumentTypeError(
            f"precisions must be among {','.join(shape_suite.PRECISIONS)}: {text!r}")
    return got


def add(sub) -> None:
    b = sub.add_parser(
        "bench", help="time every rung against cuBLAS (in the seed's report format)",
        description="Time every rung against cuBLAS and print the report in the format of "
                    "the seed, the single-file benchmark this project grew from. Without a "
                    "GPU (and with no timing options) it prints the compile-only report.")
    b.add_argument("--sizes", type=sizes, default=None,
                   help="square sizes, comma separated (default 256,3072,4096)")
    b.add_argument("--kernels", type=names, default=None,
                   help="rungs to run, comma separated (default: all)")
    b.add_argument("--json", metavar="PATH", help="write the results as JSON")
    b.add_argument("--plot", metavar="PATH", help="draw the roofline with every rung (PNG)")
    b.add_argument("--memory", action="store_true",
                   help="memory-bound kernels (softmax, copies, transposes) instead of GEMM")
    b.add_argument("--shapes", action="store_true",
                   help="gemm(kernel='auto') over the shape suite (decode, prefill, squares, "
                        "long K, tall/wide, odd sizes) against the best cuBLAS call")
    b.add_argument("--precisions", type=precisions, default=None,
                   help="with --shapes: comma separated (default bf16,fp16,tf32,fp32); with "
                        "--memory --softmax-rows: the element types (default fp32,bf16)")
    b.add_argument("--quick", action="store_true", help="with --shapes: the reduced suite")
    b.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="with --shapes: skip the shapes left after this many seconds "
                        "(default 330, 120 with --quick)")
    b.add_argument("--softmax-rows", nargs="?", const=True, default=False, type=row_shapes,
                   metavar="ROWSxCOLS,...",
                   help="with --memory: only the softmax row-length suite (softmax auto from 1 "
                        "to 1M columns, fp32 and bf16, against the copy and torch.softmax), or "
                        "the same measurement on the shapes given (e.g. 8x50257,4x1048576)")
    b.add_argument("--no-baseline", action="store_true", help="skip cuBLAS")
    b.add_argument("--reps", type=int, default=None, help="timed repetitions per point")
    b.add_argument("--arch", default="sm_90", help=argparse.SUPPRESS)
    b.set_defaults(func=run)


def run_shapes(args) -> int:
    reason = driver.no_gpu_reason()
    if reason:
        print(f"drvgemm bench --shapes: error: it times gemm() against cuBLAS and needs a GPU; "
              f"none found ({reason})", file=sys.stderr)
        return 1
    print(f"device: {driver.device()}", flush=True)
    results = shape_bench.run_shape_bench(args.precisions or list(shape_suite.PRECISIONS),
                                          quick=args.quick, budget_s=args.budget)
    print(shape_bench.format_summary(results), flush=True)
    if args.json:
        records.write_json(results, args.json)
        print(f"results written to {args.json}")
    if args.plot:
        try:
            plot_shape_ratios(results, args.plot)
            print(f"ratio plot written to {args.plot}")
        except (ImportError, ValueError) as e:
            print(f"no plot: {e}", file=sys.stderr)
    measured = sum(s["compared"] for s in results["summary"].values())
    if not measured:
        print("drvgemm bench --shapes: error: no drvgemm record could be compared with cuBLAS",
              file=sys.stderr)
        return 1
    return 0


# Options that only a timed run uses: without a GPU they cannot be honoured.
_TIMING_OPTIONS = ("sizes", "kernels", "json", "plot", "memory", "reps")


# Each mode's own options: given to another mode, they would be ignored in silence.
_MODE_OPTIONS = {"--shapes": ("precisions", "quick", "budget"),
                 "--memory": ("softmax_rows",),
                 "the rung bench": ("sizes", "kernels", "no_baseline")}
# The row suite's element types (--memory --softmax-rows --precisions).
ROW_SUITE_PRECISIONS = ("fp32", "bf16", "fp16")


def _mode(args) -> str:
    return "--shapes" if args.shapes else "--memory" if args.memory else "the rung bench"


def _validate(args) -> None:
    """Every option checked before anything runs (ValueError: exit 2)."""
    if args.shapes and args.memory:
        raise ValueError("--shapes and --memory are two different suites: run one at a time")
    mode = _mode(args)
    row_suite = args.memory and args.softmax_rows
    for owner, options in _MODE_OPTIONS.items():
        given = [o for o in options if getattr(args, o) not in (None, False)
                 and not (o == "precisions" and row_suite)]
        if owner != mode and given:
            flags = ", ".join("--" + o.replace("_", "-") for o in given)
            verb = "goes" if len(given) == 1 else "go"
            raise ValueError(f"{flags} {verb} with {owner}, not with {mode}")
    if row_suite and args.precisions is not None:
        bad = [p for p in args.precisions if p not in ROW_SUITE_PRECISIONS]
        if bad:
            raise ValueError(f"--softmax-rows takes --precisions among "
                             f"{','.join(ROW_SUITE_PRECISIONS)}, not {','.join(bad)}")
    if args.memory and args.plot:
        raise ValueError("--plot draws the GEMM roofline or the shape ratios; --memory has no plot")
    if args.kernels is not None:
        known = by_name()
        unknown = [k for k in args.kernels if k not in known]
        if unknown or not args.kernels:
            raise ValueError(f"--kernels: unknown rung(s) {', '.join(unknown) or '(none given)'}; "
                             f"registered: {', '.join(known)}")
    if args.reps is not None and args.reps < 1:
        raise ValueError(f"--reps must be >= 1, not {args.reps}")


def run(args) -> int:
    _validate(args)
    if args.shapes:
        return run_shapes(args)
    reason = driver.no_gpu_reason()
    given = [f"--{o}" for o in _TIMING_OPTIONS if getattr(args, o) not in (None, False)]
    if reason and given:
        raise ValueError(f"no GPU found ({reason}): {', '.join(given)} need(s) a timed run; "
                         "without a GPU `drvgemm bench` (no options) prints the compile-only "
                         "report")
    if args.sizes is None:
        args.sizes = list(DEFAULT_SIZES)
    if reason:
        print(f"no GPU found ({reason}); showing the compile-only report for "
              f"{args.arch} instead of timings.")
        print(compile_cli.report(args.arch, progress=lambda m: print(m, file=sys.stderr))[0])
        return 0
    print(f"device: {driver.device()}", flush=True)
    if args.memory and args.softmax_rows:
        suite = memory_bench.run_softmax_rows(
            reps=args.reps or 20,
            shapes=None if args.softmax_rows is True else tuple(args.softmax_rows),
            precisions=tuple(args.precisions or ("fp32", "bf16")))
        memory_bench.print_softmax_rows_report(suite["records"], suite["summary"])
        results = {"device": records.device_json(driver.device()), **suite}
    elif args.memory:
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
