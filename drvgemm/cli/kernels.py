"""``drvgemm kernels``: the registered GEMM rungs."""
from __future__ import annotations

from ..ladders.gemm.registry import RUNGS


def add(sub) -> None:
    k = sub.add_parser("kernels", help="list the registered rungs")
    k.set_defaults(func=run)


def run(args) -> int:
    w = max((len(r.name) for r in RUNGS), default=10)
    for r in RUNGS:
        print(f"{r.name:<{w}}  {r.precision:<5} {r.source:<28} {r.summary}")
    return 0
