"""``drvgemm layout``: which lane and register hold each element of an mma,
ldmatrix or wgmma fragment (drvgemm/analysis/layouts.py)."""
from __future__ import annotations

import argparse
import sys

from ..analysis import layouts


def run(args) -> int:
    what = args.what.lower()
    rest = list(args.args)
    try:
        if what == "ldmatrix":
            if len(rest) > 1:
                raise ValueError("usage: drvgemm layout ldmatrix {x1,x2,x4} [--trans]")
            text = layouts.picture("ldmatrix", rest[0] if rest else "x4", "trans" if args.trans else "")
        elif what == "wgmma":
            if len(rest) > 2:
                raise ValueError("usage: drvgemm layout wgmma m64nN [d]")
            text = layouts.picture("wgmma", rest[0] if rest else "m64n16", rest[1] if len(rest) > 1 else "d")
        else:
            if args.trans:
                raise ValueError("--trans applies to ldmatrix only")
            if not 1 <= len(rest) <= 2:
                raise ValueError("usage: drvgemm layout SHAPE TYPE [A|B|C|D] "
                                 "(e.g. drvgemm layout m16n8k8 tf32 A)")
            operands = [rest[1]] if len(rest) == 2 else ["a", "b", "c"]
            text = "\n\n".join(layouts.picture(what, rest[0], op) for op in operands)
    except ValueError as e:
        print(f"drvgemm layout: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0


def add(sub) -> None:
    """Register ``drvgemm layout``."""
    p = sub.add_parser(
        "layout", help="show which lane/register holds each element of an mma, ldmatrix "
                       "or wgmma fragment",
        description="Print the register layout of a tensor-core fragment as a grid: each cell "
                    "T<lane>:r<register>[.<half>] names who holds that element.\n"
                    "  drvgemm layout m16n8k8 tf32 A      (shapes m16n8k8, m16n8k16; types "
                    "tf32, f16/fp16, bf16; operands A, B, C/D)\n"
                    "  drvgemm layout ldmatrix x4 [--trans]\n"
                    "  drvgemm layout wgmma m64n16 d",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", help="m16n8k8, m16n8k16, ldmatrix or wgmma")
    p.add_argument("args", nargs="*", help="TYPE [OPERAND] for mma; x1/x2/x4 for ldmatrix; "
                                           "m64nN [d] for wgmma")
    p.add_argument("--trans", action="store_true", help="ldmatrix with .trans")
    p.set_defaults(func=run)
