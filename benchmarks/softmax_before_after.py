"""Softmax kernels before and after a change to their source, side by side in
one run: auto's plan (or the shape's kernel's) on each shape, launched from the
tree's source and from the same-named file in OLD_DIR with the same defines,
grid and data, times interleaved (L2 flushed before each call), outputs
compared, with the device copy of the same bytes:

    python3 benchmarks/softmax_before_after.py OLD_DIR
        [--shapes bf16:131072x127:softmax_10_row_tile fp32:65536x129 ...] [--json PATH]

A shape's fourth field sets defines of the old build only, for a change that
moves the plan too: ``bf16:131072x127:auto:ELEMS=32,ROTATE=1`` times the old
source with the plan's defines but those (the grid and block stay the plan's).

OLD_DIR holds earlier cu/softmax/*.cu files, made from the history and not
committed, and the earlier headers where a change is theirs: the old build's
#includes resolve in OLD_DIR first, then in cu/softmax as the tree's do. .gpu/
is git-ignored, so name it in the device tool's `carry` to send it along:

    mkdir -p .gpu/old && git show HEAD~1:cu/softmax/softmax_10_row_tile.cu > .gpu/old/softmax_10_row_tile.cu
    git show HEAD~1:cu/softmax/softmax_common.cuh > .gpu/old/softmax_common.cuh   # a header's change

--also DIR ...: folders of intermediate sources (a change in steps), each its own column
in the same interleaved loop, so each step's share shows in one run.

--b2b: each build and the copy also timed in batches of calls back to back, cycling
through copies of x and y as the row suite's back-to-back column does (a call's bytes
not in L2 from the calls before; L2 flushed before each batch). Every build launches as
the tree's does: a dependent launch where its source waits for the grid before it
(until the forty-fifth round the earlier builds launched plainly, so back to back the
tree's build gained ~2-10% on them from the launch alone).
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import drvgemm  # noqa: E402
from drvgemm.ladders.softmax import dispatch as sm  # noqa: E402
from drvgemm.runtime import driver, sources  # noqa: E402
from drvgemm.runtime.timing import time_ms  # noqa: E402
from drvgemm.runtime.timing import batch_median_ms  # noqa: E402
from drvgemm.tools.memory_bench import (B2B_BATCH, _max_rel_err, measure_copy, rotating_buffers,  # noqa: E402
                                        softmax_inputs)
from drvgemm.tools.records import device_json, write_json  # noqa: E402

SHAPES = ("bf16:262144x33", "bf16:131072x127", "bf16:524288x31", "fp32:131072x127")


def shape_spec(spec):
    """PREC:RxC[:KERNEL[:NAME=V,...]] -> (prec, rows, cols, kernel, old build's defines)."""
    parts = spec.split(":")
    prec, rc = parts[:2]
    kernel = parts[2] if len(parts) > 2 else "auto"
    old_set = parts[3] if len(parts) > 3 else ""
    rows, cols = (int(v) for v in rc.lower().split("x"))
    return prec, rows, cols, kernel, {kv.split("=")[0]: int(kv.split("=")[1]) for kv in old_set.split(",") if kv}


def back_to_back(dx, nbytes, kernels, p, rows, cols, ws, dev, reps=5):
    """{build: ms, "copy": ms}: a call of each build and of the device copy
    in batches back to back, cycling through copies of x and y (the row
    suite's rotating buffers), builds and copy interleaved batch by batch."""
    xs, ys = rotating_buffers(dx, nbytes, dev.l2_size, B2B_BATCH)
    nxt = itertools.cycle(range(len(xs))).__next__   # as memory_bench's back-to-back column
    # each buffer pair's arguments built once, not in the timed loop
    arg_sets = [p.args(xi, yi, rows, cols, None, None, ws.ptr if ws else None) for xi, yi in zip(xs, ys)]

    def call(which):
        def go():
            drvgemm.launch(kernels[which], p.grid, p.block, arg_sets[nxt()], smem=p.smem,
                           cooperative=bool(p.split))
        return go

    def copy():
        i = nxt()
        driver.memcpy_dtod(ys[i], xs[i], nbytes)
    calls = {**{w: call(w) for w in kernels}, "copy": copy}
    times = {w: [] for w in calls}
    try:
        for _ in range(reps):
            for w, fn in calls.items():
                times[w].append(batch_median_ms(fn, B2B_BATCH, 1))
    finally:
        for a in xs[1:] + ys:
            a.free()
    return {w: statistics.median(t) for w, t in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old_dir", help="the folder of the earlier kernel sources")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES),
                    help="PREC:ROWSxCOLS[:KERNEL[:NAME=V,...]] ... (auto's kernel where none is "
                         "named; NAME=V: a define of the old build)")
    ap.add_argument("--also", nargs="*", default=[],
                    help="more folders of earlier sources (steps between OLD_DIR and the tree), "
                         "each timed as a column of its own in the same interleaved loop")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--b2b", action="store_true",
                    help="also time each build and the copy back to back (rotating buffers)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    dev = driver.device()
    recs = []
    for spec in args.shapes:
        prec, rows, cols, kernel, old_defines = shape_spec(spec)
        p = sm.plan(rows, cols, prec, kernel=kernel, cc=dev.cc, sm_count=dev.sm_count)
        dirs = {"old": args.old_dir, **{os.path.basename(os.path.normpath(d)): d for d in args.also}}
        missing = [d for d in dirs.values() if not os.path.isfile(os.path.join(d, os.path.basename(p.source)))]
        if missing:
            print(f"{spec:18s} no earlier {os.path.basename(p.source)} in {', '.join(missing)}: skipped")
            continue
        x = softmax_inputs(rows, cols, prec, seed=cols)
        dx = driver.to_device(x)
        k_new, p = sm.prepare(p, rows)
        kernels = {}
        for name, d in dirs.items():
            # an earlier source's #includes resolve in its folder, then beside the tree's source
            path = os.path.join(d, os.path.basename(p.source))
            k = drvgemm.compile(path, p.entry,
                                defines={**dict(p.defines), **(old_defines if name == "old" else {})},
                                options=[f"-I{os.path.abspath(d)}",
                                         f"-I{os.path.dirname(sources.find_source(p.source))}"])
            # launched as the tree's build is (a dependent launch overlaps a call's
            # start with the call before: back to back, ~2-10% of these times),
            # where the earlier source also waits for the grid before it
            with open(path) as f:
                k.dependent_launch = k_new.dependent_launch and "grid_dependency_wait()" in f.read()
            if p.smem:
                k.set_max_dynamic_smem(p.smem)   # prepare() did it for k_new
            kernels[name] = k
        kernels["new"] = k_new
        outs = {w: driver.empty((rows, cols), x.dtype) for w in kernels}
        ws = sm.workspace(p.workspace_bytes) if p.split else None

        def call(which):
            a = p.args(dx, outs[which], rows, cols, None, None, ws.ptr if ws else None)
            return lambda: drvgemm.launch(kernels[which], p.grid, p.block, a, smem=p.smem,
                                          cooperative=bool(p.split))

        for which in kernels:
            outs[which].fill_bytes(0xFF)
            call(which)()
        driver.synchronize()
        sample = sorted({0, rows // 2, rows - 1})
        ref = sm.reference(x[sample])
        err = {w: _max_rel_err(outs[w].to_host()[sample], ref) for w in kernels}
        same = np.array_equal(outs["new"].to_host().view(np.uint8), outs["old"].to_host().view(np.uint8))
        times = {w: [] for w in kernels}
        for _ in range(args.reps):
            for which in kernels:
                times[which].append(time_ms(call(which), warmup=0, reps=1)[0])   # L2 flushed first
        copy = measure_copy(x.nbytes, m=rows, n=cols, precision=prec)["median_ms"]
        med = {w: statistics.median(t) for w, t in times.items()}
        b2b = back_to_back(dx, x.nbytes, kernels, p, rows, cols, ws, dev) if args.b2b else None
        rec = {"precision": prec, "m": rows, "n": cols, "config": p.describe(), "old_defines": old_defines,
               "old_us": round(1e3 * med["old"], 2), "new_us": round(1e3 * med["new"], 2),
               "copy_us": round(1e3 * copy, 2), "old_of_copy": round(copy / med["old"], 3),
               "new_of_copy": round(copy / med["new"], 3), "bitwise_same": same,
               "max_rel_err": {w: float(e) for w, e in err.items()}}
        if b2b:
            rec["b2b_us"] = {w: round(1e3 * v, 2) for w, v in b2b.items()}
            rec["b2b_of_copy"] = {w: round(b2b["copy"] / v, 3) for w, v in b2b.items() if w != "copy"}
        also = [w for w in kernels if w not in ("old", "new")]
        if also:
            rec["also"] = {w: {"us": round(1e3 * med[w], 2), "of_copy": round(copy / med[w], 3)} for w in also}
        recs.append(rec)
        steps = "".join(f"  {w} {1e3 * med[w]:8.2f} us ({copy / med[w]:.3f})" for w in also)
        print(f"{spec:18s} old {rec['old_us']:8.2f} us ({rec['old_of_copy']:.3f} of copy){steps}  new "
              f"{rec['new_us']:8.2f} us ({rec['new_of_copy']:.3f})  same bits {same}  err old "
              f"{err['old']:.1e} new {err['new']:.1e}  {p.describe()}", flush=True)
        if b2b:
            print(f"{'':18s} back to back: copy {1e3 * b2b['copy']:.2f} us; " +
                  "  ".join(f"{w} {1e3 * b2b[w]:.2f} us ({rec['b2b_of_copy'][w]:.3f})" for w in kernels),
                  flush=True)
        dx.free()
        for o in outs.values():
            o.free()
    if args.json:
        write_json({"device": device_json(dev), "old_dir": args.old_dir, "records": recs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
