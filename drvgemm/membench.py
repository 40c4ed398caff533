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

import functools
import importlib
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

# By module path, not ``from . import softmax``: the package may bind the
# name ``drvgemm.softmax`` to the function, which shadows the submodule.
sm = importlib.import_module(__package__ + ".softmax")

__all__ = ["run_memory_bench", "bench_softmax", "bench_mem_kernels", "measure_copy",
           "sweep_softmax", "print_sweep_report",
           "print_memory_report", "smem_wavefronts", "transpose_wavefronts",
           "ncu_bank_conflicts", "MEM_KERNELS", "SOFTMAX_SHAPES"]

# The shapes of ANCHORS' torch table: square, very long rows, short rows.
SOFTMAX_SHAPES = ((16384, 16384), (4096, 131072), (65536, 1024), (1024, 65536))
COPY_FLOATS = 1 << 28                  # 1 GiB per buffer: far past the 60 MiB L2
TRANSPOSE_SHAPE = (8192, 8192)
STRIDES = (1, 2, 4, 8, 32)


def _progress(msg):
    print(msg, file=sys.stderr, flush=True)


def _gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def _record(kernel, precision, m, n, ms, nbytes, *, baseline=False, **extra):
    r = {"kernel": kernel, "precision": precision, "m": int(m), "n": int(n),
         "median_ms": round(ms, 5), "gbps": round(_gbps(nbytes, ms), 1),
         "bytes": int(nbytes), "baseline": baseline}
    if "max_rel_err" in extra:  # NaN (an output left unwritten) is not JSON: None
        e = extra["max_rel_err"]
        extra["max_rel_err"] = float(f"{e:.3g}") if e == e else None
    r.update(extra)
    return r


def _median_ms(fn, reps):
    from .timing import median_ms
    return median_ms(fn, warmup=3, reps=reps, flush_l2=True)


# ---------------------------------------------------------------------------
# the copy baseline
# ---------------------------------------------------------------------------
def measure_copy(nbytes: int, *, reps: int = 20, m=None, n=None, precision="fp32") -> dict:
    """Device-to-device copy of ``nbytes`` (cuMemcpyDtoDAsync), counted as
    2 * nbytes moved. The yardstick every other record is a fraction of."""
    from . import driver
    src = driver.empty((nbytes,), np.uint8).fill_bytes(0x3C)
    dst = driver.empty((nbytes,), np.uint8)
    try:
        ms = _median_ms(lambda: driver.memcpy_dtod(dst, src, nbytes), reps)
    finally:
        src.free()
        dst.free()
    return _record("copy", precision, m if m is not None else nbytes, n if n is not None else 1,
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
    """max |y - ref| / ref over entries that are normal fp32 numbers in the
    reference (below that, the output type's own spacing dominates)."""
    y = np.asarray(y).astype(np.float64)
    if np.isnan(y).any():
        return math.nan
    mask = ref > np.finfo(np.float32).tiny
    if not mask.any():
        return 0.0
    return float(np.max(np.abs(y[mask] - ref[mask]) / ref[mask]))


def softmax_inputs(rows, cols, precision="fp32", seed=0, scale=4.0):
    """Random normal rows (never zeros: zeros make every kernel's job trivial)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    x *= scale
    return x.astype(sm.numpy_dtype(precision), copy=False)


def bench_softmax(shapes=SOFTMAX_SHAPES, *, precision="fp32", kernels=None, reps=20,
                  torch_baseline=True, seed=0) -> list[dict]:
    """Every softmax rung (or ``kernels``) at every shape, with the copy
    baseline of the same bytes and torch.softmax where torch has CUDA.
    Rungs that cannot take a shape (the cluster rung off sm_90) are skipped."""
    from . import driver
    from .launch import launch
    cc = driver.device().cc
    names = list(kernels) if kernels else sm.kernels()
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
        auto = sm.plan(rows, cols, precision, cc=cc)
        for name in names:
            rung = sm.rung(name)
            if not rung.supports(cols, cc):
                continue
            k, p = sm.prepare(sm.plan(rows, cols, precision, kernel=name, cc=cc), rows)
            dy.fill_bytes(0xFF)  # NaN: an entry the kernel never writes shows up
            ms = _median_ms(lambda: launch(k, p.grid, p.block, (dx, dy, rows, cols), cluster=p.cluster,
                                           smem=p.smem), reps)
            err = _max_rel_err(dy.to_host()[sample], ref)
            rec = _record(name, precision, rows, cols, ms, 2 * elem_bytes,
                          config=p.describe(), max_rel_err=err,
                          auto=(p.entry, p.defines) == (auto.entry, auto.defines),
                          **_cluster_note(k, p))
            _progress(f"{name} {rows}x{cols}: {rec['gbps']:.0f} GB/s ({p.describe()})")
            recs.append(rec)
        if torch_baseline:
            t = _torch_softmax(x, sample, reps)
            if t is not None:
                ms, y = t
                recs.append(_record("torch_softmax", precision, rows, cols, ms, 2 * elem_bytes,
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
    from .optional import torch_cuda
    torch = torch_cuda()
    if torch is None:
        return None
    if x.dtype == sm.numpy_dtype("bf16"):
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


# Candidates around the registered configs at the three long-row shapes, to
# check (or re-tune) the registry on a new GPU: python -m drvgemm.membench --sweep
# Each is checked on the whole output before its time counts. The comment on
# a rung 06 line is the fraction of the copy bandwidth it was expected to
# reach on the H200 before it was first measured.
_05 = functools.partial(sm.SoftmaxConfig, "softmax_05_cluster", vector=True, arch="sm_90")
_P = sm.pipelined
SWEEP_CONFIGS = {
    16384: (
        sm.SoftmaxConfig("softmax_04_vectorized_rows", 512, 512, elems=32, min_blocks=2, vector=True),
        sm.SoftmaxConfig("softmax_04_vectorized_rows", 1024, 1024, elems=16, vector=True),
        _05(256, 256, elems=32, cluster=2, min_blocks=4),
        _05(512, 512, elems=16, cluster=2, min_blocks=3),
        _05(256, 256, elems=16, cluster=4, min_blocks=4),
        _P(512, 32, 1, 3),                              # ~0.97
        _P(512, 32, 1, 2),                              # ~0.96
        _P(1024, 16, 1, 3),                             # ~0.97
        _P(256, 64, 1, 1, min_blocks=2),                # ~0.96 (2 blocks per SM, one buffer each)
        _P(512, 16, 2, 6),                              # ~0.96
        sm.SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True),
        sm.SoftmaxConfig("softmax_04_vectorized_stream", 1024, 1024, unroll=2, vector=True),
    ),
    65536: (
        _05(512, 512, elems=32, cluster=4, min_blocks=2),
        _P(512, 32, 4, 3),                              # ~0.91 (the registered pick)
        _P(512, 32, 4, 2),                              # ~0.90
        _P(512, 16, 8, 6),                              # ~0.90
        _P(512, 16, 8, 4),                              # ~0.89
        _P(256, 32, 8, 3, min_blocks=2),                # ~0.91 (2 blocks per SM)
        _P(512, 8, 16, 8),                              # ~0.88 (non-portable cluster)
        _P(256, 16, 16, 6, min_blocks=2),               # ~0.89 (2 blocks per SM)
        sm.SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True),
    ),
    131072: (
        _05(512, 512, elems=32, cluster=8, min_blocks=2),
        _05(1024, 1024, elems=16, cluster=8),
        _P(512, 32, 8, 3),                              # ~0.94 (the registered pick)
        _P(512, 32, 8, 2),                              # ~0.92
        _P(512, 32, 8, 3, evict_first=True),            # ~0.94
        _P(1024, 16, 8, 3),                             # ~0.94
        _P(256, 64, 8, 3),                              # ~0.93
        _P(512, 32, 8, 1, min_blocks=2),                # ~0.93 (2 blocks per SM, one buffer each)
        _P(256, 64, 8, 1, min_blocks=2),                # ~0.92 (2 blocks per SM, one buffer each)
        _P(512, 16, 16, 6),                             # ~0.93 (non-portable cluster)
        _P(256, 32, 16, 3, min_blocks=2),               # ~0.93 (2 blocks per SM)
        sm.SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True),
        sm.SoftmaxConfig("softmax_04_vectorized_stream", 1024, 1024, unroll=4, vector=True),
    ),
}
SWEEP_SHAPES = ((4096, 131072), (1024, 65536), (16384, 16384))


def _whole_output_error(y) -> float:
    """Worst |row sum - 1| over every row of y (NaN if any entry is not
    finite): a row a persistent kernel skipped, or wrote twice with the wrong
    scale, shows up here even when the sampled rows are right."""
    if not np.isfinite(y).all():
        return math.nan
    return float(np.max(np.abs(y.sum(axis=1, dtype=np.float64) - 1.0)))


def sweep_softmax(shapes=SWEEP_SHAPES, configs=None, *, precision="fp32", reps=20,
                  seed=0) -> list[dict]:
    """Time explicit configs (default: SWEEP_CONFIGS for each shape's row
    length) on the same data, with the copy baseline: records as above,
    ``kernel`` = the entry, ``config`` = its constants, ``auto`` = the config
    kernel='auto' picks, ``correct`` = the sampled rows match the float64
    reference and every row sums to 1. A config that fails to compile or
    launch gets a record with ``error`` and no time."""
    from . import driver
    from .launch import launch
    cc = driver.device().cc
    out = []
    for rows, cols in shapes:
        cfgs = configs if configs is not None else SWEEP_CONFIGS.get(cols, ())
        x = softmax_inputs(rows, cols, precision, seed)
        nbytes = x.dtype.itemsize * rows * cols
        copy = measure_copy(nbytes, reps=reps, m=rows, n=cols, precision=precision)
        _progress(f"copy {rows}x{cols}: {copy['gbps']:.0f} GB/s")
        sample = _sample_rows(rows)
        ref = sm.reference(x[sample])
        auto = sm.plan(rows, cols, precision, cc=cc).config
        dx = driver.to_device(x)
        dy = driver.empty((rows, cols), x.dtype)
        recs = []
        for cfg in cfgs:
            if not cfg.fits(cols, cc):
                continue
            p = sm.config_plan(cfg, rows, cols, precision)
            try:
                k, p = sm.prepare(p, rows)
                dy.fill_bytes(0xFF)
                ms = _median_ms(lambda: launch(k, p.grid, p.block, (dx, dy, rows, cols), cluster=p.cluster,
                                               smem=p.smem), reps)
            except Exception as e:  # one bad candidate must not end the sweep
                msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                _progress(f"{p.describe()}: FAILED {msg}")
                recs.append({"kernel": cfg.entry, "precision": precision, "m": rows, "n": cols,
                             "config": p.describe(), "error": msg, "auto": cfg == auto})
                continue
            y = dy.to_host()
            err = _max_rel_err(y[sample], ref)
            whole = _whole_output_error(y)
            del y
            rec = _record(cfg.entry, precision, rows, cols, ms, 2 * nbytes,
                          config=p.describe(), registers=k.resources.registers,
                          smem_bytes=p.smem, max_rel_err=err,
                          row_sum_err=None if whole != whole else float(f"{whole:.3g}"),
                          correct=bool(err == err and err < 1e-5 and whole == whole
                                       and whole < 2e-5),
                          auto=cfg == auto, **_cluster_note(k, p))
            _progress(f"{rec['config']}: {rec['gbps']:.0f} GB/s"
                      + ("" if rec["correct"] else "  WRONG RESULT"))
            recs.append(rec)
        dx.free()
        dy.free()
        out.append(copy)
        out.extend(_with_copy([r for r in recs if "error" not in r], copy))
        out.extend(r for r in recs if "error" in r)
    return out


def print_sweep_report(records, file=None):
    """Per shape: the copy baseline, then every candidate fastest first, with
    its fraction of the copy, correctness, registers, shared memory and
    resident clusters; failures last."""
    file = file or sys.stdout
    shapes = []
    for r in records:
        if (r["m"], r["n"]) not in shapes:
            shapes.append((r["m"], r["n"]))
    for m, n in shapes:
        same = [r for r in records if (r["m"], r["n"]) == (m, n)]
        copy = next((r for r in same if r["kernel"] == "copy"), None)
        print(f"\n{m}x{n}" + (f": copy {copy['gbps']:.0f} GB/s ({copy['median_ms']:.4f} ms)"
                               if copy else ""), file=file)
        head = (f"  {'GB/s':>6} {'of copy':>7} {'ms':>8} {'ok':>3} {'regs':>4} {'smem KiB':>8} "
                f"{'resident':>8}  config")
        print(head, file=file)
        timed = sorted((r for r in same if r["kernel"] != "copy" and "gbps" in r),
                       key=lambda r: -r["gbps"])
        for r in timed:
            res = r.get("max_active_clusters")
            print(f"  {r['gbps']:6.0f} {r.get('copy_fraction', 0):7.3f} {r['median_ms']:8.4f} "
                  f"{'yes' if r.get('correct') else 'NO':>3} {r.get('registers', 0):4d} "
                  f"{r.get('smem_bytes', 0) / 1024:8.0f} {res if isinstance(res, int) else '-':>8}"
                  f"  {r['config']}{'  <- auto' if r.get('auto') else ''}", file=file)
        for r in same:
            if "error" in r:
                print(f"  {'FAILED':>6}  {r['config']}{'  <- auto' if r.get('auto') else ''}: "
                      f"{r['error']}", file=file)
        ok = [r for r in timed if r.get("correct")]
        if ok:
            best = ok[0]
            print(f"  best correct: {best['config']} at {best.get('copy_fraction', 0):.3f} of copy"
                  + ("" if best.get("auto") else "  (auto picks another)"), file=file)


# ---------------------------------------------------------------------------
# access-pattern lessons
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class MemKernel:
    name: str
    source: str
    entry: str
    block: tuple
    lesson: str
    items: int = 1          # elements per thread-item (float4 = 4)
    unroll: int = 4         # items per thread (the kernels' UNROLL default)


MEM_KERNELS = (
    MemKernel("mem_copy_scalar", "mem_01_copy.cu", "mem_copy_scalar", (256, 1, 1),
              "copy with 4-byte loads and stores"),
    MemKernel("mem_copy_float4", "mem_01_copy.cu", "mem_copy_float4", (256, 1, 1),
              "copy with 16-byte loads and stores (LDG.E.128)", items=4),
    MemKernel("mem_copy_strided", "mem_02_strided.cu", "mem_copy_strided", (256, 1, 1),
              "every stride-th float: whole 32-byte sectors for 4 useful bytes"),
    MemKernel("mem_transpose_naive", "mem_03_transpose.cu", "mem_transpose_naive", (32, 8, 1),
              "transpose: coalesced reads, writes 32 rows apart"),
    MemKernel("mem_transpose_smem", "mem_03_transpose.cu", "mem_transpose_smem", (32, 8, 1),
              "through a 32x32 smem tile: 32-way bank conflicts on the column read"),
    MemKernel("mem_transpose_padded", "mem_03_transpose.cu", "mem_transpose_padded", (32, 8, 1),
              "32x33 tile: the +1 spreads a column over all banks"),
    MemKernel("mem_transpose_swizzled", "mem_03_transpose.cu", "mem_transpose_swizzled",
              (32, 8, 1), "32x32 tile, column c of row r stored at c ^ r"),
)


def mem_kernel(name) -> MemKernel:
    for k in MEM_KERNELS:
        if k.name == name:
            return k
    raise ValueError(f"unknown memory kernel {name!r}")


def copy_grid(mk: MemKernel, n: int) -> tuple:
    """Blocks for n floats: each thread moves ``unroll`` items of ``items``
    floats; the float4 kernel's n % 4 tail rides on block 0."""
    per_block = mk.block[0] * mk.unroll
    return (max(1, -(-(n // mk.items) // per_block)), 1, 1)


def transpose_grid(rows: int, cols: int) -> tuple:
    return (-(-rows // 32) * -(-cols // 32), 1, 1)


def _mem_compiled(mk: MemKernel):
    return sm._compiled(mk.source, mk.entry, (), None)


def bench_mem_kernels(*, n=COPY_FLOATS, strides=STRIDES, transpose_shape=TRANSPOSE_SHAPE,
                      reps=20, seed=0) -> list[dict]:
    """Copies (scalar, float4), strided copies and the four transposes, each
    checked once for correctness, with copy baselines of the same buffers."""
    from . import driver
    from .launch import launch
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
        recs.append(_record(name, "fp32", n, 1, ms, 8 * n, config=mk.lesson, correct=ok))
    mk = mem_kernel("mem_copy_strided")
    k = _mem_compiled(mk)
    for s in strides:
        count = n // s
        g = copy_grid(mk, count)
        dst.fill_bytes(0xFF)
        ms = _median_ms(lambda: launch(k, g, mk.block, (src, dst, count, s)), reps)
        got = dst.to_host()[: count * s: s]
        ok = bool(np.array_equal(got, host[: count * s: s]))
        recs.append(_record(f"mem_copy_strided_{s}", "fp32", count, s, ms, 8 * count,
                            config=f"stride {s}: {mk.lesson}", correct=ok, stride=s))
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
        recs.append(_record(mk.name, "fp32", rows, cols, ms, 8 * rows * cols,
                            config=mk.lesson, correct=ok, **extra))
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
# shared-memory bank model
# ---------------------------------------------------------------------------
def smem_wavefronts(word_addresses, banks: int = 32) -> int:
    """Shared-memory wavefronts one warp-wide 4-byte access takes: the most
    distinct words any single bank must deliver (a word read by several
    lanes is broadcast, costing nothing extra). 1 = conflict-free."""
    per_bank = {}
    for w in word_addresses:
        per_bank.setdefault(w % banks, set()).add(w)
    return max(len(s) for s in per_bank.values())


def transpose_wavefronts(variant: str) -> tuple[int, int]:
    """(store, load) wavefronts per warp access in cu/mem_03_transpose.cu's
    shared-memory variants ('smem', 'padded', 'swizzled'), from the index
    formulas the kernels use: the warp stores tile row lr (lane tx -> column
    tx) and loads tile column lc (lane tx -> row tx)."""
    pitch = {"smem": 32, "padded": 33, "swizzled": 32}[variant]
    swz = variant == "swizzled"
    worst_st = worst_ld = 0
    for k in range(32):
        st = [k * pitch + ((tx ^ k) if swz else tx) for tx in range(32)]
        ld = [tx * pitch + ((k ^ tx) if swz else k) for tx in range(32)]
        worst_st = max(worst_st, smem_wavefronts(st))
        worst_ld = max(worst_ld, smem_wavefronts(ld))
    return worst_st, worst_ld


# ---------------------------------------------------------------------------
# measured bank conflicts (Nsight Compute, where installed)
# ---------------------------------------------------------------------------
NCU_METRICS = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")


def ncu_path() -> str | None:
    return shutil.which("ncu") or next(
        (p for p in ("/usr/local/cuda/bin/ncu",) if os.access(p, os.X_OK)), None)


def ncu_bank_conflicts(rows=4096, cols=4096, *, timeout=300) -> dict | None:
    """Run the shared-memory transposes once each under ncu in a child
    process and return {kernel: {"ld": conflicts, "st": conflicts}}; None when
    ncu is missing or cannot read the counters (the reason goes to stderr)."""
    tool = ncu_path()
    if tool is None:
        return None
    cmd = [tool, "--csv", "--metrics", ",".join(NCU_METRICS), "--kernel-name",
           "regex:mem_transpose", sys.executable, "-m", "drvgemm.membench",
           "--transposes-once", str(rows), str(cols)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        _progress(f"ncu: {e}")
        return None
    parsed = _parse_ncu_csv(res.stdout)
    if not parsed:
        tail = (res.stdout + res.stderr).strip().splitlines()[-3:]
        _progress("ncu gave no metrics: " + " | ".join(tail))
        return None
    return parsed


def _parse_ncu_csv(text: str) -> dict:
    import csv
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return {}
    rows = list(csv.DictReader(lines))
    out = {}
    for row in rows:
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
    from . import driver
    from .launch import launch
    a = driver.to_device(np.arange(rows * cols, dtype=np.float32).reshape(rows, cols))
    t = driver.empty((cols, rows), np.float32)
    for mk in MEM_KERNELS:
        if mk.name.startswith("mem_transpose_") and mk.name != "mem_transpose_naive":
            launch(_mem_compiled(mk), transpose_grid(rows, cols), mk.block, (a, t, rows, cols))
    driver.synchronize()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--transposes-once":
        _transposes_once(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 2 and sys.argv[1] == "--sweep":
        print_sweep_report(sweep_softmax())
    else:
        print("usage: python -m drvgemm.membench --sweep\n"
              "       python -m drvgemm.membench --transposes-once ROWS COLS", file=sys.stderr)
        sys.exit(2)
