"""Sweep the tile constants of rung 8 (cu/08_warp_tiled.cu) and time each
variant at a large square size on the GPU at hand.

Every variant is compiled at ALIGNED=1 and ALIGNED=0; one that spills (or
does not compile) is skipped. Both instantiations are checked against
numpy first, at small shapes that are not multiples of any tile (integer
inputs, so the result must be exact; C poisoned with NaN, beta = 0), then
the ALIGNED=1 one is timed at SIZE^3 (device events, L2 flushed, median).
The table is printed fastest first, with cuBLAS (through torch, TF32 off)
when torch is installed, and written as JSON.

    python benchmarks/autotune_warp_tiled.py [--size 4096] [--reps 20]
        [--json autotune_warp_tiled.json] [--only 0,3,5]

With no GPU it compiles every variant for sm_90 and prints registers,
spills, shared memory and blocks per SM (the occupancy model), then exits.
To adopt a winner, change the defaults of the 08_warp_tiled lambda in
drvgemm/ladders/gemm/registry.py to its constants.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

import drvgemm
from drvgemm.runtime import driver, timing
from drvgemm.ladders.gemm.registry import by_name

RUNG = by_name()["08_warp_tiled"]

def _v(bm, bn, bk, wm, wn, tm, tn, min_blocks, kt_unroll=1):
    return dict(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, TM=tm, TN=tn, MIN_BLOCKS=min_blocks,
                KT_UNROLL=kt_unroll)


# Plausible shapes only: 128-256 wide block tiles (enough reuse per byte
# loaded), 8x8 or 8x16 / 16x8 micro-tiles (FFMA : LDS.128 of 16 : 1 or
# 21 : 1), warp tiles whose 32 threads form a 4x8 / 8x4 grid, and
# MIN_BLOCKS chosen so the register cap is reachable without spilling.
VARIANTS = [
    _v(128, 128, 8, 32, 64, 8, 8, 2),        # the registry's default
    _v(128, 128, 8, 32, 64, 8, 8, 2, 2),     # ... two k-tiles per trip: constant smem addresses
    _v(128, 128, 8, 64, 32, 8, 8, 2),
    _v(128, 128, 8, 32, 64, 8, 8, 1),        # no register cap: one block of 8 warps if > 128
    _v(128, 128, 16, 32, 64, 8, 8, 2),       # (spills at the 128-register cap: skipped)
    _v(128, 128, 16, 32, 64, 8, 8, 1),
    _v(128, 128, 16, 64, 32, 8, 8, 1),
    _v(128, 128, 8, 64, 64, 16, 8, 2),       # 4 warps of 64x64, 128 accumulators a thread
    _v(128, 128, 8, 64, 64, 16, 8, 2, 2),
    _v(128, 128, 8, 64, 64, 8, 16, 2),
    _v(128, 128, 16, 64, 64, 16, 8, 2),
    _v(128, 256, 8, 64, 64, 8, 16, 1),       # 8 warps, one block per SM
    _v(128, 256, 8, 64, 64, 8, 16, 1, 2),
    _v(256, 128, 8, 64, 64, 16, 8, 1),
    _v(128, 256, 8, 32, 128, 8, 16, 1),
    _v(256, 128, 16, 64, 32, 8, 8, 1),       # 16 warps of 8x8 micro-tiles, one block per SM
    _v(64, 128, 8, 32, 64, 8, 8, 3),         # smaller tiles, more blocks per SM
    _v(128, 64, 8, 64, 32, 8, 8, 3),
    _v(64, 128, 16, 32, 64, 8, 8, 2),
]

CHECK_SHAPES = {1: (333, 260, 132), 0: (257, 263, 131)}  # ALIGNED=1 needs N, K % 4 == 0


def variant_rung(consts: dict):
    """The registry entry of rung 8 with other tile constants: block, tile and
    shared memory recomputed exactly as the registry computes them."""
    d = dict(RUNG.defines, **consts)
    threads = (d["BM"] // d["WM"]) * (d["BN"] // d["WN"]) * 32
    return dataclasses.replace(
        RUNG, defines=d, block=(threads, 1, 1), tile_m=d["BM"], tile_n=d["BN"],
        smem=2 * d["BK"] * (d["BM"] + d["APAD"] + d["BN"]) * 4)


def label(consts: dict) -> str:
    c = consts
    return (f"{c['BM']}x{c['BN']}x{c['BK']} warp {c['WM']}x{c['WN']} "
            f"thread {c['TM']}x{c['TN']} min_blocks {c['MIN_BLOCKS']} unroll {c['KT_UNROLL']}")


def compile_variant(r, aligned: int, arch=None):
    return drvgemm.compile(r.source, r.entry, defines=dict(r.defines, ALIGNED=aligned), arch=arch)


def launch_args(r, A, B, C, m, n, k):
    return r.grid(m, n), tuple(r.block), (A, B, C, m, n, k, 1.0, 0.0)


def check(r, kern, aligned: int, rng) -> str | None:
    """None when the variant is exact at its check shape, else what went wrong."""
    m, n, k = CHECK_SHAPES[aligned]
    a = rng.integers(-8, 9, (m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32)
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C = drvgemm.to_device(np.full((m, n), np.nan, np.float32))
    grid, block, args = launch_args(r, A, B, C, m, n, k)
    drvgemm.launch(kern, grid, block, args, smem=r.smem)
    drvgemm.synchronize()
    got = C.to_host()
    want = a.astype(np.float64) @ b.astype(np.float64)
    bad = got != want
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        return (f"ALIGNED={aligned} M={m} N={n} K={k}: {int(bad.sum())} wrong, first at {i}: "
                f"{got[i]} != {want[i]}")
    return None


def time_variant(r, kern, A, B, C, size, reps) -> float:
    grid, block, args = launch_args(r, A, B, C, size, size, size)
    return timing.median_ms(lambda: drvgemm.launch(kern, grid, block, args, smem=r.smem),
                            warmup=3, reps=reps)


def cublas_tflops(a, b, size, reps) -> float | None:
    try:
        import torch
        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = torch.empty((size, size), dtype=torch.float32, device="cuda")
        ms = timing.median_ms(lambda: torch.matmul(ta, tb, out=tc), warmup=3, reps=reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return 2.0 * size ** 3 / (ms * 1e-3) / 1e12


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default="autotune_warp_tiled.json")
    ap.add_argument("--only", default="", help="comma-separated variant indices")
    args = ap.parse_args(argv)
    chosen = [int(i) for i in args.only.split(",")] if args.only else range(len(VARIANTS))
    gpu = driver.has_gpu()
    arch = None if gpu else "sm_90"
    rows = []
    if gpu:
        rng = np.random.default_rng(0)
        n = args.size
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        A, B = drvgemm.to_device(a), drvgemm.to_device(b)
        C = drvgemm.empty((n, n), np.float32)
    else:
        print(f"no GPU ({driver.no_gpu_reason()}): compiling for {arch} only", file=sys.stderr)
    for i in chosen:
        consts = VARIANTS[i]
        r = variant_rung(consts)
        row = {"index": i, "variant": label(consts), "defines": r.defines,
               "threads": r.threads, "smem": r.smem}
        rows.append(row)
        t0 = time.perf_counter()
        try:
            kerns = {al: compile_variant(r, al, arch) for al in (1, 0)}
        except drvgemm.CompileError as e:
            why = [ln for ln in e.log.splitlines() if "error" in ln] or [str(e).splitlines()[0]]
            row["skipped"] = "does not compile: " + why[0].strip()
            print(f"[{i:2d}] {row['variant']}: {row['skipped']}", file=sys.stderr)
            continue
        res = kerns[1].resources
        row.update(registers=res.registers,
                   spill_bytes=max(k.resources.spill_stores + k.resources.spill_loads
                                   + k.resources.stack for k in kerns.values()))
        row["blocks_per_sm"] = drvgemm.occupancy(kerns[1], r.threads, r.smem).blocks_per_sm
        if row["spill_bytes"]:
            row["skipped"] = f"spills ({row['spill_bytes']} B of spill/stack)"
        elif gpu:
            for al, kern in kerns.items():
                err = check(r, kern, al, rng)
                if err:
                    row["skipped"] = "WRONG RESULT " + err
                    break
        if "skipped" not in row and gpu:
            ms = time_variant(r, kerns[1], A, B, C, args.size, args.reps)
            row.update(median_ms=round(ms, 4),
                       tflops=round(2.0 * args.size ** 3 / (ms * 1e-3) / 1e12, 2))
        status = row.get("skipped") or (f"{row['tflops']:.1f} TFLOP/s" if gpu else "compiled")
        print(f"[{i:2d}] {row['variant']}: {res.registers} regs, {row['blocks_per_sm']} blocks/SM, "
              f"{status} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr, flush=True)

    cublas = cublas_tflops(a, b, args.size, args.reps) if gpu else None
    ranked = sorted(rows, key=lambda r: -r.get("tflops", -1.0))
    head = f"{'#':>3} {'variant':<61} {'regs':>4} {'blk/SM':>6} {'smem':>7} {'ms':>8} {'TFLOP/s':>8}"
    if cublas:
        head += f" {'% cuBLAS':>8}"
    print(head)
    for row in ranked:
        line = (f"{row['index']:>3} {row['variant']:<61} {row.get('registers', '-'):>4} "
                f"{row.get('blocks_per_sm', '-'):>6} {row['smem']:>7} ")
        if "tflops" in row:
            line += f"{row['median_ms']:>8.3f} {row['tflops']:>8.2f}"
            if cublas:
                line += f" {100 * row['tflops'] / cublas:>7.1f}%"
        else:
            line += f"  {row.get('skipped', 'not timed (no GPU)')}"
        print(line)
    if cublas:
        print(f"cuBLAS (torch.matmul, TF32 off): {cublas:.2f} TFLOP/s at {args.size}^3")
    best = next((r for r in ranked if "tflops" in r), None)
    if best:
        print("best: " + ", ".join(f"{k}={best['defines'][k]}" for k in VARIANTS[0]))
    if gpu:
        out = {"device": dataclasses.asdict(drvgemm.device()) if dataclasses.is_dataclass(
                   drvgemm.device()) else str(drvgemm.device()),
               "size": args.size, "cublas_tflops": cublas, "variants": ranked}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
