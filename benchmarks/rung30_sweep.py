"""Rung 30's geometry knobs (WARPS, NWARPS, STAGES) and split counts on the
decode shapes, against cuBLAS in the same run:

    python3 benchmarks/rung30_sweep.py [--precision bf16] [--json PATH]
        [--shapes 1x4096x4096 8x128256x4096 ...] [--variants 4/1/6/4 8/1/4/2 ...]
        [--batch 20] [--reps 7]

What it answers: whether the registered geometry (4 warps taking turns along
K on one 64-column strip, a 6-deep ring) is the fastest way to stream B at
M <= 16, or whether warps side by side along N (NWARPS: 128 * NWARPS
contiguous bytes of each B row per block) or a deeper ring read faster.
Each variant is the registered entry with its defines replaced (a distinct
name, so it compiles once); C is in the inputs' 16-bit type, as
torch.matmul's; each result is checked against float64 before it is timed.
Timing: `batch` products back to back between two events, L2 flushed before
each batch, median over `reps` batches, variants and cuBLAS interleaved per
shape."""
from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

import drvgemm
from drvgemm.ladders.gemm import registry, small_m
from drvgemm.ladders.gemm.dispatch import plan_shape
from drvgemm.runtime import driver
from drvgemm.tools.bench import (batch_time_launches, batch_time_torch, log_best_against_baseline,
                                  make_inputs, reference, unless_it_fails)
from drvgemm.tools.records import gemm_record, results_json, write_json

DECODE = ["1x4096x4096", "8x4096x4096", "16x11008x4096", "4x14336x4096", "2x5120x5120",
          "16x8192x8192", "1x28672x8192", "4x8192x28672", "1x128256x4096", "8x128256x4096"]
# (WARPS, NWARPS, STAGES, MIN_BLOCKS)
VARIANTS = [(4, 1, 6, 4), (4, 1, 4, 4), (4, 2, 6, 4), (4, 4, 6, 4), (4, 4, 4, 4),
            (4, 1, 8, 2), (8, 4, 4, 2), (8, 8, 4, 2)]
SPLITS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_shape(s):
    m, n, k = (int(x) for x in s.lower().split("x"))
    return m, n, k


def variant(base, warps, nwarps, stages, min_blocks):
    d = dict(base.defines, WARPS=warps, NWARPS=nwarps, STAGES=stages, MIN_BLOCKS=min_blocks)
    g = small_m.Geometry(base.precision, int(d["ROWS"]), warps, stages, min_blocks, nwarps)
    return dataclasses.replace(base, name=f"{base.name}_w{warps}n{nwarps}s{stages}",
                               defines=d, block=(g.threads, 1, 1), tile_n=g.strip, smem=g.smem)


def bench(r, split, m, n, k, A, B, ref, dt, batch, reps):
    kern = registry.rung_kernel(r, True, narrow_output=True)
    C = driver.to_device(np.full((m, n), np.nan, np.float32).astype(dt))
    esize = np.dtype(dt).itemsize
    nbytes = r.workspace_bytes(m, n, split)
    ws = driver.to_device(np.zeros(max(1, nbytes // 4), np.float32))
    steps = r.launches(kern, A, B, C, m, n, k, 1.0, 0.0, split=split, narrow_output=True,
                       workspace=ws if split > 1 else 0)
    ms, err = batch_time_launches(steps, C, ref, batch, reps)
    g = small_m.geometry(r)
    rec = gemm_record(r.name, r.precision, m, n, k, ms, err, False, timing="batch",
                      tflops_digits=2, split=steps[0][1].args[12], grid=list(steps[0][1].grid),
                      warps=g.warps, nwarps=g.nwarps, stages=g.stages,
                      gbps=round((k * n + m * k + m * n) * esize / ms / 1e6, 1))
    C.free()
    ws.free()
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--shapes", nargs="+", type=parse_shape,
                    default=[parse_shape(s) for s in DECODE])
    ap.add_argument("--variants", nargs="+", default=None,
                    help="geometries as WARPS/NWARPS/STAGES/MIN_BLOCKS (default: VARIANTS)")
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    base = registry.by_name()[f"30_small_m_{args.precision}"]
    chosen = [tuple(int(x) for x in v.split("/")) for v in args.variants] if args.variants \
        else VARIANTS
    variants = [variant(base, *v) for v in chosen]
    log(f"device: {drvgemm.device()}")
    records = []
    for m, n, k in args.shapes:
        log(f"== {args.precision} {m}x{n}x{k}")
        a, b = make_inputs(args.precision, m, n, k, seed=m + n + k)
        ref = reference(a, b)
        A, B = driver.to_device(a), driver.to_device(b)
        chosen = plan_shape(m, n, k, precision=args.precision, out_dtype=a.dtype)
        log(f"  auto: {chosen.kernel} split {chosen.split}")
        rows = []
        for r in variants:
            counts = small_m.SMALL_M.split_counts(r, m, n, k)
            for split in sorted(set(counts) & set(SPLITS)):
                rec = unless_it_fails(f"{r.name} split {split}", log, bench, r, split, m, n, k,
                                      A, B, ref, a.dtype, args.batch, args.reps)
                if rec is None:
                    continue
                rows.append(rec)
                log(f"  {r.name:34s} split {split:3d} {rec['median_ms'] * 1e3:8.1f} us "
                    f"{rec['gbps']:7.0f} GB/s rel.RMSE {rec['rel_rmse']:.1e}")
        base = batch_time_torch(args.precision, m, n, k, a, b, ref, args.batch, args.reps)
        if base is not None:
            rows.append(base)
            log(f"  {'cublas (torch.matmul)':34s}           {base['median_ms'] * 1e3:8.1f} us")
            for label, pick in (("registered", lambda x: x["nwarps"] == 1 and x["stages"] == 6
                                 and x["warps"] == 4), ("any", lambda x: True)):
                log_best_against_baseline([x for x in rows if x["baseline"] or pick(x)], log,
                                          f" {label}")
        records += rows
        A.free()
        B.free()
    if args.json:
        write_json(results_json(drvgemm.device(), records), args.json)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
