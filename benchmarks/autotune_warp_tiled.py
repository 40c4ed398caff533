"""Sweep the tile constants of rung 8 (cu/gemm/08_warp_tiled.cu) and time
each variant at a large square size on the GPU at hand, through
drvgemm/tools/sweep.py's pipeline:

1. every variant is compiled at ALIGNED=1 and ALIGNED=0 in parallel
   processes; one that spills (or does not compile) is skipped;
2. both instantiations are checked against numpy once, at small shapes that
   are not multiples of any tile (integer inputs, so the result must be
   exact; C poisoned with NaN, beta = 0);
3. the ALIGNED=1 ones and cuBLAS (torch.matmul, TF32 off) are timed
   round-robin at SIZE^3 in paired rounds (median of ``reps`` batches of
   ``batch`` back-to-back launches, L2 flushed before each batch).

The table is printed fastest first with each variant's ratio to cuBLAS, and
written as JSON (DESIGN.md records plus the variants' constants).

    python benchmarks/autotune_warp_tiled.py [--size 4096] [--rounds 5] [--batch 3]
        [--reps 3] [--json autotune_warp_tiled.json] [--only 0,3,5]

With no GPU it compiles every variant for sm_90 and prints registers,
spills, shared memory and blocks per SM (the occupancy model), then exits.
To adopt a winner, change the defaults of the 08_warp_tiled lambda in
drvgemm/ladders/gemm/registry.py to its constants.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import drvgemm  # noqa: E402
from drvgemm.ladders.gemm.registry import by_name  # noqa: E402
from drvgemm.runtime import driver  # noqa: E402
from drvgemm.runtime.launch import launch_config  # noqa: E402
from drvgemm.tools import sweep  # noqa: E402

RUNG = by_name()["08_warp_tiled"]
log = sweep.log


def _v(bm, bn, bk, wm, wn, tm, tn, min_blocks, kt_unroll=1):
    return dict(BM=bm, BN=bn, BK=bk, WM=wm, WN=wn, TM=tm, TN=tn, MIN_BLOCKS=min_blocks,
                KT_UNROLL=kt_unroll)


# Plausible shapes only: 128-256 wide block tiles (enough reuse per byte
# loaded), 8x8 or 8x16 / 16x8 micro-tiles (FFMA : LDS.128 of 16 : 1 or
# 21 : 1), warp tiles whose 32 threads form a 4x8 / 8x4 grid, and
# MIN_BLOCKS chosen so the register cap is reachable without spilling.
_TABLE = [
    _v(128, 128, 8, 32, 64, 8, 8, 2),        # the first registered constants
    _v(128, 128, 8, 32, 64, 8, 8, 2, 2),     # ... two k-tiles per trip: constant smem addresses
    _v(128, 128, 8, 64, 32, 8, 8, 2),
    _v(128, 128, 8, 32, 64, 8, 8, 1),        # no register cap: one block of 8 warps if > 128
    _v(128, 128, 16, 32, 64, 8, 8, 2),       # (spills at the 128-register cap: skipped)
    _v(128, 128, 16, 32, 64, 8, 8, 1),
    _v(128, 128, 16, 64, 32, 8, 8, 1),
    _v(128, 128, 8, 64, 64, 16, 8, 2),       # 4 warps of 64x64, 128 accumulators a thread
    _v(128, 128, 8, 64, 64, 16, 8, 2, 2),    # (registered now: the winner of the first sweep)
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
# Variant 0 is what the registry holds today, read from its entry (never copied here).
REGISTERED = {key: RUNG.defines[key] for key in _TABLE[0]}
VARIANTS = [REGISTERED] + [v for v in _TABLE if v != REGISTERED]

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


def compile_variants(rungs, arch):
    """{index: (problem or None, resources of ALIGNED=1)} through the compile pool."""
    jobs = [sweep.CompileJob((i, al), r.source, r.entry, r.instantiation_defines(al), arch,
                             tuple(r.options)) for i, r in rungs.items() for al in (1, 0)]
    out = {}
    for job, res in zip(jobs, sweep.compile_all(jobs)):
        i, al = job.key
        problem, res1 = out.get(i, (None, None))
        ok, why = sweep.resources_ok(res)
        if not ok:
            problem = problem or (why if "error" in res else f"spills ({why})")
        if al == 1:
            res1 = res
        out[i] = (problem, res1)
    return out


def check(r, kern, aligned: int, rng) -> str | None:
    """None when the variant is exact at its check shape, else what went wrong."""
    m, n, k = CHECK_SHAPES[aligned]
    a = rng.integers(-8, 9, (m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32)
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C = drvgemm.to_device(np.full((m, n), np.nan, np.float32))
    launch_config(kern, r.launch_config(kern, A, B, C, m, n, k, 1.0, 0.0))
    drvgemm.synchronize()
    got = C.to_host()
    want = a.astype(np.float64) @ b.astype(np.float64)
    bad = got != want
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        return (f"ALIGNED={aligned} M={m} N={n} K={k}: {int(bad.sum())} wrong, first at {i}: "
                f"{got[i]} != {want[i]}")
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default="autotune_warp_tiled.json")
    ap.add_argument("--only", default="", help="comma-separated variant indices")
    args = ap.parse_args(argv)
    chosen = [int(i) for i in args.only.split(",")] if args.only else range(len(VARIANTS))
    gpu = driver.has_gpu()
    if gpu:
        dev = drvgemm.device()
        arch = f"sm_{dev.cc[0]}{dev.cc[1]}"
    else:
        arch = "sm_90"
        log(f"no GPU ({driver.no_gpu_reason()}): compiling for {arch} only")
    rungs = {i: variant_rung(VARIANTS[i]) for i in chosen}
    compiled = compile_variants(rungs, arch)
    rows, entries = {}, []
    rng = np.random.default_rng(0)
    if gpu:
        from drvgemm.tools import cublas
        from drvgemm.tools.bench import make_inputs
        n = args.size
        a, b = make_inputs("fp32", n, n, n, seed=0)
        A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    for i, r in rungs.items():
        problem, res = compiled[i]
        row = rows[i] = {"index": i, "variant": label(VARIANTS[i]), "defines": r.defines,
                         "threads": r.threads, "smem": r.smem}
        if res and "error" not in res:
            row["registers"] = res["registers"]
            row["spill_bytes"] = res["spills"] + res["stack"]
            kern = drvgemm.compile(r.source, r.entry, defines=r.instantiation_defines(1), arch=arch)
            row["blocks_per_sm"] = drvgemm.occupancy(kern, r.threads, r.smem).blocks_per_sm
        if problem:
            row["skipped"] = problem
        elif gpu:
            kerns = {al: drvgemm.compile(r.source, r.entry, defines=r.instantiation_defines(al),
                                         arch=arch) for al in (1, 0)}
            for al, kern in kerns.items():
                err = check(r, kern, al, rng)
                if err:
                    row["skipped"] = "WRONG RESULT " + err
                    break
            if "skipped" not in row:
                C = drvgemm.empty((n, n), np.float32)
                cfg = r.launch_config(kerns[1], A, B, C, n, n, n, 1.0, 0.0)
                entries.append(sweep.Entry(
                    RUNG.name, (lambda k=kerns[1], c=cfg: launch_config(k, c)),
                    sync=driver.synchronize,
                    meta={"variant": row["variant"], "index": i, "defines": r.defines,
                          "registers": row.get("registers"), "smem": r.smem, "out": "fp32"}))
        status = row.get("skipped") or ("checked" if gpu else "compiled")
        log(f"[{i:2d}] {row['variant']}: {row.get('registers', '-')} regs, "
            f"{row.get('blocks_per_sm', '-')} blocks/SM, {status}")
    records = []
    if gpu and entries:
        call = cublas.torch_matmul_call("fp32", a, b)
        if call:
            enqueue, _, sync, restore = call
            entries.append(sweep.Entry("cublas", enqueue, baseline=True, sync=sync, cleanup=restore,
                                       meta={"via": "torch.matmul (TF32 off)", "out": "fp32"}))
        try:
            sweep.round_robin(entries, args.rounds, sweep.measure_batch(args.batch, args.reps),
                              progress=log)
        finally:
            for e in entries:
                if e.cleanup:
                    e.cleanup()
        records = sweep.ratio_records(entries, n, n, n, "fp32")
        print(sweep.format_table(records, f"rung 8 variants at {n}^3 on {dev.name} "
                                          "(paired rounds, L2 flushed)"))
    for row in rows.values():
        if "skipped" in row or not gpu:
            print(f"[{row['index']:2d}] {row['variant']}: "
                  f"{row.get('skipped', 'compiled, not timed (no GPU)')}")
    timed = [r for r in records if r.get("variant") and r.get("median_ms")]
    best = max(timed, key=lambda r: r.get("vs_best_cublas", 0), default=None)
    if best:
        print("best: " + ", ".join(f"{k}={best['defines'][k]}" for k in VARIANTS[0]))
    if gpu:
        sweep.write_results(args.json, dev, records, size=args.size,
                            variants=sorted(rows.values(), key=lambda r: r["index"]))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
