"""GPU time of each kernel that gemm() and torch.matmul launch, per shape,
from Nsight Compute (gpu__time_duration): where a small product's time goes
on the device, apart from the host (gemm_call_overhead.py measures that).

    python benchmarks/kernel_times.py [--json PATH] [--ncu PATH] [SHAPE ...]

SHAPE is MxNxK or MxNxK:precision (bf16 by default; tf32 asks for
precision="tf32" on float32 inputs). Each shape runs three drvgemm.gemm
calls and three torch.matmul(out=) calls (C in the inputs' type) under
ncu; the table gives, per shape and path, each kernel launched with its
grid, block and the median of its three GPU times."""
import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys

DEFAULT = ["128x128x128", "512x512x512", "1024x1024x1024", "4096x4096x128", "8192x8192x64",
           "128x128x65536", "1000x700x900", "127x8191x131", "2048x2048x2048",
           "1024x1024x1024:tf32"]
METRICS = "gpu__time_duration.sum,launch__grid_size,launch__block_size"


def parse(shape):
    dims, _, prec = shape.partition(":")
    m, n, k = (int(x) for x in dims.split("x"))
    return m, n, k, prec or "bf16"


def workload(shapes):
    import torch
    import drvgemm
    for s in shapes:
        m, n, k, prec = parse(s)
        tdt = torch.bfloat16 if prec == "bf16" else torch.float16 if prec == "fp16" \
            else torch.float32
        kw = {"precision": "tf32"} if prec == "tf32" else {}
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        a = torch.rand(m, k, device="cuda").to(tdt)
        b = torch.rand(k, n, device="cuda").to(tdt)
        c = torch.empty(m, n, device="cuda", dtype=tdt)
        drvgemm.gemm(a, b, c, **kw)           # compile and plan outside the profiled range
        torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for _ in range(3):
            drvgemm.gemm(a, b, c, **kw)
        for _ in range(3):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


def drvgemm_kernels() -> set:
    """Entry names of every kernel gemm() may launch (the rest is torch's):
    the rungs, the split-K reductions, the padded copies of misaligned
    operands (staging) and the scaling of C for K = 0."""
    from drvgemm.ladders.gemm import dispatch, split_k, staging
    from drvgemm.ladders.gemm.registry import RUNGS
    return {r.entry for r in RUNGS} | set(split_k.REDUCE_ENTRIES.values()) | \
        set(split_k.DEEP_REDUCE_ENTRIES.values()) | set(staging.PAD_ENTRIES.values()) | \
        set(dispatch.SCALE_C_ENTRIES.values())


def profile_shape(shape, ncu, ours):
    cmd = [ncu, "--profile-from-start", "off", "--metrics", METRICS, "--csv",
           "--print-units", "base", sys.executable, os.path.abspath(__file__), "--run", shape]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-3000:] + out.stderr[-3000:])
        raise SystemExit(f"ncu failed ({out.returncode}) on {shape}")
    return attribute(out.stdout, shape, ours)


def attribute(ncu_csv: str, shape: str, ours: set) -> list:
    """ncu's CSV (one row per kernel and metric) -> a record per (path,
    kernel): a kernel whose entry is one of ``ours`` is drvgemm's."""
    lines = [ln for ln in ncu_csv.splitlines() if ln.startswith('"')]
    rows = {}
    for rec in csv.DictReader(io.StringIO("\n".join(lines))):
        key = (int(rec["ID"]), rec["Kernel Name"])
        rows.setdefault(key, {})[rec["Metric Name"]] = rec["Metric Value"].replace(",", "")
    per = {}
    for (_, name), metrics in sorted(rows.items()):
        short = name.split("(")[0].replace("void ", "")[:80]
        path = "drvgemm" if short in ours else "torch"
        d = per.setdefault((path, short), {"times_us": [], "grid": metrics.get(
            "launch__grid_size"), "block": metrics.get("launch__block_size")})
        d["times_us"].append(float(metrics["gpu__time_duration.sum"]) / 1e3)
    return [{"shape": shape, "path": path, "kernel": name, "grid": d["grid"],
             "block": d["block"], "launches": len(d["times_us"]),
             "median_us": round(statistics.median(d["times_us"]), 2)}
            for (path, name), d in per.items()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="*")
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    shapes = args.shapes or DEFAULT
    if args.run:
        workload(shapes)
        return 0
    ours = drvgemm_kernels()
    result = []
    for shape in shapes:
        rs = profile_shape(shape, args.ncu, ours)
        result += rs
        for r in rs:
            print(f"{r['shape']:>22} {r['path']:8} {r['median_us']:8.2f} us  x{r['launches']}  "
                  f"grid {r['grid']:>6} block {r['block']:>4}  {r['kernel']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"metrics": METRICS, "records": result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
