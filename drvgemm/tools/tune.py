"""``drvgemm tune``: time the dispatcher's best-ranked candidates for one
product on this GPU and store the fastest in the device's winners file
(drvgemm/ladders/gemm/tuned.py), which kernel="auto" then prefers for that
exact signature.

Each candidate (a rung and a split of K, the model's top ``top``) runs on
the same fresh operands: its launches built by the rung's host side, a
warm-up, then ``rounds`` interleaved rounds of ``calls`` launches between
two events (the median per call). Every candidate's C is compared with the
model's first choice: one that disagrees (relative RMS difference above the
input type's tolerance) is reported and never stored."""
from __future__ import annotations

import math
import statistics

import numpy as np

from ..ladders.gemm import dispatch, plan as planning, tuned
from ..ladders.gemm.dispatch import input_dtype
from ..ladders.gemm.registry import by_name, rung_kernel
from ..runtime import driver, dtypes
from ..runtime.launch import launch_config

__all__ = ["tune", "parse_option"]

TOLERANCE = {"fp32": 1e-5, "tf32": 2e-3, "bf16": 2e-2, "fp16": 2e-3}


def parse_option(name: str) -> tuple:
    """'20_tma_wgmma_bf16_128x128/split=3' -> (rung name, 3)."""
    base, _, split = name.partition("/split=")
    return base, int(split) if split else 1


def _ranked(m, n, k, precision, out, beta_reads_c, top, t) -> list:
    p = planning.choose(m, n, k, precision, out=out, beta_reads_c=beta_reads_c, t=t)
    names = [f"{p.kernel}/split={p.split}" if p.split > 1 else p.kernel]
    names += [name for name, _ in p.alternatives]
    seen, ranked = set(), []
    for nm in names:
        key = parse_option(nm)
        if key not in seen:
            seen.add(key)
            ranked.append(key)
        if len(ranked) >= top:
            break
    return p, ranked


def _time(launches, calls, rounds_ms):
    start, end = driver.Event(), driver.Event()
    start.record()
    for _ in range(calls):
        for kern, cfg in launches:
            launch_config(kern, cfg)
    end.record()
    end.synchronize()
    rounds_ms.append(start.elapsed_ms(end) / calls)


def tune(m: int, n: int, k: int, *, precision: str = "bf16", out: str = "fp32",
         beta: float = 0.0, top: int = 4, calls: int = 30, rounds: int = 5,
         progress=print) -> dict:
    """Measure, store and return the winner's entry for one product."""
    if not driver.has_gpu():
        raise RuntimeError(f"drvgemm tune measures on this GPU: {driver.no_gpu_reason()}")
    if min(m, n, k) < 1:
        raise ValueError(f"M, N, K must be >= 1 to tune, got {m}, {n}, {k}")
    t = dispatch._target()
    beta_reads_c = beta != 0
    model, ranked = _ranked(m, n, k, precision, out, beta_reads_c, max(1, top), t)
    in_prec = "fp32" if precision == "tf32" else precision
    dt = input_dtype(in_prec)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32).astype(dt)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32).astype(dt)
    c_dt = np.float32 if out == "fp32" else dtypes.numpy_dtype(out)
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32).astype(c_dt)
    A, B = driver.to_device(a), driver.to_device(b)
    rungs = by_name()
    entries = []
    for name, split in ranked:
        r = rungs[name]
        host = r.host_side
        C = driver.to_device(c0)
        ws = driver.to_device(np.zeros(max(1, -(-r.workspace_bytes(m, n, split) // 4)),
                                       np.float32))
        aligned = host.aligned(r, m, n, k, A.ptr, B.ptr, C.ptr)
        kern = rung_kernel(r, aligned, narrow_output=out != "fp32",
                           split_k=host.split_k_build(r, k, split))
        steps = r.launches(kern, A, B, C, m, n, k, 1.0, beta, narrow_output=out != "fp32",
                           split=split, workspace=ws)
        for kk, cfg in steps:                       # warm-up, and the result to compare
            launch_config(kk, cfg)
        driver.synchronize()
        entries.append({"kernel": name, "split": split, "steps": steps, "c": C, "ws": ws,
                        "result": C.to_host().astype(np.float64), "rounds": []})
    ref = entries[0]["result"]
    scale = math.sqrt(float(np.mean(ref ** 2))) or 1.0
    tol = TOLERANCE[precision] * (4.0 if out != "fp32" else 1.0)
    for e in entries:
        e["rel_diff"] = math.sqrt(float(np.mean((e["result"] - ref) ** 2))) / scale
        e["ok"] = e["rel_diff"] <= tol
    live = [e for e in entries if e["ok"]]
    for i in range(rounds):
        for e in live[i % len(live):] + live[:i % len(live)]:
            _time(e["steps"], calls, e["rounds"])
    for e in live:
        e["ms"] = statistics.median(e["rounds"])
    for e in entries:
        label = e["kernel"] + (f"/split={e['split']}" if e["split"] > 1 else "")
        if e["ok"]:
            progress(f"  {label:44s} {e['ms'] * 1e3:9.2f} us")
        else:
            progress(f"  {label:44s} disagrees with the model's choice (rel. diff "
                     f"{e['rel_diff']:.2g}): not stored")
    best = min(live, key=lambda e: e["ms"])
    first = entries[0]
    entry = {"kernel": best["kernel"], "split": best["split"], "ms": round(best["ms"], 6),
             "model_choice": f"{model.kernel}/split={model.split}",
             "model_choice_ms": round(first["ms"], 6) if first["ok"] else None,
             "candidates": {e["kernel"] + f"/split={e['split']}": round(e["ms"], 6)
                            for e in live},
             "calls": calls, "rounds": rounds}
    path = dispatch.tuned_file()
    if path is None:
        raise RuntimeError("the cache is off (DRVGEMM_NO_CACHE): there is no place to store "
                           "the winner")
    dev = driver.device()
    tuned.record(path, dev.name, tuned.signature(m, n, k, precision, out, beta_reads_c), entry)
    dispatch.clear_plan_cache()        # auto takes the new winner from the next call on
    entry["file"] = str(path)
    return entry
