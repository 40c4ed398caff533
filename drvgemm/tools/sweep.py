"""One sweep harness for candidate kernel configurations: compile the
variants in a process pool (resources checked: no spills, no stack), check
each once against a reference, then time the survivors round-robin in paired
rounds next to a baseline (cuBLAS), and report ratios and JSON records.

A sweep script is a variant table (data) and a thin main:

    compiled = compile_all(jobs)                  # [CompileJob] -> [resources dict]
    ok, why = resources_ok(res, allow_spill=False)
    entries = [Entry(name, enqueue, ...), ...]    # variants and baselines
    round_robin(entries, rounds, measure_batch(batch, reps))
    recs = ratio_records(entries, m, n, k, precision)
    print(format_table(recs, title)); write_results(path, dev, recs)

The pairing: in round r every live entry is timed once, in an order rotated
by r, so the entries of one round were measured within moments of each
other; an entry's ratio to the best baseline is taken per round (the drift of
clocks and temperature over a run cancels in it) and reported as the median
and range over the rounds, next to the ratio of the medians."""
from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence

from ..runtime.compiler import compile_binary, parse_resources
from ..runtime.timing import batch_median_ms
from .records import device_json, gemm_record, write_json

__all__ = ["CompileJob", "compile_job", "compile_all", "resources_ok", "Entry", "round_robin",
           "measure_batch", "paired_ratios", "geomean", "ratio_records", "format_table",
           "check_isolated", "child_checks", "STICKY", "is_sticky", "write_results", "log"]

# Errors after which the context is unusable: stop (or start a new process).
STICKY = ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED",
          "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_MISALIGNED_ADDRESS",
          "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_ASSERT")


def is_sticky(exc) -> bool:
    return getattr(exc, "name", "") in STICKY


def log(msg=""):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# 1. compile
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CompileJob:
    key: object             # what the caller calls this instantiation
    source: str
    entry: str
    defines: dict | None
    arch: str | None
    options: tuple = ()


def compile_job(job: CompileJob) -> dict:
    """Worker: compile one instantiation exactly as the registry does (same
    defines, arch and options, so the parent then hits the disk cache) and
    return ptxas's resource figures, or {"error": ...}; never raises."""
    t = time.time()
    try:
        b = compile_binary(job.source, job.entry, defines=job.defines, arch=job.arch,
                           options=tuple(job.options))
    except Exception as e:   # report, never raise across the pool
        return {"error": f"{type(e).__name__}: {e}"[:2000]}
    res = parse_resources(b.log).get(b.entry)
    if res is None:
        return {"error": f"no ptxas resource report for {b.entry} in the compile log: "
                         f"{b.log.strip()[:300]!r}"}
    low = b.log.lower()
    return {"registers": res.registers, "spills": res.spill_stores + res.spill_loads,
            "stack": res.stack,
            "serialized": "serializ" in low or "c7508" in low or "c7512" in low,
            "seconds": round(time.time() - t, 2)}


def compile_all(jobs: Sequence[CompileJob], worker: Callable = compile_job,
                processes: int | None = None) -> list[dict]:
    """``worker(job)`` for every job, in spawned processes (NVRTC holds the
    interpreter while it compiles), in order; serially if the pool fails."""
    jobs = list(jobs)
    if not jobs:
        return []
    workers = max(1, min(len(jobs), processes or os.cpu_count() or 2))
    if workers > 1:
        try:
            with ProcessPoolExecutor(workers,
                                     mp_context=multiprocessing.get_context("spawn")) as ex:
                return list(ex.map(worker, jobs))
        except Exception as e:
            log(f"  parallel compile failed ({type(e).__name__}: {e}); compiling in turn")
    return [worker(j) for j in jobs]


def resources_ok(res: dict, *, allow_spill=False, registers: int | None = None):
    """(ok, why) for a compile_job result: no error, no spills or stack
    (unless ``allow_spill``), wgmma not serialised, and exactly ``registers``
    at entry when given (the setmaxnreg budget of a warp-specialised kernel)."""
    if "error" in res:
        return False, res["error"].splitlines()[0] if res["error"] else "compile failed"
    if (res.get("spills") or res.get("stack")) and not allow_spill:
        return False, f"spills {res['spills']} B, stack {res['stack']} B"
    if res.get("serialized"):
        return False, "ptxas serialised the wgmmas or ignored setmaxnreg"
    if registers is not None and res.get("registers") != registers:
        return False, f"{res.get('registers')} registers at entry (needs {registers})"
    return True, f"{res.get('registers')} regs"


# ---------------------------------------------------------------------------
# 2. checks in a child process (a variant that faults cannot take the rest down)
# ---------------------------------------------------------------------------
def child_checks(items: list, check: Callable[[object], tuple]) -> int:
    """In the child: print {"ready": true}, then one JSON line per item
    ({"key", "ok", "detail"}) as soon as it is known; exit 3 after an error
    that loses the context (the parent restarts the rest)."""
    print(json.dumps({"ready": True}), flush=True)
    for item in items:
        key = item["key"]
        try:
            ok, detail = check(item)
        except Exception as e:
            print(json.dumps({"key": key, "ok": False,
                              "detail": f"{getattr(e, 'name', type(e).__name__)}: {e}"[:500]}),
                  flush=True)
            if is_sticky(e):
                sys.exit(3)
            continue
        print(json.dumps({"key": key, "ok": bool(ok), "detail": str(detail)}), flush=True)
    return 0


def check_isolated(argv: list[str], items: list, timeout=300, run=subprocess.run) -> dict:
    """Run ``argv`` (a script that calls child_checks on the JSON list it
    reads from stdin) over ``items`` (dicts with a "key"), restarting after a
    crash without the item that caused it: {key: (ok, detail)}."""
    results = {}
    todo = list(items)
    while todo:
        try:
            proc = run(argv, input=json.dumps(todo), capture_output=True, text=True,
                       timeout=timeout)
            stdout, rc, err = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc, err = -1, "timed out"
        ready = False
        for line in stdout.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("ready"):
                ready = True
            elif "key" in rec:
                results[_key(rec["key"])] = (rec["ok"], rec["detail"])
        remaining = [t for t in todo if _key(t["key"]) not in results]
        last = ((err or "").strip().splitlines() or ["?"])[-1][:300]
        if not ready:   # the child failed before checking anything: no item is to blame
            for t in remaining:
                results[_key(t["key"])] = (False, f"check not run: {last}")
            remaining = []
        elif remaining and rc != 0:   # the first unanswered item crashed (or hung) it
            results[_key(remaining[0]["key"])] = (False, f"child exited {rc}: {last}")
            remaining = remaining[1:]
        elif remaining:
            for t in remaining:
                results[_key(t["key"])] = (False, "no answer from the check")
            remaining = []
        todo = remaining
    return results


def _key(k):
    return tuple(k) if isinstance(k, list) else k


# ---------------------------------------------------------------------------
# 3. paired round-robin timing
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class Entry:
    """One thing timed: a variant or a baseline. ``enqueue()`` enqueues one
    call; ``sync()`` waits for it; ``meta`` goes into its record."""
    name: str
    enqueue: Callable
    baseline: bool = False
    sync: Callable | None = None
    result: Callable | None = None      # -> host array, for the reference check
    meta: dict = dataclasses.field(default_factory=dict)
    cleanup: Callable | None = None
    rounds: list = dataclasses.field(default_factory=list)
    error: str | None = None
    err: float | None = None            # relative RMSE against the reference

    @property
    def median(self) -> float | None:
        return statistics.median(self.rounds) if self.rounds else None


def measure_batch(batch: int, reps: int) -> Callable[[Entry], float]:
    """A measure for round_robin: the median over ``reps`` batches of
    ``batch`` back-to-back calls between two events (L2 flushed before each
    batch), per call, in ms."""
    def measure(e: Entry) -> float:
        return batch_median_ms(e.enqueue, batch, reps, e.sync)
    return measure


def round_robin(entries: Sequence[Entry], rounds: int, measure: Callable[[Entry], float], *,
                progress: Callable | None = None) -> None:
    """``rounds`` rounds; in round r each live entry (no error yet) is
    measured once, the order rotated by r, and the time appended to its
    ``rounds``. An entry whose measure raises gets ``error`` and sits out the
    rest; an error that loses the context is raised."""
    for r in range(rounds):
        live = [e for e in entries if e.error is None]
        if not live:
            return
        shift = r % len(live)
        for e in live[shift:] + live[:shift]:
            try:
                e.rounds.append(float(measure(e)))
            except Exception as ex:
                e.error = f"timing failed: {type(ex).__name__}: {ex}"[:500]
                if progress:
                    progress(f"  {e.name}: {e.error}")
                if is_sticky(ex):
                    raise


def paired_ratios(base_rounds: Sequence[float], rounds: Sequence[float]) -> list[float]:
    """Per round, baseline time / entry time (> 1: the entry is faster)."""
    return [b / x for b, x in zip(base_rounds, rounds) if x > 0 and b > 0]


def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def best_baseline(entries: Sequence[Entry]) -> Entry | None:
    timed = [e for e in entries if e.baseline and e.rounds and e.error is None]
    return min(timed, key=lambda e: e.median, default=None)


def ratio_records(entries: Sequence[Entry], m, n, k, precision, *, timing="batch, round-robin"):
    """DESIGN.md records for the timed entries, the variants' with
    ``vs_best_cublas`` (ratio of medians), ``vs_best_cublas_paired`` (median
    of the per-round ratios) and its range; entries that failed get a record
    with their ``error``."""
    recs = []
    best = best_baseline(entries)
    for e in entries:
        if e.error is not None or not e.rounds:
            recs.append({"kernel": e.name, "precision": precision, "m": int(m), "n": int(n),
                         "k": int(k), "median_ms": None, "tflops": None,
                         "baseline": e.baseline, "error": e.error or "not timed", **e.meta})
            continue
        ms = e.median
        rec = gemm_record(e.name, precision, m, n, k, ms, e.err, e.baseline, timing=timing,
                          round_ms=[round(x, 5) for x in e.rounds],
                          spread=round((max(e.rounds) - min(e.rounds)) / ms, 4), **e.meta)
        if best is not None and not e.baseline:
            rec["vs_best_cublas"] = round(best.median / ms, 4)
            rec["best_cublas"] = f"{best.name} ({best.meta.get('via')}, out {best.meta.get('out')})"
            ratios = paired_ratios(best.rounds, e.rounds)
            if ratios:
                rec["vs_best_cublas_paired"] = round(statistics.median(ratios), 4)
                rec["paired_range"] = [round(min(ratios), 4), round(max(ratios), 4)]
        recs.append(rec)
    return recs


def format_table(recs, title: str, label: Callable | None = None) -> str:
    """Records fastest first: time, TFLOP/s, ratio to the best baseline
    (medians and paired), the prediction, the spread of the rounds."""
    label = label or (lambda r: r.get("variant") or f"{r['kernel']} [{r.get('via')}, "
                                                   f"out {r.get('out')}]")
    lines = [title, f"  {'entry':40s} {'ms':>8s} {'TFLOP/s':>8s} {'vs best':>8s} "
                    f"{'paired':>19s} {'pred':>6s} {'spread':>7s}  rel.RMSE"]
    timed = sorted((r for r in recs if r.get("median_ms")), key=lambda r: r["median_ms"])
    for r in timed:
        vs = f"{r['vs_best_cublas']:.3f}" if "vs_best_cublas" in r else "base"
        paired = (f"{r['vs_best_cublas_paired']:.3f} [{r['paired_range'][0]:.3f}-"
                  f"{r['paired_range'][1]:.3f}]" if "vs_best_cublas_paired" in r else "")
        pred = r.get("predicted_tflops")
        lines.append(f"  {label(r)[:40]:40s} {r['median_ms']:8.4f} {r['tflops']:8.1f} {vs:>8s} "
                     f"{paired:>19s} {pred if pred is not None else '':>6} "
                     f"{100 * r['spread']:6.1f}%  {r.get('rel_rmse')}")
    for r in recs:
        if not r.get("median_ms"):
            lines.append(f"  {label(r)[:40]:40s} not timed: {r.get('error')}")
    return "\n".join(lines)


def write_results(path, dev, records, **extra) -> None:
    """The DESIGN.md results object ({"device", "records"}, plus ``extra``)."""
    write_json({"device": device_json(dev) if dataclasses.is_dataclass(dev) else dev,
                "records": records, **extra}, path)
