"""``drvgemm ceilings``: the FFMA and mma.sync peaks of this GPU."""
from __future__ import annotations

import json
import sys

from ..runtime import driver
from ..tools import ceilings


def add(sub) -> None:
    p = sub.add_parser(
        "ceilings", help="measure the FFMA and mma.sync ceilings of this GPU",
        description="Time register-only FFMA and mma.sync loops (tf32 m16n8k8, bf16 and fp16 "
                    "m16n8k16) on the current GPU: the peaks the tensor-core rungs are "
                    "measured against.")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    p.add_argument("--reps", type=int, default=10, help="timed launches per ceiling (default 10)")
    p.set_defaults(func=run)


def run(args) -> int:
    reason = driver.no_gpu_reason()
    if reason:
        print(f"drvgemm ceilings: no GPU found ({reason}); nothing to measure", file=sys.stderr)
        return 1
    if args.reps < 1:
        print("drvgemm ceilings: --reps must be >= 1", file=sys.stderr)
        return 2
    result = ceilings.measure_ceilings(reps=args.reps)
    name = driver.device().name
    print(ceilings.format_table(result, name))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "unit": "TFLOP/s", "ceilings": result}, f, indent=2)
            f.write("\n")
        print(f"written to {args.json}")
    return 0
