#!/usr/bin/env python3
"""GPU check of rung 30 (cu/gemm/30_small_m.cu through drvgemm_small_m.py).

    cd <repo root> && python3 check_small_m.py --json $OUT/small_m.json

(a) correctness against a float64 numpy reference: M in 1..64, odd and prime
    N / K, K up to 65536, aligned and misaligned pointers (offset views),
    fp32 / bf16 / fp16 inputs, C in fp32 or (out16) the inputs' 16-bit type,
    beta = 0 with NaN in C, beta != 0, guard zones before and after C, an
    exact small-integer mode (results must match bit for bit) and a random
    mode with the K-dependent bound of DESIGN.md, K = 0 and M / N = 0;
(b) determinism: repeated calls (split K included, another workspace
    included) give the same bits;
(c) timing of decode shapes, M in 1..64 against (N, K) weights, with device
    events around each call (a spin kernel in front hides the host's enqueue
    time; B rotated over copies > 2x L2 so it comes from DRAM), median of
    >= 50, effective GB/s of B and of A+B+C against a device-to-device copy
    measured in the same run, and torch.matmul (cuBLAS) on the same shapes
    in the same run when torch is importable.
Writes everything as JSON to --json. Exit status 1 when a correctness or
determinism check failed (the JSON is written first).
"""
from __future__ import annotations

# torch (a baseline, never required) is imported before anything else: imported
# late it has been seen to fail its own start-up. Any failure leaves it out.
try:
    import torch  # noqa: F401
    _TORCH_ERR = None
except Exception as _e:  # noqa: BLE001
    torch = None
    _TORCH_ERR = f"{type(_e).__name__}: {_e}"

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import drvgemm  # noqa: E402
from drvgemm import driver  # noqa: E402
import drvgemm_small_m as sm  # noqa: E402

T0 = time.perf_counter()
TIME_BUDGET_S = float(os.environ.get("SMALL_M_BUDGET_S", "170"))


def log(msg):
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------
# helpers kernels: fill with pseudo-random values on the device, spin
# ---------------------------------------------------------------------------
_HELPERS = r'''
__device__ __forceinline__ float hash_uniform(long long i, unsigned seed) {
    unsigned x = (unsigned)i * 2654435761u ^ (unsigned)(i >> 32) * 40503u ^ seed;
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return (float)(x >> 8) * (2.0f / 16777216.0f) - 1.0f;     // [-1, 1), never all zeros
}
extern "C" __global__ void fill_u16(unsigned short* p, long long n, unsigned seed, int fp16) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float v = hash_uniform(i, seed);
        unsigned short h;
        if (fp16) {
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        } else {
            unsigned u = __float_as_uint(v);
            u += 0x7fffu + ((u >> 16) & 1u);
            h = (unsigned short)(u >> 16);
        }
        p[i] = h;
    }
}
extern "C" __global__ void fill_f32(float* p, long long n, unsigned seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        p[i] = hash_uniform(i, seed);
}
extern "C" __global__ void spin(long long ns) {
    if (threadIdx.x != 0) return;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
}
'''
_helper_kernels = {}


def helper(name):
    k = _helper_kernels.get(name)
    if k is None:
        k = _helper_kernels[name] = drvgemm.compile(_HELPERS, name)
    return k


def fill_random(ptr, count, precision, seed, stream=None):
    grid = (min(132 * 16, max(1, -(-count // 256))), 1, 1)
    if precision == "fp32":
        drvgemm.launch(helper("fill_f32"), grid, (256, 1, 1), (ptr, count, seed), stream=stream)
    else:
        drvgemm.launch(helper("fill_u16"), grid, (256, 1, 1),
                       (ptr, count, seed, 1 if precision == "fp16" else 0), stream=stream)


# ---------------------------------------------------------------------------
# host-side number formats
# ---------------------------------------------------------------------------
def to_bf16_bits(x):
    # round to nearest even; inputs here are finite and far from the top of
    # the range, so the 32-bit add cannot overflow
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return r.astype(np.uint16)


def from_bf16_bits(b):
    return (np.asarray(b).astype(np.uint32) << 16).view(np.float32)


def encode(x, precision):
    """float array -> (storage array for the device, the float64 values it holds)."""
    if precision == "fp32":
        s = np.ascontiguousarray(x, np.float32)
        return s, s.astype(np.float64)
    if precision == "fp16":
        s = np.ascontiguousarray(x).astype(np.float16)
        return s, s.astype(np.float64)
    s = to_bf16_bits(x)
    return s, from_bf16_bits(s).astype(np.float64)


def decode(s, precision):
    if precision == "fp32":
        return s.astype(np.float64)
    if precision == "fp16":
        return s.view(np.float16).astype(np.float64)
    return from_bf16_bits(s.view(np.uint16)).astype(np.float64)


def c_format(precision, out16):
    return ("bf16" if precision == "bf16" else "fp16") if out16 else "fp32"


def nan_bits(fmt):
    return {"fp32": np.array([0x7FC00000], np.uint32).view(np.float32),
            "bf16": np.array([0x7FC0], np.uint16),
            "fp16": np.array([0x7E00], np.uint16).view(np.float16)}[fmt][0]


ITEM = {"fp32": 4, "bf16": 2, "fp16": 2}
GUARD_BYTES = 256
CANARY = 0xA5


class DevBuf:
    """A raw device allocation with room for an offset and guard zones."""

    def __init__(self, nbytes):
        self.arr = drvgemm.empty((max(1, nbytes),), np.uint8)
        self.base = self.arr.ptr
        self.nbytes = nbytes

    def put(self, host, byte_off):
        host = np.ascontiguousarray(host)
        if host.nbytes:
            driver.DeviceArray(host.shape, host.dtype, ptr=self.base + byte_off,
                               owner=False).copy_from_host(host)
        return self.base + byte_off

    def get_bytes(self):
        return self.arr.to_host()


# ---------------------------------------------------------------------------
# (a) correctness
# ---------------------------------------------------------------------------
def run_case(prec, m, n, k, *, mode, alpha, beta, out16=False, offs=(0, 0, 0), seed=0,
             workspace=None):
    rng = np.random.default_rng(seed)
    e = ITEM[prec]
    cfmt = c_format(prec, out16)
    ec = ITEM[cfmt]
    if mode == "exact":
        a, b, c0 = (np.floor(rng.random(sh, dtype=np.float32) * 17.0) - 8.0
                    for sh in ((m, k), (k, n), (m, n)))      # integers in [-8, 8]
    else:
        a, b, c0 = (rng.random(sh, dtype=np.float32) * 2 - 1 for sh in ((m, k), (k, n), (m, n)))
    a_s, a64 = encode(a, prec)
    b_s, b64 = encode(b, prec)
    if beta == 0:
        c_s = np.full((m, n), nan_bits(cfmt))
        c64 = np.zeros((m, n))
    else:
        c_s, c64 = encode(c0, cfmt)
    oa, ob, oc = (o * s for o, s in zip(offs, (e, e, ec)))
    A = DevBuf(a_s.nbytes + oa + 16)
    B = DevBuf(b_s.nbytes + ob + 16)
    Cb = DevBuf(GUARD_BYTES + oc + c_s.nbytes + GUARD_BYTES)
    Cb.arr.fill_bytes(CANARY)
    pa = A.put(a_s, oa)
    pb = B.put(b_s, ob)
    pc = Cb.put(c_s, GUARD_BYTES + oc)
    p = sm.launch_small_m(pa, pb, pc, m, n, k, alpha, beta, prec, out16, workspace=workspace)
    drvgemm.synchronize()
    raw = Cb.get_bytes()
    lo, hi = GUARD_BYTES + oc, GUARD_BYTES + oc + c_s.nbytes
    guards_ok = bool((raw[:lo] == CANARY).all() and (raw[hi:] == CANARY).all())
    out_s = raw[lo:hi].view(c_s.dtype).reshape(m, n) if m and n else np.zeros((m, n), c_s.dtype)
    out = decode(out_s, cfmt)
    ref = alpha * (a64 @ b64) + (beta * c64 if beta != 0 else 0.0)
    rec = {"precision": prec, "m": m, "n": n, "k": k, "mode": mode, "alpha": alpha,
           "beta": beta, "out16": out16, "offsets": list(offs), "seed": seed,
           "instance": p.instance.name if p else None, "splits": p.splits if p else None,
           "guards_ok": guards_ok}
    if mode == "exact":
        # integer results below 2^24: fp32 holds them exactly; a 16-bit C is
        # their round-to-nearest-even, which the encoder computes the same way
        want_s, want = encode(ref.astype(np.float32), cfmt)
        bad = ~((out == want) | (np.isnan(out) & np.isnan(want)))
        rec["n_bad"] = int(bad.sum())
        if rec["n_bad"]:
            i, j = map(int, np.argwhere(bad)[0])
            rec["worst"] = {"i": i, "j": j, "got": float(out[i, j]), "want": float(want[i, j])}
        ok = rec["n_bad"] == 0
    else:
        u_acc = 2.0 ** -23              # fp32 accumulation (truncating adds allowed)
        u_out = {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}[cfmt]
        mag = np.abs(a64) @ np.abs(b64)
        # fp16 C: below 2^-14 the spacing is absolute (subnormals)
        u_abs = 2.0 ** -24 if cfmt == "fp16" else 1e-30
        bound = (abs(alpha) * (k + 2) * u_acc * mag + 4 * u_out * np.abs(ref)
                 + abs(beta) * np.abs(c64) * 2.0 ** -23 + u_abs)
        err = np.abs(out - ref)
        bad = ~(err <= bound)          # NaN counts as bad
        rec["n_bad"] = int(bad.sum())
        ratio = np.where(bound > 0, err / bound, 0.0)
        rec["worst_err_over_bound"] = float(np.nanmax(ratio)) if ratio.size else 0.0
        if rec["n_bad"]:
            i, j = map(int, np.argwhere(bad)[0])
            rec["worst"] = {"i": i, "j": j, "got": float(out[i, j]), "want": float(ref[i, j]),
                            "bound": float(bound[i, j])}
        ok = rec["n_bad"] == 0
    rec["ok"] = bool(ok and guards_ok)
    return rec


def correctness_cases():
    shapes = [
        (1, 1, 1), (1, 64, 16), (2, 7, 3), (3, 67, 37), (4, 96, 65536), (5, 128, 4099),
        (7, 1000, 17), (8, 8, 16), (1, 4096, 4096), (13, 257, 129), (16, 4096, 2048),
        (16, 13, 65537), (17, 130, 21), (31, 997, 1009), (32, 512, 64), (33, 100, 200),
        (48, 72, 20), (63, 333, 555), (64, 4096, 1024), (64, 1, 65536), (1, 11008, 1024),
        (11, 1031, 2053), (64, 136, 4096), (2, 1032, 8200), (40, 72, 4096),
    ]
    cases = []
    seed = 1000
    for prec in ("fp32", "bf16", "fp16"):
        for idx, (m, n, k) in enumerate(shapes):
            big = k * n > 3_000_000     # host-side generation and reference cost
            seed += 10
            # exact small integers, beta != 0, aligned where the shape allows
            cases.append(dict(prec=prec, m=m, n=n, k=k, mode="exact", alpha=2.0, beta=-1.0,
                              seed=seed))
            # random, beta = 0 with NaN in C
            cases.append(dict(prec=prec, m=m, n=n, k=k, mode="random", alpha=1.0, beta=0.0,
                              seed=seed + 1))
            # misaligned pointers (one element into the allocation): ALIGNED=0
            cases.append(dict(prec=prec, m=m, n=n, k=k, mode="random", alpha=0.75, beta=0.5,
                              offs=(1, 1, 1), seed=seed + 2))
            if not big:
                # misaligned A only / B only (and C by 3 elements)
                cases.append(dict(prec=prec, m=m, n=n, k=k, mode="exact", alpha=1.0,
                                  beta=0.0, offs=(1, 0, 0), seed=seed + 3))
                cases.append(dict(prec=prec, m=m, n=n, k=k, mode="exact", alpha=1.0,
                                  beta=0.0, offs=(0, 1, 3), seed=seed + 4))
            if prec != "fp32" and (not big or idx % 2):
                # C in the inputs' 16-bit type
                cases.append(dict(prec=prec, m=m, n=n, k=k, mode="exact", alpha=1.0, beta=3.0,
                                  out16=True, seed=seed + 5))
                cases.append(dict(prec=prec, m=m, n=n, k=k, mode="random", alpha=1.0,
                                  beta=0.0, out16=True, seed=seed + 6))
                if not big:
                    cases.append(dict(prec=prec, m=m, n=n, k=k, mode="random", alpha=-0.5,
                                      beta=0.25, out16=True, offs=(1, 1, 1), seed=seed + 7))
        # K = 0: C = beta * C (and beta = 0: zeros over NaN)
        for o16 in ((False, True) if prec != "fp32" else (False,)):
            cases.append(dict(prec=prec, m=5, n=33, k=0, mode="exact", alpha=1.0, beta=0.5,
                              out16=o16, seed=seed + 8))
            cases.append(dict(prec=prec, m=5, n=33, k=0, mode="exact", alpha=1.0, beta=0.0,
                              out16=o16, seed=seed + 9))
    return cases


def check_empty(results):
    """M = 0 or N = 0: nothing happens (no launch, C untouched)."""
    for m, n in ((0, 16), (16, 0)):
        try:
            buf = DevBuf(64)
            buf.arr.fill_bytes(CANARY)
            p = sm.launch_small_m(buf.base, buf.base, buf.base, m, n, 16, 1.0, 0.0, "bf16")
            drvgemm.synchronize()
            ok = p is None and bool((buf.get_bytes() == CANARY).all())
        except Exception as e:  # noqa: BLE001
            ok = False
            log(f"  empty {m}x{n}: {type(e).__name__}: {e}")
        results.append({"precision": "bf16", "m": m, "n": n, "k": 16, "mode": "empty",
                        "ok": ok})
        log(f"  {'ok  ' if ok else 'FAIL'} empty product M={m} N={n}")


# ---------------------------------------------------------------------------
# (b) determinism
# ---------------------------------------------------------------------------
def determinism(prec, m, n, k, out16=False, seed=7):
    e = ITEM[prec]
    cfmt = c_format(prec, out16)
    A = DevBuf(m * k * e + 16)
    B = DevBuf(k * n * e + 16)
    fill_random(A.base, m * k, prec, seed)
    fill_random(B.base, k * n, prec, seed + 1)
    outs, plans = [], []
    ws = sm.Workspace()
    for rep in range(4):
        C = DevBuf(m * n * ITEM[cfmt])
        C.arr.fill_bytes(0xFF)   # NaN in C, beta = 0
        p = sm.launch_small_m(A.base, B.base, C.base, m, n, k, 1.0, 0.0, prec, out16,
                              workspace=ws if rep == 3 else None)
        drvgemm.synchronize()
        outs.append(C.get_bytes())
        plans.append(p)
    same = all(np.array_equal(outs[0], o) for o in outs[1:])
    finite = bool(np.isfinite(decode(outs[0].view(np.uint16 if ITEM[cfmt] == 2 else np.float32),
                                     cfmt)).all())
    return {"precision": prec, "m": m, "n": n, "k": k, "out16": out16,
            "splits": plans[0].splits, "runs": len(outs), "bitwise_equal": bool(same),
            "finite": finite, "ok": bool(same and finite)}


# ---------------------------------------------------------------------------
# (c) timing
# ---------------------------------------------------------------------------
SPIN_NS = 40_000   # longer than the host needs to enqueue event + launch + event


def time_events(run, reps, stream=None):
    """Median ms of run(i), each between its own pair of events, each behind
    a spin kernel so the GPU does not wait on the host's enqueue."""
    for i in range(5):
        run(i)
    drvgemm.synchronize()
    ev = [(drvgemm.Event(), drvgemm.Event()) for _ in range(reps)]
    spin = helper("spin")
    for i, (s, t) in enumerate(ev):
        drvgemm.launch(spin, (1, 1, 1), (32, 1, 1), (SPIN_NS,), stream=stream)
        s.record(stream)
        run(i)
        t.record(stream)
    ev[-1][1].synchronize()
    times = [s.elapsed_ms(t) for s, t in ev]
    return statistics.median(times), min(times)


def copy_bandwidth():
    n = 1 << 30
    a = drvgemm.empty((n,), np.uint8)
    b = drvgemm.empty((n,), np.uint8)
    a.fill_bytes(1)

    def run(i, a=a, b=b):
        driver.memcpy_dtod(b, a, n)

    med, best = time_events(run, 10)
    a.free()
    b.free()
    return 2 * n / (med * 1e-3) / 1e9


def torch_stream_handle():
    if torch is None:
        return 0
    try:
        return int(torch.cuda.current_stream().cuda_stream)
    except Exception:  # noqa: BLE001
        return 0


def timing(records, copy_gbps, torch_ok, deadline):
    weights = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (28672, 8192),
               (128256, 4096)]
    plan_ms = {"bf16": [1, 2, 4, 8, 16, 32, 64], "fp16": [1, 8, 16], "fp32": [1, 4, 16, 64]}
    stream = torch_stream_handle() if torch_ok else 0
    stream = stream or None
    tdt = None
    for prec in ("bf16", "fp16", "fp32"):
        e = ITEM[prec]
        if torch_ok:
            tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[prec]
            torch.backends.cuda.matmul.allow_tf32 = False
        for (n, k) in weights:
            if time.perf_counter() > deadline:
                log(f"  time budget reached: skipping {prec} {n}x{k} and the rest")
                records.append({"precision": prec, "n": n, "k": k, "skipped": "time budget"})
                continue
            b_bytes = k * n * e
            copies = max(1, min(8, math.ceil(200e6 / b_bytes)))
            try:
                Bs = [DevBuf(b_bytes) for _ in range(copies)]
                for i, b in enumerate(Bs):
                    fill_random(b.base, k * n, prec, 100 + i)
                tb = None
                if torch_ok:
                    tb = [torch.empty((k, n), dtype=tdt, device="cuda").uniform_(-1, 1)
                          for _ in range(copies)]
                drvgemm.synchronize()
            except Exception as ex:  # noqa: BLE001
                log(f"  {prec} {n}x{k}: allocation failed: {type(ex).__name__}: {ex}")
                records.append({"precision": prec, "n": n, "k": k, "error": str(ex)})
                continue
            for m in plan_ms[prec]:
                if time.perf_counter() > deadline:
                    records.append({"precision": prec, "m": m, "n": n, "k": k,
                                    "skipped": "time budget"})
                    continue
                try:
                    A = DevBuf(m * k * e)
                    fill_random(A.base, m * k, prec, 7)
                    # C in the inputs' type for 16-bit inputs, as torch.matmul writes it
                    out16 = prec != "fp32"
                    ec = 2 if out16 else 4
                    C = DevBuf(m * n * ec)
                    launch = sm.prepare(A.base, Bs[0].base, C.base, m, n, k, 1.0, 0.0, prec,
                                        out16, stream=stream)
                    base_args = list(launch.args)
                    argsets = []
                    for b in Bs:
                        a = list(base_args)
                        a[1] = b.base
                        argsets.append(tuple(a))

                    def run(i, launch=launch, argsets=argsets):
                        launch.run(argsets[i % len(argsets)])

                    reps = 60
                    med, best = time_events(run, reps, stream)
                    s = med * 1e-3
                    a_bytes, c_bytes = m * k * e, m * n * ec
                    tot = a_bytes + b_bytes + c_bytes
                    rec = {"kernel": "30_small_m", "precision": prec, "m": m, "n": n, "k": k,
                           "median_ms": med, "min_ms": best, "reps": reps,
                           "gbps_b": b_bytes / s / 1e9, "gbps": tot / s / 1e9,
                           "frac_of_copy": tot / s / 1e9 / copy_gbps,
                           "tflops": 2.0 * m * n * k / s / 1e12, "baseline": False,
                           "out": "16-bit" if out16 else "fp32",
                           "instance": launch.plan.instance.name, "splits": launch.plan.splits,
                           "grid": launch.plan.grid[0],
                           "predicted_ms": launch.plan.predicted_s * 1e3,
                           "plan": launch.plan.explain()}
                    records.append(rec)
                    line = (f"  {prec} M={m:2d} N={n:6d} K={k:5d}: {med * 1e3:8.1f} us "
                            f"B {rec['gbps_b']:6.0f} GB/s, all {rec['gbps']:6.0f} GB/s "
                            f"({rec['frac_of_copy']:.2f} of copy), S={launch.plan.splits}")
                    if torch_ok:
                        ta = torch.empty((m, k), dtype=tdt, device="cuda").uniform_(-1, 1)
                        tc = torch.empty((m, n), dtype=tdt, device="cuda")

                        def trun(i, ta=ta, tc=tc, tb=tb):
                            torch.matmul(ta, tb[i % len(tb)], out=tc)

                        tmed, tbest = time_events(trun, reps, stream)
                        ts = tmed * 1e-3
                        ttot = a_bytes + b_bytes + m * n * e
                        records.append({"kernel": "torch.matmul", "precision": prec, "m": m,
                                        "n": n, "k": k, "median_ms": tmed, "min_ms": tbest,
                                        "reps": reps, "gbps_b": b_bytes / ts / 1e9,
                                        "gbps": ttot / ts / 1e9,
                                        "tflops": 2.0 * m * n * k / ts / 1e12,
                                        "baseline": True, "via": "torch.matmul(out=)"})
                        rec["speedup_vs_torch"] = tmed / med
                        line += f" | torch {tmed * 1e3:8.1f} us -> x{tmed / med:.2f}"
                        del ta, tc
                    log(line)
                    del A, C
                except Exception as ex:  # noqa: BLE001
                    log(f"  {prec} M={m} N={n} K={k}: {type(ex).__name__}: {ex}")
                    records.append({"kernel": "30_small_m", "precision": prec, "m": m, "n": n,
                                    "k": k, "error": f"{type(ex).__name__}: {ex}",
                                    "traceback": traceback.format_exc()[-2000:]})
                    if isinstance(ex, drvgemm.CudaError):
                        raise
            del Bs, tb
            if torch_ok:
                torch.cuda.empty_cache()


def variants_timing(records, copy_gbps, torch_ok, deadline):
    """--quick: a focused set of decode shapes, each timed for several
    variants of the instance the plan picks (diagnostics and candidates),
    and torch.matmul once."""
    import dataclasses
    shapes = [("bf16", 1, 4096, 4096), ("bf16", 1, 28672, 8192), ("bf16", 16, 14336, 4096),
              ("bf16", 16, 4096, 4096), ("bf16", 64, 4096, 4096), ("bf16", 8, 128256, 4096),
              ("bf16", 32, 14336, 4096), ("fp16", 1, 11008, 4096), ("fp16", 16, 28672, 8192),
              ("fp32", 64, 4096, 4096), ("fp32", 16, 4096, 4096)]
    V = [("plan", {}), ("lanecopy", dict(coalesced=False)), ("s6", dict(stages=6)),
         ("n4", dict(nwarps=4)), ("skipmath", dict(extra=("SKIP_MATH",)))]
    stream = (torch_stream_handle() if torch_ok else 0) or None
    for (prec, m, n, k) in shapes:
        if time.perf_counter() > deadline:
            log("  time budget reached")
            break
        e = ITEM[prec]
        out16 = prec != "fp32"
        ec = 2 if out16 else 4
        b_bytes = k * n * e
        copies = max(1, min(8, math.ceil(200e6 / b_bytes)))
        Bs = [DevBuf(b_bytes) for _ in range(copies)]
        for i, b in enumerate(Bs):
            fill_random(b.base, k * n, prec, 100 + i)
        A = DevBuf(m * k * e)
        fill_random(A.base, m * k, prec, 7)
        C = DevBuf(m * n * ec)
        tot = m * k * e + b_bytes + m * n * ec
        tmed = None
        if torch_ok:
            tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[prec]
            torch.backends.cuda.matmul.allow_tf32 = False
            tb = [torch.empty((k, n), dtype=tdt, device="cuda").uniform_(-1, 1) for _ in range(copies)]
            ta = torch.empty((m, k), dtype=tdt, device="cuda").uniform_(-1, 1)
            tc = torch.empty((m, n), dtype=tdt, device="cuda")

            def trun(i):
                torch.matmul(ta, tb[i % len(tb)], out=tc)
            tmed, _ = time_events(trun, 60, stream)
            records.append({"kernel": "torch.matmul", "precision": prec, "m": m, "n": n, "k": k,
                            "median_ms": tmed, "gbps": tot / (tmed * 1e-3) / 1e9, "baseline": True})
            log(f"  {prec} M={m:2d} N={n:6d} K={k:5d}: torch {tmed * 1e3:8.1f} us "
                f"{tot / (tmed * 1e-3) / 1e9:6.0f} GB/s")
        base = sm.instance_for(m, prec, True, out16)
        variants = list(V)
        if prec == "fp32":
            variants = [("plan", {})]
        for name, ov in variants:
            try:
                inst, fs = None, None
                if isinstance(ov, str):
                    p0 = sm.plan(m, n, k, prec, drvgemm.device().sm_count, out16=out16)
                    fs = p0.splits * int(ov[1:])
                elif ov:
                    inst = dataclasses.replace(base, **ov)
                launch = sm.prepare(A.base, Bs[0].base, C.base, m, n, k, 1.0, 0.0, prec, out16,
                                    stream=stream, inst=inst, force_splits=fs)
                argsets = []
                for b in Bs:
                    a = list(launch.args)
                    a[1] = b.base
                    argsets.append(tuple(a))

                def run(i, launch=launch, argsets=argsets):
                    launch.run(argsets[i % len(argsets)])
                med, best = time_events(run, 60, stream)
                r = launch.kernel.resources
                rec = {"kernel": "30_small_m", "variant": name, "precision": prec, "m": m, "n": n,
                       "k": k, "median_ms": med, "min_ms": best, "gbps": tot / (med * 1e-3) / 1e9,
                       "frac_of_copy": tot / (med * 1e-3) / 1e9 / copy_gbps,
                       "instance": launch.plan.instance.name, "splits": launch.plan.splits,
                       "grid": launch.plan.grid[0], "registers": getattr(r, "registers", None),
                       "predicted_ms": launch.plan.predicted_s * 1e3}
                if tmed:
                    rec["speedup_vs_torch"] = tmed / med
                records.append(rec)
                log(f"    {name:12s} {launch.plan.instance.name:34s} S={launch.plan.splits:2d} "
                    f"grid={launch.plan.grid[0]:4d} regs={rec['registers']}: {med * 1e3:8.1f} us "
                    f"{rec['gbps']:6.0f} GB/s ({rec['frac_of_copy']:.2f} of copy)"
                    + (f" x{tmed / med:.2f} torch" if tmed else "")
                    + f" [pred {rec['predicted_ms'] * 1e3:.1f}]")
            except Exception as ex:  # noqa: BLE001
                log(f"    {name}: {type(ex).__name__}: {ex}")
                if isinstance(ex, drvgemm.CudaError):
                    raise
        del Bs, A, C
        if torch_ok:
            del tb, ta, tc
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-correctness", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="compile only the aligned instances, then the variant timing set")
    args = ap.parse_args()
    out = {"device": None, "torch": None, "correctness": [], "determinism": [], "records": [],
           "summary": {}}
    failed = False

    def dump():
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)

    reason = drvgemm.no_gpu_reason()
    if reason is not None:
        log(f"no GPU: {reason}")
        out["error"] = f"no GPU: {reason}"
        dump()
        return 2
    dev = drvgemm.device()
    out["device"] = {"name": dev.name, "sm_count": dev.sm_count, "cc": list(dev.cc),
                     "l2_size": dev.l2_size, "driver": dev.driver_version,
                     "launch_path": drvgemm.launch_path()}
    log(f"device: {dev}")
    torch_ok = False
    if torch is not None:
        try:
            torch_ok = bool(torch.cuda.is_available())
            out["torch"] = {"version": torch.__version__, "available": torch_ok}
        except Exception as e:  # noqa: BLE001
            out["torch"] = {"error": str(e)}
    else:
        out["torch"] = {"error": _TORCH_ERR}
    log(f"torch: {out['torch']}")

    # compile everything first, so timings do not include NVRTC
    t = time.perf_counter()
    for inst in sm.INSTANCES:
        try:
            k = sm.compile_instance(inst)
            r = k.resources
            log(f"  compiled {inst.name}: {r}")
        except Exception as e:  # noqa: BLE001
            log(f"  COMPILE FAILED {inst.name}: {type(e).__name__}: {e}")
            failed = True
    log(f"compiled {len(sm.INSTANCES)} instances in {time.perf_counter() - t:.1f}s")

    if not args.skip_correctness:
        log("(a) correctness")
        cases = correctness_cases()
        for c in cases:
            desc = (f"{c['prec']} {c['m']}x{c['n']}x{c['k']} {c['mode']} a={c['alpha']} "
                    f"b={c['beta']}{' out16' if c.get('out16') else ''} "
                    f"offs={c.get('offs', (0, 0, 0))} seed={c['seed']}")
            try:
                kw = {x: c[x] for x in ("mode", "alpha", "beta", "seed")}
                rec = run_case(c["prec"], c["m"], c["n"], c["k"], out16=c.get("out16", False),
                               offs=c.get("offs", (0, 0, 0)), **kw)
            except Exception as e:  # noqa: BLE001
                rec = dict(c, ok=False, error=f"{type(e).__name__}: {e}",
                           traceback=traceback.format_exc()[-2000:])
                if isinstance(e, drvgemm.CudaError):
                    log(f"  FAIL {desc}: {rec['error']} (sticky fault: resetting)")
                    try:
                        drvgemm.reset() if hasattr(drvgemm, "reset") else None
                    except Exception:  # noqa: BLE001
                        pass
            out["correctness"].append(rec)
            extra = (f"{rec.get('instance')} S={rec.get('splits')} "
                     + (f"err/bound {rec['worst_err_over_bound']:.3f}"
                        if "worst_err_over_bound" in rec else f"bad {rec.get('n_bad')}"))
            if not rec["ok"]:
                failed = True
                log(f"  FAIL {desc}: {rec.get('error') or rec.get('worst')} "
                    f"guards_ok={rec.get('guards_ok')} {extra}")
            else:
                log(f"  ok   {desc}: {extra}")
        check_empty(out["correctness"])
        failed |= not all(r["ok"] for r in out["correctness"])
        dump()

        log("(b) determinism")
        for (prec, m, n, k, o16) in [("bf16", 16, 4096, 4096, False), ("bf16", 1, 11008, 4096, False),
                                     ("fp16", 64, 4096, 1024, True), ("fp32", 5, 1000, 65536, False),
                                     ("fp32", 64, 4096, 4096, False), ("bf16", 3, 64, 65536, False)]:
            try:
                rec = determinism(prec, m, n, k, o16)
            except Exception as e:  # noqa: BLE001
                rec = {"precision": prec, "m": m, "n": n, "k": k, "ok": False,
                       "error": f"{type(e).__name__}: {e}"}
            out["determinism"].append(rec)
            failed |= not rec["ok"]
            log(f"  {'ok  ' if rec['ok'] else 'FAIL'} {prec} {m}x{n}x{k}: {rec}")
        dump()

    if not args.skip_timing:
        log("(c) timing")
        try:
            copy = copy_bandwidth()
        except Exception as e:  # noqa: BLE001
            copy = 4270.0
            log(f"  copy bandwidth not measured ({e}); using {copy}")
        out["copy_gbps"] = copy
        log(f"  device-to-device copy: {copy:.0f} GB/s (read + write)")
        try:
            if args.quick:
                variants_timing(out["records"], copy, torch_ok, T0 + TIME_BUDGET_S)
            else:
                timing(out["records"], copy, torch_ok, T0 + TIME_BUDGET_S)
        except Exception as e:  # noqa: BLE001
            log(f"  timing stopped: {type(e).__name__}: {e}")
            out["timing_error"] = traceback.format_exc()[-3000:]

    # summary
    ours = [r for r in out["records"] if r.get("kernel") == "30_small_m" and "median_ms" in r]
    dec = [r for r in ours if r["precision"] == "bf16" and r["m"] <= 16]
    summ = {"correctness_cases": len(out["correctness"]),
            "correctness_failures": sum(not r["ok"] for r in out["correctness"]),
            "determinism_failures": sum(not r["ok"] for r in out["determinism"]),
            "timed": len(ours)}
    for prec in ("bf16", "fp16", "fp32"):
        rs = [r for r in ours if r["precision"] == prec and r["m"] <= 16]
        if rs:
            summ[f"{prec}_decode_min_frac_of_copy"] = min(r["frac_of_copy"] for r in rs)
            summ[f"{prec}_decode_median_frac_of_copy"] = statistics.median(
                r["frac_of_copy"] for r in rs)
            sp = [r["speedup_vs_torch"] for r in rs if "speedup_vs_torch" in r]
            if sp:
                summ[f"{prec}_decode_min_speedup_vs_torch"] = min(sp)
                summ[f"{prec}_decode_geomean_speedup_vs_torch"] = math.exp(
                    sum(math.log(x) for x in sp) / len(sp))
    if dec:
        summ["bf16_decode_shapes_at_0.85_copy"] = sum(r["frac_of_copy"] >= 0.85 for r in dec)
        summ["bf16_decode_shapes"] = len(dec)
    out["summary"] = summ
    out["elapsed_s"] = time.perf_counter() - T0
    dump()
    log(f"summary: {json.dumps(summ, indent=1)}")
    log(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
