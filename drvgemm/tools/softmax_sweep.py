"""Candidates around the registered softmax configs, timed side by side on
the same data, to check (or re-tune) the registry on a new GPU:
``python -m drvgemm.tools.softmax_sweep``. Each is checked on the whole
output before its time counts."""
from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import sys

import numpy as np

from ..ladders.softmax import dispatch as sm
from ..ladders.softmax.registry import SoftmaxConfig, WindowConfig, pipelined
from ..runtime import driver
from ..runtime.timing import batch_median_ms
from .memory_bench import (B2B_BATCH, B2B_REPS, _cluster_note, _max_rel_err, _median_ms,
                           _progress, _sample_rows, _torch_softmax, _with_copy, measure_copy,
                           rotating_buffers, softmax_inputs)
from .records import device_json, memory_record

__all__ = ["SWEEP_CONFIGS", "SWEEP_SHAPES", "sweep_softmax", "print_sweep_report", "side_by_side"]

# Candidates at the three long-row shapes. The comment on
# a rung 06 line is the fraction of the copy bandwidth it was expected to
# reach on the H200 before it was first measured.
_05 = functools.partial(SoftmaxConfig, "softmax_05_cluster", vector=True, arch="sm_90")
_P = pipelined
_08 = functools.partial(WindowConfig, "softmax_08_any_row_cluster")
_11 = functools.partial(WindowConfig, "softmax_11_any_row_pipelined")
SWEEP_CONFIGS = {
    16384: (
        WindowConfig("softmax_07_any_row", 512, 8, 4, row_threads=512, min_blocks=2),
        WindowConfig("softmax_07_any_row", 1024, 4, 4, row_threads=1024, min_blocks=1),
        SoftmaxConfig("softmax_04_vectorized_rows", 512, 512, elems=32, min_blocks=2, vector=True),
        SoftmaxConfig("softmax_04_vectorized_rows", 1024, 1024, elems=16, vector=True),
        _05(256, 256, elems=32, cluster=2, min_blocks=4),
        _05(512, 512, elems=16, cluster=2, min_blocks=3),
        _05(256, 256, elems=16, cluster=4, min_blocks=4),
        _P(512, 32, 1, 3),                              # ~0.97
        _P(512, 32, 1, 2),                              # ~0.96
        _P(1024, 16, 1, 3),                             # ~0.97
        _P(256, 64, 1, 1, min_blocks=2),                # ~0.96 (2 blocks per SM, one buffer each)
        _P(512, 16, 2, 6),                              # ~0.96
        SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True),
        SoftmaxConfig("softmax_04_vectorized_stream", 1024, 1024, unroll=2, vector=True),
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
        SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True),
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
        SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True),
        SoftmaxConfig("softmax_04_vectorized_stream", 1024, 1024, unroll=4, vector=True),
    ),
    # the vocabulary row: the cluster shapes measured on the H200 (prototype sweep)
    50257: (
        _08(256, 8, 4, cluster=7, min_blocks=4),        # 0.775 (the registered pick)
        _08(256, 7, 4, cluster=8, min_blocks=4),        # 0.733
        _08(512, 7, 4, cluster=4, min_blocks=2),        # 0.743
        _08(512, 4, 4, cluster=8, min_blocks=2),        # 0.463
        _11(256, 13, 4, cluster=4, stages=3),          # ~0.87 predicted (rung 06's pipeline)
        _11(256, 7, 4, cluster=8, stages=3),           # ~0.85
        _11(256, 13, 4, cluster=4, stages=4),          # ~0.87
        _11(512, 7, 4, cluster=4, stages=2),           # ~0.85
    ),
}
SWEEP_SHAPES = ((4096, 131072), (1024, 65536), (16384, 16384), (8192, 50257))
# (sampled rows' max relative error, worst |row sum - 1|) a correct output stays
# under: a few fp32 ulp, or the output type's rounding (bf16 2^-9, fp16 2^-11)
# and a row sum of rounded outputs; fp16 outputs under 6.1e-5 are subnormal and
# those under 2^-25 round to 0 (relative error 1, seen at 50257 columns): for
# fp16 the row sums carry the check
SWEEP_TOLERANCE = {"fp32": (1e-5, 2e-5), "bf16": (8e-3, 2e-2), "fp16": (1.0, 2e-2)}


def _fits(cfg, cols, cc, itemsize) -> bool:
    """The candidate takes rows of ``cols`` (the sweep's rows start on 16 bytes)."""
    if isinstance(cfg, WindowConfig):
        return cfg.fits(cols, cc, aligned=cols % cfg.vec == 0)
    return cfg.fits(cols, cc, itemsize)


def _whole_output_error(y) -> float:
    """Worst |row sum - 1| over every row of y (NaN if any entry is not
    finite): a row a persistent kernel skipped, or wrote twice with the wrong
    scale, shows up here even when the sampled rows are right."""
    if not np.isfinite(y).all():
        return math.nan
    return float(np.max(np.abs(y.sum(axis=1, dtype=np.float64) - 1.0)))


def sweep_softmax(shapes=SWEEP_SHAPES, configs=None, *, precision="fp32", reps=20,
                  seed=0, torch_baseline=False, back_to_back=False) -> list[dict]:
    """Time explicit configs (default: SWEEP_CONFIGS for each shape's row
    length) on the same data, with the copy baseline: records as above,
    ``kernel`` = the entry, ``config`` = its constants, ``auto`` = the config
    kernel='auto' picks, ``correct`` = the sampled rows match the float64
    reference and every row sums to 1. A config that fails to compile or
    launch gets a record with ``error`` and no time. ``torch_baseline``: also
    torch.softmax on the same data (a ``baseline`` record), where torch has CUDA.
    ``back_to_back``: also ``b2b_ms``, a call's time in batches of calls back
    to back on rotating buffers (the row suite's "back to back", which the
    launch of one call may overlap with the last), on each config and the
    copy, and ``copy_fraction_b2b``."""
    cc = driver.device().cc
    tol = SWEEP_TOLERANCE[precision]
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
        sets = _BackToBack(dx, nbytes) if back_to_back else None
        if sets is not None:
            copy["b2b_ms"] = round(sets.copy_ms(), 5)
        recs = []
        for cfg in cfgs:
            if not _fits(cfg, cols, cc, x.dtype.itemsize):
                _progress(f"{cfg.describe()}: skipped, does not hold rows of {cols} on "
                          f"sm_{cc[0]}{cc[1]}")
                continue
            p = sm.config_plan(cfg, rows, cols, precision)
            try:
                k, p = sm.prepare(p, rows)
                dy.fill_bytes(0xFF)
                ms = _median_ms(lambda: sm.run_plan(k, p, dx, dy, rows, cols), reps)
                b2b = sets.plan_ms(k, p, rows, cols) if sets is not None else None
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
            rec = memory_record(cfg.entry, precision, rows, cols, ms, 2 * nbytes,
                          config=p.describe(), registers=k.resources.registers,
                          smem_bytes=p.smem, max_rel_err=err,
                          row_sum_err=None if whole != whole else float(f"{whole:.3g}"),
                          correct=bool(err == err and err <= tol[0] and whole == whole
                                       and whole < tol[1]),
                          auto=cfg == auto, **_cluster_note(k, p))
            if b2b is not None:
                rec["b2b_ms"] = round(b2b, 5)
                rec["copy_fraction_b2b"] = round(copy["b2b_ms"] / b2b, 4)
            _progress(f"{rec['config']}: {rec['gbps']:.0f} GB/s"
                      + ("" if rec["correct"] else "  WRONG RESULT"))
            recs.append(rec)
        if torch_baseline:
            t = _torch_softmax(x, sample, reps)
            if t is not None:
                recs.append(memory_record("torch_softmax", precision, rows, cols, t[0], 2 * nbytes,
                                          baseline=True, config="torch.softmax(dim=-1)",
                                          max_rel_err=_max_rel_err(t[1], ref), correct=True))
        if sets is not None:
            sets.free()
        dx.free()
        dy.free()
        out.append(copy)
        out.extend(_with_copy([r for r in recs if "error" not in r], copy))
        out.extend(r for r in recs if "error" in r)
    return out


class _BackToBack:
    """Rotating (x, y) buffers for timing calls back to back (memory_bench's
    rotation: each call's operands last touched more than twice L2's size of
    traffic ago), the copy's and a plan's time a call."""

    def __init__(self, dx, nbytes):
        dev = driver.device()
        l2 = int(getattr(dev, "l2_size", 0) or 60 << 20)
        self.nbytes = nbytes
        self.xs, self.ys = rotating_buffers(dx, nbytes, l2, B2B_BATCH)
        self.turn = itertools.cycle(range(len(self.xs)))

    def _ms(self, call):
        return batch_median_ms(call, B2B_BATCH, B2B_REPS)

    def copy_ms(self):
        def call():
            i = next(self.turn)
            driver.memcpy_dtod(self.ys[i], self.xs[i], self.nbytes)
        return self._ms(call)

    def plan_ms(self, k, p, rows, cols):
        def call():
            i = next(self.turn)
            sm.run_plan(k, p, self.xs[i], self.ys[i], rows, cols)
        return self._ms(call)

    def free(self):
        for a in self.xs[1:] + self.ys:
            a.free()


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
        b2b = any("b2b_ms" in r for r in same)
        head = (f"  {'GB/s':>6} {'of copy':>7} {'ms':>8} "
                + (f"{'b2b ms':>8} {'b2b of copy':>11} " if b2b else "")
                + f"{'ok':>3} {'regs':>4} {'smem KiB':>8} {'resident':>8}  config")
        print(head, file=file)
        timed = sorted((r for r in same if r["kernel"] != "copy" and "gbps" in r),
                       key=lambda r: -r["gbps"])
        for r in timed:
            res = r.get("max_active_clusters")
            print(f"  {r['gbps']:6.0f} {r.get('copy_fraction', 0):7.3f} {r['median_ms']:8.4f} "
                  + (f"{r.get('b2b_ms', float('nan')):8.4f} "
                     f"{r.get('copy_fraction_b2b', float('nan')):11.3f} " if b2b else "")
                  + f"{'yes' if r.get('correct') else 'NO':>3} {r.get('registers', 0):4d} "
                  f"{r.get('smem_bytes', 0) / 1024:8.0f} {res if isinstance(res, int) else '-':>8}"
                  f"  {r['config']}{'  <- auto' if r.get('auto') else ''}", file=file)
        for r in same:
            if "error" in r:
                print(f"  {'FAILED':>6}  {r['config']}{'  <- auto' if r.get('auto') else ''}: "
                      f"{r['error']}", file=file)
        ok = [r for r in timed if r.get("correct") and not r.get("baseline")]
        if ok:
            best = ok[0]
            print(f"  best correct: {best['config']} at {best.get('copy_fraction', 0):.3f} of copy"
                  + ("" if best.get("auto") else "  (auto picks another)"), file=file)


def side_by_side(candidates: dict, argv=None, description: str = "") -> int:
    """The command line of a side-by-side script (benchmarks/softmax_*.py):
    ``candidates`` maps precision -> {(rows, cols): [configs]}, each shape's
    configs timed on the same data with the copy; ``--precisions``,
    ``--shapes`` (rows x cols) pick among them, ``--json`` keeps the records
    with the config auto takes now for each shape."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", default=None)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--precisions", default=",".join(candidates))
    p.add_argument("--shapes", default=None,
                   help="rows x cols to run, e.g. 8192x50257,512x151936 (default: all)")
    p.add_argument("--torch", action="store_true", help="time torch.softmax on the same data too")
    p.add_argument("--b2b", action="store_true",
                   help="also time each config and the copy in calls back to back")
    args = p.parse_args(argv)
    precs = args.precisions.split(",")
    unknown = [prec for prec in precs if prec not in candidates]
    if unknown:
        p.error(f"no candidates for precision {', '.join(unknown)}; known: {', '.join(candidates)}")
    wanted = args.shapes.split(",") if args.shapes else None
    if wanted is not None:
        # A shape asked for that no chosen precision lists would be left out in silence.
        known = {f"{m}x{n}" for prec in precs for (m, n) in candidates[prec]}
        missing = [s for s in wanted if s not in known]
        if missing:
            p.error(f"no candidates for shape {', '.join(missing)}; this script's shapes: "
                    f"{', '.join(sorted(known, key=lambda s: tuple(map(int, s.split('x')))))}")
    recs = []
    for prec in precs:
        for (m, n), cfgs in candidates[prec].items():
            if wanted is None or f"{m}x{n}" in wanted:
                recs += sweep_softmax([(m, n)], cfgs, precision=prec, reps=args.reps,
                                      torch_baseline=args.torch, back_to_back=args.b2b)
    for prec in precs:
        print(f"\n== {prec}")
        print_sweep_report([r for r in recs if r["precision"] == prec])
    if args.json:
        now = {f"{prec} {m}x{n}": sm.plan(m, n, prec).describe()
               for prec in precs for (m, n) in candidates[prec]}
        with open(args.json, "w") as f:
            json.dump({"device": device_json(driver.device()), "auto": now, "records": recs},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    print_sweep_report(sweep_softmax())
