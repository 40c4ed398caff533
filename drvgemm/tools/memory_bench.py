"""Timing the memory-bound kernels: the softmax ladder and the access-pattern
lessons (cu/mem_0*.cu), against a device-to-device copy of the same bytes.

Bandwidth accounting: every record's ``gbps`` is the *minimum* bytes the
operation must move (each input element read once, each output element
written once) over the median time. A kernel that reads its input twice
still gets credit for one read, so its GB/s shows what the second read costs.
The ``copy`` baseline (cuMemcpyDtoDAsync of the same bytes; 2 x the buffer
counted, read + write) is what the memory system delivers to a pure stream;
``print_memory_report`` prints each kernel's fraction of it.

Records follow the results format of DESIGN.md (``gbps`` in place of
``tflops``): ``kernel``, ``precision``, ``m``, ``n``, ``median_ms``, ``gbps``,
``baseline`` and, here, ``bytes``, ``copy_gbps``, ``copy_fraction`` and the
kernel's ``config``; softmax records add ``max_rel_err`` (sampled rows against
the float64 reference) and transposes ``smem_wavefronts`` (the bank model
below: shared-memory wavefronts per warp-wide access, 1 = conflict-free).
"""
from __future__ import annotations

import itertools
import math
import subprocess
import sys
import time

import numpy as np

from ..analysis.banks import transpose_wavefronts
from ..ladders.memory.registry import MEM_KERNELS, MemKernel, copy_grid, mem_kernel, transpose_grid
from ..ladders.softmax import dispatch as sm
from ..ladders.softmax import registry as sm_registry
from ..runtime import driver
from ..runtime.graph import graph
from ..runtime.launch import launch
from ..runtime.sass import kernel_sass_hash
from ..runtime.timing import batch_median_ms, median_ms
from . import ncu
from .optional import torch_cuda
from .records import memory_record
from .shape_suite import rotation_sets

__all__ = ["run_memory_bench", "bench_softmax", "bench_mem_kernels", "measure_copy",
           "print_memory_report", "softmax_summary", "ncu_bank_conflicts", "softmax_inputs",
           "SOFTMAX_SHAPES", "SOFTMAX_ROW_SUITE", "bench_softmax_rows", "softmax_rows_summary",
           "print_softmax_rows_report", "run_softmax_rows", "LARGE_BYTES"]

# The shapes of ANCHORS' torch table: square, very long rows, short rows.
SOFTMAX_SHAPES = ((16384, 16384), (4096, 131072), (65536, 1024), (1024, 65536))
COPY_FLOATS = 1 << 28                  # 1 GiB per buffer: far past the 60 MiB L2
TRANSPOSE_SHAPE = (8192, 8192)
STRIDES = (1, 2, 4, 8, 32)


def _progress(msg):
    print(msg, file=sys.stderr, flush=True)


def _median_ms(fn, reps):
    return median_ms(fn, warmup=3, reps=reps, flush_l2=True)


# ---------------------------------------------------------------------------
# the copy baseline
# ---------------------------------------------------------------------------
def measure_copy(nbytes: int, *, reps: int = 20, m=None, n=None, precision="fp32") -> dict:
    """Device-to-device copy of ``nbytes`` (cuMemcpyDtoDAsync), counted as
    2 * nbytes moved. The yardstick every other record is a fraction of."""
    src = driver.empty((nbytes,), np.uint8).fill_bytes(0x3C)
    dst = driver.empty((nbytes,), np.uint8)
    try:
        ms = _median_ms(lambda: driver.memcpy_dtod(dst, src, nbytes), reps)
    finally:
        src.free()
        dst.free()
    return memory_record("copy", precision, m if m is not None else nbytes, n if n is not None else 1,
                   ms, 2 * nbytes, baseline=True, config="cuMemcpyDtoDAsync")


def _with_copy(records, copy):
    for r in records:
        r["copy_gbps"] = copy["gbps"]
        r["copy_fraction"] = round(r["gbps"] / copy["gbps"], 4)
    return records


# ---------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------
def _cluster_note(kernel, p) -> dict:
    """How many clusters fit on the GPU at once (a cluster must sit inside
    one GPC, so SMs can idle that plain blocks would fill); for a persistent
    config that is its grid, and a cluster of 1 counts blocks."""
    cfg = p.config
    if cfg.cluster <= 1 and not cfg.persistent:
        return {}
    try:
        n = sm.resident_clusters(kernel, cfg, p.smem)
    except Exception as e:  # diagnostic only
        return {"max_active_clusters": f"unavailable: {e}"}
    return {"max_active_clusters": int(n)}


def _sample_rows(rows, k=24):
    return np.unique(np.linspace(0, rows - 1, num=min(rows, k)).astype(np.int64))


def _max_rel_err(y, ref) -> float:
    """max |y - ref| / ref over entries that are normal numbers of y's type
    in the reference (below that, the output type's own spacing dominates:
    an fp16 output of a probability under 2^-14 is subnormal or 0, a relative
    error up to 1 that says nothing of the kernel)."""
    y = np.asarray(y)
    floor = 2.0 ** -14 if y.dtype == np.float16 else np.finfo(np.float32).tiny
    y = y.astype(np.float64)
    if np.isnan(y).any():
        return math.nan
    mask = ref > floor
    if not mask.any():
        return 0.0
    return float(np.max(np.abs(y[mask] - ref[mask]) / ref[mask]))


def softmax_inputs(rows, cols, precision="fp32", seed=0, scale=4.0):
    """Random normal rows (never zeros: zeros make every kernel's job trivial)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    x *= scale
    return x.astype(sm_registry.numpy_dtype(precision), copy=False)


def bench_softmax(shapes=SOFTMAX_SHAPES, *, precision="fp32", kernels=None, reps=20,
                  torch_baseline=True, seed=0) -> list[dict]:
    """Every softmax rung (or ``kernels``) at every shape, with the copy
    baseline of the same bytes and torch.softmax where torch has CUDA.
    Rungs that cannot take a shape (the cluster rung off sm_90) are skipped."""
    cc = driver.device().cc
    names = list(kernels) if kernels else sm_registry.kernels()
    out = []
    for rows, cols in shapes:
        x = softmax_inputs(rows, cols, precision, seed)
        elem_bytes = x.dtype.itemsize * rows * cols
        copy = measure_copy(elem_bytes, reps=reps, m=rows, n=cols, precision=precision)
        _progress(f"copy {rows}x{cols}: {copy['gbps']:.0f} GB/s")
        sample = _sample_rows(rows)
        ref = sm.reference(x[sample])
        dx = driver.to_device(x)
        dy = driver.empty((rows, cols), x.dtype)
        recs = []
        auto = sm.plan(rows, cols, precision, cc=cc, sm_count=driver.device().sm_count)
        for name in names:
            rung = sm_registry.rung(name)
            if not rung.supports(cols, cc, precision):
                continue
            k, p = sm.prepare(sm.plan(rows, cols, precision, kernel=name, cc=cc,
                                      sm_count=driver.device().sm_count), rows)
            dy.fill_bytes(0xFF)  # NaN: an entry the kernel never writes shows up
            ms = _median_ms(lambda: sm.run_plan(k, p, dx, dy, rows, cols), reps)
            err = _max_rel_err(dy.to_host()[sample], ref)
            rec = memory_record(name, precision, rows, cols, ms, 2 * elem_bytes,
                          config=p.describe(), max_rel_err=err,
                          auto=(p.entry, p.defines) == (auto.entry, auto.defines),
                          **_cluster_note(k, p), **_kernel_hash(lambda: k))
            _progress(f"{name} {rows}x{cols}: {rec['gbps']:.0f} GB/s ({p.describe()})")
            recs.append(rec)
        if torch_baseline:
            t = _torch_softmax(x, sample, reps)
            if t is not None:
                ms, y = t
                recs.append(memory_record("torch_softmax", precision, rows, cols, ms, 2 * elem_bytes,
                                    baseline=True, config="torch.softmax(dim=-1)",
                                    max_rel_err=_max_rel_err(y, ref)))
        dx.free()
        dy.free()
        out.append(copy)
        out.extend(_with_copy(recs, copy))
    return out


def _torch_softmax(x, sample, reps):
    """(median ms, output rows ``sample``) of torch.softmax on the same data, timed with the
    same events and L2 flush (torch and drvgemm share the primary context and
    the legacy default stream); None without torch or CUDA."""
    torch = torch_cuda()
    if torch is None:
        return None
    if x.dtype == sm_registry.numpy_dtype("bf16"):
        t = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16).cuda()
    else:
        t = torch.from_numpy(x).cuda()
    torch.cuda.synchronize()
    holder = {}

    def run():
        holder["y"] = torch.softmax(t, dim=-1)

    ms = _median_ms(run, reps)
    torch.cuda.synchronize()
    y = holder.pop("y")[torch.from_numpy(sample).cuda()].float().cpu().numpy()
    del t
    torch.cuda.empty_cache()
    return ms, y


def _mem_compiled(mk: MemKernel):
    return sm.compiled(mk.source, mk.entry, tuple(sorted(mk.defines.items())), None)


def bench_mem_kernels(*, n=COPY_FLOATS, strides=STRIDES, transpose_shape=TRANSPOSE_SHAPE,
                      reps=20, seed=0) -> list[dict]:
    """Copies (scalar, float4), strided copies and the four transposes, each
    checked once for correctness, with copy baselines of the same buffers."""
    out = []
    rng = np.random.default_rng(seed)
    host = rng.standard_normal(n, dtype=np.float32)
    src = driver.to_device(host)
    dst = driver.empty((n,), np.float32)
    copy = measure_copy(4 * n, reps=reps, m=n, n=1)
    _progress(f"copy {4 * n >> 20} MiB: {copy['gbps']:.0f} GB/s")
    recs = []
    for name in ("mem_copy_scalar", "mem_copy_float4"):
        mk = mem_kernel(name)
        k = _mem_compiled(mk)
        g = copy_grid(mk, n)
        dst.fill_bytes(0xFF)
        ms = _median_ms(lambda: launch(k, g, mk.block, (src, dst, n)), reps)
        ok = bool(np.array_equal(dst.to_host(), host))
        recs.append(memory_record(name, "fp32", n, 1, ms, 8 * n, config=mk.lesson, correct=ok,
                                  **_kernel_hash(lambda: k)))
    mk = mem_kernel("mem_copy_strided")
    k = _mem_compiled(mk)
    for s in strides:
        count = n // s
        g = copy_grid(mk, count)
        dst.fill_bytes(0xFF)
        ms = _median_ms(lambda: launch(k, g, mk.block, (src, dst, count, s)), reps)
        got = dst.to_host()[: count * s: s]
        ok = bool(np.array_equal(got, host[: count * s: s]))
        recs.append(memory_record(f"mem_copy_strided_{s}", "fp32", count, s, ms, 8 * count,
                            config=f"stride {s}: {mk.lesson}", correct=ok, stride=s,
                            **_kernel_hash(lambda: k)))
    out.append(copy)
    out.extend(_with_copy(recs, copy))
    src.free()
    dst.free()

    rows, cols = transpose_shape
    a = rng.standard_normal((rows, cols), dtype=np.float32)
    da = driver.to_device(a)
    dt = driver.empty((cols, rows), np.float32)
    tcopy = measure_copy(4 * rows * cols, reps=reps, m=rows, n=cols)
    recs = []
    want = np.ascontiguousarray(a.T)
    g = transpose_grid(rows, cols)
    for mk in MEM_KERNELS:
        if not mk.name.startswith("mem_transpose"):
            continue
        k = _mem_compiled(mk)
        dt.fill_bytes(0xFF)
        ms = _median_ms(lambda: launch(k, g, mk.block, (da, dt, rows, cols)), reps)
        ok = bool(np.array_equal(dt.to_host(), want))
        variant = mk.name[len("mem_transpose_"):]
        extra = {}
        if variant != "naive":
            extra["smem_wavefronts"] = transpose_wavefronts(variant)
        recs.append(memory_record(mk.name, "fp32", rows, cols, ms, 8 * rows * cols,
                            config=mk.lesson, correct=ok, **extra, **_kernel_hash(lambda: k)))
    da.free()
    dt.free()
    out.append(tcopy)
    out.extend(_with_copy(recs, tcopy))
    return out


def run_memory_bench(*, softmax_shapes=SOFTMAX_SHAPES, precision="fp32", reps=20,
                     torch_baseline=True, ncu=True) -> list[dict]:
    """Everything ``drvgemm bench --memory`` reports: the access-pattern
    lessons, then the softmax ladder at ``softmax_shapes``. Where ncu is
    installed (and allowed to read the counters), the transposes' records
    gain the measured bank-conflict counts."""
    records = bench_mem_kernels(reps=reps)
    if ncu:
        counts = ncu_bank_conflicts()
        if counts:
            for r in records:
                if r["kernel"] in counts:
                    r["ncu"] = counts[r["kernel"]]
    records += bench_softmax(softmax_shapes, precision=precision, reps=reps,
                             torch_baseline=torch_baseline)
    return records


# ---------------------------------------------------------------------------
# the row-length suite (issue 18): kernel="auto" from 1 to 1,048,576 columns
# ---------------------------------------------------------------------------
LARGE_BYTES = 8 << 20     # shapes from here on are bandwidth-bound: judged by the copy ratio

# (rows, cols): many short rows, odd lengths (no 16-byte vector per row),
# vocabularies (32000, 50257, 128256, 151936) and a few very long rows; at
# most ~1.6 GB a buffer (fp32 8192 x 50257, the first row), the
# launch-bound shapes last.
SOFTMAX_ROW_SUITE = (
    (1048576, 1), (1048576, 2), (1048576, 3), (1048576, 8), (524288, 31), (262144, 33),
    (131072, 127), (100000, 128), (65536, 129), (65536, 256), (32768, 1000), (16384, 1024),
    (8192, 4096), (4096, 4097), (777, 12345), (2048, 16384), (2048, 32000), (8192, 50257),
    (1024, 50257), (1024, 128256), (512, 151936), (64, 262144), (16, 1048576), (4, 1048576),
    (1, 1048576), (65537, 7), (1, 1), (1, 1000), (128, 128), (8, 4096), (32, 50257),
    (3, 777777),
)
SUITE_PERIOD_BYTES = 4 << 20   # host data per shape: rows repeat with this period


def _tiled_input(rows, cols, precision, seed):
    """A rows x cols device array whose rows repeat a host pattern of at most
    SUITE_PERIOD_BYTES (filled on the device by doubling copies, so a 1.6 GB
    input costs the host 4 MiB of random numbers); returns (array, pattern)."""
    itemsize = sm_registry.element_bytes(precision)
    period = max(1, min(rows, SUITE_PERIOD_BYTES // (cols * itemsize)))
    pattern = softmax_inputs(period, cols, precision, seed)
    x = driver.empty((rows, cols), pattern.dtype)
    driver.DeviceArray((period, cols), pattern.dtype, ptr=x.ptr, owner=False).copy_from_host(
        pattern)
    done, row_bytes = period, cols * itemsize
    while done < rows:
        n = min(done, rows - done)
        driver.memcpy_dtod(x.ptr + done * row_bytes, x.ptr, n * row_bytes)
        done += n
    driver.synchronize()
    return x, pattern


def _call_us(fn, calls, sync):
    """Wall-clock microseconds per call of ``calls`` calls back to back (what a
    launch-bound shape costs its caller: host work included)."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def _rows_rel_err(y_rows, pattern, sample):
    return _max_rel_err(y_rows, sm.reference(pattern[sample % len(pattern)]))


ERR_BOUND = {"fp32": 1e-5, "bf16": 2.0 ** -7, "fp16": 2.0 ** -9}


# Back-to-back columns of the row suite: calls in batches of B2B_BATCH between two
# events (L2 flushed before each batch), cycling through copies of x and y so that
# a call's bytes are not in L2 from the call before; B2B_REPS batches of each,
# interleaved. softmax and the copy are timed twice each: called from Python (the
# copy ratio: like against like), and as one replay of a captured graph of a batch
# of the same calls -- their GPU rates back to back with no host call between,
# which a call of 8-16 MiB from Python does not reach (its host time is longer than
# its GPU time: bf16 4 x 1048576's copy read 6.7 and 9.1 us a call in two runs, 5.7
# from a graph).
B2B_BATCH = 20
B2B_REPS = 5


def rotating_buffers(x, nbytes, l2_bytes, batch=B2B_BATCH):
    """(xs, ys): copies of device array x (x itself first) and as many outputs
    of its shape, enough that a batch of calls cycling through them finds
    each call's operands last touched more than twice L2's size of traffic
    ago (``rotation_sets``). The caller frees xs[1:] and ys."""
    sets = rotation_sets(2 * nbytes, l2_bytes, batch)
    xs = [x] + [driver.empty(x.shape, x.dtype) for _ in range(sets - 1)]
    for xi in xs[1:]:
        driver.memcpy_dtod(xi, x, nbytes)
    return xs, [driver.empty(x.shape, x.dtype) for _ in range(sets)]


def _b2b_ms(x, nbytes, torch, l2_bytes, batch=B2B_BATCH, reps=B2B_REPS) -> dict:
    """{"softmax", "copy", "torch"}: ms a call of ``drvgemm.softmax(x_i,
    out=y_i)``, of the device copy x_i -> y_i and of torch.softmax(x_i), back
    to back as above; "softmax_graph", "copy_graph": the same calls replayed
    from a captured graph of a batch of them (missing where they could not be
    captured: "softmax_graph_error", "copy_graph_error" say why); "sets": how
    many (x_i, y_i) the calls cycle through."""
    xs, ys = rotating_buffers(x, nbytes, l2_bytes, batch)
    sets = len(xs)
    turns = itertools.cycle(range(sets))
    nxt = turns.__next__

    def soft():
        i = nxt()
        sm.softmax(xs[i], out=ys[i])

    def copy():
        i = nxt()
        driver.memcpy_dtod(ys[i], xs[i], nbytes)
    calls = {"softmax": soft, "copy": copy}
    if torch is not None:
        ts = [_torch_view(torch, xi) for xi in xs]

        def tsoft():
            torch.softmax(ts[nxt()], dim=-1)
        calls["torch"] = tsoft
    out = {}
    # how a column is timed: (enqueues a timed batch, calls an enqueue)
    timing = {name: (batch, 1) for name in calls}
    captured = []
    times = {name: [] for name in calls}
    try:
        soft()               # the plan and the split rung's workspace exist before a capture
        driver.synchronize()
        for name, call in (("softmax", soft), ("copy", copy)):
            try:
                g = _captured(call, batch)
            except Exception as e:   # what cannot be captured: the column without it
                out[f"{name}_graph_error"] = f"{type(e).__name__}: {e}"
                continue
            captured.append(g)
            # one replay (on the legacy stream, as the events) is a batch of calls
            calls[f"{name}_graph"] = lambda g=g: g.replay(0)
            timing[f"{name}_graph"] = (1, batch)
            times[f"{name}_graph"] = []
        for rep in range(reps):
            names = list(calls) if rep % 2 == 0 else list(calls)[::-1]
            for name in names:
                if name not in calls:
                    continue
                enqueues, each = timing[name]
                try:
                    ms = batch_median_ms(calls[name], enqueues, 1) / each
                except Exception as e:
                    if not name.endswith("_graph"):
                        raise
                    # a replay the driver refused: that column left out, with the reason
                    out[f"{name}_error"] = f"{type(e).__name__}: {e}"
                    del calls[name], times[name]
                    continue
                times[name].append(ms)
    finally:
        for g in captured:
            g.close()
        for a in xs[1:] + ys:
            a.free()
    out.update({name: sorted(t)[len(t) // 2] for name, t in times.items()})
    out["sets"] = sets
    return out


def _captured(call, n):
    """A drvgemm graph of ``n`` calls of ``call`` (captured on the graph's own
    stream, which ``stream=None`` means while it captures); closed (its stream
    too) when the capture fails."""
    g = graph()
    try:
        with g:
            for _ in range(n):
                call()
    except BaseException:
        g.close()
        raise
    return g


def bench_softmax_rows(shapes=SOFTMAX_ROW_SUITE, precisions=("fp32", "bf16"), *, reps=20,
                       calls=200, torch_baseline=True, seed=0) -> list[dict]:
    """drvgemm.softmax(kernel="auto") at every shape and precision, as a user
    calls it (device input, ``out=``, the public path with its plan cache),
    with the device copy of the same bytes and torch.softmax measured in the
    same run on the same data. Records (DESIGN "Benchmarks"): a ``copy`` and
    a ``torch_softmax`` baseline and the ``auto`` record with ``config`` (the
    chosen rung and constants), ``shape_class`` ("large": >= 8 MiB, else
    "small"), ``copy_fraction``, ``vs_torch`` (torch's time over auto's),
    ``call_us`` (wall-clock per call of back-to-back calls, auto and torch),
    ``max_rel_err`` on sampled rows, ``correct`` and ``sass_hash`` (the
    kernel's SASS digest, as in tests/data/sass_manifest.json). Each shape also
    back to back (``_b2b_ms``: the issue's "calls back to back", where a call's
    launch may overlap the one before): ``b2b_ms`` on the auto, copy and
    torch records (``b2b_graph_ms`` on auto's and the copy's: the calls
    replayed from a captured graph), ``copy_fraction_b2b`` (both called from
    Python), ``copy_fraction_b2b_graph`` (both from graphs) and
    ``vs_torch_b2b`` on auto's."""
    torch = torch_cuda() if torch_baseline else None
    dev = driver.device()
    l2 = int(getattr(dev, "l2_size", 0) or 60 << 20)
    out = []
    for precision in precisions:
        for rows, cols in shapes:
            nbytes = rows * cols * sm_registry.element_bytes(precision)
            large = nbytes >= LARGE_BYTES
            n_calls = calls if not large else max(5, min(calls, int(2e9 // max(nbytes, 1))))
            x, pattern = _tiled_input(rows, cols, precision, seed + cols)
            y = driver.empty((rows, cols), x.dtype)
            copy = measure_copy(nbytes, reps=reps, m=rows, n=cols, precision=precision)
            y.fill_bytes(0xFF)
            p = sm.plan(rows, cols, precision, cc=dev.cc, sm_count=dev.sm_count)

            def run():
                sm.softmax(x, out=y)

            ms = _median_ms(run, reps)
            sample = _sample_rows(rows, 8)
            got = np.stack([driver.DeviceArray((1, cols), x.dtype, owner=False,
                                               ptr=y.ptr + int(r) * cols * x.dtype.itemsize
                                               ).to_host()[0] for r in sample])
            err = _rows_rel_err(got, pattern, sample)
            us = _call_us(run, n_calls, driver.synchronize)
            rec = memory_record(p.rung, precision, rows, cols, ms, 2 * nbytes,
                                config=p.describe(), auto=True, max_rel_err=err,
                                correct=bool(err == err and err <= ERR_BOUND[precision]),
                                shape_class="large" if large else "small",
                                call_us=round(us, 2), predicted=p.predicted, why=p.note,
                                **_sass_hash(p))
            recs = [rec]
            if torch is not None:
                t = _torch_view(torch, x)
                hold = {}

                def trun():
                    hold["y"] = torch.softmax(t, dim=-1)

                tms = _median_ms(trun, reps)
                tus = _call_us(trun, n_calls, torch.cuda.synchronize)
                hold.clear()
                recs.append(memory_record("torch_softmax", precision, rows, cols, tms, 2 * nbytes,
                                          baseline=True, config="torch.softmax(dim=-1)",
                                          shape_class=rec["shape_class"],
                                          call_us=round(tus, 2)))
                rec["vs_torch"] = round(tms / ms, 3)
                rec["torch_call_us"] = round(tus, 2)
                del t
                torch.cuda.empty_cache()
            b2b = _b2b_ms(x, nbytes, torch, l2)
            rec.update(b2b_ms=round(b2b["softmax"], 5), rotation_sets=b2b["sets"],
                       copy_fraction_b2b=round(b2b["copy"] / b2b["softmax"], 4))
            copy["b2b_ms"] = round(b2b["copy"], 5)
            for r, name in ((rec, "softmax"), (copy, "copy")):
                if f"{name}_graph" in b2b:
                    r["b2b_graph_ms"] = round(b2b[f"{name}_graph"], 5)
                else:
                    r["b2b_graph_error"] = b2b[f"{name}_graph_error"]
                    print(f"  ({rows}x{cols} {precision}: {name} not captured, "
                          f"{b2b[f'{name}_graph_error']})", file=sys.stderr)
            if "softmax_graph" in b2b and "copy_graph" in b2b:
                rec["copy_fraction_b2b_graph"] = round(b2b["copy_graph"] / b2b["softmax_graph"], 4)
            if "torch" in b2b:
                recs[1]["b2b_ms"] = round(b2b["torch"], 5)
                rec["vs_torch_b2b"] = round(b2b["torch"] / b2b["softmax"], 3)
                torch.cuda.empty_cache()
            x.free()
            y.free()
            out.append(copy)
            out.extend(_with_copy(recs, copy))
            _progress(f"{precision} {rows}x{cols}: {rec['copy_fraction']:.3f} of copy"
                      + (f", {rec['vs_torch']:.2f}x torch" if "vs_torch" in rec else "")
                      + f" ({p.describe()})" + ("" if rec["correct"] else "  WRONG"))
    return out


def _sass_hash(p) -> dict:
    """{"sass_hash"} of the kernel plan ``p`` runs (the manifest's digest of
    its SASS), or {"sass_hash_error"} when it cannot be had (no nvdisasm)."""
    return _kernel_hash(lambda: sm.compiled_kernel(p))


def _kernel_hash(kernel) -> dict:
    """{"sass_hash"} of the compiled kernel ``kernel()`` gives, or
    {"sass_hash_error"} when it cannot be had (no nvdisasm)."""
    try:
        return {"sass_hash": kernel_sass_hash(kernel())}
    except Exception as e:  # the timing stands without it
        return {"sass_hash": None, "sass_hash_error": f"{type(e).__name__}: {e}"[:200]}


def _torch_view(torch, x):
    """A torch tensor over the same device memory as DeviceArray x (no copy),
    of x's shape (softmax runs along its last axis)."""
    if x.dtype == sm_registry.numpy_dtype("bf16"):
        u = torch.as_tensor(x.view(np.int16, x.shape), device="cuda")
        return u.view(torch.bfloat16)
    return torch.as_tensor(x, device="cuda")


def _geomean(xs):
    return math.exp(sum(math.log(v) for v in xs) / len(xs)) if xs else None


def softmax_rows_summary(records) -> dict:
    """Per precision, against the issue's targets: ``large`` (>= 8 MiB)
    shapes: min and geometric mean of the copy ratio, the shapes below 0.85 of
    copy and those not faster than torch; ``small`` shapes: the ones whose
    time per call is above torch's; every shape's geometric mean too."""
    out = {}
    autos = [r for r in records if r.get("auto")]
    for prec in sorted({r["precision"] for r in autos}):
        mine = [r for r in autos if r["precision"] == prec]
        large = [r for r in mine if r["shape_class"] == "large"]
        small = [r for r in mine if r["shape_class"] == "small"]
        ratio = [r["copy_fraction"] for r in large]
        vs = [r["vs_torch"] for r in large if "vs_torch" in r]
        out[prec] = {
            "shapes": len(mine), "large_shapes": len(large), "small_shapes": len(small),
            "min_copy_ratio_large": min(ratio) if ratio else None,
            "geomean_copy_ratio_large": round(_geomean(ratio), 4) if ratio else None,
            "geomean_copy_ratio_all": round(_geomean([r["copy_fraction"] for r in mine]), 4)
            if mine else None,
            "min_vs_torch_large": min(vs) if vs else None,
            "geomean_vs_torch_large": round(_geomean(vs), 4) if vs else None,
            "large_below_0.85_of_copy": [f"{r['m']}x{r['n']}" for r in large
                                         if r["copy_fraction"] < 0.85],
            "large_not_faster_than_torch": [f"{r['m']}x{r['n']}" for r in large
                                            if "vs_torch" in r and r["vs_torch"] <= 1.0],
            "small_slower_per_call_than_torch": [f"{r['m']}x{r['n']}" for r in small
                                                 if "torch_call_us" in r
                                                 and r["call_us"] > r["torch_call_us"]],
            "wrong": [f"{r['m']}x{r['n']}" for r in mine if not r.get("correct")],
        }
        b2b = [r["copy_fraction_b2b"] for r in large if "copy_fraction_b2b" in r]
        if b2b:
            vs2 = [r["vs_torch_b2b"] for r in large if "vs_torch_b2b" in r]
            out[prec].update({
                "min_copy_ratio_large_b2b": min(b2b),
                "geomean_copy_ratio_large_b2b": round(_geomean(b2b), 4),
                "large_below_0.85_of_copy_b2b": [f"{r['m']}x{r['n']}" for r in large
                                                 if r.get("copy_fraction_b2b", 1) < 0.85],
                "large_not_faster_than_torch_b2b": [f"{r['m']}x{r['n']}" for r in large
                                                    if r.get("vs_torch_b2b", 2) <= 1.0],
                "min_vs_torch_large_b2b": min(vs2) if vs2 else None,
            })
        graphs = [r["copy_fraction_b2b_graph"] for r in large if "copy_fraction_b2b_graph" in r]
        if graphs:
            # softmax and the copy both replayed from graphs: no host call between
            out[prec]["geomean_copy_ratio_large_b2b_graph"] = round(_geomean(graphs), 4)
    return out


def print_softmax_rows_report(records, summary=None, file=None):
    file = file or sys.stdout
    head = (f"{'shape':>14s} {'prec':4s} {'class':5s} {'of copy':>7s} {'vs torch':>8s} "
            f"{'b2b':>6s} {'us/call':>8s} {'torch':>8s}  config")
    print(head, file=file)
    print("-" * len(head), file=file)
    for r in records:
        if not r.get("auto"):
            continue
        vs = f"{r['vs_torch']:.2f}" if "vs_torch" in r else "-"
        tu = f"{r['torch_call_us']:.1f}" if "torch_call_us" in r else "-"
        b2 = f"{r['copy_fraction_b2b']:.3f}" if "copy_fraction_b2b" in r else "-"
        print(f"{r['m']:>7d}x{r['n']:<6d} {r['precision']:4s} {r['shape_class']:5s} "
              f"{r['copy_fraction']:7.3f} {vs:>8s} {b2:>6s} {r['call_us']:8.1f} {tu:>8s}  "
              f"{r['config']}"
              + ("" if r.get("correct") else "  WRONG RESULT"), file=file)
    summary = softmax_rows_summary(records) if summary is None else summary
    for prec, s in summary.items():
        print(f"{prec}: large shapes min {s['min_copy_ratio_large']} / geomean "
              f"{s['geomean_copy_ratio_large']} of copy, vs torch min {s['min_vs_torch_large']}; "
              f"below 0.85: {', '.join(s['large_below_0.85_of_copy']) or 'none'}; "
              f"small shapes slower per call than torch: "
              f"{', '.join(s['small_slower_per_call_than_torch']) or 'none'}", file=file)
        if "geomean_copy_ratio_large_b2b" in s:
            print(f"{prec} back to back: large shapes min {s['min_copy_ratio_large_b2b']} / "
                  f"geomean {s['geomean_copy_ratio_large_b2b']} of copy, vs torch min "
                  f"{s['min_vs_torch_large_b2b']}; below 0.85: "
                  f"{', '.join(s['large_below_0.85_of_copy_b2b']) or 'none'}"
                  + (f"; both from graphs: geomean "
                     f"{s['geomean_copy_ratio_large_b2b_graph']}"
                     if "geomean_copy_ratio_large_b2b_graph" in s else ""), file=file)


def run_softmax_rows(*, reps=20, torch_baseline=True, shapes=None,
                     precisions=("fp32", "bf16")) -> dict:
    """The suite's results object: device, records, summary (``shapes``:
    (rows, cols) pairs to measure instead of SOFTMAX_ROW_SUITE)."""
    recs = bench_softmax_rows(SOFTMAX_ROW_SUITE if shapes is None else shapes, precisions,
                              reps=reps, torch_baseline=torch_baseline)
    return {"records": recs, "summary": softmax_rows_summary(recs)}


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------
def print_memory_report(records, file=None):
    """One line per record: GB/s and the fraction of the copy bandwidth
    measured on the same bytes in the same run."""
    file = file or sys.stdout
    head = f"{'kernel':30s} {'shape':>16s} {'ms':>9s} {'GB/s':>8s} {'of copy':>8s}  notes"
    print(head, file=file)
    print("-" * len(head), file=file)
    for r in records:
        shape = f"{r['m']}x{r['n']}"
        frac = "" if r.get("baseline") and r["kernel"] == "copy" else \
            (f"{r['copy_fraction']:.3f}" if "copy_fraction" in r else "")
        notes = []
        if r["kernel"] == "copy":
            notes.append(f"baseline, {r['bytes'] / 2**30:.2f} GiB moved")
        if "max_rel_err" in r:
            e = r["max_rel_err"]
            notes.append("max rel err " + ("NaN" if e is None or e != e else f"{e:.1e}"))
        if r.get("auto"):
            notes.append("auto")
        if isinstance(r.get("max_active_clusters"), int):
            notes.append(f"{r['max_active_clusters']} clusters resident")
        if r.get("correct") is False:
            notes.append("WRONG RESULT")
        if "smem_wavefronts" in r:
            st, ld = r["smem_wavefronts"]
            notes.append(f"smem wavefronts/warp: store {st}, load {ld}")
        if "ncu" in r:
            notes.append("ncu bank conflicts: " +
                         ", ".join(f"{k} {v}" for k, v in sorted(r["ncu"].items())))
        if r["kernel"] not in ("copy",) and "config" in r and not r["kernel"].startswith("mem_"):
            notes.append(r["config"])
        print(f"{r['kernel']:30s} {shape:>16s} {r['median_ms']:9.4f} {r['gbps']:8.0f} "
              f"{frac:>8s}  {'; '.join(notes)}", file=file)
    for line in softmax_summary(records):
        print(line, file=file)


def softmax_summary(records) -> list[str]:
    """One line per softmax shape: what kernel='auto' runs, its fraction of
    the copy bandwidth and its speed relative to torch.softmax (the targets)."""
    lines = []
    shapes = []
    for r in records:
        key = (r["m"], r["n"], r["precision"])
        if r.get("auto") and key not in shapes:
            shapes.append(key)
    for m, n, prec in shapes:
        same = [r for r in records if (r["m"], r["n"], r["precision"]) == (m, n, prec)]
        auto = next(r for r in same if r.get("auto"))
        torch = next((r for r in same if r["kernel"] == "torch_softmax"), None)
        line = (f"softmax {m}x{n} {prec}: auto = {auto['kernel']} at "
                f"{auto.get('copy_fraction', float('nan')):.3f} of copy")
        if torch is not None:
            line += f", {torch['median_ms'] / auto['median_ms']:.2f}x the speed of torch.softmax"
        lines.append(line)
    return lines


# ---------------------------------------------------------------------------
# measured bank conflicts (Nsight Compute, where installed)
# ---------------------------------------------------------------------------
NCU_METRICS = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")


def ncu_bank_conflicts(rows=4096, cols=4096, *, timeout=300) -> dict | None:
    """Run the shared-memory transposes once each under ncu in a child
    process and return {kernel: {"ld": conflicts, "st": conflicts}}; None when
    ncu is missing or cannot read the counters (the reason goes to stderr)."""
    tool = ncu.find_ncu()
    if tool is None:
        return None
    cmd = [tool, "--csv", "--metrics", ",".join(NCU_METRICS), "--kernel-name",
           "regex:mem_transpose", sys.executable, "-m", "drvgemm.tools.memory_bench",
           "--transposes-once", str(rows), str(cols)]
    try:
        res = ncu.run(cmd, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        _progress(f"ncu: {e}")
        return None
    parsed = bank_conflicts_from_csv(res.stdout)
    if not parsed:
        tail = (res.stdout + res.stderr).strip().splitlines()[-3:]
        _progress("ncu gave no metrics: " + " | ".join(tail))
        return None
    return parsed


def bank_conflicts_from_csv(text: str) -> dict:
    """{kernel: {"ld": n, "st": n}} from ncu's details page."""
    out = {}
    for row in ncu.metric_rows(text):
        name = row.get("Kernel Name", "")
        metric = row.get("Metric Name", "")
        value = row.get("Metric Value", "").replace(",", "")
        if not name or metric not in NCU_METRICS:
            continue
        key = "ld" if metric.endswith("op_ld.sum") else "st"
        try:
            out.setdefault(name.split("(")[0].strip(), {})[key] = int(float(value))
        except ValueError:
            continue
    return out


def _transposes_once(rows: int, cols: int):
    a = driver.to_device(np.arange(rows * cols, dtype=np.float32).reshape(rows, cols))
    t = driver.empty((cols, rows), np.float32)
    for mk in MEM_KERNELS:
        if mk.name.startswith("mem_transpose_") and mk.name != "mem_transpose_naive":
            launch(_mem_compiled(mk), transpose_grid(rows, cols), mk.block, (a, t, rows, cols))
    driver.synchronize()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--transposes-once":
        _transposes_once(int(sys.argv[2]), int(sys.argv[3]))
    else:
        print("usage: python -m drvgemm.tools.memory_bench --transposes-once ROWS COLS\n"
              "(the softmax sweep: python -m drvgemm.tools.softmax_sweep)", file=sys.stderr)
        sys.exit(2)
