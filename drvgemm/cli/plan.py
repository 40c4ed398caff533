"""``drvgemm plan M N K``: what gemm() would launch for a shape and why --
the chosen rung, instantiation and split, the launch, the predicted time
and every alternative ranked. No GPU needed (the H200's figures then)."""
from __future__ import annotations

import json

from ..ladders.gemm.dispatch import PRECISIONS, plan_shape


def add(sub) -> None:
    p = sub.add_parser("plan", help="the dispatcher's choice for an M x N x K product, "
                                    "with the alternatives and predicted times")
    p.add_argument("m", type=int)
    p.add_argument("n", type=int)
    p.add_argument("k", type=int)
    p.add_argument("--precision", default="bf16", choices=PRECISIONS,
                   help="the math (tf32: float32 inputs opted into TF32); default bf16")
    p.add_argument("--out-dtype", default=None, choices=("fp32", "bf16", "fp16"),
                   help="C's type (default float32)")
    p.add_argument("--beta", type=float, default=0.0, help="beta != 0 reads C")
    p.add_argument("--kernel", default="auto", help="a rung name (rank its splits only)")
    p.add_argument("--gpu", default=None, help="a catalogue device (default: this GPU, "
                                               "else H200)")
    p.add_argument("--unaligned", action="store_true",
                   help="pointers not 16-byte aligned (A, B and C 4 bytes off)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    residues = (4, 4, 4) if args.unaligned else (0, 0, 0)
    p = plan_shape(args.m, args.n, args.k, precision=args.precision, out_dtype=args.out_dtype,
                   beta=args.beta, kernel=args.kernel, device=args.gpu, residues=residues)
    if args.json:
        print(json.dumps({"kernel": p.kernel, "instantiation": p.instantiation,
                          "split": p.split, "predicted_s": p.predicted_s, "grid": list(p.grid),
                          "block": list(p.block), "smem": p.smem,
                          "workspace_bytes": p.workspace_bytes, "device": p.device,
                          "alternatives": [[n, s] for n, s in p.alternatives]}, indent=1))
    else:
        print(p.describe())
    return 0
