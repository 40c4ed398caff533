"""The Hopper rung and cuBLAS under Nsight Compute, side by side: where does
the rung's time go that cuBLAS's does not?

    python benchmarks/ncu_compare.py [--prec bf16] [--size 4096]
        [--extra NAME:KEY=V,KEY=V ...] [--raw PATH]

Runs itself under ``ncu --clock-control none`` with the speed-of-light,
compute, memory, launch, occupancy and warp-state sections, profiling one
call each (after a warm-up call) of: the registered 20_tma_wgmma rung, any
--extra variants of it (defines over the registered ones), torch.matmul and
cublasGemmEx through CuPy (bf16 and fp32 output). Prints one column per
kernel for the figures that separate them (SM clock, tensor pipe, L2 and
DRAM throughput, issue activity, the top stalls) and writes ncu's full CSV to
--raw. cuBLAS's kernel name says which tile and cluster shape it chose.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from drvgemm.tools import ncu

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(1, os.path.dirname(_HERE))

SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "LaunchStats",
            "Occupancy", "WarpStateStats", "SchedulerStats"]
# Rows shown, in order (ncu's metric names on the details page).
SHOWN = ["Duration", "SM Frequency", "Compute (SM) Throughput", "Memory Throughput",
         "L1/TEX Cache Throughput", "L2 Cache Throughput", "DRAM Throughput",
         "Executed Ipc Active", "Issue Slots Busy", "SM Busy", "No Eligible", "Active Warps Per Scheduler",
         "Eligible Warps Per Scheduler", "Registers Per Thread", "Grid Size", "Block Size",
         "Cluster Size", "Dynamic Shared Memory Per Block", "Achieved Occupancy",
         "Warp Cycles Per Issued Instruction"]
KERNEL_FILTER = "regex:gemm|sm90|nvjet|cutlass|xmma|Kernel2"


def child(args):
    """The profiled program: each GEMM once to warm up, once more measured."""
    from drvgemm.ladders.gemm import dispatch, hopper, registry
    from drvgemm.runtime import driver
    from drvgemm.runtime.launch import launch
    from drvgemm.tools import cublas
    import wgmma_sweep as sweep

    prec, n = args.prec, args.size
    rng = np.random.default_rng(1)
    dt = dispatch.input_dtype(prec)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(dt)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(dt)
    A, B = driver.to_device(a), driver.to_device(b)
    C = driver.empty((n, n), np.float32)
    calls = []
    reg = registry.by_name()[f"20_tma_wgmma_{prec}"]
    variants = [("registered", reg)]
    for spec in args.extra or []:
        name, _, kv = spec.partition(":")
        d = {k: int(v) for k, v in (x.split("=") for x in kv.split(",") if x)}
        variants.append((name, sweep.variant_rung(prec, name, {**reg.defines, **d})))
    C16 = driver.empty((n, n), dt) if prec != "tf32" else None
    for name, r in variants:
        kern = registry.rung_kernel(r, True)
        narrow = bool(r.defines.get("OUT_16"))   # C in the inputs' type
        cfg = hopper.wgmma_gemm_launch_config(r, A, B, C16 if narrow else C, n, n, n, 1.0, 0.0, kernel=kern,
                                           narrow_output=narrow)
        calls.append((f"rung {name}", lambda k=kern, c=cfg: launch(
            k, c["grid"], c["block"], c["args"], smem=c["smem"], cluster=c["cluster"])))
    t = cublas.torch_matmul_call(prec, a, b)
    if t:
        calls.append(("torch.matmul", t[0]))
    for out_fp32 in (False, True):
        g = cublas.gemmex_call(prec, n, n, n, a, b, out_fp32)
        if g:
            calls.append((g[3], g[0]))
    for label, fn in calls:
        fn()
        driver.synchronize()
        print(f"CALL {label}", flush=True)
        fn()
        driver.synchronize()
    return 0


def parse(csv_text):
    """[(kernel name, {metric: (value, unit)})] in launch order."""
    kernels, order = {}, []
    for r in ncu.metric_rows(csv_text):
        key = r["ID"]
        if key not in kernels:
            kernels[key] = (r["Kernel Name"], {})
            order.append(key)
        kernels[key][1][r["Metric Name"]] = (r["Metric Value"], r["Metric Unit"])
    return [kernels[k] for k in order]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prec", default="bf16", choices=["bf16", "fp16", "tf32"])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--extra", nargs="*", help="NAME:KEY=V,KEY=V variants of the rung")
    ap.add_argument("--raw", help="write ncu's CSV here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    ncu_args = ["--page", "details", "--kernel-name", KERNEL_FILTER, "--launch-skip", "0"]
    for s in SECTIONS:
        ncu_args += ["--section", s]
    child_args = ["--prec", args.prec, "--size", str(args.size)] + (["--extra", *args.extra] if args.extra else [])
    proc = ncu.profile_child(__file__, ncu_args, child_args, args.raw)
    if proc is None:
        print("ncu not found")
        return 1
    if proc.returncode != 0 or '"ID"' not in proc.stdout:
        print(f"ncu failed ({proc.returncode}):\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}")
        return 1
    labels = ncu.calls(proc.stdout)
    kernels = parse(proc.stdout)
    # Two launches per call (warm-up, measured); a call may launch helper
    # kernels too, so match by order only when the counts agree.
    print(f"{len(kernels)} kernels profiled; calls: {labels}")
    cols = kernels[1::2] if len(kernels) == 2 * len(labels) else kernels
    names = labels if len(cols) == len(labels) else [k[0][:30] for k in cols]
    for (kname, _), label in zip(cols, names):
        print(f"  {label}: {kname[:160]}")
    print(f"{'metric':36s}" + "".join(f"{n[:18]:>20s}" for n in names))
    for m in SHOWN:
        vals = [k[1].get(m) for k in cols]
        if not any(vals):
            continue
        unit = next(v[1] for v in vals if v)
        print(f"{(m + ' [' + unit + ']')[:36]:36s}" +
              "".join(f"{(v[0] if v else '-'):>20s}" for v in vals))
    # Stall reasons are not on the details page by name; show the warp-state
    # rows ncu printed (the "Stall ..." metrics) when present.
    stall_rows = sorted({m for k in cols for m in k[1] if m.lower().startswith("stall")})
    for m in stall_rows:
        print(f"{m[:36]:36s}" + "".join(f"{(k[1].get(m, ('-',))[0]):>20s}" for k in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
