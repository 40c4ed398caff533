"""The ``drvgemm`` command: one module per subcommand in this folder, each
with ``add(subparsers)`` and ``run(args)``.

With no arguments it runs the main job: on a GPU the benchmark report of the
registered rungs; with no CUDA driver a compile-only report of every kernel
for sm_90, and one line saying that no GPU was found.
"""
from __future__ import annotations

import argparse
import os
import sys

from .._version import __version__
from ..runtime.errors import CompileError, CudaError
from . import (bench, cache, ceilings, compile, device, kernels, layout, occupancy, plan,
               profile, roofline, tune)

# In the order `drvgemm --help` lists them.
COMMANDS = (bench, compile, kernels, plan, tune, device, occupancy, roofline, profile, layout,
            ceilings, cache)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="drvgemm",
        description="GEMM kernels from naive to tensor cores, compiled with NVRTC and "
                    "launched through the CUDA driver API. With no command: the benchmark "
                    "report on a GPU, the compile-only report without one.",
        epilog="\"The seed\" in these help texts is the single-file benchmark and design "
               "notes this project grew from: its report format and its worked examples "
               "(a device, a roofline) are kept as references.")
    p.add_argument("--version", action="version", version=f"drvgemm {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            args = parser.parse_args(["bench"] + (argv or []))
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `drvgemm ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"drvgemm: error: {e}", file=sys.stderr)
        return 2
    except (CudaError, CompileError) as e:  # the message says it all
        print(f"drvgemm: {type(e).__name__}: {e}", file=sys.stderr)
        return 1

