"""Each build step of the TMA + wgmma rung (cu/gemm/20_tma_wgmma.cu) side by
side in one run, against cuBLAS called two ways:

    python benchmarks/wgmma_steps.py [--precision bf16 tf32 fp16]
        [--shapes 4096 8192 4096x4096x4100 8191x8193x4096] [--steps ...]
        [--define GROUP=8 ...] [--batch 10] [--reps 7] [--json PATH]

Steps (compile-time defines of the one source; drvgemm/ladders/gemm/hopper.py derives the launch):
  tma_only          TMA into a 4-stage mbarrier ring + wgmma, 2 consumer
                    warpgroups, thread 0 refills the ring between its MMAs
  warp_specialized  + a producer warpgroup (setmaxnreg 40 / 232), consumers
                    keep one stage of wgmmas in flight
  persistent        + grid = resident blocks, each walking tiles
  cluster2          + 2-block clusters multicasting the shared 256-wide tile
Baselines: torch.matmul (cuBLAS via torch) and cublasGemmEx through CuPy:
16-bit inputs with fp32 compute, both with the output in the input type (the
usual call) and in fp32 (what the rung writes); TF32: torch with TF32 on and
cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32.

Timing, the same for every entry: `batch` launches back to back between two
events (so host launch cost hides behind the GPU), L2 flushed before each
batch, median over `reps` batches. Inputs are random normal, never zeros.
Each kernel's result is checked (relative RMSE vs a float64 reference) before
it is timed. benchmarks/wgmma_sweep.py compares the rung's tuning knobs the
same way."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

import drvgemm
from drvgemm.ladders.gemm import dispatch, hopper, registry
from drvgemm.runtime import driver
from drvgemm.tools.bench import batch_time_torch, make_inputs, reference, rel_rmse
from drvgemm.tools.cublas import gemmex_call
from drvgemm.tools.records import device_json as _device_json
from drvgemm.tools.records import gemm_record
from drvgemm.runtime.launch import launch

# The steps as first built, starting from the registered entry: stores
# straight from the accumulators, all SMs (the choices of
# benchmarks/wgmma_sweep.py at their original settings).
_PLAIN = dict(EPILOGUE=0, BALANCE=0, GROUP=16, STAGES=4)
STEPS = {
    "tma_only": dict(_PLAIN, WARP_SPECIALIZED=0, PERSISTENT=0, CLUSTER=1),
    "warp_specialized": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=0, CLUSTER=1),
    "persistent": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1),
    "cluster2": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=2),
}
RUNG = {"bf16": "20_tma_wgmma_bf16", "fp16": "20_tma_wgmma_fp16", "tf32": "20_tma_wgmma_tf32"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def batch_ms(enqueue, batch, reps, sync):
    from drvgemm.runtime.timing import batch_median_ms
    return batch_median_ms(enqueue, batch, reps, sync)


def record(kernel, prec, m, n, k, ms, err, baseline, **extra):
    return gemm_record(kernel, prec, m, n, k, ms, err, baseline, timing="batch",
                       tflops_digits=2, **extra)


def step_rung(prec, step, extra_defines):
    base = dispatch.rung(RUNG[prec])
    d = {**base.defines, **STEPS[step], **extra_defines}
    block = (384 if d["WARP_SPECIALIZED"] else 256, 1, 1)
    tag = step + "".join(f",{k}={v}" for k, v in sorted(extra_defines.items()))
    return dataclasses.replace(base, name=f"{base.name}[{tag}]", defines=d, block=block,
                               smem=hopper.wgmma_smem_bytes(d["STAGES"], d["EPILOGUE"]))


def bench_step(prec, step, extra, m, n, k, A, B, ref, batch, reps):
    r = step_rung(prec, step, extra)
    kern = registry.rung_kernel(r, True)
    C = driver.to_device(np.full((m, n), np.nan, np.float32))
    cfg = hopper.wgmma_gemm_launch_config(r, A, B, C, m, n, k, 1.0, 0.0, kernel=kern)
    grid, block, args, smem, cluster = (cfg["grid"], cfg["block"], cfg["args"], cfg["smem"],
                                        cfg["cluster"])

    def enqueue():
        launch(kern, grid, block, args, smem=smem, cluster=cluster)

    enqueue()
    driver.synchronize()
    err = rel_rmse(C.to_host(), ref)
    ms = batch_ms(enqueue, batch, reps, driver.synchronize)
    res = kern.resources
    rec = record(r.name, prec, m, n, k, ms, err, False, step=step,
                 defines={kk: v for kk, v in r.defines.items()}, grid=list(grid),
                 cluster=list(cluster) if cluster else None, smem=smem,
                 registers=res.registers if res else None,
                 staged=len(cfg["keepalive"]))
    del cfg
    C.free()
    return rec


def bench_gemmex(prec, m, n, k, a, b, ref, batch, reps, out_fp32):
    call = gemmex_call(prec, m, n, k, a, b, out_fp32)
    if call is None:
        return None
    enqueue, result, sync, name, out, _ = call
    enqueue()
    err = rel_rmse(result(), ref)
    ms = batch_ms(enqueue, batch, reps, sync)
    return record(name, prec, m, n, k, ms, err, True, via="cupy cublasGemmEx", out=out)


def parse_shape(s):
    parts = [int(x) for x in s.lower().split("x")]
    if len(parts) == 1:
        return parts * 3
    if len(parts) == 3:
        return parts
    raise argparse.ArgumentTypeError(f"shape {s!r}: write N or MxNxK")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", nargs="+", default=["bf16"], choices=list(RUNG))
    ap.add_argument("--shapes", nargs="+", type=parse_shape,
                    default=[[4096] * 3, [8192] * 3, [4096, 4096, 4100], [8191, 8193, 4096]])
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=list(STEPS))
    ap.add_argument("--define", action="append", default=[],
                    help="KEY=VALUE added to every step (e.g. GROUP=8, STAGES=3)")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--json", help="write the records here (DESIGN.md results format)")
    args = ap.parse_args(argv)
    extra = {}
    for kv in args.define:
        key, _, val = kv.partition("=")
        extra[key] = int(val) if val.lstrip("-").isdigit() else val

    dev = drvgemm.device()
    log(f"device: {dev}")
    records = []
    for prec in args.precision:
        for m, n, k in args.shapes:
            log(f"== {prec} {m}x{n}x{k}")
            a, b = make_inputs(prec, m, n, k, seed=m + n + k)
            ref = reference(a, b)
            A, B = driver.to_device(a), driver.to_device(b)
            rows = []
            for step in args.steps:
                try:
                    rec = bench_step(prec, step, extra, m, n, k, A, B, ref, args.batch,
                                     args.reps)
                except Exception as e:
                    log(f"  {step}: FAILED {type(e).__name__}: {e}")
                    if isinstance(e, drvgemm.CudaError) and e.name in (
                            "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED",
                            "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_MISALIGNED_ADDRESS"):
                        raise  # the context is gone
                    continue
                rows.append(rec)
                log(f"  {step:17s} {rec['median_ms']:8.3f} ms {rec['tflops']:8.1f} TFLOP/s "
                    f"rel.RMSE {rec['rel_rmse']} regs {rec['registers']} grid {rec['grid'][0]}"
                    + (f" staged {rec['staged']}" if rec["staged"] else ""))
            if not args.no_baseline:
                for fn, kw in ((batch_time_torch, {}), (bench_gemmex, {"out_fp32": False}),
                               (bench_gemmex, {"out_fp32": True})):
                    if prec == "tf32" and kw.get("out_fp32"):
                        continue
                    try:
                        rec = fn(prec, m, n, k, a, b, ref, args.batch, args.reps, **kw)
                    except Exception as e:
                        log(f"  baseline {fn.__name__} failed: {type(e).__name__}: {e}")
                        rec = None
                    if rec:
                        rows.append(rec)
                        log(f"  {rec['kernel']:17s} {rec['median_ms']:8.3f} ms "
                            f"{rec['tflops']:8.1f} TFLOP/s ({rec['via']}, out {rec.get('out', prec)})")
            best = min((r for r in rows if r["baseline"]), key=lambda r: r["median_ms"],
                       default=None)
            if best:
                for r in rows:
                    if not r["baseline"]:
                        r["vs_best_cublas"] = round(best["median_ms"] / r["median_ms"], 3)
                        log(f"  {r['step']:17s} {r['vs_best_cublas']:.3f} x {best['kernel']} "
                            f"({best['via']})")
            records.extend(rows)
            A.free()
            B.free()
    result = {"device": _device_json(dev), "records": records}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    print(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
