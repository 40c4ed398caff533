"""softmax() on a column slice -- x's rows at a pitch wider than the row, as
``logits[:, :-1]`` of a (rows, cols + 1) array has them -- against the same
rows stored contiguously, on the same data with the device copy of the same
bytes:

    python benchmarks/softmax_views.py [--json PATH] [--reps 20] [--pad 1]
        [--shapes PREC:RxC ...]

Three layouts a shape, each auto's plan for it (the kernel alone, L2 flushed
before each launch) and ``drvgemm.softmax(x, out=y)`` as a caller makes it
(``call_us``, calls back to back, host cost included; on the same x and y with
no flush, so a call may find x in L2 or pay for the last call's y being
written back: it can sit below or above the kernel's time, as DRAM, not the
host, decides):

- ``contiguous``: x and y contiguous (the row suite's layout);
- ``slice->contiguous``: x a column slice, y contiguous (what softmax(x) writes
  when it allocates y): row by row, y's 16-byte phase is not x's, and the
  window rungs store those rows element by element (the planner's model puts
  that at 0.6 of the same-phase store, never measured);
- ``slice->slice``: the same x, y a column slice at x's pitch and phase.

Every output is checked on sampled rows against the float64 reference."""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drvgemm.ladders.softmax import dispatch as sm  # noqa: E402
from drvgemm.runtime import driver  # noqa: E402
from drvgemm.runtime.timing import batch_median_ms  # noqa: E402
from drvgemm.tools.memory_bench import (_max_rel_err, _median_ms, _sample_rows,  # noqa: E402
                                        measure_copy, softmax_inputs)
from drvgemm.tools.records import device_json, memory_record  # noqa: E402

SHAPES = ("fp32:1024x50257", "bf16:8192x50257", "bf16:1024x128256", "fp32:4096x4096",
          "bf16:4096x4096", "bf16:131072x127", "fp32:65536x256")
TOLERANCE = {"fp32": 1e-5, "bf16": 1e-2, "fp16": 2e-3}
CALLS = 20          # calls a batch for call_us


class Pitched:
    """``rows`` x ``cols`` elements at row pitch ``ld`` in a buffer of their
    own, seen through __cuda_array_interface__ with strides (a column slice
    of a wider array)."""

    def __init__(self, rows, cols, ld, dtype):
        self.rows, self.cols, self.ld, self.dtype = rows, cols, ld, np.dtype(dtype)
        self.buf = driver.empty((rows * ld,), self.dtype)
        self.ptr = self.buf.ptr
        size = self.dtype.itemsize
        self.__cuda_array_interface__ = {"shape": (rows, cols), "typestr": "|V%d" % size,
                                         "data": (self.ptr, False),
                                         "strides": (ld * size, size), "version": 3}

    def upload(self, x):
        h = np.zeros((self.rows, self.ld), self.dtype)
        h[:, :self.cols] = x
        self.buf.copy_from_host(h.reshape(-1))

    def rows_of(self, index):
        return self.buf.to_host().reshape(self.rows, self.ld)[index, :self.cols]

    def free(self):
        self.buf.free()


def _layouts(x, pad):
    rows, cols = x.shape
    xc, yc = Pitched(rows, cols, cols, x.dtype), Pitched(rows, cols, cols, x.dtype)
    xs, ys = Pitched(rows, cols, cols + pad, x.dtype), Pitched(rows, cols, cols + pad, x.dtype)
    xc.upload(x)
    xs.upload(x)
    return [("contiguous", xc, yc), ("slice->contiguous", xs, yc), ("slice->slice", xs, ys)], \
        [xc, yc, xs, ys]


def measure(prec, rows, cols, *, pad=1, reps=20, seed=0) -> list[dict]:
    x = softmax_inputs(rows, cols, prec, seed)
    nbytes = x.dtype.itemsize * rows * cols
    copy = measure_copy(nbytes, reps=reps, m=rows, n=cols, precision=prec)
    sample = _sample_rows(rows)
    ref = sm.reference(x[sample])
    layouts, bufs = _layouts(x, pad)
    recs = [copy]
    try:
        for name, xv, yv in layouts:
            k, p = sm._prepared(rows, cols, prec, "auto", xv.ptr, yv.ptr, xv.ld, yv.ld)
            ms = _median_ms(lambda: sm.run_plan(k, p, xv.ptr, yv.ptr, rows, cols, xv.ld, yv.ld),
                            reps)
            call_ms = batch_median_ms(lambda: sm.softmax(xv, out=yv), CALLS, reps)
            err = _max_rel_err(yv.rows_of(sample), ref)
            rec = memory_record(p.rung, prec, rows, cols, ms, 2 * nbytes, layout=name,
                                ldx=xv.ld, ldy=yv.ld, config=p.describe(),
                                call_us=round(call_ms * 1e3, 2), max_rel_err=err,
                                correct=bool(err == err and err <= TOLERANCE[prec]))
            rec["copy_fraction"] = round(rec["gbps"] / copy["gbps"], 4)
            recs.append(rec)
            print(f"{prec} {rows}x{cols} {name:18s} {ms * 1e3:9.2f} us  "
                  f"{rec['copy_fraction']:.3f} of copy  call {rec['call_us']:9.2f} us  "
                  f"{'ok' if rec['correct'] else 'WRONG'}  {p.describe()}", flush=True)
    finally:
        for b in bufs:
            b.free()
    return recs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--pad", type=int, default=1, help="elements past the row in a slice's pitch")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), help="PREC:RxC ...")
    args = ap.parse_args(argv)
    shapes = []
    for s in args.shapes:
        prec, _, rc = s.partition(":")
        if prec not in TOLERANCE or "x" not in rc:
            ap.error(f"shape {s!r}: PREC:RxC with PREC one of {', '.join(TOLERANCE)}")
        rows, cols = (int(v) for v in rc.split("x"))
        shapes.append((prec, rows, cols))
    recs = []
    for prec, rows, cols in shapes:
        recs += measure(prec, rows, cols, pad=args.pad, reps=args.reps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_json(driver.device()), "pad": args.pad,
                       "records": recs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
