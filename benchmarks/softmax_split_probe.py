"""Where the split-row rung's time goes (softmax_09 on a few long rows):

    python benchmarks/softmax_split_probe.py [--json PATH] [--reps 20]

Per shape and precision, side by side on the same data with the device copy
of the same bytes (events around each call, L2 flushed before it):
- auto's plan, launched cooperatively as softmax() does;
- the same plan and grid launched as a plain launch (the grid is resident
  anyway: prepare() cut it to the blocks that fit);
- every registered split config (other chunk sizes, so other split / slots);
- fp32: auto's plan built with the 16-bit builds' exp (WINDOW_FAST_EXP=1), to
  tell what the exponentials cost; and auto's plan with any --variants'
  defines (NAME:KEY=V,...);
and, once, what a launch of 264 x 512 threads costs on its own: an empty
kernel (plain and cooperative) and an empty kernel that only crosses a
grid-wide barrier (one atomic a block, then a wait on the count), so the
fixed costs can be told from the streaming."""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import drvgemm  # noqa: E402
from drvgemm.ladders.softmax import dispatch as sm  # noqa: E402
from drvgemm.ladders.softmax import registry as smr  # noqa: E402
from drvgemm.runtime import driver  # noqa: E402
from drvgemm.runtime.timing import flush_l2  # noqa: E402
from drvgemm.tools.memory_bench import _max_rel_err, measure_copy, softmax_inputs  # noqa: E402
from drvgemm.tools.records import device_json, write_json  # noqa: E402

SHAPES = ((1, 1 << 20), (3, 777777), (4, 1 << 20), (16, 1 << 20), (64, 262144))

EMPTY_SOURCE = r"""
extern "C" __global__ void empty_kernel(unsigned* count) {}

// Every block bumps the count once, then waits until all have.
extern "C" __global__ void barrier_kernel(unsigned* count) {
    if (threadIdx.x == 0) {
        atomicAdd(count, 1u);
        unsigned v;
        do {
            __nanosleep(32);
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
        } while (v < gridDim.x);
    }
    __syncthreads();
}
"""


def _time(enqueue, reps, before=None):
    """Median ms of ``enqueue()`` between events, L2 flushed (and ``before()``
    run) ahead of each repetition's start event."""
    for _ in range(3):
        if before:
            before()
        enqueue()
    driver.synchronize()
    pairs = [(driver.Event(), driver.Event()) for _ in range(reps)]
    for s, e in pairs:
        flush_l2()
        if before:
            before()
        s.record()
        enqueue()
        e.record()
    pairs[-1][1].synchronize()
    return statistics.median(s.elapsed_ms(e) for s, e in pairs)


def _fixed_costs(reps):
    out = {}
    count = driver.empty((64,), np.uint32)
    count.fill_bytes(0)
    grid, block = (264, 1, 1), (512, 1, 1)
    for name in ("empty_kernel", "barrier_kernel"):
        k = drvgemm.compile(EMPTY_SOURCE, name)
        for coop in (False, True):
            ms = _time(lambda: drvgemm.launch(k, grid, block, (count.ptr,), cooperative=coop),
                       reps, before=lambda: count.fill_bytes(0))
            key = f"{name}{' cooperative' if coop else ''}"
            out[key] = round(ms * 1000, 2)
            print(f"  {key:32s} {ms * 1000:7.2f} us", flush=True)
    count.free()
    return out


def _check(dy, x, sample):
    """The sampled rows' max relative error against the float64 reference."""
    return _max_rel_err(dy.to_host()[sample], sm.reference(x[sample]))


def _variants(specs):
    """{name: defines} from NAME:KEY=V,KEY=V specs."""
    out = {}
    for spec in specs:
        name, _, kv = spec.partition(":")
        out[name] = {k: int(v) for k, v in (x.split("=") for x in kv.split(",") if x)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--shapes", default=None, help="rows x cols to run, e.g. 4x1048576 (default: all)")
    ap.add_argument("--no-fixed", action="store_true", help="skip the empty-kernel launches")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="NAME:KEY=V,KEY=V ...: auto's plan built with these defines as well")
    args = ap.parse_args(argv)
    dev = driver.device()
    fixed = {}
    if not args.no_fixed:
        print("fixed costs, grid 264 x 512:", flush=True)
        fixed = _fixed_costs(args.reps)
    shapes = [s for s in SHAPES if not args.shapes or f"{s[0]}x{s[1]}" in args.shapes.split(",")]
    recs = []
    for prec in args.precisions.split(","):
        splits = [c for c in smr.window_configs(prec) if c.kind == "split"]
        for rows, cols in shapes:
            x = softmax_inputs(rows, cols, prec, seed=cols)
            nbytes = x.nbytes
            dx = driver.to_device(x)
            dy = driver.empty((rows, cols), x.dtype)
            copy = measure_copy(nbytes, reps=args.reps, m=rows, n=cols, precision=prec)
            copy_us = copy["median_ms"] * 1000
            auto = sm.plan(rows, cols, prec, cc=dev.cc, sm_count=dev.sm_count)
            sample = sorted({0, rows // 2, rows - 1})
            print(f"\n{prec} {rows}x{cols}: copy {copy_us:.2f} us; auto {auto.describe()}",
                  flush=True)
            cands = [("auto", auto)]
            for c in splits:
                try:
                    p = sm.config_plan(c, rows, cols, prec, sm_count=dev.sm_count)
                except ValueError:
                    continue
                if p.describe() != auto.describe():
                    cands.append(("split", p))
            for tag, p in cands:
                if not p.split:
                    continue
                k, p = sm.prepare(p, rows)
                ws = sm.workspace(p.workspace_bytes)
                a = p.args(dx, dy, rows, cols, None, None, ws.ptr)
                modes = [("cooperative", True)] + ([("plain", False)] if tag == "auto" else [])
                extra = {}
                if tag == "auto" and prec == "fp32":
                    # the same code with the 16-bit builds' exp: what fp32's expf costs
                    extra["fast exp"] = {"WINDOW_FAST_EXP": 1}
                if tag == "auto":
                    extra.update(_variants(args.variants))
                modes += [(name, True) for name in extra]
                for mode, coop in modes:
                    kk = k
                    if mode in extra:
                        try:
                            kk = drvgemm.compile(p.source, p.entry,
                                                 defines={**dict(p.defines), **extra[mode]})
                        except drvgemm.CompileError as e:   # e.g. a variant this config cannot take
                            print(f"  {mode}: not built ({str(e).splitlines()[0][:120]})", flush=True)
                            continue
                    if kk is not k:
                        kk.set_max_dynamic_smem(p.smem)   # prepare() did it for k
                    dy.fill_bytes(0xFF)
                    us = 1000 * _time(lambda: drvgemm.launch(kk, p.grid, p.block, a, smem=p.smem,
                                                             cooperative=coop), args.reps)
                    err = _check(dy, x, sample)
                    rec = {"precision": prec, "m": rows, "n": cols, "tag": tag, "launch": mode,
                           "config": p.describe(), "grid": p.grid[0], "us": round(us, 2),
                           "copy_us": round(copy_us, 2), "copy_fraction": round(copy_us / us, 3),
                           "max_rel_err": err}
                    recs.append(rec)
                    print(f"  {us:8.2f} us {copy_us / us:6.3f} of copy  err {err:.1e}  "
                          f"{mode:11s} {tag:5s} {p.describe()}", flush=True)
            dx.free()
            dy.free()
    if args.json:
        write_json({"device": device_json(dev), "fixed_us": fixed, "records": recs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
