"""``drvgemm device``: properties of the current GPU."""
from __future__ import annotations

from ..runtime import driver, launch


def add(sub) -> None:
    d = sub.add_parser("device", help="properties of the current GPU")
    d.set_defaults(func=run)


def run(args) -> int:
    reason = driver.no_gpu_reason()
    if reason:
        print(f"no GPU found: {reason}")
        return 1
    d = driver.device()
    print(d)
    for k, v in vars(d).items():
        print(f"  {k}: {v}")
    print(f"  drvgemm.launch path: {launch.fast_path()}")
    return 0
