"""GPU check and bench of the any-row-length softmax (cu/softmax/07..09 through
drvgemm_softmax_any.py).

    cd <repo root> && python3 check_softmax_any.py --json $OUT/softmax_any.json

(a) correctness against a float64 numpy reference: many shapes (cols 1 ..
    1,048,576), misaligned row starts (offset views), odd pitches, x and y
    of different alignment, -inf entries, all -inf rows, large values, rows of
    one element, fp32/bf16/fp16; outputs poisoned with NaN, guarded before,
    after and between rows; one > 2^31-element case (bf16, sampled rows).
(b) a row-length suite: the new path, drvgemm.softmax(kernel="auto"),
    torch.softmax (when importable) and a device copy of the same bytes
    (cuMemcpyDtoDAsync), all in this run; CUDA events, warm-up, L2 flushed
    before every repetition, median of REPS; GB/s counts one read and one
    write of every element; plus the wall-clock time per call of 200 calls
    back to back (what a launch-bound small shape costs its caller).
Every case runs in its own try/except; progress is printed as it goes.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback

import numpy as np

import drvgemm
from drvgemm import driver
from drvgemm import timing
import drvgemm_softmax_any as A

REPS = 30
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def np_dtype(prec):
    if prec == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float32 if prec == "fp32" else np.float16)


RTOL = {"fp32": 2e-5, "bf16": 8e-3, "fp16": 1.2e-3}
ATOL = {"fp32": 1e-36, "bf16": 1e-36, "fp16": 6.0e-8}


def reference(x):
    x64 = np.asarray(x).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(x64, axis=-1, keepdims=True)
        e = np.exp(x64 - m)
        return e / np.sum(e, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# device buffers with guards
# ---------------------------------------------------------------------------
GUARD = 64  # elements of NaN poison before and after every buffer


class Guarded:
    """rows x cols elements at pitch ld, starting `off` elements past a
    16-byte aligned point, with GUARD elements on either side; every byte
    starts as 0xFF (NaN in all three types)."""

    def __init__(self, rows, cols, ld, off, dtype):
        self.rows, self.cols, self.ld, self.off, self.dtype = rows, cols, ld, off, np.dtype(dtype)
        size = self.dtype.itemsize
        self.span = (rows - 1) * ld + cols
        self.n = GUARD + off + self.span + GUARD
        self.buf = driver.empty((self.n * size,), np.uint8)
        self.buf.fill_bytes(0xFF)
        self.ptr = self.buf.ptr + (GUARD + off) * size

    def upload(self, x):
        full = np.full(self.n, np.nan, dtype=np.float32).astype(self.dtype)
        full.view(np.uint8)[:] = 0xFF
        body = full[GUARD + self.off:GUARD + self.off + self.span]
        for r in range(self.rows):
            body[r * self.ld:r * self.ld + self.cols] = x[r]
        self.buf.copy_from_host(full.view(np.uint8))

    def download(self):
        h = self.buf.to_host().view(self.dtype)
        body = h[GUARD + self.off:GUARD + self.off + self.span]
        idx = (np.arange(self.rows)[:, None] * self.ld + np.arange(self.cols)[None, :])
        y = body[idx]
        untouched = np.ones(self.n, bool)
        untouched[GUARD + self.off + idx.ravel()] = False
        raw = h.view(np.uint8 if self.dtype.itemsize == 1 else
                     (np.uint16 if self.dtype.itemsize == 2 else np.uint32))
        allones = np.iinfo(raw.dtype).max
        wrote_outside = int(np.count_nonzero(raw[untouched] != allones))
        return y, wrote_outside

    def free(self):
        self.buf.free()


def check_case(rows, cols, prec, *, xoff=0, yoff=0, xpad=0, ypad=0, kind="normal", seed=0):
    dt = np_dtype(prec)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols), dtype=np.float32) * 3.0)
    if kind == "large":
        big = 3.0e38 if prec in ("fp32", "bf16") else 6.0e4
        x = rng.uniform(-big, big, (rows, cols)).astype(np.float32)
        x[0, 0] = big
    if kind in ("masked", "large"):
        x[rng.random((rows, cols)) < 0.3] = -np.inf
        x[rows // 2] = -np.inf                 # an all -inf row: NaN, like torch
        if rows > 2:
            x[rows - 1, : max(1, cols - 1)] = -np.inf   # a single live entry: 1
    if prec == "fp16":
        x = np.clip(x, -6.0e4, 6.0e4, where=np.isfinite(x), out=x)
    x = x.astype(dt)
    gx = Guarded(rows, cols, cols + xpad, xoff, dt)
    gy = Guarded(rows, cols, cols + ypad, yoff, dt)
    try:
        gx.upload(x)
        p = A.run(gx.ptr, gy.ptr, rows, cols, prec, ldx=gx.ld, ldy=gy.ld)
        driver.synchronize()
        y, outside = gy.download()
        x_after, _ = gx.download()
    finally:
        gx.free()
        gy.free()
    ref = reference(x)
    y64 = y.astype(np.float64)
    problems = []
    if outside:
        problems.append(f"{outside} elements written outside the output rows")
    if not np.array_equal(x_after.view(np.uint8), x.view(np.uint8)):
        problems.append("input modified")
    nan_ref, nan_y = np.isnan(ref), np.isnan(y64)
    if (nan_ref != nan_y).any():
        r, c = np.argwhere(nan_ref != nan_y)[0]
        problems.append(f"NaN mismatch at [{r},{c}] (y={y64[r, c]}, ref={ref[r, c]}, "
                        f"{int((nan_ref != nan_y).sum())} in all)")
    ok = ~nan_ref & ~nan_y
    err = np.abs(y64 - ref)
    bound = RTOL[prec] * np.abs(ref) + ATOL[prec]
    bad = ok & (err > bound)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        problems.append(f"{int(bad.sum())} entries out of bound; first [{r},{c}] "
                        f"y={y64[r, c]!r} ref={ref[r, c]!r}")
    if kind == "masked":
        neg = np.isneginf(x.astype(np.float32)) & ~nan_ref
        if (y64[neg] != 0).any():
            problems.append("-inf entries not 0")
    rel = float(np.max(err[ok] / np.maximum(np.abs(ref[ok]), 1e-30))) if ok.any() else 0.0
    return {"rows": rows, "cols": cols, "precision": prec, "xoff": xoff, "yoff": yoff,
            "xpad": xpad, "ypad": ypad, "kind": kind, "config": p.describe() if p else "existing auto",
            "ok": not problems, "problems": problems, "max_rel_err": rel}


def correctness_cases():
    cols_list = [1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 127, 128, 129, 255, 1000, 1023, 1025,
                 4097, 12345, 16383, 16385, 32000, 50257, 128256, 151936]
    cases = []
    for i, cols in enumerate(cols_list):
        rows = max(2, min(300, 3_000_000 // (cols * 8) or 2))
        rows = rows if rows % 2 else rows + 1   # odd row counts: partial lane groups / blocks
        for prec in ("fp32", "bf16", "fp16"):
            cases.append(dict(rows=rows, cols=cols, prec=prec, seed=i))
        cases.append(dict(rows=rows, cols=cols, prec="fp32", xoff=1, yoff=1, kind="masked", seed=i))
        cases.append(dict(rows=rows, cols=cols, prec="bf16", xoff=3, yoff=3, xpad=5, ypad=5, seed=i))
        cases.append(dict(rows=rows, cols=cols, prec="fp32", xoff=2, yoff=1, xpad=1, ypad=3,
                          kind="masked", seed=i))           # different phases: element-wise stores
    for cols in (1, 3, 100, 5000, 50257):
        cases.append(dict(rows=7, cols=cols, prec="fp32", kind="large", xoff=1, yoff=1))
        cases.append(dict(rows=7, cols=cols, prec="fp16", kind="large"))
    # few very long rows: the split kernels (resident and streamed)
    for cols, prec, off in ((1048576, "fp32", 0), (1048575, "fp32", 1), (1048576, "bf16", 5),
                            (777_777, "fp16", 3), (4_500_000, "fp32", 1), (9_000_001, "bf16", 0)):
        cases.append(dict(rows=3 if cols < 2_000_000 else 2, cols=cols, prec=prec, xoff=off,
                          yoff=off, kind="masked" if cols == 1048575 else "normal"))
    cases.append(dict(rows=40, cols=300_000, prec="fp32", xoff=1, yoff=1))  # split, slots loop rows
    cases.append(dict(rows=1, cols=1, prec="fp32"))
    cases.append(dict(rows=1, cols=1048576, prec="fp32", kind="masked"))
    return cases


def huge_case():
    """More than 2^31 elements (bf16, 8.6 GB of device memory): sampled rows
    around the 2^31 boundary, the first and the last, against the reference."""
    rows, cols = 32769, 65537
    n = rows * cols
    assert n > 2**31
    free, _ = driver.memory_info()
    if free < 2 * n * 2 + (1 << 30):
        return {"skipped": f"needs {2 * n * 2 / 2**30:.1f} GiB, {free / 2**30:.1f} free"}
    dt = np_dtype("bf16")
    x = driver.empty((rows, cols), dt)
    y = driver.empty((rows, cols), dt)
    try:
        y.fill_bytes(0xFF)
        rng = np.random.default_rng(1)
        block_rows = 1024
        chunk = (rng.standard_normal((block_rows, cols), dtype=np.float32) * 3).astype(dt)
        # fill x with one random block repeated, row r gets block row r % 1024,
        # then perturb sampled rows so they differ from their copies
        for r0 in range(0, rows, block_rows):
            nr = min(block_rows, rows - r0)
            driver.DeviceArray((nr * cols,), dt, ptr=x.ptr + r0 * cols * 2, owner=False) \
                .copy_from_host(chunk[:nr])
        sample = sorted({0, 1, (2**31) // cols - 1, (2**31) // cols, (2**31) // cols + 1, rows - 1})
        xs = {}
        for r in sample:
            v = (rng.standard_normal(cols, dtype=np.float32) * 3).astype(dt)
            driver.DeviceArray((cols,), dt, ptr=x.ptr + r * cols * 2, owner=False).copy_from_host(v)
            xs[r] = v
        p = A.run(x, y, rows, cols, "bf16")
        driver.synchronize()
        worst = 0.0
        for r in sample:
            got = driver.DeviceArray((cols,), dt, ptr=y.ptr + r * cols * 2, owner=False).to_host()
            ref = reference(xs[r][None, :])[0]
            e = np.abs(got.astype(np.float64) - ref)
            if np.isnan(e).any() or (e > RTOL["bf16"] * ref + ATOL["bf16"]).any():
                return {"ok": False, "config": p.describe(), "row": r}
            worst = max(worst, float(np.max(e / ref)))
        return {"ok": True, "config": p.describe(), "rows": rows, "cols": cols,
                "max_rel_err": worst}
    finally:
        x.free()
        y.free()


# ---------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------
SUITE = [
    # (rows, cols): short rows, many of them
    (1048576, 1), (1048576, 2), (1048576, 3), (1048576, 8), (524288, 31), (262144, 33),
    (100000, 128), (131072, 127), (65536, 129), (65536, 256), (32768, 1000), (16384, 1024),
    # medium, odd lengths, vocabularies
    (8192, 4096), (4096, 4097), (777, 12345), (4096, 16384), (2048, 32000), (4096, 32000),
    (8192, 50257), (1024, 50257), (1024, 128256), (512, 151936), (2048, 151936),
    # few very long rows
    (4, 1048576), (16, 1048576), (1, 1048576), (64, 262144),
    # small (launch-bound) shapes
    (1, 1000), (8, 4096), (32, 50257), (128, 128),
]
BF16_SUITE = [(8192, 50257), (2048, 32000), (1024, 128256), (512, 151936), (100000, 128),
              (4, 1048576), (32768, 1000)]


def _torch():
    try:
        import torch
        if torch.cuda.is_available():
            return torch
    except Exception:
        pass
    return None


def make_input(rows, cols, prec, torch):
    """A device array of random normal * 3 (never zeros), and its keeper."""
    dt = np_dtype(prec)
    if torch is not None:
        tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[prec]
        g = torch.Generator(device="cuda").manual_seed(0)
        t = (torch.randn((rows, cols), device="cuda", generator=g, dtype=torch.float32) * 3).to(tdt)
        torch.cuda.synchronize()
        return driver.DeviceArray((rows, cols), dt, ptr=t.data_ptr(), owner=False), t
    x = (np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32) * 3).astype(dt)
    d = driver.to_device(x)
    return d, d


def events_median(fn, reps=REPS):
    return statistics.median(timing.time_ms(fn, warmup=3, reps=reps, flush_l2=True))


def per_call_us(fn, n=200):
    fn()
    driver.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    driver.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def sample_err(y, x_host_rows, rows_idx, prec):
    ref = reference(x_host_rows)
    got = y.astype(np.float64)
    if np.isnan(got).any():
        return math.nan
    m = ref > 1e-30
    return float(np.max(np.abs(got[m] - ref[m]) / ref[m]))


def bench_shape(rows, cols, prec, torch):
    dt = np_dtype(prec)
    nbytes = rows * cols * dt.itemsize
    moved = 2 * nbytes
    x, keep = make_input(rows, cols, prec, torch)
    y = driver.empty((rows, cols), dt)
    y2 = driver.empty((rows, cols), dt)
    rec = {"rows": rows, "cols": cols, "precision": prec, "bytes": moved}
    try:
        p = A.plan(rows, cols, prec, True, driver.device().sm_count, cc=driver.device().cc)
        route = A.existing_route(rows, cols, prec, True, True)
        rec["config"] = f"auto({route})" if route else p.describe()
        rec["predicted_copy_ratio"] = p.predicted_copy_ratio
        new = lambda: A.run(x, y, rows, cols, prec)  # noqa: E731
        y.fill_bytes(0xFF)
        new()
        driver.synchronize()
        # correctness on sampled rows
        idx = np.unique(np.linspace(0, rows - 1, num=min(rows, 6)).astype(np.int64))
        xs = np.stack([driver.DeviceArray((cols,), dt, ptr=x.ptr + int(r) * cols * dt.itemsize,
                                          owner=False).to_host() for r in idx])
        ys = np.stack([driver.DeviceArray((cols,), dt, ptr=y.ptr + int(r) * cols * dt.itemsize,
                                          owner=False).to_host() for r in idx])
        rec["max_rel_err"] = sample_err(ys, xs, idx, prec)
        ms = events_median(new)
        rec["new_ms"] = ms
        rec["new_gbps"] = moved / ms / 1e6
        calls = 200 if moved < (64 << 20) else 10
        rec["new_call_us"] = per_call_us(new, calls)
    except Exception as e:
        rec["new_error"] = f"{type(e).__name__}: {e}"
        log(f"  new path failed: {rec['new_error']}")
        traceback.print_exc()
    try:
        old = lambda: drvgemm.softmax(x, kernel="auto", out=y2)  # noqa: E731
        ms = events_median(old)
        rec["auto_ms"] = ms
        rec["auto_gbps"] = moved / ms / 1e6
        rec["auto_call_us"] = per_call_us(old, 200 if moved < (64 << 20) else 10)
    except Exception as e:
        rec["auto_error"] = f"{type(e).__name__}: {e}"
    if torch is not None:
        try:
            t = keep
            holder = {}

            def tor():
                holder["y"] = torch.softmax(t, dim=-1)
            ms = events_median(tor)
            rec["torch_ms"] = ms
            rec["torch_gbps"] = moved / ms / 1e6
            rec["torch_call_us"] = per_call_us(tor, 200 if moved < (64 << 20) else 10)
            holder.clear()
        except Exception as e:
            rec["torch_error"] = f"{type(e).__name__}: {e}"
    try:
        cp = lambda: driver.memcpy_dtod(y2, x, nbytes)  # noqa: E731
        ms = events_median(cp)
        rec["copy_ms"] = ms
        rec["copy_gbps"] = moved / ms / 1e6
    except Exception as e:
        rec["copy_error"] = f"{type(e).__name__}: {e}"
    for k in ("new", "auto", "torch"):
        if f"{k}_ms" in rec and "copy_ms" in rec:
            rec[f"{k}_copy_ratio"] = round(rec["copy_ms"] / rec[f"{k}_ms"], 4)
    if "new_ms" in rec and "torch_ms" in rec:
        rec["new_vs_torch_speed"] = round(rec["torch_ms"] / rec["new_ms"], 3)
    if "new_ms" in rec and "auto_ms" in rec:
        rec["new_vs_auto_speed"] = round(rec["auto_ms"] / rec["new_ms"], 3)
    y.free()
    y2.free()
    del x, keep
    if torch is not None:
        torch.cuda.empty_cache()
    return rec


def summarise(recs):
    out = {}
    for prec in ("fp32", "bf16"):
        rs = [r for r in recs if r["precision"] == prec and "new_copy_ratio" in r]
        if not rs:
            continue
        ratios = [r["new_copy_ratio"] for r in rs]
        big = [r for r in rs if r["bytes"] // 2 >= 8 << 20]
        out[prec] = {
            "shapes": len(rs),
            "geomean_copy_ratio": round(math.exp(sum(math.log(v) for v in ratios) / len(ratios)), 4),
            "min_copy_ratio_ge_8MiB": min((r["new_copy_ratio"] for r in big), default=None),
            "ge_8MiB_below_0.85": [f"{r['rows']}x{r['cols']}" for r in big
                                   if r["new_copy_ratio"] < 0.85],
            "ge_8MiB_slower_than_torch": [f"{r['rows']}x{r['cols']}" for r in big
                                          if r.get("new_vs_torch_speed", 2) < 1.0],
            "small_slower_per_call_than_torch": [
                f"{r['rows']}x{r['cols']}" for r in rs if r["bytes"] // 2 < 8 << 20
                and "torch_call_us" in r and r["new_call_us"] > r["torch_call_us"]],
        }
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--skip-huge", action="store_true")
    args = ap.parse_args()
    result = {"device": {}, "correctness": [], "huge": None, "bench": [], "summary": {}}

    def dump():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1, default=str)

    try:
        dev = driver.device()
        result["device"] = {"name": dev.name, "sm_count": dev.sm_count, "cc": list(dev.cc)}
        log(f"device {dev.name}, {dev.sm_count} SMs, launch path {drvgemm.launch_path()}")
    except Exception as e:
        log(f"no device: {e}")
        result["error"] = str(e)
        dump()
        return 1
    torch = _torch()
    log(f"torch: {'yes ' + torch.__version__ if torch else 'no'}")

    if not args.skip_check:
        cases = correctness_cases()
        fails = 0
        for c in cases:
            try:
                r = check_case(c.pop("rows"), c.pop("cols"), c.pop("prec"), **c)
            except Exception as e:
                r = {"case": str(c), "ok": False, "problems": [f"{type(e).__name__}: {e}"]}
                traceback.print_exc()
                try:
                    A.reset_workspace()
                    driver.synchronize()
                except Exception:
                    pass
            result["correctness"].append(r)
            if not r["ok"]:
                fails += 1
                log(f"FAIL {r}")
        log(f"correctness: {len(cases) - fails}/{len(cases)} cases pass")
        dump()
        if not args.skip_huge:
            try:
                result["huge"] = huge_case()
            except Exception as e:
                result["huge"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            log(f"> 2^31 elements: {result['huge']}")
            dump()

    if not args.skip_bench:
        log(f"{'shape':>16} {'prec':>4} {'config':<58} {'new':>6} {'auto':>6} {'torch':>6} "
            f"{'copy':>6} GB/s | new/copy auto/copy torch/copy | us/call new torch")
        suite = [(r, c, "fp32") for r, c in SUITE] + [(r, c, "bf16") for r, c in BF16_SUITE]
        for rows, cols, prec in suite:
            if time.time() - T0 > 165:
                log("time budget reached; stopping the suite")
                break
            try:
                r = bench_shape(rows, cols, prec, torch)
            except Exception as e:
                r = {"rows": rows, "cols": cols, "precision": prec, "error": f"{type(e).__name__}: {e}"}
            result["bench"].append(r)
            g = lambda k: f"{r[k]:6.0f}" if k in r else "     -"  # noqa: E731
            q = lambda k: f"{r[k]:8.3f}" if k in r else "       -"  # noqa: E731
            u = lambda k: f"{r[k]:7.1f}" if k in r else "      -"  # noqa: E731
            log(f"{rows:>8}x{cols:<8} {prec:>4} {r.get('config', r.get('error', ''))[:58]:<58} "
                f"{g('new_gbps')} {g('auto_gbps')} {g('torch_gbps')} {g('copy_gbps')} | "
                f"{q('new_copy_ratio')} {q('auto_copy_ratio')} {q('torch_copy_ratio')} | "
                f"{u('new_call_us')} {u('torch_call_us')}  err={r.get('max_rel_err', '-')}")
            dump()
        result["summary"] = summarise(result["bench"])
        log(json.dumps(result["summary"], indent=1))
    dump()
    ok = all(r.get("ok") for r in result["correctness"])
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
