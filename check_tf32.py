#!/usr/bin/env python3
"""GPU check and benchmark of rung 15 (cu/gemm/15_mma_tf32_rotating.cu).

    cd <repo root> && python3 check_tf32.py --json $OUT/tf32.json

1. Correctness of the proposed registry entry (drvgemm_tf32_rung.RUNG_15),
   ALIGNED=1 and ALIGNED=0 picked as drvgemm.gemm picks them, against a
   float64 numpy reference: M, N, K from 1 through primes and tile +- 1 to
   K = 16384; misaligned operands through offset views into larger
   allocations; 'exact' mode (integers in [-8, 8], exact in tf32 and in the
   fp32 accumulator) must match exactly; 'random' mode must meet
   |C - C^| <= (2 u_in + K 2^-24) (|A| |B|) (+ |beta C|) with the entry's
   u_in; C poisoned with NaN when beta = 0; beta != 0; and no byte written
   outside C (guard zones around it). The other constant sets get a shorter
   list.
2. Timing at 4096^3 and 8192^3 of every constant set in VARIANTS, rung 11
   and the mma.sync TF32 ceiling measured in the same run (before and
   after): CUDA events, warm-up, L2 flushed, kernels interleaved over
   rounds, median of ROUNDS x REPS samples; TFLOP/s and fraction of the
   ceiling.

Each case runs in its own try/except; progress is flushed line by line.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

import numpy as np

import drvgemm
from drvgemm import driver, timing
from drvgemm.ceilings import measure_ceilings
from drvgemm.ladder import rung_kernel
from drvgemm.rungs import by_name
from drvgemm_tf32_rung import RUNG_15, VARIANTS

U_ACC = 2.0 ** -24
GUARD = 64                     # floats of guard zone before and after C
SENTINEL = np.float32(-12345.5)


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------
# Correctness
# ---------------------------------------------------------------------------
_kernels = {}


def kernel_for(r, aligned):
    key = (r.name, aligned)
    if key not in _kernels:
        _kernels[key] = rung_kernel(r, aligned)
    return _kernels[key]


def inputs(m, n, k, seed, mode):
    rng = np.random.default_rng(seed)
    if mode == "exact":
        a = rng.integers(-8, 9, (m, k)).astype(np.float32)
        b = rng.integers(-8, 9, (k, n)).astype(np.float32)
        c = rng.integers(-8, 9, (m, n)).astype(np.float32)
        a[0, 0] = b[0, 0] = 7.0  # element (0, 0) non-zero, as CUTLASS's testbed does
    else:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = rng.standard_normal((m, n), dtype=np.float32)
    return a, b, c


_refs = {}


def reference(m, n, k, seed, mode):
    key = (m, n, k, seed, mode)
    if key not in _refs:
        a, b, c = inputs(m, n, k, seed, mode)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        _refs.clear()  # one at a time: the large-K ones are big
        _refs[key] = (a, b, c, a64 @ b64, np.abs(a64) @ np.abs(b64))
    return _refs[key]


def place(host, offset):
    """host on the device at `offset` floats into a larger allocation (offset
    1, 2, 3: a pointer that is not 16-byte aligned); returns (buffer, view)."""
    flat = np.ascontiguousarray(host).ravel()
    buf = driver.empty((flat.size + offset + 4,), np.float32)
    buf.copy_from_host(np.concatenate([np.zeros(offset, np.float32), flat,
                                       np.zeros(4, np.float32)]))
    view = driver.DeviceArray(host.shape, np.float32, ptr=buf.ptr + 4 * offset, owner=False)
    return buf, view


def run_case(r, m, n, k, *, mode, seed, alpha, beta, poison, offsets=(0, 0, 0)):
    a, b, c0, ab, mag_ab = reference(m, n, k, seed, mode)
    abuf, A = place(a, offsets[0])
    bbuf, B = place(b, offsets[1])
    # C inside guard zones of SENTINEL; with beta = 0 and `poison`, C holds NaN.
    c_init = np.full((m, n), np.nan, np.float32) if (poison and beta == 0) else c0
    whole = np.concatenate([np.full(GUARD + offsets[2], SENTINEL, np.float32), c_init.ravel(),
                            np.full(GUARD, SENTINEL, np.float32)])
    cbuf = driver.to_device(whole)
    C = driver.DeviceArray((m, n), np.float32, ptr=cbuf.ptr + 4 * (GUARD + offsets[2]),
                           owner=False)
    aligned = (k % r.vector == 0 and n % r.vector == 0 and A.ptr % 16 == 0 and B.ptr % 16 == 0
               and C.ptr % 16 == 0)
    kern = kernel_for(r, aligned)
    drvgemm.launch(kern, r.grid(m, n), r.block, [A, B, C, m, n, k, float(alpha), float(beta)],
                   smem=r.smem)
    driver.synchronize()
    got = cbuf.to_host()
    for x in (abuf, bbuf, cbuf):
        x.free()
    lo = GUARD + offsets[2]
    out = got[lo:lo + m * n].reshape(m, n)
    guard_ok = (np.all(got[:lo] == SENTINEL) and np.all(got[lo + m * n:] == SENTINEL))
    where = (f"{r.name} M={m} N={n} K={k} mode={mode} seed={seed} alpha={alpha} beta={beta} "
             f"offsets={offsets} ALIGNED={int(aligned)}")
    if not guard_ok:
        raise AssertionError(f"{where}: wrote outside C")
    ref = alpha * ab + (beta * c0.astype(np.float64) if beta != 0 else 0.0)
    if not np.all(np.isfinite(out)):
        i, j = np.argwhere(~np.isfinite(out))[0]
        raise AssertionError(f"{where}: non-finite output at ({i}, {j}) = {out[i, j]} "
                             "(unwritten, or C read with beta = 0)")
    if mode == "exact":
        diff = np.abs(out - ref)
        if diff.max() != 0:
            i, j = np.unravel_index(np.argmax(diff), diff.shape)
            raise AssertionError(f"{where}: not exact, {int((diff != 0).sum())} differ; worst "
                                 f"({i}, {j}) = {out[i, j]} vs {ref[i, j]}")
        return aligned, 0.0
    mag = abs(alpha) * mag_ab + (np.abs(beta * c0.astype(np.float64)) if beta != 0 else 0.0)
    bound = (2 * r.input_roundoff + k * U_ACC) * mag + 1e-30
    ratio = np.abs(out - ref) / bound
    worst = float(ratio.max())
    if worst > 1:
        i, j = np.unravel_index(np.argmax(ratio), ratio.shape)
        raise AssertionError(f"{where}: above bound at ({i}, {j}): {out[i, j]} vs {ref[i, j]}, "
                             f"|err| {abs(out[i, j] - ref[i, j]):.3g} > {bound[i, j]:.3g}")
    return aligned, worst


def full_cases(r):
    bm, bn, bk = r.tile_m, r.tile_n, r.defines["BK"]
    shapes = [(1, 1, 1), (1, 1, 8), (3, 5, 7), (17, 13, 11), (31, 37, 41), (127, 251, 97),
              (bm - 1, bn - 1, bk - 1), (bm, bn, bk), (bm + 1, bn + 1, bk + 1),
              (bm, bn, 3 * bk), (2 * bm + 1, 2 * bn - 1, 5 * bk + 1), (bm, 4, 4), (4, bn, 4),
              (257, 260, 1000), (300, 516, 2052), (64, 96, 16384), (129, 132, 16384 - 4)]
    cases = []
    for s, (m, n, k) in enumerate(shapes):
        for mode in ("exact", "random"):
            cases.append(dict(m=m, n=n, k=k, mode=mode, seed=s, alpha=1.0, beta=0.0,
                              poison=True))
        cases.append(dict(m=m, n=n, k=k, mode="random", seed=s, alpha=1.5, beta=-0.75,
                          poison=False))
    # Misaligned pointers (offset views) on shapes that would take ALIGNED=1.
    for s, (m, n, k) in enumerate([(bm, bn, 4 * bk), (129, 260, 200), (64, 256, 4096)]):
        for offs in ((1, 0, 0), (0, 2, 0), (0, 0, 3), (3, 1, 2)):
            for mode in ("exact", "random"):
                cases.append(dict(m=m, n=n, k=k, mode=mode, seed=100 + s, alpha=1.0,
                                  beta=0.5 if mode == "random" else 0.0, poison=True,
                                  offsets=offs))
    return cases


def short_cases(r):
    bm, bn, bk = r.tile_m, r.tile_n, r.defines["BK"]
    cases = []
    for s, (m, n, k) in enumerate([(1, 1, 1), (bm + 1, bn - 1, bk + 3), (bm, bn, 5 * bk),
                                   (257, 260, 1000), (64, 96, 16384)]):
        for mode in ("exact", "random"):
            cases.append(dict(m=m, n=n, k=k, mode=mode, seed=200 + s, alpha=1.0, beta=0.0,
                              poison=True))
    cases.append(dict(m=bm, n=bn, k=3 * bk, mode="random", seed=210, alpha=2.0, beta=-1.0,
                      poison=False))
    cases.append(dict(m=bm, n=bn, k=3 * bk, mode="exact", seed=211, alpha=1.0, beta=0.0,
                      poison=True, offsets=(1, 0, 0)))
    return cases


def correctness(results, deadline):
    for name, r in VARIANTS.items():
        cases = full_cases(r) if r is RUNG_15 else short_cases(r)
        passed, failed, worst = 0, [], 0.0
        t0 = time.time()
        for case in cases:
            if time.time() > deadline:
                failed.append("skipped: time budget")
                break
            try:
                _, w = run_case(r, **case)
                worst = max(worst, w)
                passed += 1
            except Exception as e:  # noqa: BLE001 - every case is reported, none stops the run
                failed.append(f"{type(e).__name__}: {e}")
                log(f"  FAIL {name}: {failed[-1]}")
        results["correctness"][name] = dict(passed=passed, failed=failed, cases=len(cases),
                                            worst_error_over_bound=worst,
                                            input_roundoff=r.input_roundoff)
        log(f"correctness {name}: {passed}/{len(cases)} passed, worst |err|/bound "
            f"{worst:.3f} ({time.time() - t0:.1f} s)")


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------
def bench(results, sizes, rounds, reps):
    ceil_before = measure_ceilings(reps=10)["mma_tf32"]
    log(f"mma.sync tf32 ceiling (before): {ceil_before:.1f} TFLOP/s")
    kernels = {}
    for name, r in list(VARIANTS.items()) + [("11_mma_tf32", by_name()["11_mma_tf32"])]:
        try:
            k = rung_kernel(r, True)
            res = k.resources
            # The largest shared-memory carveout, so that the two-block
            # variants (2 x 96 KiB) really get two blocks per SM.
            driver.set_function_attribute(k.function, "MAX_DYNAMIC_SHARED_SIZE_BYTES", r.smem)
            driver.set_function_attribute(k.function, "PREFERRED_SHARED_MEMORY_CARVEOUT", 100)
            per_sm = driver.occupancy_max_active_blocks(k.function, r.block[0], r.smem)
            kernels[name] = (r, k)
            results["kernels"][name] = dict(defines=dict(r.defines), registers=res.registers
                                            if res else None,
                                            spill_bytes=(res.spill_stores + res.spill_loads)
                                            if res else None, smem=r.smem,
                                            blocks_per_sm=per_sm)
            log(f"  {name}: {res.registers if res else '?'} registers, {r.smem} B smem, "
                f"{per_sm} block(s)/SM")
        except Exception as e:  # noqa: BLE001
            log(f"  compile {name} failed: {e}")
            results["kernels"][name] = dict(error=str(e))
    samples = {}
    for s in sizes:
        m = n = k = s
        rng = np.random.default_rng(s)
        A = driver.to_device(rng.uniform(-1, 1, (m, k)).astype(np.float32))
        B = driver.to_device(rng.uniform(-1, 1, (k, n)).astype(np.float32))
        C = driver.empty((m, n), np.float32)
        for rnd in range(rounds):
            for name, (r, kern) in kernels.items():
                try:
                    fn = (lambda r=r, kern=kern: drvgemm.launch(
                        kern, r.grid(m, n), r.block, [A, B, C, m, n, k, 1.0, 0.0], smem=r.smem))
                    t = timing.time_ms(fn, warmup=5 if rnd == 0 else 2, reps=reps)
                    samples.setdefault((name, s), []).extend(t)
                except Exception as e:  # noqa: BLE001
                    log(f"  time {name} {s}: {type(e).__name__}: {e}")
        for x in (A, B, C):
            x.free()
    ceil_after = measure_ceilings(reps=10)["mma_tf32"]
    ceiling = max(ceil_before, ceil_after)
    log(f"mma.sync tf32 ceiling (after): {ceil_after:.1f} TFLOP/s; using {ceiling:.1f}")
    results["ceiling_tflops"] = dict(before=ceil_before, after=ceil_after, used=ceiling)
    for s in sizes:
        log(f"-- {s}^3 (median of {rounds} x {reps}, TFLOP/s, fraction of the ceiling)")
        base = None
        for name in kernels:
            t = samples.get((name, s))
            if not t:
                continue
            ms = statistics.median(t)
            tf = 2.0 * s ** 3 / (ms * 1e-3) / 1e12
            if name == "11_mma_tf32":
                base = tf
            results["timing"].setdefault(str(s), {})[name] = dict(
                ms=ms, tflops=tf, fraction=tf / ceiling, samples=len(t),
                min_ms=min(t), max_ms=max(t))
        for name, row in results["timing"].get(str(s), {}).items():
            vs = f"  {row['tflops'] / base:.3f}x rung 11" if base else ""
            log(f"  {name:<22} {row['tflops']:7.1f}  {row['fraction']:.3f}{vs}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--budget", type=float, default=130.0,
                    help="seconds the correctness part may take (the rest is skipped)")
    args = ap.parse_args()
    reason = driver.no_gpu_reason()
    if reason:
        log(f"check_tf32: no GPU ({reason})")
        return 2
    t0 = time.time()
    results = {"device": driver.device().name, "rung": RUNG_15.name,
               "defines": dict(RUNG_15.defines), "input_roundoff": RUNG_15.input_roundoff,
               "correctness": {}, "kernels": {}, "timing": {}}
    log(f"device: {results['device']}")

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
                f.write("\n")

    if not args.skip_check:
        try:
            correctness(results, t0 + args.budget)
        except Exception:  # noqa: BLE001
            results["correctness_error"] = traceback.format_exc()
            log(results["correctness_error"])
        save()
    if not args.skip_bench:
        try:
            bench(results, [int(x) for x in args.sizes.split(",")], args.rounds, args.reps)
        except Exception:  # noqa: BLE001
            results["bench_error"] = traceback.format_exc()
            log(results["bench_error"])
    results["wall_s"] = time.time() - t0
    save()
    ok = all(not v["failed"] for v in results["correctness"].values())
    log(f"done in {results['wall_s']:.0f} s; correctness {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
