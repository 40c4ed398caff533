"""``drvgemm tune M N K``: time the dispatcher's best-ranked candidates for
one product on this GPU and store the fastest, which kernel="auto" then
prefers for that product on this device (drvgemm/tools/tune.py).
``--show`` lists the stored winners of every device in the cache folder;
``--clear`` removes this GPU's."""
from __future__ import annotations

import json
import sys

from ..ladders.gemm import dispatch, tuned
from ..ladders.gemm.dispatch import PRECISIONS
from ..runtime import compiler, driver
from ..tools import tune as tuning


def add(sub) -> None:
    p = sub.add_parser("tune", help="measure the dispatcher's top candidates for a product on "
                                    "this GPU and make the fastest auto's choice for it")
    p.add_argument("m", type=int, nargs="?")
    p.add_argument("n", type=int, nargs="?")
    p.add_argument("k", type=int, nargs="?")
    p.add_argument("--precision", default="bf16", choices=PRECISIONS,
                   help="the math (tf32: float32 inputs opted into TF32); default bf16")
    p.add_argument("--out-dtype", default="fp32", choices=("fp32", "bf16", "fp16"),
                   help="C's type (default float32)")
    p.add_argument("--beta", type=float, default=0.0, help="beta != 0 reads C")
    p.add_argument("--top", type=int, default=4, help="candidates to time (default 4)")
    p.add_argument("--calls", type=int, default=30, help="launches per timed round")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median)")
    p.add_argument("--show", action="store_true", help="print the stored winners")
    p.add_argument("--clear", action="store_true", help="forget this GPU's winners")
    p.set_defaults(func=run)


def _show() -> int:
    d = compiler.cache_dir()
    files = sorted(d.glob("tuned-*.json")) if d is not None and d.is_dir() else []
    if not files:
        print("no tuned winners stored" + (f" in {d}" if d else " (the cache is off)"))
        return 0
    for f in files:
        print(f"{f}:")
        for sig, e in sorted(tuned.load(f).items()):
            print(f"  {sig:40s} {e.get('kernel')} split {e.get('split')}  "
                  f"{(e.get('ms') or 0) * 1e3:.2f} us (model's choice {e.get('model_choice')}: "
                  f"{(e.get('model_choice_ms') or 0) * 1e3:.2f} us)")
    return 0


def run(args) -> int:
    if args.show:
        return _show()
    if not driver.has_gpu():
        print(f"drvgemm tune measures on this GPU, and there is none: {driver.no_gpu_reason()}",
              file=sys.stderr)
        return 2
    if args.clear:
        removed = tuned.clear(dispatch.tuned_file())
        dispatch.clear_plan_cache()
        print("removed " + str(dispatch.tuned_file()) if removed else "no winners stored")
        return 0
    if args.m is None or args.n is None or args.k is None:
        print("drvgemm tune: give M N K (or --show / --clear)", file=sys.stderr)
        return 2
    if args.top < 1 or args.calls < 1 or args.rounds < 1:
        print("drvgemm tune: --top, --calls and --rounds must be >= 1", file=sys.stderr)
        return 2
    print(f"{args.m} x {args.n} x {args.k} {args.precision}, C {args.out_dtype}: timing the "
          f"model's top {args.top} on {driver.device().name}")
    e = tuning.tune(args.m, args.n, args.k, precision=args.precision, out=args.out_dtype,
                    beta=args.beta, top=args.top, calls=args.calls, rounds=args.rounds)
    print(f"winner: {e['kernel']} split {e['split']} ({e['ms'] * 1e3:.2f} us; the model's "
          f"choice {e['model_choice']}: "
          + (f"{e['model_choice_ms'] * 1e3:.2f} us" if e['model_choice_ms'] else "not timed")
          + f") -> {e['file']}")
    print(json.dumps({k: v for k, v in e.items() if k != "file"}, sort_keys=True))
    return 0
