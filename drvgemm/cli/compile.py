"""``drvgemm compile``: the ptxas report of every kernel (no GPU needed)."""
from __future__ import annotations

from ..tools import bench


def add(sub) -> None:
    c = sub.add_parser("compile", help="compile every kernel and print the ptxas report")
    c.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    c.set_defaults(func=run)


def run(args) -> int:
    print(bench.compile_report(arch=args.arch))
    return 0
