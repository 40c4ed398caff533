"""Candidate configurations of the mma.sync rungs (cu/gemm/11 TF32, 12 bf16 /
fp16, 14 warp-specialised bf16) side by side in one run, to choose the
registered defines:

    python benchmarks/mma_sweep.py [--variants NAME ...] [--size 4096] [--rounds 5]
        [--batch 5] [--reps 3] [--json PATH] [--list]

A variant is a registered rung with some defines overridden (the table
below); the pipeline is drvgemm/tools/sweep.py's:
1. every variant is compiled at ALIGNED=0 and ALIGNED=1 in parallel
   processes; one that spills, uses a stack or fails to compile is dropped;
2. every variant is checked once before it is timed: ALIGNED=0 at
   333 x 517 x 271 with integers in [-8, 8] (edge tiles everywhere; must be
   exact), ALIGNED=1 at 1024^3 with normal inputs against float64 (a bound
   from the input precision);
3. per precision, the variants that passed and cuBLAS (torch.matmul;
   cublasGemmEx for 16-bit inputs) are timed round-robin at size^3 in paired
   rounds (median of ``reps`` batches of ``batch`` back-to-back launches, L2
   flushed before each batch), next to the mma.sync ceilings measured in the
   same run.

Prints a table per precision sorted by time (ratio to the best cuBLAS call,
paired and of medians; % of the ceiling; the prediction each variant was
added with) and writes the records (DESIGN.md format) to --json.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.runtime.sass import kernel_sass_hash  # noqa: E402
from drvgemm.tools import sweep  # noqa: E402


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
    # TF32, rung 15. Measured 2026-12-01 (H200, paired rounds, L2 flushed; TFLOP/s at
    # 4096^3 / 8192^3, registered 208.3-209.2 / 193.9-197.9) and dropped from the
    # source (benchmarks/notes/tf32-mma.md, "Third round"): A fed as raw fp32 bits
    # (A_ROUND=0, 16 fewer VIADDMNMX per k8 step) 204.4-209.8 / 209.3-209.6;
    # n-tile-outer rotation (ORDER=1) 191.4 / 195.4, with A raw 204.5 / 208.6;
    # warps of 128 x 32 184.2 / 186.6, with A raw 195.8 / 199.3 (306 instead of
    # 402 instructions per k-tile); 16 warps of 64 x 32 with A raw 190.8 / 193.8.
    "15_base": Variant("15_mma_tf32_rotating", {}, 215, "registered"),
    # Rung 16's main loop is rung 15's instruction for instruction (405 SASS
    # instructions per k-tile against 402); its epilogue goes through shared memory.
    "16_ptx": Variant("16_mma_tf32_rotating_ptx", {}, 210, "hand-written PTX twin of 15_base"),
}
CEILING_OF = {"tf32": "mma_tf32", "bf16": "mma_bf16", "fp16": "mma_fp16"}
ODD_SHAPE = (333, 517, 271)
U_IN = {"tf32": 2.0 ** -11, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
# defines whose change moves the block shape: a variant may not override them
# without a block formula here (none does today)
_BLOCK_KEYS = {"BM", "BN", "WM", "WN", "PRODUCER_WARPS"}
log = sweep.log


def variant_rung(name):
    """The registered rung with the variant's defines, its own name (so its
    kernels are cached apart). Everything else comes from the registered
    entry: the block, and shared memory rescaled from the entry's own
    STAGES x (BM x BK + BK x BN) tiles."""
    from drvgemm.ladders.gemm.registry import by_name
    v = VARIANTS[name]
    base = by_name()[v.rung]
    if base.source.endswith(".ptx") or not v.defines:
        return dataclasses.replace(base, name=f"{base.name}[{name}]")
    moved = _BLOCK_KEYS & set(v.defines)
    if moved:
        raise ValueError(f"{name}: overriding {sorted(moved)} changes the block; add its formula")
    d = {**base.defines, **v.defines}

    def tiles(x):
        bm, bn = x.get("BM", base.tile_m), x.get("BN", base.tile_n)
        return x["STAGES"] * (bm * x["BK"] + x["BK"] * bn)
    elem = base.smem // tiles(base.defines)   # bytes per element, as registered
    return dataclasses.replace(base, name=f"{base.name}[{name}]", defines=d,
                               smem=tiles(d) * elem)


def compile_variants(names, arch):
    """{name: (problem or None, {aligned: registers})} through the compile pool."""
    jobs = []
    for nm in names:
        r = variant_rung(nm)
        for aligned in ((None,) if r.source.endswith(".ptx") else (0, 1)):
            defines = None if aligned is None else r.instantiation_defines(aligned)
            jobs.append(sweep.CompileJob((nm, aligned), r.source, r.entry, defines, arch,
                                         tuple(r.options)))
    out = {nm: (None, {}) for nm in names}
    for job, res in zip(jobs, sweep.compile_all(jobs)):
        nm, aligned = job.key
        problem, regs = out[nm]
        ok, why = sweep.resources_ok(res, allow_spill=VARIANTS[nm].allow_spill)
        if not ok:
            problem = problem or f"ALIGNED={aligned}: {why}"
        else:
            regs = {**regs, aligned: res["registers"]}
            if res.get("spills") or res.get("stack"):
                log(f"  {nm} ALIGNED={aligned}: spills {res['spills']} B, stack {res['stack']} B "
                    "(measured anyway)")
        out[nm] = (problem, regs)
    return out


def run_gemm(r, aligned, A, B, C, m, n, k, arch):
    """One launch of an instantiation, as its host side computes it."""
    from drvgemm.ladders.gemm import registry
    from drvgemm.runtime.launch import launch_config
    kern = registry.rung_kernel(r, aligned, arch=arch)
    launch_config(kern, r.launch_config(kern, A, B, C, m, n, k, 1.0, 0.0))


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
    ref = a64 @ b64
    if r.precision == "tf32":   # the kernel rounds fp32 -> tf32 itself (rna; CVT=0 truncates)
        u = 2.0 ** -10 if r.defines.get("CVT") == 0 else U_IN["tf32"]
        bound = (2 * u + s * 2.0 ** -24) * (np.abs(a64) @ np.abs(b64)) * 2
    else:
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


def time_precision(prec, rungs, size, args, arch):
    """Records of the variants [(name, rung, registers)] of one precision and
    the cuBLAS calls, timed round-robin in paired rounds at size^3."""
    from drvgemm.ladders.gemm import registry
    from drvgemm.runtime import driver
    from drvgemm.runtime.launch import launch_config
    from drvgemm.tools import cublas
    from drvgemm.tools.bench import make_inputs
    a, b = make_inputs(prec, size, size, size, seed=1)
    A, B = driver.to_device(a), driver.to_device(b)
    entries = []
    for nm, r, regs in rungs:
        kern = registry.rung_kernel(r, True, arch=arch)
        C = driver.empty((size, size), np.float32)
        cfg = r.launch_config(kern, A, B, C, size, size, size, 1.0, 0.0)
        v = VARIANTS[nm]
        entries.append(sweep.Entry(
            r.name, (lambda kern=kern, cfg=cfg: launch_config(kern, cfg)), sync=driver.synchronize,
            meta={"variant": nm, "rung": v.rung, "defines": dict(r.defines), "smem": r.smem,
                  "block": list(r.block), "registers": regs, "predicted_tflops": v.pred,
                  "sass_hash": kernel_sass_hash(kern),
                  "why": v.why, "out": "fp32", "_c": C}))
    if not args.no_baseline:
        call = cublas.torch_matmul_call(prec, a, b)
        if call:
            enqueue, _, sync, restore = call
            entries.append(sweep.Entry("cublas", enqueue, baseline=True, sync=sync,
                                       meta={"via": "torch.matmul",
                                             "out": "fp32" if prec == "tf32" else prec},
                                       cleanup=restore))
        for out_fp32 in ((False,) if prec == "tf32" else (False, True)):
            call = cublas.gemmex_call(prec, size, size, size, a, b, out_fp32)
            if call:
                enqueue, _, sync, name, otype, _ = call
                entries.append(sweep.Entry(name, enqueue, baseline=True, sync=sync,
                                           meta={"via": "cupy cublasGemmEx", "out": otype}))
    try:
        sweep.round_robin(entries, args.rounds, sweep.measure_batch(args.batch, args.reps),
                          progress=log)
    finally:
        for e in entries:
            if e.cleanup:
                e.cleanup()
    for e in entries:
        e.meta.pop("_c", None)
    return sweep.ratio_records(entries, size, size, size, prec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="*", default=None, help="names (default: all)")
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-baseline", action="store_true")
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
    if not drvgemm.has_gpu():
        log(f"no GPU: {drvgemm.no_gpu_reason()}")
        return 2
    dev = drvgemm.device()
    arch = f"sm_{dev.cc[0]}{dev.cc[1]}"
    t0 = time.time()
    log(f"compiling {len(names)} variants for {arch} ...")
    compiled = compile_variants(names, arch)
    log(f"  {time.time() - t0:.0f} s")
    log("measuring ceilings ...")
    ceil = ceilings.measure_ceilings()
    log("  " + ", ".join(f"{k} {v:.1f}" for k, v in ceil.items()))

    failed, passed = [], {}
    for nm in names:
        r = variant_rung(nm)
        problem, regs = compiled[nm]
        if not problem:
            try:
                ok, detail = check(r, arch)
                problem = None if ok else f"WRONG ({detail})"
            except drvgemm.CudaError as e:
                problem = f"{e.name}: {e}"[:300]
                if sweep.is_sticky(e):
                    log(f"{nm}: {problem}\nthe context is lost: stopping (run the rest with "
                        "--variants)")
                    failed.append({"variant": nm, "rung": VARIANTS[nm].rung, "error": problem})
                    break
        if problem:
            log(f"{nm}: not timed ({problem})")
            failed.append({"variant": nm, "rung": VARIANTS[nm].rung, "error": problem})
        else:
            log(f"{nm}: checked")
            passed[nm] = (r, regs.get(1, regs.get(None)))

    records = []
    for prec in ("tf32", "bf16", "fp16"):
        group = [(nm, r, regs) for nm, (r, regs) in passed.items() if r.precision == prec]
        if not group:
            continue
        recs = time_precision(prec, group, args.size, args, arch)
        ceiling = ceil.get(CEILING_OF[prec])
        for rec in recs:
            if rec.get("tflops") and ceiling:
                rec["ceiling_tflops"] = ceiling
                rec["fraction_of_ceiling"] = round(rec["tflops"] / ceiling, 4)
        records.extend(recs)
        print("\n" + sweep.format_table(recs, f"{prec} mma.sync variants at {args.size}^3 on "
                                             f"{dev.name} (paired rounds, L2 flushed)"))
        best = max((r for r in recs if "vs_best_cublas" in r), key=lambda r: r["vs_best_cublas"],
                   default=None)
        if best:
            print(f"best {prec}: {best['variant']} {best['tflops']:.1f} TFLOP/s = "
                  f"{best['vs_best_cublas']:.3f} x {best['best_cublas']}; "
                  f"{100 * best.get('fraction_of_ceiling', 0):.1f}% of the ceiling; "
                  f"defines {best['defines']}")
    for f in failed:
        print(f"{f['variant']:22s} not timed: {f['error']}")
    if args.json:
        sweep.write_results(args.json, dev, records, ceilings=ceil, size=args.size,
                            not_timed=failed)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
