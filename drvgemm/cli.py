"""The ``drvgemm`` command.

With no arguments it runs the main job: on a GPU the benchmark report of the
registered rungs; with no CUDA driver a compile-only report of every kernel
for sm_90, and one line saying that no GPU was found.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# Modules that add their own subcommand through add_cli(subparsers).
_PLUGINS = ("occupancy", "roofline", "profile", "layouts", "ceilings")


def _sizes(text):
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be integers separated by commas: {text!r}")


def _names(text):
    return [s.strip() for s in text.split(",") if s.strip()]


def cmd_compile(args) -> int:
    from .bench import compile_report
    print(compile_report(arch=args.arch))
    return 0


def cmd_kernels(args) -> int:
    from .rungs import RUNGS
    w = max((len(r.name) for r in RUNGS), default=10)
    for r in RUNGS:
        print(f"{r.name:<{w}}  {r.precision:<5} {r.source:<28} {r.summary}")
    return 0


def cmd_device(args) -> int:
    import drvgemm
    reason = drvgemm.no_gpu_reason()
    if reason:
        print(f"no GPU found: {reason}")
        return 1
    d = drvgemm.device()
    print(d)
    for k, v in vars(d).items():
        print(f"  {k}: {v}")
    print(f"  drvgemm.launch path: {drvgemm.launch_path()}")
    return 0


def cmd_bench(args) -> int:
    import drvgemm
    from . import bench
    reason = drvgemm.no_gpu_reason()
    if reason:
        print(f"no GPU found ({reason}); showing the compile-only report for "
              f"{args.arch} instead of timings.")
        print(bench.compile_report(arch=args.arch))
        return 0
    print(f"device: {drvgemm.device()}", flush=True)
    if args.memory:
        from . import membench
        records = membench.run_memory_bench()
        membench.print_memory_report(records)
        results = {"device": bench._device_json(drvgemm.device()), "records": records}
    else:
        results = bench.run_bench(args.kernels, args.sizes, baseline=not args.no_baseline,
                                  reps=args.reps)
        # Measured once per process: the roofs of the report, the plot and the JSON.
        from .ceilings import device_ceilings
        results["ceilings"] = device_ceilings()
        bench.annotate_roofline(results, results["ceilings"])
        print(bench.format_report(results))
    if args.plot and not args.memory:
        from .roofline import plot_bench
        plot_bench(results, args.plot, measured=bench.roofline_measured(results["ceilings"]))
        print(f"roofline plot written to {args.plot} (measured ceilings: "
              + ", ".join(f"{k} {v / 1e12:.1f} T" if k != "dram_bw" else f"copy {v / 1e9:.0f} GB/s"
                          for k, v in results["ceilings"].items()) + ")")
    if args.json:
        bench.write_json(results, args.json)
        print(f"results written to {args.json}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="drvgemm",
        description="GEMM kernels from naive to tensor cores, compiled with NVRTC and "
                    "launched through the CUDA driver API. With no command: the benchmark "
                    "report on a GPU, the compile-only report without one.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    b = sub.add_parser("bench", help="time every rung against cuBLAS (seed report format)")
    b.add_argument("--sizes", type=_sizes, default=[256, 3072, 4096],
                   help="square sizes, comma separated (default 256,3072,4096)")
    b.add_argument("--kernels", type=_names, default=None,
                   help="rungs to run, comma separated (default: all)")
    b.add_argument("--json", metavar="PATH", help="write the results as JSON")
    b.add_argument("--plot", metavar="PATH", help="draw the roofline with every rung (PNG)")
    b.add_argument("--memory", action="store_true",
                   help="memory-bound kernels (softmax, copies, transposes) instead of GEMM")
    b.add_argument("--no-baseline", action="store_true", help="skip cuBLAS")
    b.add_argument("--reps", type=int, default=None, help="timed repetitions per point")
    b.add_argument("--arch", default="sm_90", help=argparse.SUPPRESS)
    b.set_defaults(func=cmd_bench)

    c = sub.add_parser("compile", help="compile every kernel and print the ptxas report")
    c.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    c.set_defaults(func=cmd_compile)

    k = sub.add_parser("kernels", help="list the registered rungs")
    k.set_defaults(func=cmd_kernels)

    d = sub.add_parser("device", help="properties of the current GPU")
    d.set_defaults(func=cmd_device)

    for name in _PLUGINS:
        try:
            mod = importlib.import_module(f"drvgemm.{name}")
        except ImportError:
            continue
        add = getattr(mod, "add_cli", None)
        if add is not None:
            add(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            args = parser.parse_args(["bench"] + (argv or []))
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `drvgemm ... | head`
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"drvgemm: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # CudaError, CompileError: the message says it all
        from .errors import CompileError, CudaError
        if isinstance(e, (CudaError, CompileError)):
            print(f"drvgemm: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
