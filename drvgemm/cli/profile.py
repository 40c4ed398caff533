"""``drvgemm profile``: one launch of a rung under Nsight Compute
(drvgemm/tools/profile.py)."""
from __future__ import annotations

import sys

from ..tools import ncu, profile


def add(sub) -> None:
    p = sub.add_parser(
        "profile", help="one launch of a rung under Nsight Compute: throughput, occupancy, stalls",
        description="Launch a registered GEMM rung once under Nsight Compute (ncu) and print "
                    "memory and SM throughput (% of peak), achieved occupancy, the top warp "
                    "stall reasons and shared-memory bank conflicts.")
    p.add_argument("kernel", help="registered rung name (see drvgemm.kernels())")
    p.add_argument("--size", type=int, default=2048, help="M = N = K (default 2048)")
    p.add_argument("--ncu", metavar="PATH", help="ncu executable (default: PATH, then "
                                                 f"{ncu.NCU_FALLBACK})")
    p.add_argument("--top", type=int, default=5, help="stall reasons to show (default 5)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for ncu")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        prof = profile.profile_rung(args.kernel, args.size, ncu=args.ncu, timeout=args.timeout)
    except profile.ProfileError as e:
        print(f"drvgemm profile: {e}", file=sys.stderr)
        return 1
    print(profile.format_profile(prof, title=f"{args.kernel} at {args.size}x{args.size}x{args.size}",
                         top=args.top))
    return 0
