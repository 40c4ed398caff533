"""``drvgemm bench --shapes``: ``gemm(kernel="auto")`` over the shape suite
(tools/shape_suite.py) for bf16, fp16, tf32 and fp32, next to the best of
the ways cuBLAS can be called, in the same run and interleaved.

For each shape and precision, every entry (drvgemm.gemm with a C of each
type it can write; torch.matmul(out=); cublasGemmEx through CuPy with a
16-bit and an fp32 C, or TF32 compute) is

1. called once untimed (compiles, plans), then checked: C poisoned with NaN,
   one call, sampled rows against float64 from the same rounded inputs;
2. timed as ONE call, several times, interleaved with the other entries:
   L2 flushed, synchronised, then the wall time from the call to the end of
   a synchronise (host + GPU: what a program that waits for its result
   sees) -> ``one_call_ms`` (median);
3. timed back to back, in rounds interleaved with the other entries (the
   order rotated each round): device events around ``batch`` calls / batch
   -> ``median_ms`` (median over rounds), the calls cycling through enough
   copies of A and B that a call's operands are never L2-resident.

Inputs are uniform in [-1, 1] (never zeros or small integers: they draw less
power and run faster). Records follow DESIGN.md's results format, plus
``shape_class``, ``one_call_ms``, the chosen instantiation (drvgemm.plan)
and its ``sass_hash``; ``summary`` holds per precision the geometric mean and
the minimum of cuBLAS time / drvgemm time, back to back and one call,
comparing like with like: drvgemm's C has the type of the cuBLAS call it is
compared with."""
from __future__ import annotations

import dataclasses
import math
import statistics
import sys
import time

import numpy as np

import drvgemm   # the public API the suite measures: drvgemm.gemm, drvgemm.plan

from ..runtime import driver, dtypes, timing
from ..runtime.errors import CudaError
from ..runtime.sass import kernel_sass_hash
from . import shape_suite
from .cublas import gemmex_enqueue
from .optional import torch_cuda, why_not
from .records import device_json, gemm_record
from .sweep import geomean, is_sticky, paired_ratios

__all__ = ["run_shape_bench", "summarize", "format_summary", "PRIMARY_OUT", "TOLERANCE"]

# The C type of the headline comparison: a 16-bit C for 16-bit inputs (what
# torch.matmul writes, and cuBLAS's fastest call), float32 otherwise.
PRIMARY_OUT = {"bf16": "bf16", "fp16": "fp16", "tf32": "fp32", "fp32": "fp32"}
# Relative RMSE above which a result is garbage (not a precision verdict:
# the GPU tests hold the real bounds).
TOLERANCE = {"bf16": 2e-2, "fp16": 1e-2, "tf32": 1e-2, "fp32": 1e-4}
CHECK_ROWS = 16
DEFAULT_BUDGET_S = {False: 330.0, True: 120.0}


def _progress(msg):
    print(msg, file=sys.stderr, flush=True)


class _Entry:
    """One call path at one shape: ``call()`` enqueues one product on the
    next operand set; ``c`` is its output; ``meta`` goes into its record."""

    def __init__(self, kernel, out, baseline, calls, c, meta, read_rows):
        self.kernel, self.out, self.baseline = kernel, out, baseline
        self._calls, self._i = calls, 0
        self.c, self.meta, self.read_rows = c, meta, read_rows
        self.one_call, self.rounds = [], []
        self.error = None
        self.err = None
        self.batch = 1

    def call(self):
        f = self._calls[self._i % len(self._calls)]
        self._i += 1
        f()


# ---------------------------------------------------------------------------
# operands
# ---------------------------------------------------------------------------
class _Operands:
    """``sets`` copies of A and B for one precision (device memory that both
    drvgemm and cuBLAS read: torch tensors wrapped as DeviceArrays, or
    DeviceArrays alone without torch), and float64 reference rows of set 0."""

    def __init__(self, precision, m, n, k, sets, seed):
        self.precision, self.m, self.n, self.k = precision, m, n, k
        self.np_dtype = dtypes.numpy_dtype(precision)
        self.torch = torch_cuda()
        self.rows = np.unique(np.linspace(0, m - 1, min(m, CHECK_ROWS)).astype(np.int64))
        self.keep = []
        self.a, self.b, self.ta, self.tb = [], [], [], []
        if self.torch is not None:
            torch = self.torch
            tdt = self.torch_dtype(precision)
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            for _ in range(sets):
                ta = torch.empty((m, k), dtype=torch.float32, device="cuda").uniform_(
                    -1, 1, generator=g).to(tdt).contiguous()
                tb = torch.empty((k, n), dtype=torch.float32, device="cuda").uniform_(
                    -1, 1, generator=g).to(tdt).contiguous()
                self.ta.append(ta)
                self.tb.append(tb)
                self.a.append(self.wrap(ta, (m, k)))
                self.b.append(self.wrap(tb, (k, n)))
            a64 = self.ta[0][torch.as_tensor(self.rows, device="cuda")].double()
            self.ref = (a64 @ self.tb[0].double()).cpu().numpy()
        else:
            rng = np.random.default_rng(seed)
            a = rng.uniform(-1, 1, (m, k)).astype(np.float32).astype(self.np_dtype)
            b = rng.uniform(-1, 1, (k, n)).astype(np.float32).astype(self.np_dtype)
            self.ref = a[self.rows].astype(np.float64) @ b.astype(np.float64)
            A, B = driver.to_device(a), driver.to_device(b)
            self.a, self.b = [A], [B]
            for _ in range(sets - 1):
                self.a.append(driver.empty(A.shape, A.dtype).copy_(A))
                self.b.append(driver.empty(B.shape, B.dtype).copy_(B))

    def torch_dtype(self, name):
        torch = self.torch
        return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                "bf16": torch.bfloat16}[name]

    def wrap(self, t, shape, np_dtype=None):
        """A DeviceArray over a torch tensor's memory (the tensor is kept):
        drvgemm sees its own array type with the right element type (torch's
        __cuda_array_interface__ calls bfloat16 "<f2", the typestr of fp16)."""
        self.keep.append(t)
        return driver.DeviceArray(shape, np_dtype or self.np_dtype, ptr=t.data_ptr(), owner=False)

    def output(self, out):
        """(DeviceArray C, torch tensor or None) of the given type."""
        np_dt = dtypes.numpy_dtype(out) if out != "fp32" else np.dtype(np.float32)
        if self.torch is not None:
            tc = self.torch.empty((self.m, self.n), dtype=self.torch_dtype(out), device="cuda")
            return self.wrap(tc, (self.m, self.n), np_dt), tc
        return driver.empty((self.m, self.n), np_dt), None

    def read_rows(self, c):
        """The checked rows of C as float64 (C of any of the three types),
        copied row by row: C can be a GiB."""
        row_bytes = self.n * c.dtype.itemsize
        return np.stack([driver.DeviceArray((self.n,), c.dtype, ptr=c.ptr + int(r) * row_bytes,
                                            owner=False).to_host().astype(np.float64)
                         for r in self.rows])

    def free(self):
        for x in self.a + self.b:
            try:
                x.free()
            except Exception:
                pass
        self.a = self.b = self.ta = self.tb = self.keep = []


# ---------------------------------------------------------------------------
# the plan (drvgemm.plan, being written on the dispatch side) or what gemm() does today
# ---------------------------------------------------------------------------
def _plan_kernels(plan):
    """The compiled Kernel a Plan launches."""
    return [plan.compiled()]


def plan_info(A, B, C, precision, kernel="auto") -> dict:
    """What gemm(A, B, C, kernel=kernel) will run (DeviceArray operands):
    rung, instantiation, split, predicted time and the SASS hash of its
    kernel(s)."""
    kw = {"precision": "tf32"} if precision == "tf32" and kernel == "auto" else {}
    info = {}
    kernels = []
    p = drvgemm.plan(A, B, C, kernel=kernel, **kw)
    info["kernel"] = str(p.kernel)
    info["instantiation"] = str(p.instantiation)
    info["split"] = int(p.split)
    info["predicted_ms"] = round(float(p.predicted_s) * 1e3, 5)
    info["alternatives"] = len(p.alternatives)
    kernels = _plan_kernels(p)
    if not kernels:
        info["sass_hash_error"] = "the Plan offers no compiled Kernel"
    if kernels:
        try:
            info["sass_hash"] = "+".join(kernel_sass_hash(x) for x in kernels)
        except Exception as e:   # nvdisasm missing: say so, keep the record
            info["sass_hash"] = None
            info["sass_hash_error"] = f"{type(e).__name__}: {e}"[:200]
    return info


# ---------------------------------------------------------------------------
# entries
# ---------------------------------------------------------------------------
def _drvgemm_entry(ops: _Operands, out):
    C, tc = ops.output(out)
    kw = {"precision": "tf32"} if ops.precision == "tf32" else {}
    gemm = drvgemm.gemm

    def make(A, B):
        return lambda: gemm(A, B, C, kernel="auto", **kw)
    calls = [make(A, B) for A, B in zip(ops.a, ops.b)]
    meta = {"api": "drvgemm.gemm(a, b, c, kernel='auto'" + (", precision='tf32')" if kw else ")"),
            "out": out}
    e = _Entry("auto", out, False, calls, C, meta, ops.read_rows)
    try:
        info = plan_info(ops.a[0], ops.b[0], C, ops.precision)
        e.kernel = info.pop("kernel", "auto")
        meta.update(info)
    except Exception as ex:
        meta["plan"] = f"failed: {type(ex).__name__}: {ex}"[:300]
        if is_sticky(ex):
            raise
    return e


def _torch_entry(ops: _Operands, out):
    torch = ops.torch
    C, tc = ops.output(out)
    mm = torch.matmul

    def make(ta, tb):
        return lambda: mm(ta, tb, out=tc)
    calls = [make(ta, tb) for ta, tb in zip(ops.ta, ops.tb)]
    return _Entry("cublas", out, True, calls, C,
                  {"via": "torch.matmul(out=)", "out": out,
                   "allow_tf32": ops.precision == "tf32"}, ops.read_rows)


def _gemmex_entry(ops: _Operands, out):
    C, tc = ops.output(out)
    m, n, k = ops.m, ops.n, ops.k
    calls = [gemmex_enqueue(ops.precision, m, n, k, A.ptr, B.ptr, C.ptr, out_fp32=out == "fp32")
             for A, B in zip(ops.a, ops.b)]
    if calls[0] is None:
        return None
    name = "cublas_gemmex_f32out" if out == "fp32" and ops.precision != "tf32" else "cublas_gemmex"
    return _Entry(name, out, True, calls, C, {"via": "cupy cublasGemmEx", "out": out},
                  ops.read_rows)


def _entries(ops: _Operands, progress):
    """drvgemm and cuBLAS entries of one precision, a C of every type each
    can write; a builder that fails gives an entry with its error."""
    p = ops.precision
    outs = (p, "fp32") if p in ("bf16", "fp16") else ("fp32",)
    entries = []
    for out in outs:
        builders = [("auto", _drvgemm_entry)]
        if ops.torch is not None and out == PRIMARY_OUT[p]:
            builders.append(("cublas", _torch_entry))   # torch writes C in the inputs' type
        builders.append(("cublas_gemmex", _gemmex_entry))   # None where it does not apply
        for name, build in builders:
            try:
                e = build(ops, out)
            except Exception as ex:
                if is_sticky(ex):
                    raise
                progress(f"    {name} (C {out}): set-up failed: {type(ex).__name__}: {ex}")
                e = _Entry(name, out, name != "auto", [lambda: None], None,
                           {"out": out}, ops.read_rows)
                e.error = f"set-up failed: {type(ex).__name__}: {ex}"[:500]
            if e is not None:
                entries.append(e)
    return entries


# ---------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------
def _first_and_check(e: _Entry, ops: _Operands, tol: float) -> float | None:
    """Untimed first call (compile, plan), the check, and a wall-clock guess
    of one call (ms) for the repetition policy."""
    t0 = time.perf_counter()
    e.call()
    driver.synchronize()
    e.meta["first_call_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    e.c.fill_bytes(0xFF)            # NaN in every C type: an unwritten output shows
    driver.synchronize()
    e._i = 0                        # the check reads set 0's product
    e.call()
    driver.synchronize()
    got = e.read_rows(e.c)
    num = math.sqrt(float(np.mean((got - ops.ref) ** 2)))
    den = math.sqrt(float(np.mean(ops.ref ** 2))) or 1.0
    e.err = num / den
    if not e.err <= tol:
        e.error = f"wrong result: rel. RMSE {e.err:.3g} over {tol:g} at the sampled rows"
        return None
    t0 = time.perf_counter()
    e.call()
    driver.synchronize()
    return (time.perf_counter() - t0) * 1e3


def _one_call_ms(e: _Entry) -> float:
    timing.flush_l2()
    driver.synchronize()
    t0 = time.perf_counter()
    e.call()
    driver.synchronize()
    return (time.perf_counter() - t0) * 1e3


def _batch_ms(e: _Entry) -> float:
    timing.flush_l2()
    start, end = driver.Event(), driver.Event()
    start.record()
    for _ in range(e.batch):
        e.call()
    end.record()
    end.synchronize()
    return start.elapsed_ms(end) / e.batch


def _measure(entries, policy, progress):
    live = [e for e in entries if e.error is None]
    if not live:
        return
    plan = {id(e): shape_suite.repetitions(e.meta.pop("_est_ms", 1.0), policy) for e in live}
    one = min(p[0] for p in plan.values())
    rounds = min(p[1] for p in plan.values())
    for e in live:
        e.batch = plan[id(e)][2]
    for i in range(one):                 # isolated calls, interleaved
        order = live[i % len(live):] + live[:i % len(live)]
        for e in order:
            if e.error is None:
                try:
                    e.one_call.append(_one_call_ms(e))
                except Exception as ex:
                    e.error = f"one call failed: {type(ex).__name__}: {ex}"[:500]
                    if is_sticky(ex):
                        raise
    for r in range(rounds):              # back to back, in rotated rounds
        cur = [e for e in live if e.error is None]
        if not cur:
            break
        for e in cur[r % len(cur):] + cur[:r % len(cur)]:
            try:
                e.rounds.append(_batch_ms(e))
            except Exception as ex:
                e.error = f"timing failed: {type(ex).__name__}: {ex}"[:500]
                progress(f"    {e.kernel} (C {e.out}): {e.error}")
                if is_sticky(ex):
                    raise


def _records(shape, precision, entries, sets) -> list[dict]:
    m, n, k = shape.m, shape.n, shape.k
    common = {"shape_class": shape.shape_class, "shape": shape.name}
    recs = []
    for e in entries:
        meta = {kk: v for kk, v in e.meta.items() if not kk.startswith("_")}
        if e.error is None and e.rounds and e.one_call:
            rec = gemm_record(e.kernel, precision, m, n, k, statistics.median(e.rounds), e.err,
                              e.baseline, **common,
                              one_call_ms=round(statistics.median(e.one_call), 5), **meta)
            rec.update(round_ms=[round(x, 5) for x in e.rounds], batch=e.batch,
                       one_call_n=len(e.one_call), rotation_sets=sets)
        else:
            rec = {"kernel": e.kernel, "precision": precision, "m": m, "n": n, "k": k,
                   "median_ms": None, "tflops": None, "one_call_ms": None,
                   "rel_rmse": None if e.err is None or e.err != e.err else float(f"{e.err:.3g}"),
                   "baseline": e.baseline, **common, **meta,
                   "error": e.error or "not timed"}
        recs.append(rec)
    # like with like: each drvgemm record against the best cuBLAS call with its C type
    for rec, e in zip(recs, entries):
        if rec["baseline"] or rec["median_ms"] is None:
            continue
        base = [(r, x) for r, x in zip(recs, entries)
                if r["baseline"] and r["out"] == rec["out"] and r["median_ms"] is not None]
        if not base:
            continue
        best_r, best_e = min(base, key=lambda t: t[0]["median_ms"])
        best_one = min(base, key=lambda t: t[0]["one_call_ms"])[0]
        rec["vs_cublas"] = round(best_r["median_ms"] / rec["median_ms"], 4)
        rec["best_cublas"] = f"{best_r['kernel']} ({best_r.get('via')})"
        rec["vs_cublas_one_call"] = round(best_one["one_call_ms"] / rec["one_call_ms"], 4)
        rec["best_cublas_one_call"] = f"{best_one['kernel']} ({best_one.get('via')})"
        ratios = paired_ratios(best_e.rounds, e.rounds)
        if ratios:
            rec["vs_cublas_paired"] = round(statistics.median(ratios), 4)
    return recs


def bench_shape(shape, precision, policy, l2_bytes, progress, seed=0) -> list[dict]:
    """The records of one shape at one precision (errors inside: an entry
    that fails has a record with its ``error``)."""
    in_bytes = dtypes.itemsize(precision)
    per_set = (shape.m * shape.k + shape.k * shape.n) * in_bytes
    sets = shape_suite.rotation_sets(per_set, l2_bytes, policy.max_batch)
    ops = _Operands(precision, shape.m, shape.n, shape.k, sets, seed)
    torch = ops.torch
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32 if torch is not None else None
    try:
        if torch is not None:
            # Global in torch: set once for the whole precision (fp32 means no TF32).
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        entries = _entries(ops, progress)
        for e in entries:
            if e.error is not None:
                continue
            try:
                est = _first_and_check(e, ops, TOLERANCE[precision])
                if est is not None:
                    e.meta["_est_ms"] = est
            except Exception as ex:
                e.error = f"{type(ex).__name__}: {ex}"[:500]
                if is_sticky(ex):
                    raise
        _measure(entries, policy, progress)
        return _records(shape, precision, entries, sets)
    finally:
        if torch is not None:
            try:
                torch.backends.cuda.matmul.allow_tf32 = prev_tf32
            except Exception:
                pass
        ops.free()
        if torch is not None:
            try:
                torch.cuda.empty_cache()
            except Exception:   # after a lost context: the original error is the one to see
                pass


def _error_record(shape, precision, error):
    return {"kernel": "auto", "precision": precision, "m": shape.m, "n": shape.n, "k": shape.k,
            "median_ms": None, "tflops": None, "one_call_ms": None, "baseline": False,
            "shape_class": shape.shape_class, "shape": shape.name, "out": PRIMARY_OUT[precision],
            "error": error[:500]}


def _line(shape, precision, recs) -> str:
    parts = []
    for r in recs:
        if not r["baseline"]:
            if r["median_ms"] is None:
                parts.append(f"drvgemm (C {r.get('out')}): {r['error'][:90]}")
            else:
                vs = (f" -> {r['vs_cublas']:.2f} b2b, {r['vs_cublas_one_call']:.2f} one call "
                      f"vs {r['best_cublas']}" if "vs_cublas" in r else " (no cuBLAS)")
                parts.append(f"{r['kernel']} C {r['out']}: {r['median_ms']:.4f} ms "
                             f"({r['tflops']:.1f} TFLOP/s, one call {r['one_call_ms']:.4f}){vs}")
    return "; ".join(parts)


def run_shape_bench(precisions=shape_suite.PRECISIONS, *, quick=False, shapes=None,
                    budget_s=None, progress=_progress) -> dict:
    """The shape suite; returns {"device", "suite", "records", "summary"}."""
    for p in precisions:
        if p not in shape_suite.PRECISIONS:
            raise ValueError(f"unknown precision {p!r}: choose from "
                             f"{', '.join(shape_suite.PRECISIONS)}")
    dev = driver.device()
    policy = shape_suite.QUICK_POLICY if quick else shape_suite.POLICY
    shapes = list(shapes) if shapes is not None else shape_suite.suite(quick)
    budget_s = DEFAULT_BUDGET_S[bool(quick)] if budget_s is None else float(budget_s)
    l2 = int(getattr(dev, "l2_size", 0) or 60 << 20)
    if torch_cuda() is None:
        progress(f"cuBLAS through torch: not measured ({why_not('torch')})")
    t0 = time.time()
    records = []
    total = len(shapes) * len(precisions)
    done = 0
    lost = None
    for i, shape in enumerate(shapes):
        for p in precisions:
            done += 1
            if lost is not None:
                records.append(_error_record(shape, p, f"skipped: the context was lost ({lost})"))
                continue
            elapsed = time.time() - t0
            if elapsed > budget_s:
                records.append(_error_record(shape, p, f"skipped: over the time budget "
                                                       f"({budget_s:.0f} s)"))
                continue
            progress(f"[{done}/{total}] {p} {shape.shape_class} {shape.name} (+{elapsed:.0f} s)")
            try:
                recs = bench_shape(shape, p, policy, l2, progress, seed=1000 * i + 7)
            except Exception as ex:   # one broken shape must not hide the rest
                msg = f"{type(ex).__name__}: {ex}"
                progress(f"    failed: {msg[:300]}")
                recs = [_error_record(shape, p, msg)]
                if is_sticky(ex) or (isinstance(ex, CudaError) and "ILLEGAL" in ex.name):
                    lost = msg[:200]
            records.extend(recs)
            progress(f"    {_line(shape, p, recs)}")
    wall = time.time() - t0
    return {"device": device_json(dev),
            "suite": {"shapes": len(shapes), "quick": bool(quick), "precisions": list(precisions),
                      "wall_s": round(wall, 1), "budget_s": budget_s,
                      "policy": dataclasses.asdict(policy),
                      "timing": "one_call_ms: wall time of one call to the end of a synchronise "
                                "(L2 flushed before it), median of isolated calls; median_ms: "
                                "device events around a batch of back-to-back calls / batch, "
                                "median over interleaved rounds, operands rotated so that no "
                                "call finds them in L2",
                      "inputs": "uniform in [-1, 1]"},
            "records": records,
            "summary": summarize(records)}


# ---------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------
def summarize(records) -> dict:
    """Per precision and C type: the geometric mean and the minimum (with its
    shape) of best cuBLAS time / drvgemm time, back to back (``b2b``), for
    one call, and back to back paired by round (``paired``: each round's
    ratio, then their median -- the two sides of a round ran at the same
    clock, where the medians of the two may fall on different sides of a
    power-limit throttle), over the shapes measured; the shapes below 0.60; the
    geometric mean per shape class; and how many shapes failed. Keys: the
    precision for its headline C type (PRIMARY_OUT), "<precision>/c=fp32"
    for 16-bit inputs with an fp32 C."""
    out = {}
    groups = {}
    for r in records:
        if r.get("baseline"):
            continue
        groups.setdefault((r["precision"], r.get("out") or PRIMARY_OUT[r["precision"]]),
                          []).append(r)
    for (prec, c), rs in sorted(groups.items()):
        key = prec if c == PRIMARY_OUT.get(prec) else f"{prec}/c={c}"
        ok = [r for r in rs if r.get("vs_cublas") is not None]
        failed = [r for r in rs if r.get("median_ms") is None]
        s = {"out": c, "shapes": len(rs), "compared": len(ok), "failed": len(failed)}
        for metric, field in (("b2b", "vs_cublas"), ("one_call", "vs_cublas_one_call"),
                              ("paired", "vs_cublas_paired")):
            vals = [r[field] for r in ok if r.get(field)]
            g = geomean(vals)
            s[f"geomean_{metric}"] = round(g, 4) if g is not None else None
            if vals:
                worst = min(ok, key=lambda r: r.get(field) or math.inf)
                s[f"min_{metric}"] = worst[field]
                s[f"min_{metric}_shape"] = f"{worst['shape_class']} {worst['m']}x{worst['n']}x" \
                                           f"{worst['k']}"
            else:
                s[f"min_{metric}"] = None
        s["below_0.60_b2b"] = [f"{r['m']}x{r['n']}x{r['k']}" for r in ok if r["vs_cublas"] < 0.6]
        by_class = {}
        for r in ok:
            by_class.setdefault(r["shape_class"], []).append(r["vs_cublas"])
        s["geomean_b2b_by_class"] = {cl: round(geomean(v), 4) for cl, v in sorted(by_class.items())}
        if failed:
            s["failed_shapes"] = [f"{r['m']}x{r['n']}x{r['k']}: {str(r.get('error'))[:80]}"
                                  for r in failed]
        out[key] = s
    return out


def format_summary(results) -> str:
    lines = ["cuBLAS time / drvgemm time (> 1: drvgemm faster), like C types compared:",
             f"  {'precision':14s} {'shapes':>6s} {'ok':>4s} {'failed':>6s} {'geo b2b':>8s} "
             f"{'min b2b':>8s} {'geo 1call':>9s} {'min 1call':>9s} {'geo pair':>8s}  worst (b2b)"]

    def f(x):
        return f"{x:.3f}" if isinstance(x, (int, float)) else "-"
    for key, s in results.get("summary", {}).items():
        lines.append(f"  {key:14s} {s['shapes']:6d} {s['compared']:4d} {s['failed']:6d} "
                     f"{f(s['geomean_b2b']):>8s} {f(s['min_b2b']):>8s} "
                     f"{f(s['geomean_one_call']):>9s} {f(s['min_one_call']):>9s} "
                     f"{f(s.get('geomean_paired')):>8s}  "
                     f"{s.get('min_b2b_shape', '')}")
    suite = results.get("suite", {})
    if suite:
        lines.append(f"{suite.get('shapes')} shapes x {len(suite.get('precisions', []))} "
                     f"precisions in {suite.get('wall_s')} s")
    return "\n".join(lines)
