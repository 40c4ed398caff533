"""Rung 20's flagship instantiations before and after a change to their
machine code, side by side in one run: the same tensor maps, grid and
arguments, results compared, times interleaved round by round.

    python3 benchmarks/rung20_before_after.py --old-dir DIR [--sizes 4096,8192] [--json PATH]

DIR holds the earlier kernel source (``20_wgmma_tma_bf16.cu`` and the
header it includes, as of commit d55b3e2: before the dynamic scheduler's
leftovers were removed and split-K was added). That kernel takes one
parameter fewer at the end (an unused scheduler pointer instead of
partials, split_stride, splits) and 64 more bytes of shared memory.
Make DIR from the history (it is not committed: an ignored folder that
travels to the GPU machine with ``carry``):

    mkdir -p .gpu/old20
    git show d55b3e2:cu/20_wgmma_tma_bf16.cu > .gpu/old20/20_wgmma_tma_bf16.cu
    git show d55b3e2:cu/wgmma_common.cuh > .gpu/old20/wgmma_common.cuh
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

import drvgemm
from drvgemm.ladders.gemm.hopper import wgmma_gemm_launch_config
from drvgemm.ladders.gemm.registry import by_name, rung_kernel
from drvgemm.runtime import driver
from drvgemm.runtime.dtypes import numpy_dtype
from drvgemm.runtime.launch import launch
from drvgemm.runtime.timing import median_ms

# The defines the old registry passed (commit d55b3e2, drvgemm/rungs.py).
OLD_COMMON = {"WARP_SPECIALIZED": 1, "PERSISTENT": 1, "CLUSTER": 1, "STAGES": 4, "SCHED": 0,
              "GROUP": 16, "RASTER": 0, "INFLIGHT": 1, "TF32_FRAG": 2, "ALIGNED": 1}
CASES = [  # (rung, WGMMA_ELEM, EPILOGUE, BALANCE, 16-bit C)
    ("20_tma_wgmma_bf16", 1, 2, 1, False), ("20_tma_wgmma_bf16", 1, 2, 1, True),
    ("20_tma_wgmma_fp16", 2, 2, 1, True), ("20_tma_wgmma_tf32", 3, 0, 0, False)]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-dir", required=True)
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    old_src = Path(args.old_dir) / "20_wgmma_tma_bf16.cu"
    out = []
    for name, elem, epi, bal, narrow in CASES:
        r = by_name()[name]
        new_k = rung_kernel(r, True, narrow_output=narrow)
        d = dict(OLD_COMMON, WGMMA_ELEM=elem, EPILOGUE=epi, BALANCE=bal)
        if narrow:
            d["OUT_16"] = 1
        old_k = drvgemm.compile(str(old_src), f"gemm_tma_wgmma_{r.precision}", defines=d,
                                arch="sm_90a")
        dt = numpy_dtype(r.precision)
        for n in [int(s) for s in args.sizes.split(",")]:
            rng = np.random.default_rng(n)
            a = drvgemm.to_device(rng.uniform(-1, 1, (n, n)).astype(np.float32).astype(dt))
            b = drvgemm.to_device(rng.uniform(-1, 1, (n, n)).astype(np.float32).astype(dt))
            c_dt = dt if narrow else np.float32
            c_new, c_old = drvgemm.empty((n, n), c_dt), drvgemm.empty((n, n), c_dt)
            cfg = wgmma_gemm_launch_config(r, a, b, c_new, n, n, n, 1.0, 0.0,
                                           narrow_output=narrow, kernel=new_k)
            cfg_old = wgmma_gemm_launch_config(r, a, b, c_old, n, n, n, 1.0, 0.0,
                                               narrow_output=narrow, kernel=new_k)
            old_args = list(cfg_old["args"][:9]) + [0]

            def run_new():
                launch(new_k, cfg["grid"], cfg["block"], cfg["args"], smem=cfg["smem"])

            def run_old():
                launch(old_k, cfg_old["grid"], cfg_old["block"], old_args,
                       smem=cfg_old["smem"] + 64)

            run_new(); run_old(); driver.synchronize()
            same = np.array_equal(c_new.to_host().view(np.uint8), c_old.to_host().view(np.uint8))
            times = {"new": [], "old": []}
            for _ in range(args.rounds):
                for label, fn in (("old", run_old), ("new", run_new)):
                    times[label].append(median_ms(fn, reps=args.reps))
            med = {k: statistics.median(v) for k, v in times.items()}
            tf = {k: 2.0 * n ** 3 / (v * 1e-3) / 1e12 for k, v in med.items()}
            rec = {"kernel": name, "c": str(np.dtype(c_dt)) if not narrow else r.precision,
                   "m": n, "n": n, "k": n, "old_ms": med["old"], "new_ms": med["new"],
                   "old_tflops": tf["old"], "new_tflops": tf["new"],
                   "new_over_old": med["old"] / med["new"], "bitwise_equal": same}
            log(f"{name} C {'16-bit' if narrow else 'fp32'} {n}^3: old {tf['old']:.1f} new "
                f"{tf['new']:.1f} TFLOP/s ({rec['new_over_old']:.3f}x), results "
                f"{'bitwise equal' if same else 'DIFFER'}")
            out.append(rec)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": str(drvgemm.device()), "records": out},
                                              indent=1))
    return 0 if all(r["bitwise_equal"] for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
