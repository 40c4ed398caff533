"""Candidate configurations of the mma.sync rungs (cu/11 TF32, cu/12 bf16 /
fp16, cu/14 warp-specialised bf16) side by side in one run, to choose the
registered defines:

    python benchmarks/mma_sweep.py [--variants NAME ...] [--size 4096] [--reps 20]
        [--json PATH] [--list]

1. Every variant (a registered rung with some defines overridden) is compiled
   at ALIGNED=0 and ALIGNED=1 in parallel processes; one that spills, uses a
   stack or fails to compile is dropped.
2. Every variant is checked before it is timed: ALIGNED=0 at 333 x 517 x 271
   with integers in [-8, 8] (edge tiles everywhere; must be exact), and
   ALIGNED=1 at 1024^3 with normal inputs against float64 (error bound from
   the input precision).
3. Each variant that passed is timed at size^3 with drvgemm.timing.median_ms
   (L2 flushed before every repetition), next to the instruction ceilings
   measured in the same run (drvgemm.ceilings.measure_ceilings).

Prints a table sorted by TFLOP/s (with % of the ceiling of its precision and
the prediction each variant was added with) and writes the records to --json.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np


@dataclasses.dataclass(frozen=True)
class Variant:
    rung: str            # registered rung it starts from
    defines: dict        # overrides of the rung's defines
    pred: float          # predicted TFLOP/s at 4096^3 on the H200
    why: str
    allow_spill: bool = False  # measured anyway, its spills reported


# Measured before this sweep (H200, 4096^3, TFLOP/s): 10: 167.8, 11: 173.5,
# 12: 333.3, 13: 333.0, 14: 367.0 (BK=32, STAGES 3 (tf32) / 4, FRAG_PIPE=0).
# Per k-tile the 8 warps of a block meet at one barrier; with FRAG_PIPE=0 a
# warp then issues its ldmatrix and waits their latency before the first
# MMA, with both warps of its scheduler in the same state, so the tensor
# pipe idles at every k-tile. FRAG_PIPE=1 loads the next k16 step during the
# MMAs of this one and crosses the barrier with the last step's MMAs still
# to issue; BK=64 halves the number of barriers and makes A's shared rows
# (and the global reads of A) whole 128-byte lines.
VARIANTS = {
    # bf16, rung 12 (every warp copies and computes)
    "12_base": Variant("12_mma_bf16", dict(FRAG_PIPE=0, BK=32, STAGES=4), 333,
                       "as first measured"),
    "12_bk64_s3": Variant("12_mma_bf16", dict(FRAG_PIPE=0, BK=64, STAGES=3), 355,
                          "half the barriers, 128-byte A rows"),
    "12_pipe": Variant("12_mma_bf16", dict(FRAG_PIPE=1, BK=32, STAGES=4), 400,
                       "fragment double buffering"),
    "12_pipe_s3": Variant("12_mma_bf16", dict(FRAG_PIPE=1, BK=32, STAGES=3), 390,
                          "fragment double buffering, 3 stages"),
    "12_pipe_bk64_s3": Variant("12_mma_bf16", dict(FRAG_PIPE=1, BK=64, STAGES=3), 430,
                               "double buffering + BK=64 (registered default)"),
    "12_pipe_bk64_s4": Variant("12_mma_bf16", dict(FRAG_PIPE=1, BK=64, STAGES=4), 440,
                               "double buffering + BK=64, 4 stages (192 KiB)"),
    "12_pipe_bk64_s4_g16": Variant("12_mma_bf16", dict(FRAG_PIPE=1, BK=64, STAGES=4,
                                                       GROUP_M=16), 435,
                                   "+ bands of 16 block rows"),
    # fp16, rung 13
    "13_base": Variant("13_mma_fp16", dict(FRAG_PIPE=0, BK=32, STAGES=4), 333,
                       "as first measured"),
    "13_pipe_bk64_s3": Variant("13_mma_fp16", dict(FRAG_PIPE=1, BK=64, STAGES=3), 435,
                               "double buffering + BK=64 (registered default)"),
    "13_pipe_bk64_s4": Variant("13_mma_fp16", dict(FRAG_PIPE=1, BK=64, STAGES=4), 440,
                               "double buffering + BK=64"),
    # warp-specialised bf16, rung 14 (168 registers: no room for two fragment sets)
    "14_base": Variant("14_warp_specialized_mma_bf16", dict(BK=32, STAGES=4), 367,
                       "as first measured"),
    "14_bk64_s3": Variant("14_warp_specialized_mma_bf16", dict(BK=64, STAGES=3), 385,
                          "half the hand-overs"),
    "14_bk64_s4": Variant("14_warp_specialized_mma_bf16", dict(BK=64, STAGES=4), 390,
                          "half the hand-overs, 4 stages"),
    # TF32, rungs 10 (PTX, fixed) and 11
    "10_ptx": Variant("10_mma_tf32_ptx", {}, 168, "hand-written PTX twin of 11_base"),
    "11_base": Variant("11_mma_tf32", dict(BK=32, STAGES=3), 173,
                       "as first measured: cvt.rna on every fragment load"),
    "11_s4": Variant("11_mma_tf32", dict(BK=32, STAGES=4), 178, "4 stages"),
    # Measured 2026-11-29 (same runs, TFLOP/s) and dropped from the source:
    # 16-byte B loads through a chosen n-tile column order 151.4 vs 175.9;
    # fragment double buffering 163.5 (spills); rounding once in shared memory
    # 143.1 (3 stages) / 146.3 (4) vs 173.6.
    # 16 warps of 64 x 32 (WN=32): measured 150.1 / 147.2 (3 / 4 stages) vs
    # 173.3 and removed (benchmarks/notes/removed-knobs.md).
    "11_nocvt": Variant("11_mma_tf32", dict(BK=32, STAGES=3, CVT=0), 195,
                        "measurement only: no conversion at all (truncation)"),
}
CEILING_OF = {"tf32": "mma_tf32", "bf16": "mma_bf16", "fp16": "mma_fp16"}
ELEMENT_BYTES = {"tf32": 4, "bf16": 2, "fp16": 2}
ODD_SHAPE = (333, 517, 271)
U_IN = {"tf32": 2.0 ** -11, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}


def log(msg=""):
    print(msg, file=sys.stderr, flush=True)


def variant_rung(name):
    """The registered rung with the variant's defines; its own name keeps its
    compiled kernels apart in ladder's cache. Shared memory and the block
    follow the tile constants."""
    from drvgemm.ladders.gemm.registry import by_name
    v = VARIANTS[name]
    base = by_name()[v.rung]
    if base.source.endswith(".ptx"):
        return dataclasses.replace(base, name=f"{base.name}[{name}]")
    d = {**base.defines, **v.defines}
    bm, bk, stages = d.get("BM", base.tile_m), d.get("BK", 32), d.get("STAGES", 3)
    bn = d.get("BN", base.tile_n)
    smem = stages * (bm * bk + bk * bn) * ELEMENT_BYTES[base.precision]
    block = base.block
    if "WN" in d:   # consumer warps of WM x WN (rung 11: WM = 64), plus producers
        block = ((bm // d.get("WM", 64)) * (bn // d["WN"]) * 32
                 + d.get("PRODUCER_WARPS", 0) * 32, 1, 1)
    return dataclasses.replace(base, name=f"{base.name}[{name}]", defines=d, smem=smem,
                               block=block)


# ---------------------------------------------------------------------------
# 1. compile
# ---------------------------------------------------------------------------
def _compile_job(job):
    source, entry, defines, arch = job
    from drvgemm.runtime.compiler import compile_binary, parse_resources
    try:
        b = compile_binary(source, entry, defines=defines, arch=arch)
    except Exception as e:   # report, never raise across the pool
        return {"error": f"{type(e).__name__}: {e}"[:1000]}
    res = parse_resources(b.log).get(b.entry)
    return {"registers": res.registers if res else None,
            "spills": (res.spill_stores + res.spill_loads) if res else None,
            "stack": res.stack if res else None}


def compile_all(names, arch):
    """{name: problem or None, resources}: both instantiations of each variant."""
    jobs, keys = [], []
    for nm in names:
        r = variant_rung(nm)
        for aligned in ((None,) if r.source.endswith(".ptx") else (0, 1)):
            defines = None if aligned is None else {**r.defines, "ALIGNED": aligned}
            jobs.append((r.source, r.entry, defines, arch))
            keys.append((nm, aligned))
    try:
        import multiprocessing
        workers = max(1, min(len(jobs), os.cpu_count() or 2))
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            results = list(ex.map(_compile_job, jobs))
    except Exception as e:
        log(f"  parallel compile failed ({type(e).__name__}: {e}); compiling in turn")
        results = [_compile_job(j) for j in jobs]
    out = {nm: (None, {}) for nm in names}
    for (nm, aligned), res in zip(keys, results):
        problem, regs = out[nm]
        if "error" in res:
            problem = problem or res["error"].splitlines()[0]
        elif (res["spills"] or res["stack"]) and not VARIANTS[nm].allow_spill:
            problem = problem or (f"ALIGNED={aligned}: spills {res['spills']} B, "
                                  f"stack {res['stack']} B")
        else:
            regs = {**regs, aligned: res["registers"]}
            if res["spills"] or res["stack"]:
                log(f"  {nm} ALIGNED={aligned}: spills {res['spills']} B, stack {res['stack']} B "
                    "(measured anyway)")
        out[nm] = (problem, regs)
    return out


# ---------------------------------------------------------------------------
# 2. correctness, 3. timing
# ---------------------------------------------------------------------------
def run_gemm(r, aligned, A, B, C, m, n, k, arch):
    from drvgemm.ladders.gemm import registry
    from drvgemm.runtime.launch import launch
    kern = registry.rung_kernel(r, aligned, arch=arch)
    launch(kern, r.grid(m, n), r.block, [A, B, C, m, n, k, 1.0, 0.0], smem=r.smem)


def check(r, arch):
    """(ok, detail): exact at the odd shape with ALIGNED=0, within the
    precision's bound at 1024^3 with ALIGNED=1."""
    from drvgemm.ladders.gemm import dispatch
    from drvgemm.runtime import driver
    dt = dispatch.input_dtype(r.precision)
    rng = np.random.default_rng(7)
    m, n, k = ODD_SHAPE
    a = rng.integers(-8, 9, (m, k)).astype(dt)
    b = rng.integers(-8, 9, (k, n)).astype(dt)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    C = driver.to_device(np.full((m, n), np.nan, np.float32))
    run_gemm(r, False, driver.to_device(a), driver.to_device(b), C, m, n, k, arch)
    got = C.to_host().astype(np.float64)
    bad = int(np.count_nonzero(~(got == ref)))
    if bad:
        return False, f"ALIGNED=0 {m}x{n}x{k}: {bad} of {m * n} outputs wrong"
    s = 1024
    a = rng.standard_normal((s, s), dtype=np.float32).astype(dt)
    b = rng.standard_normal((s, s), dtype=np.float32).astype(dt)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if r.precision == "tf32":   # the kernel rounds fp32 -> tf32 itself (rna)
        ref = a64 @ b64
        u = 2.0 ** -10 if r.defines.get("CVT") == 0 else U_IN["tf32"]  # truncation: 2^-10
        bound = (2 * u + s * 2.0 ** -24) * (np.abs(a64) @ np.abs(b64)) * 2
    else:
        ref = a64 @ b64
        bound = (s * 2.0 ** -24) * (np.abs(a64) @ np.abs(b64)) * 2
    C = driver.to_device(np.full((s, s), np.nan, np.float32))
    run_gemm(r, True, driver.to_device(a), driver.to_device(b), C, s, s, s, arch)
    got = C.to_host().astype(np.float64)
    err = np.abs(got - ref)
    over = ~(err <= bound)
    if over.any():
        i, j = np.argwhere(over)[0]
        return False, (f"ALIGNED=1 1024^3: {int(over.sum())} outputs over the bound, first "
                       f"({i}, {j}) = {got[i, j]} vs {ref[i, j]}")
    return True, f"exact {m}x{n}x{k}; 1024^3 max err/bound {float((err / bound).max()):.2f}"


def time_variant(r, size, reps, arch):
    from drvgemm.ladders.gemm import dispatch
    from drvgemm.runtime import driver, timing
    dt = dispatch.input_dtype(r.precision)
    rng = np.random.default_rng(1)
    A = driver.to_device(rng.standard_normal((size, size), dtype=np.float32).astype(dt))
    B = driver.to_device(rng.standard_normal((size, size), dtype=np.float32).astype(dt))
    C = driver.empty((size, size), np.float32)
    ms = timing.median_ms(lambda: run_gemm(r, True, A, B, C, size, size, size, arch), reps=reps)
    return ms, 2.0 * size ** 3 / (ms * 1e-3) / 1e12


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="*", default=None, help="names (default: all)")
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if args.list:
        for nm, v in VARIANTS.items():
            print(f"{nm:22s} {v.rung:30s} {v.defines}  pred {v.pred:.0f}  {v.why}")
        return 0
    names = args.variants or list(VARIANTS)
    unknown = [nm for nm in names if nm not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; --list shows them")

    import drvgemm
    from drvgemm.tools import ceilings
    dev = drvgemm.device()
    arch = f"sm_{dev.cc[0]}{dev.cc[1]}"
    t0 = time.time()
    log(f"compiling {len(names)} variants for {arch} ...")
    compiled = compile_all(names, arch)
    log(f"  {time.time() - t0:.0f} s")
    log("measuring ceilings ...")
    ceil = ceilings.measure_ceilings()
    log("  " + ", ".join(f"{k} {v:.1f}" for k, v in ceil.items()))

    records = []
    for nm in names:
        v = VARIANTS[nm]
        r = variant_rung(nm)
        problem, regs = compiled[nm]
        rec = {"variant": nm, "rung": v.rung, "precision": r.precision,
               "defines": {k: val for k, val in r.defines.items()}, "smem": r.smem,
               "block": list(r.block), "registers": regs.get(1, regs.get(None)),
               "pred_tflops": v.pred, "why": v.why, "m": args.size, "n": args.size,
               "k": args.size}
        if problem:
            rec.update(ok=False, detail=problem)
            log(f"{nm}: dropped ({problem})")
            records.append(rec)
            continue
        try:
            ok, detail = check(r, arch)
        except drvgemm.CudaError as e:
            rec.update(ok=False, detail=f"{e.name}: {e}"[:300])
            records.append(rec)
            log(f"{nm}: {rec['detail']}")
            if e.name in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED",
                          "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_MISALIGNED_ADDRESS"):
                log("the context is lost: stopping (run the rest with --variants)")
                break
            continue
        rec.update(ok=ok, detail=detail)
        if ok:
            ms, tf = time_variant(r, args.size, args.reps, arch)
            ceiling = ceil.get(CEILING_OF[r.precision])
            rec.update(time_ms=ms, tflops=tf, ceiling_tflops=ceiling,
                       fraction_of_ceiling=tf / ceiling if ceiling else None)
            log(f"{nm}: {tf:.1f} TFLOP/s ({detail})")
        else:
            log(f"{nm}: WRONG ({detail})")
        records.append(rec)

    print(f"\nmma.sync variants at {args.size}^3 on {dev.name} "
          f"(median of {args.reps}, L2 flushed; % of the mma.sync ceiling of the same run)")
    print(f"{'variant':22s} {'prec':5s} {'TFLOP/s':>8s} {'% ceil':>7s} {'pred':>5s} "
          f"{'regs':>5s} {'smem KiB':>8s}  defines")
    timed = sorted((r for r in records if "tflops" in r), key=lambda r: -r["tflops"])
    for rec in timed:
        frac = rec["fraction_of_ceiling"]
        print(f"{rec['variant']:22s} {rec['precision']:5s} {rec['tflops']:8.1f} "
              f"{100 * frac if frac else float('nan'):6.1f}% {rec['pred_tflops']:5.0f} "
              f"{rec['registers'] or 0:5d} {rec['smem'] / 1024:8.0f}  "
              f"{ {k: v for k, v in VARIANTS[rec['variant']].defines.items()} }")
    for rec in records:
        if "tflops" not in rec:
            print(f"{rec['variant']:22s} not timed: {rec['detail']}")
    for prec in ("tf32", "bf16", "fp16"):
        best = [r for r in timed if r["precision"] == prec]
        if best:
            print(f"best {prec}: {best[0]['variant']} {best[0]['tflops']:.1f} TFLOP/s "
                  f"defines {best[0]['defines']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev.name, "size": args.size, "reps": args.reps,
                       "ceilings": ceil, "records": records}, f, indent=1)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
