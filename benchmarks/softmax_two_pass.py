"""A few long rows in two launches (cu/softmax/softmax_12_split_two_pass.cu)
against auto's plan (rung 09's resident grid) and the device copy:

    python benchmarks/softmax_two_pass.py [--json PATH] [--reps 20] [--shapes 4x1048576,...]

Per shape and precision, on the same data, events around each call and L2
flushed before it (as the softmax suite times): the copy of the same bytes,
``softmax(x, out=y)`` (auto), and rung 12's stats + apply launches for each
--configs entry (THREADS x ITEMS). Rung 12 reads every row twice; where the
rows fit in L2 the second read should come from there, so the prediction is
about a copy's time where x is well under L2 (60 MiB on the H200) and about
1.5 copies' where it is not."""
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
from drvgemm.runtime import driver  # noqa: E402
from drvgemm.runtime.timing import flush_l2  # noqa: E402
from drvgemm.tools.memory_bench import _max_rel_err, measure_copy, softmax_inputs  # noqa: E402
from drvgemm.tools.records import device_json  # noqa: E402

SHAPES = ((1, 1 << 20), (3, 777777), (4, 1 << 20), (16, 1 << 20), (64, 262144), (2, 8388608))
DTYPE = {"fp32": 0, "bf16": 1, "fp16": 2}


def _time(enqueue, reps):
    for _ in range(3):
        enqueue()
    driver.synchronize()
    pairs = [(driver.Event(), driver.Event()) for _ in range(reps)]
    for s, e in pairs:
        flush_l2()
        s.record()
        enqueue()
        e.record()
    pairs[-1][1].synchronize()
    return statistics.median(s.elapsed_ms(e) for s, e in pairs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--shapes", default=None, help="rows x cols, comma-separated (default: all)")
    ap.add_argument("--configs", default="512x4,256x4,512x2",
                    help="THREADSxITEMS, comma-separated (16-byte vectors a thread a chunk)")
    args = ap.parse_args(argv)
    dev = driver.device()
    shapes = [s for s in SHAPES if not args.shapes or f"{s[0]}x{s[1]}" in args.shapes.split(",")]
    recs = []
    for prec in args.precisions.split(","):
        vec = 16 // (4 if prec == "fp32" else 2)
        for rows, cols in shapes:
            x = softmax_inputs(rows, cols, prec, seed=cols)
            dx = driver.to_device(x)
            dy = driver.empty((rows, cols), x.dtype)
            copy_us = 1000 * measure_copy(x.nbytes, reps=args.reps, m=rows, n=cols,
                                          precision=prec)["median_ms"]
            sample = sorted({0, rows // 2, rows - 1})
            base = {"precision": prec, "m": rows, "n": cols, "copy_us": round(copy_us, 2)}

            def record(tag, config, us):
                err = _max_rel_err(dy.to_host()[sample], sm.reference(x[sample]))
                rec = dict(base, tag=tag, config=config, us=round(us, 2),
                           copy_fraction=round(copy_us / us, 3), max_rel_err=err)
                recs.append(rec)
                print(f"  {us:8.2f} us {copy_us / us:6.3f} of copy  err {err:.1e}  {tag:8s} {config}",
                      flush=True)

            auto = sm.plan(rows, cols, prec, cc=dev.cc, sm_count=dev.sm_count)
            print(f"\n{prec} {rows}x{cols}: copy {copy_us:.2f} us", flush=True)
            dy.fill_bytes(0xFF)
            record("auto", auto.describe(), 1000 * _time(lambda: drvgemm.softmax(dx, out=dy), args.reps))
            for spec in args.configs.split(","):
                threads, items = (int(v) for v in spec.split("x"))
                if items * vec > 32:
                    continue
                d = dict(DTYPE=DTYPE[prec], THREADS=threads, ITEMS=items, MIN_BLOCKS=2048 // threads // 2)
                ks = drvgemm.compile("softmax_12_split_two_pass.cu", "softmax_12_stats", defines=d)
                ka = drvgemm.compile("softmax_12_split_two_pass.cu", "softmax_12_apply", defines=d)
                # every row's window at its worst lead (rows of a contiguous array
                # start at different 16-byte phases)
                chunks = -(-((cols + 2 * vec - 2) // vec) // (threads * items))
                pairs = driver.empty((rows * chunks * 2,), np.float32)
                grid = rows * chunks

                def run():
                    drvgemm.launch(ks, grid, threads, (dx, cols, cols, pairs, chunks))
                    drvgemm.launch(ka, grid, threads, (dx, dy, cols, cols, cols, pairs, chunks))
                dy.fill_bytes(0xFF)
                record("two-pass", f"threads={threads} items={items} chunks={chunks}",
                       1000 * _time(run, args.reps))
                pairs.free()
            dx.free()
            dy.free()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_json(dev), "records": recs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
