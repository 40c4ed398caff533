"""``drvgemm plan M N K``: what gemm() would launch for a shape and why --
the chosen rung, instantiation and split, the launch, the predicted time
and every alternative ranked. ``drvgemm plan --softmax ROWS COLS``: the same
for softmax() on a rows x cols array -- the rung, its config, the launch and
the reason. No GPU needed (the H200's figures then)."""
from __future__ import annotations

import json

from ..ladders.gemm.dispatch import PRECISIONS, plan_shape
from ..ladders.softmax import dispatch as softmax_dispatch
from ..ladders.softmax.plan import MODEL_MIN_BYTES, MODEL_TOLERANCE
from ..ladders.softmax.registry import element_bytes


def add(sub) -> None:
    p = sub.add_parser("plan", help="the dispatcher's choice for an M x N x K product (or, with "
                                    "--softmax, a ROWS x COLS softmax), with the reason and "
                                    "predicted times",
                       usage="drvgemm plan [options] M N K\n"
                             "       drvgemm plan --softmax [options] ROWS COLS")
    p.add_argument("sizes", type=int, nargs="+", metavar="SIZE",
                   help="M N K of gemm()'s product; with --softmax, ROWS COLS of softmax()'s array")
    p.add_argument("--softmax", action="store_true",
                   help="plan softmax() over the rows of a ROWS x COLS array instead")
    p.add_argument("--precision", default="bf16", choices=PRECISIONS,
                   help="the math (tf32: float32 inputs opted into TF32); for --softmax the "
                        "element type (fp32, bf16, fp16); default bf16")
    p.add_argument("--out-dtype", default=None, choices=("fp32", "bf16", "fp16"),
                   help="C's type (default float32)")
    p.add_argument("--beta", type=float, default=0.0, help="beta != 0 reads C")
    p.add_argument("--kernel", default="auto", help="a rung name (rank its splits only; "
                                                    "for --softmax: that softmax rung)")
    p.add_argument("--gpu", default=None, help="a catalogue device (default: this GPU, "
                                               "else H200)")
    p.add_argument("--unaligned", action="store_true",
                   help="pointers not 16-byte aligned (A, B and C 4 bytes off; for --softmax, "
                        "x and y)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.softmax:
        return run_softmax(args)
    if len(args.sizes) != 3:
        raise ValueError(f"plan takes M N K, got {len(args.sizes)} sizes "
                         "(a softmax: drvgemm plan --softmax ROWS COLS)")
    m, n, k = args.sizes
    residues = (4, 4, 4) if args.unaligned else (0, 0, 0)
    p = plan_shape(m, n, k, precision=args.precision, out_dtype=args.out_dtype,
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


def run_softmax(args) -> int:
    if len(args.sizes) != 2:
        raise ValueError(f"plan --softmax takes ROWS COLS, got {len(args.sizes)} sizes")
    if args.out_dtype is not None or args.beta != 0.0:
        raise ValueError("--out-dtype and --beta are gemm()'s: softmax writes x's own type")
    rows, cols = args.sizes
    device, cc, sm_count = softmax_dispatch.plan_device(args.gpu)
    p = softmax_dispatch.plan(rows, cols, args.precision, kernel=args.kernel,
                              aligned=not args.unaligned, cc=cc, sm_count=sm_count)
    nbytes = rows * cols * element_bytes(args.precision)
    if args.json:
        print(json.dumps({"rung": p.rung, "config": p.describe(), "source": p.source,
                          "entry": p.entry, "defines": dict(p.defines), "grid": list(p.grid),
                          "block": list(p.block), "smem": p.smem, "split": p.split,
                          "slots": p.slots, "cooperative": p.cooperative,
                          "workspace_bytes": p.workspace_bytes, "note": p.note,
                          "predicted_copy_ratio": p.predicted, "bytes_each_way": nbytes,
                          "device": device}, indent=1))
        return 0
    launch = (f"grid {' x '.join(map(str, p.grid))}, block {' x '.join(map(str, p.block))}, "
              f"{p.smem:,} B of dynamic shared memory")
    if p.cooperative:
        launch += ", cooperative"
    if p.workspace_bytes:
        launch += f", {p.workspace_bytes:,} B of workspace"
    lines = [f"softmax of {rows} x {cols} {args.precision} on {device} (sm_{cc[0]}{cc[1]}, "
             f"{sm_count} SMs): {nbytes / 2**20:.1f} MiB read, as many written",
             f"  rung       {p.rung}",
             f"  config     {p.describe()}",
             f"  launch     {launch}"]
    if p.split or getattr(p.config, "persistent", False):
        lines.append("             (the grid is refitted to the blocks the driver keeps resident, "
                     "at the first call)")
    if p.note:
        lines.append(f"  why        {p.note}")
    if 2 * nbytes < MODEL_MIN_BYTES:
        lines.append(f"  predicted  nothing: at {2 * nbytes / 2**20:.1f} MiB moved a call is the "
                     "launch's and the ramp's more than DRAM's (the copy's as well)")
    elif p.predicted is None:
        lines.append("  predicted  no model for this route: it was chosen by measurement")
    else:
        lines.append(f"  predicted  {p.predicted:.2f} of the device copy's bandwidth (the planner's "
                     f"model, held within {MODEL_TOLERANCE:.2f} of the H200's row suite at this "
                     "size; another GPU's figures may differ)")
    print("\n".join(lines))
    return 0
