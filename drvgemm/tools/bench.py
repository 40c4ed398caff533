"""``drvgemm bench``: every rung at every size, checked against a float64
reference and timed against cuBLAS in the same run, printed in the seed's
format and written as JSON in the DESIGN.md results format. With no GPU,
``drvgemm compile`` (cli/compile.py) lists what ptxas says about every
kernel instead; ``extra_kernels`` names the non-GEMM kernels it covers."""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from ..analysis.roofline import record_intensity, roofline_fraction, spec_for_device_name
from ..ladders.gemm.dispatch import device_arch_ok, gemm, input_dtype, rung
from ..ladders.gemm.registry import RUNGS, Rung, by_name
from ..ladders.memory import registry as memory_registry
from ..ladders.softmax import registry as softmax_registry
from ..runtime import driver
from ..runtime.errors import CudaError
from ..runtime.launch import launch_config
from ..runtime.timing import batch_median_ms, median_ms
from .cublas import gemmex_call, torch_matmul_call
from .optional import torch_cuda, why_not
from .records import gemm_record, results_json
from .shape_bench import plan_info

DEFAULT_SIZES = (256, 3072, 4096)


def _progress(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# inputs, reference, error
# ---------------------------------------------------------------------------
def make_inputs(precision, m, n, k, seed=0):
    """Random normal A and B in the rung's input type (never zeros: zeros
    hide unwritten outputs and can run faster than real data)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    dt = input_dtype(precision)
    return a.astype(dt), b.astype(dt)


def reference(a, b) -> np.ndarray:
    """A @ B in float64 from the (already rounded) inputs: on the GPU through
    torch when it is installed (a 4096^3 float64 product takes seconds on a
    CPU), else numpy."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    torch = torch_cuda()
    if torch is not None:
        return (torch.from_numpy(a64).cuda() @ torch.from_numpy(b64).cuda()).cpu().numpy()
    return a64 @ b64


def rel_rmse(c, ref) -> float:
    """sqrt(mean((C - ref)^2)) / sqrt(mean(ref^2)); NaN anywhere gives NaN."""
    c = np.asarray(c, np.float64)
    num = math.sqrt(float(np.mean((c - ref) ** 2)))
    den = math.sqrt(float(np.mean(ref ** 2))) or 1.0
    return num / den


def _reps_for(ms_estimate, budget_ms=400.0):
    return int(min(50, max(5, budget_ms / max(ms_estimate, 1e-3))))


# ---------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------
def bench_rung(r: Rung, m, n, k, A, B, ref, *, reps=None, narrow_output=False):
    """Time one rung on device operands A, B (C poisoned with NaN first).
    ``narrow_output``: C in the inputs' 16-bit type; the record's kernel is
    then "<rung>.<type>_out"."""
    c_dt = input_dtype(r.precision) if narrow_output else np.dtype(np.float32)
    C = driver.to_device(np.full((m, n), np.nan, np.float32).astype(c_dt))

    def run():
        gemm(A, B, C, alpha=1.0, beta=0.0, kernel=r.name)

    run()
    driver.synchronize()
    err = rel_rmse(C.to_host().astype(np.float32), ref)
    t0 = time.perf_counter()
    run()
    driver.synchronize()
    est = (time.perf_counter() - t0) * 1e3
    ms = median_ms(run, warmup=1, reps=reps or _reps_for(est))
    sass = instantiation_of(r, A, B, C)
    C.free()
    if narrow_output:
        return gemm_record(f"{r.name}.{r.precision}_out", r.precision, m, n, k, ms, err, False,
                           out=r.precision, **sass)
    return gemm_record(r.name, r.precision, m, n, k, ms, err, False, out="fp32", **sass)


def instantiation_of(r: Rung, A, B, C) -> dict:
    """{"instantiation", "sass_hash"} of what gemm(A, B, C, kernel=r.name)
    launched, so a reader can tell whether committed results belong to the
    kernels in the tree (the digest of tests/sass_manifest.py); the reason
    in "sass_hash_error" when it cannot be had (no nvdisasm)."""
    try:
        info = plan_info(A, B, C, r.precision, kernel=r.name)
    except Exception as e:
        return {"sass_hash": None, "sass_hash_error": f"{type(e).__name__}: {e}"[:200]}
    keep = ("instantiation", "sass_hash", "sass_hash_error", "split")
    return {key: info[key] for key in keep if key in info}


def _torch_timed(precision, a_host, b_host, ref, time_enqueue):
    """(ms, relative RMSE) of torch.matmul on these operands, its time
    from ``time_enqueue(enqueue, sync)``; None without torch."""
    call = torch_matmul_call(precision, a_host, b_host)
    if call is None:
        return None
    enqueue, result, sync, restore = call
    try:
        enqueue()
        err = rel_rmse(result(), ref)
        return time_enqueue(enqueue, sync), err
    finally:
        restore()


def bench_torch(precision, m, n, k, a_host, b_host, ref, *, reps=None):
    """cuBLAS through torch.matmul (TF32 off for fp32, on for tf32)."""
    def per_call(enqueue, sync):
        t0 = time.perf_counter()
        enqueue()
        sync()
        est = (time.perf_counter() - t0) * 1e3
        return median_ms(enqueue, warmup=2, reps=reps or _reps_for(est))

    timed = _torch_timed(precision, a_host, b_host, ref, per_call)
    if timed is None:
        return None
    ms, err = timed
    return gemm_record("cublas", precision, m, n, k, ms, err, True, via="torch.matmul",
                       out="fp32" if precision in ("fp32", "tf32") else precision)


def unless_it_fails(what, log, fn, *args):
    """``fn(*args)``, or None after logging why it failed: a sweep goes on
    past a candidate that cannot run (too much shared memory, a shape it
    refuses), but not past a CUDA fault, which leaves the context unusable."""
    try:
        return fn(*args)
    except CudaError:
        raise
    except Exception as e:
        log(f"  {what}: FAILED {type(e).__name__}: {e}")
        return None


def batch_time_launches(steps, C, ref, batch, reps) -> tuple[float, float]:
    """(ms a product, relative RMSE of C against ``ref``) of a product's
    launches ``steps`` ((kernel, LaunchConfig) pairs, e.g. Rung.launches):
    run once and checked, then timed as ``batch`` back-to-back products
    (runtime.timing.batch_median_ms) -- the benchmark scripts' sweeps."""
    def enqueue():
        for kernel, cfg in steps:
            launch_config(kernel, cfg)

    enqueue()
    driver.synchronize()
    err = rel_rmse(C.to_host().astype(np.float32), ref)
    return batch_median_ms(enqueue, batch, reps, driver.synchronize), err


def log_best_against_baseline(rows, log, label=""):
    """Log the fastest of ``rows`` (records of one shape) that is not the
    baseline, and the baseline's time over its own: the sweeps' per-shape
    summary line."""
    base = next((x for x in rows if x["baseline"]), None)
    best = min((x for x in rows if not x["baseline"]), key=lambda x: x["median_ms"],
               default=None)
    if best and base:
        log(f"  best{label}: {best['kernel']} split {best.get('split')}: "
            f"cuBLAS time / ours = {base['median_ms'] / best['median_ms']:.3f}")


def batch_time_torch(precision, m, n, k, a_host, b_host, ref, batch, reps):
    """cuBLAS through torch.matmul timed as batch_time_launches times a
    rung: a "cublas" record, or None without torch."""
    timed = _torch_timed(precision, a_host, b_host, ref,
                         lambda enqueue, sync: batch_median_ms(enqueue, batch, reps, sync))
    if timed is None:
        return None
    ms, err = timed
    return gemm_record("cublas", precision, m, n, k, ms, err, True, timing="batch",
                       tflops_digits=2, via="torch.matmul")


def bench_cublas_direct(precision, m, n, k, a_host, b_host, ref, *, reps=None, out_fp32=False):
    """cublasGemmEx through CuPy's bindings: 16-bit in, fp32 compute, output
    in the input type (the call a Hopper kernel is measured against), or in
    fp32 with ``out_fp32`` (the same work as a rung writing a float32 C)."""
    if precision not in ("bf16", "fp16"):
        return None
    call = gemmex_call(precision, m, n, k, a_host, b_host, out_fp32)
    if call is None:
        return None
    enqueue, result, sync, name, out, stream = call
    enqueue()
    err = rel_rmse(result(), ref)
    ms = median_ms(enqueue, warmup=2, reps=reps or 20, stream=stream)
    return gemm_record(name, precision, m, n, k, ms, err, True, via="cupy cublasGemmEx", out=out)


def bench_cublas_direct_f32out(precision, m, n, k, a_host, b_host, ref, *, reps=None):
    return bench_cublas_direct(precision, m, n, k, a_host, b_host, ref, reps=reps, out_fp32=True)


# ---------------------------------------------------------------------------
def run_bench(kernels=None, sizes=DEFAULT_SIZES, *, baseline=True, reps=None,
              progress=_progress) -> dict:
    """Benchmark the given rungs (default: all that run on this device) at
    square sizes; returns the DESIGN.md results dict."""
    dev = driver.device()
    rungs = [rung(k) for k in kernels] if kernels else [r for r in RUNGS if device_arch_ok(r)]
    precisions = sorted({r.precision for r in rungs}, key=["fp32", "tf32", "fp16", "bf16"].index)
    records = []
    total = len(rungs) * len(sizes)
    done = 0
    for size in sizes:
        m = n = k = int(size)
        for prec in precisions:
            a, b = make_inputs(prec, m, n, k, seed=size)
            ref = reference(a, b)
            A, B = driver.to_device(a), driver.to_device(b)
            for r in [r for r in rungs if r.precision == prec]:
                done += 1
                # Rungs that can write C in the inputs' type run both ways.
                for narrow in ((False, True) if r.narrow_output else (False,)):
                    what = f"{r.name}{f' ({prec} C)' if narrow else ''}"
                    progress(f"[{done}/{total}] {what} {m}x{n}x{k} ...")
                    try:
                        rec = bench_rung(r, m, n, k, A, B, ref, reps=reps, narrow_output=narrow)
                    except Exception as e:  # report and go on: one broken rung must not hide the rest
                        progress(f"    {what} failed: {type(e).__name__}: {e}")
                        if isinstance(e, CudaError) and "ILLEGAL" in e.name:
                            raise
                        continue
                    records.append(rec)
                    progress(f"    {rec['median_ms']:.3f} ms, {rec['tflops']:.2f} TFLOP/s, "
                             f"rel. RMSE {rec['rel_rmse']}")
            if baseline:
                for fn in (bench_torch, bench_cublas_direct, bench_cublas_direct_f32out):
                    try:
                        rec = fn(prec, m, n, k, a, b, ref, reps=reps)
                    except Exception as e:
                        progress(f"    baseline {fn.__name__} failed: {e}")
                        rec = None
                    if rec:
                        records.append(rec)
                        progress(f"    {rec['kernel']} ({rec['via']}): {rec['tflops']:.2f} TFLOP/s")
            A.free()
            B.free()
    return results_json(dev, records)


def roofline_measured(ceilings: dict) -> dict:
    """The measured figures the roofline uses: the FFMA peak and the copy
    bandwidth. Tensor-core roofs stay at the datasheet's dense peaks, which
    only wgmma reaches: the mma.sync ceilings are recorded but are not the
    device's roof (the Hopper rung runs above them)."""
    return {k: v for k, v in ceilings.items() if k in ("fp32", "dram_bw")}


def annotate_roofline(results: dict, ceilings: dict) -> None:
    """Add to every GEMM record its operational intensity (FLOP per byte its
    tiling moves through DRAM) and its fraction of the roofline bound there."""
    spec = spec_for_device_name(results["device"]["name"])
    if spec is None:
        return
    spec = spec.with_measured(roofline_measured(ceilings))
    registry = by_name()
    for rec in results["records"]:
        if rec.get("tflops") is None:
            continue
        oi = record_intensity(rec, registry.get(rec["kernel"]))
        rec["oi"] = round(oi, 2)
        rec["roofline_fraction"] = round(roofline_fraction(rec["tflops"] * 1e12, oi, spec,
                                                           rec["precision"]), 4)


def format_report(results: dict) -> str:
    """The seed's report: per rung and size, correctness, run time and
    throughput; the speedups along the ladder on the largest size; and each
    rung's share of cuBLAS at that precision and size."""
    recs = results["records"]
    lines = []
    base = {(r["precision"], r["m"], r["n"], r["k"]): r for r in recs
            if r["baseline"] and r["kernel"] == "cublas"}
    best_base = {}
    for r in recs:
        if r["baseline"]:
            key = (r["precision"], r["m"], r["n"], r["k"])
            if key not in best_base or r["median_ms"] < best_base[key]["median_ms"]:
                best_base[key] = r
    names = []
    for r in recs:
        if r["kernel"] not in names:
            names.append(r["kernel"])
    for name in names:
        rs = [r for r in recs if r["kernel"] == name]
        lines.append(f"{name}" + (f" ({rs[0]['precision']})" if rs else "") + ":")
        lines.append("")
        for r in rs:
            err = "nan" if r["rel_rmse"] is None else f"{r['rel_rmse']:.2e}"
            lines.append(f"  size {r['m']:4d} * {r['n']:4d} * {r['k']:4d}:")
            lines.append(f"    correctness: {err} relative RMSE")
            lines.append(f"    run time: {r['median_ms']:7.3f} ms")
            tail = ""
            b = best_base.get((r["precision"], r["m"], r["n"], r["k"]))
            if b is not None and not r["baseline"]:
                tail = f"  ({100 * b['median_ms'] / r['median_ms']:.1f}% of {b['kernel']})"
            lines.append(f"    throughput: {r['tflops']:6.2f} TFLOP/s{tail}")
            if "oi" in r:
                note = (" (above the DRAM slope: L2 serves part of the tiles' re-reads)"
                        if r["roofline_fraction"] > 1 else "")
                lines.append(f"    roofline: {r['oi']:.1f} FLOP/B moved, "
                             f"{100 * r['roofline_fraction']:.1f}% of the bound there{note}")
            lines.append("")
    # speedups on the largest size, step by step along each precision's ladder
    for prec in ["fp32", "tf32", "fp16", "bf16"]:
        rs = [r for r in recs if r["precision"] == prec and not r["baseline"]]
        if len(rs) < 2:
            continue
        big = max(r["m"] * r["n"] * r["k"] for r in rs)
        ladder = [r for r in rs if r["m"] * r["n"] * r["k"] == big]
        lines.append(f"speedups on largest problem size ({prec}, "
                     f"{ladder[0]['m']}x{ladder[0]['n']}x{ladder[0]['k']}):")
        lines.append("")
        for x, y in zip(ladder, ladder[1:]):
            lines.append(f"  speedup {x['kernel']} -> {y['kernel']}: "
                         f"{x['median_ms'] / y['median_ms']:.2f}x")
        lines.append("")
    if not base:
        lines.append(f"cuBLAS baseline: not measured ({why_not('torch')})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# compile-only report (no GPU needed)
# ---------------------------------------------------------------------------
def extra_kernels():
    """(label, source, entry, defines, arch) of the non-GEMM kernels, from the
    modules that own them."""
    out = [("saxpy", "saxpy.cu", "saxpy", {}, None),
           ("saxpy_ptx", "saxpy.ptx", "saxpy_ptx", {}, None),
           ("scale_c", "scale.cu", "scale_c", {}, None)]
    out += softmax_registry.catalogue() + memory_registry.catalogue()
    return out
