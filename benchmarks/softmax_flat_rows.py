"""Softmax rung 12 (flat rows: the run held in registers, only the rows'
pairs in shared memory) against what auto takes, on short contiguous rows:

    python3 benchmarks/softmax_flat_rows.py [--shapes bf16:131072x127 ...]
        [--variants 256/4/4/4 ...] [--reps 30] [--json PATH]

A variant is THREADS/ITEMS/FOLD/MIN_BLOCKS of cu/softmax/softmax_12_flat_rows.cu,
compiled through drvgemm.compile and launched through drvgemm.launch with
the largest run of rows its vectors cover. Per shape, on the same data:
auto as a user calls it (``drvgemm.softmax(x, out=y)``) and every variant,
times interleaved (events around one call, L2 flushed before it), the
device copy of the same bytes; each variant's output checked against the
float64 reference on sampled rows, and against its own output with half
the rows a run (the fold's order is the row's alone: same bits)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import drvgemm  # noqa: E402
from drvgemm.ladders.softmax import dispatch as sm  # noqa: E402
from drvgemm.runtime import driver, sources  # noqa: E402
from drvgemm.runtime.timing import flush_l2  # noqa: E402
from drvgemm.tools.memory_bench import _max_rel_err, measure_copy, softmax_inputs  # noqa: E402
from drvgemm.tools.records import device_json  # noqa: E402

SHAPES = ("bf16:131072x127", "bf16:65536x129", "bf16:131072x96", "bf16:131072x66",
          "bf16:100000x128", "bf16:262144x33", "bf16:524288x31", "bf16:65536x256",
          "bf16:32768x1000", "fp32:131072x127", "fp32:65536x129", "fp32:262144x33")
VARIANTS = ("256/4/4/4", "256/4/4/3", "256/2/4/4", "128/4/4/6", "256/4/8/3")
SZ = {"fp32": 4, "bf16": 2, "fp16": 2}
DTYPE = {"fp32": 0, "bf16": 1, "fp16": 2}


def _one(enqueue):
    """ms of one call between events, L2 flushed before it."""
    flush_l2()
    s, e = driver.Event(), driver.Event()
    s.record()
    enqueue()
    e.record()
    e.synchronize()
    return s.elapsed_ms(e)


def tile_rows(cols, threads, items, vec):
    """The most rows whose run, at any misalignment, the block's vectors cover."""
    return (threads * items * vec - (vec - 1)) // cols


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), help="PREC:ROWSxCOLS ...")
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS),
                    help="THREADS/ITEMS/FOLD/MIN_BLOCKS ...")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    dev = driver.device()
    path = sources.find_source("softmax_12_flat_rows.cu")
    recs = []
    for spec in args.shapes:
        prec, rc = spec.split(":")
        rows, cols = (int(v) for v in rc.lower().split("x"))
        vec = 16 // SZ[prec]
        x = softmax_inputs(rows, cols, prec, seed=cols)
        dx = driver.to_device(x)
        sample = sorted({0, 1, rows // 2, rows - 1})
        ref = sm.reference(x[sample])
        calls, errs, same = {}, {}, {}
        y_auto = driver.empty((rows, cols), x.dtype)
        calls["auto"] = lambda: drvgemm.softmax(dx, out=y_auto)
        calls["auto"]()
        driver.synchronize()
        errs["auto"] = _max_rel_err(y_auto.to_host()[sample], ref)
        outs = [y_auto]
        for var in args.variants:
            threads, items, fold, mb = (int(v) for v in var.split("/"))
            tr = tile_rows(cols, threads, items, vec)
            if cols < vec or tr < 1:
                continue
            k = drvgemm.compile(path, "softmax_12_flat_rows",
                                defines=dict(DTYPE=DTYPE[prec], THREADS=threads, ITEMS=items,
                                             FOLD=fold, MIN_BLOCKS=mb), arch="sm_90")
            y = driver.empty((rows, cols), x.dtype).fill_bytes(0xFF)
            outs.append(y)

            def call(tr=tr, y=y, k=k, threads=threads):
                grid = (-(-rows // tr), 1, 1)
                return drvgemm.launch(k, grid, (threads, 1, 1), (dx, y, rows, cols, tr))

            call()
            driver.synchronize()
            got = y.to_host()
            errs[var] = _max_rel_err(got[sample], ref)
            # half the rows a run: the same bits
            y.fill_bytes(0xFF)
            call(tr=max(1, tr // 2))
            driver.synchronize()
            same[var] = bool(np.array_equal(y.to_host().view(np.uint8), got.view(np.uint8)))
            calls[var] = call
            print(f"  {spec} {var}: {k.resources}; rows a run {tr}", flush=True)
        times = {w: [] for w in calls}
        for r in range(args.reps):
            order = list(calls)
            order = order[r % len(order):] + order[:r % len(order)]
            for w in order:
                times[w].append(_one(calls[w]))
        copy = measure_copy(x.nbytes, m=rows, n=cols, precision=prec)["median_ms"]
        med = {w: statistics.median(t) for w, t in times.items()}
        auto_desc = sm.plan(rows, cols, prec, cc=dev.cc, sm_count=dev.sm_count).describe()
        line = [f"{spec:18s} copy {1e3 * copy:7.2f} us  auto {1e3 * med['auto']:7.2f} "
                f"({copy / med['auto']:.3f}, {auto_desc})"]
        for w in calls:
            if w == "auto":
                continue
            line.append(f"    {w:12s} {1e3 * med[w]:7.2f} us  {copy / med[w]:.3f} of copy  "
                        f"err {errs[w]:.1e}  same bits at half the run: {same[w]}")
        print("\n".join(line), flush=True)
        recs.append({"precision": prec, "m": rows, "n": cols, "copy_us": round(1e3 * copy, 2),
                     "auto": auto_desc,
                     "us": {w: round(1e3 * t, 2) for w, t in med.items()},
                     "of_copy": {w: round(copy / t, 3) for w, t in med.items()},
                     "max_rel_err": {w: float(e) for w, e in errs.items()},
                     "same_bits_half_run": same})
        dx.free()
        for o in outs:
            o.free()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_json(dev), "records": recs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
