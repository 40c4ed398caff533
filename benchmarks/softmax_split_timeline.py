"""When each block of the split-row rung (softmax_09) reaches each phase of a
row: a timeline from inside the kernel, where the probes before could only
time whole launches.

    python benchmarks/softmax_split_timeline.py [--shapes fp32:4x1048576 bf16:16x1048576 ...]
        [--reps 7] [--b2b] [--json PATH]

For each shape, auto's split plan (prepare()'s grid, cooperative, its
workspace) is built a second time with PHASE_CLOCKS: thread 0 of every block
stamps %globaltimer as the row's step begins, when the block's pair is
reduced (its loads have landed), when it sees the row complete, when the
row's pairs are folded, when its own stores are issued, and as the block
leaves (softmax_09_split_row.cu says where), and the SM it ran on. Launched --reps times, L2
flushed before each; the launch with the median event time is reported:
per pass (the rows a slot's blocks take together) the first / median / last
block at each mark, in us from the first block's start, with the bytes the
pass reads and writes and what they imply as a rate; and the event time of
the unstamped kernel in the same run, so the stamps' own cost shows. The
mark that a block reaches last, less the one before it, is where a pass
waits; a long "first -> last" spread at a mark is blocks out of step. The
first pass is kept block by block with each block's SM, and its folds are
split by whether the other block on the SM had begun its stores (its pair
loads may queue behind them).

--b2b: the stamped launch runs back to back instead, last of a batch of
launches that cycle through copies of x and y as the row suite's back-to-back
column does (L2 flushed before the batch only), so its phases are the ones a
stream of calls meets; the event time is then a launch's share of the batch.
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
from drvgemm.runtime import driver  # noqa: E402
from drvgemm.runtime.timing import time_ms  # noqa: E402
from drvgemm.runtime.timing import batch_median_ms, flush_l2  # noqa: E402
from drvgemm.tools.memory_bench import (B2B_BATCH, _max_rel_err, measure_copy, rotating_buffers,  # noqa: E402
                                        softmax_inputs)
from drvgemm.tools.records import device_json, write_json  # noqa: E402

SHAPES = ("fp32:4x1048576", "fp32:16x1048576", "fp32:64x262144", "bf16:4x1048576",
          "bf16:16x1048576", "bf16:3x777777")
MARKS = ("begin", "pair reduced", "row complete", "pairs folded", "stores issued")
ROWS_STAMPED = 8          # PHASE_CLOCKS: rows a slot stamps
MAX_BLOCKS = 2048         # PHASE_MAX_BLOCKS


def stamped_build(p):
    """Plan ``p``'s kernel with the phase clocks on."""
    return drvgemm.compile(p.source, p.entry, defines={**dict(p.defines), "PHASE_CLOCKS": ROWS_STAMPED,
                                                        "PHASE_MAX_BLOCKS": MAX_BLOCKS})


def passes(stamps, grid, slots, split, rows):
    """[(pass, {mark: (first, median, last) us})] from the stamps
    (blocks x rows x 6, ns), relative to the first block's begin; a pass is
    the k-th row of every slot."""
    blocks = min(grid, MAX_BLOCKS)
    s = stamps[:blocks].astype(np.int64)
    t0 = s[:, 0, 0].min()
    out = []
    for k in range(min(ROWS_STAMPED, -(-rows // slots))):
        live = [b for b in range(blocks) if b // split + k * slots < rows]
        row = {}
        for m, name in enumerate(MARKS):
            v = (s[live, k, m] - t0) / 1000.0
            row[name] = (round(float(v.min()), 2), round(float(np.median(v)), 2), round(float(v.max()), 2))
        out.append((k, row))
    leave = (s[:, 0, 5] - t0) / 1000.0
    return out, (round(float(leave.min()), 2), round(float(np.median(leave)), 2), round(float(leave.max()), 2))


STEPS = ("loads", "wait", "fold", "stores")   # the spans between consecutive marks


def blocks_of_pass0(stamps, smids, grid, split, sm_count):
    """The first pass block by block, and what its SMs' pairs of blocks say:
    ([{block, sm, row, begin, reduced, complete, folded, stores, leave}] in
    us from the first begin, {summary}). A block's fold (row complete ->
    pairs folded) reads its row's pairs from L2; where the other block on its
    SM began its stores before this one saw its row complete, those loads
    may queue behind that block's stores -- the summary sets the two kinds of
    fold side by side, and says how the hardware placed the grid (whether
    blocks b and b + sm_count shared an SM)."""
    blocks = min(grid, MAX_BLOCKS)
    s = stamps[:blocks].astype(np.int64)
    t0 = s[:, 0, 0].min()
    us = lambda v: round(float(v - t0) / 1000.0, 2)   # noqa: E731
    per = [{"block": b, "sm": int(smids[b]), "row": b // split,
            **{name: us(s[b, 0, m]) for m, name in enumerate(("begin", "reduced", "complete", "folded", "stores"))},
            "leave": us(s[b, 0, 5])} for b in range(blocks)]
    by_sm = {}
    for r in per:
        by_sm.setdefault(r["sm"], []).append(r)
    behind, clear, alone = [], [], []
    for r in per:
        others = [o for o in by_sm[r["sm"]] if o is not r]
        fold = r["folded"] - r["complete"]
        if not others:
            alone.append(fold)
        elif any(o["folded"] < r["complete"] for o in others):
            behind.append(fold)
        else:
            clear.append(fold)
    shared = [v for v in by_sm.values() if len(v) > 1]
    med = lambda v: round(float(np.median(v)), 2) if v else None   # noqa: E731
    summary = {"sms": len(by_sm), "sms_with_two_or_more": len(shared),
               "of_those_same_row": sum(len({r["row"] for r in v}) == 1 for v in shared),
               "b_and_b_plus_sm_count_together": sum(per[b]["sm"] == per[b + sm_count]["sm"]
                                                     for b in range(max(0, blocks - sm_count))),
               "fold_median_us": {"sm_neighbour_storing": med(behind), "neighbour_not_yet": med(clear),
                                  "alone_on_sm": med(alone)},
               "fold_blocks": {"sm_neighbour_storing": len(behind), "neighbour_not_yet": len(clear),
                               "alone_on_sm": len(alone)}}
    return per, summary


def step_medians(table):
    """[(pass, {step: us})]: the median block's time from each mark to the
    next (loads: begin -> pair reduced, wait: -> row complete, fold: -> pairs
    folded, stores: -> stores issued)."""
    out = []
    for k, row in table:
        med = [row[m][1] for m in MARKS]
        out.append((k, {s_: round(b - a, 2) for s_, a, b in zip(STEPS, med, med[1:])}))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), help="PREC:ROWSxCOLS ...")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--b2b", action="store_true",
                    help="stamp the last launch of a back-to-back batch over rotating buffers")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    dev = driver.device()
    recs = []
    for spec in args.shapes:
        prec, rc = spec.split(":")
        rows, cols = (int(v) for v in rc.lower().split("x"))
        p = sm.plan(rows, cols, prec, cc=dev.cc, sm_count=dev.sm_count)
        if not p.split:
            print(f"{spec}: auto takes {p.describe()}, not the split rung: skipped", flush=True)
            continue
        k, p = sm.prepare(p, rows)
        if p.grid[0] > MAX_BLOCKS:
            print(f"{spec}: {p.grid[0]} blocks, more than the {MAX_BLOCKS} that stamp: skipped", flush=True)
            continue
        ks = stamped_build(p)
        if p.smem:
            ks.set_max_dynamic_smem(p.smem)
        clocks = ks.variable("phase_clock", np.uint64, (MAX_BLOCKS, ROWS_STAMPED, 6))
        smid = ks.variable("phase_smid", np.uint32, (MAX_BLOCKS,))
        x = softmax_inputs(rows, cols, prec, seed=cols)
        dx, dy = driver.to_device(x), driver.empty((rows, cols), x.dtype)
        ws = sm.workspace(p.workspace_bytes)
        a = p.args(dx, dy, rows, cols, None, None, ws.ptr)

        def run(kernel):
            return lambda: drvgemm.launch(kernel, p.grid, p.block, a, smem=p.smem, cooperative=True)
        zero = np.zeros((MAX_BLOCKS, ROWS_STAMPED, 6), np.uint64)
        for kernel in (k, ks, k, ks):   # warm both
            run(kernel)()
        driver.synchronize()
        plain, stamped = [], []
        if args.b2b:
            xs, ys = rotating_buffers(dx, x.nbytes, dev.l2_size, B2B_BATCH)
            # each buffer pair's arguments built once, not in the timed loop
            arg_sets = [p.args(xi, yi, rows, cols, None, None, ws.ptr) for xi, yi in zip(xs, ys)]

            def batch(last):
                """B2B_BATCH launches of k back to back, the last one `last`;
                ms a launch."""
                flush_l2()
                start, end = driver.Event(), driver.Event()
                start.record()
                for i in range(B2B_BATCH):
                    j = i % len(xs)
                    kern = last if i == B2B_BATCH - 1 else k
                    drvgemm.launch(kern, p.grid, p.block, arg_sets[j], smem=p.smem, cooperative=True)
                end.record()
                end.synchronize()
                return start.elapsed_ms(end) / B2B_BATCH
            for _ in range(args.reps):
                plain.append(batch(k))
                clocks.copy_from_host(zero)
                ms = batch(ks)
                stamped.append((ms, clocks.to_host().copy(), smid.to_host().copy()))
            turns = itertools.cycle(range(len(xs)))

            def copy():
                j = next(turns)
                driver.memcpy_dtod(ys[j], xs[j], x.nbytes)
            copy_b2b = [batch_median_ms(copy, B2B_BATCH, 1) for _ in range(args.reps)]
            for a_ in xs[1:] + ys:
                a_.free()
        else:
            for _ in range(args.reps):   # one call between events, L2 flushed before it
                plain.append(time_ms(run(k), warmup=0, reps=1)[0])
                clocks.copy_from_host(zero)
                ms = time_ms(run(ks), warmup=0, reps=1)[0]
                stamped.append((ms, clocks.to_host().copy(), smid.to_host().copy()))
        dy.fill_bytes(0xFF)
        run(k)()
        driver.synchronize()
        sample = sorted({0, rows // 2, rows - 1})
        err = _max_rel_err(dy.to_host()[sample], sm.reference(x[sample]))
        stamped.sort(key=lambda t: t[0])
        ms, st, sms = stamped[len(stamped) // 2]
        table, leave = passes(st, p.grid[0], p.slots, p.split, rows)
        per_block, siblings = blocks_of_pass0(st, sms, p.grid[0], p.split, dev.sm_count)
        copy_us = 1000 * (statistics.median(copy_b2b) if args.b2b else
                          measure_copy(x.nbytes, m=rows, n=cols, precision=prec)["median_ms"])
        pass_bytes = min(p.slots, rows) * cols * x.dtype.itemsize
        print(f"\n{spec}: {p.describe()}, grid {p.grid[0]}; event {1000 * statistics.median(plain):.2f} us "
              f"unstamped, {1000 * ms:.2f} stamped; copy {copy_us:.2f} us; err {err:.1e}", flush=True)
        print(f"  {'pass':>4s}  " + "  ".join(f"{m:>22s}" for m in MARKS), flush=True)
        for kk, row in table:
            print(f"  {kk:4d}  " + "  ".join(f"{a_:6.2f} {b_:6.2f} {c_:6.2f}" + " " * 1
                                             for a_, b_, c_ in row.values()), flush=True)
        for kk, st_ in step_medians(table):
            print(f"  pass {kk}, the median block's steps (us): " +
                  ", ".join(f"{name} {v:.2f}" for name, v in st_.items()), flush=True)
        print(f"  blocks leave {leave[0]:.2f} / {leave[1]:.2f} / {leave[2]:.2f} us; a pass reads and writes "
              f"{pass_bytes / 2**20:.1f} MiB each way", flush=True)
        f_, n_ = siblings["fold_median_us"], siblings["fold_blocks"]
        print(f"  pass 0 on the SMs: {siblings['sms']} SMs, {siblings['sms_with_two_or_more']} with two blocks or "
              f"more ({siblings['of_those_same_row']} of one row); blocks b and b + {dev.sm_count} on one SM: "
              f"{siblings['b_and_b_plus_sm_count_together']}; fold median (us) where the SM's other block was "
              f"storing {f_['sm_neighbour_storing']} ({n_['sm_neighbour_storing']} blocks), not yet "
              f"{f_['neighbour_not_yet']} ({n_['neighbour_not_yet']}), alone {f_['alone_on_sm']} "
              f"({n_['alone_on_sm']})", flush=True)
        recs.append({"precision": prec, "m": rows, "n": cols, "config": p.describe(), "grid": p.grid[0],
                     "timing": "back to back" if args.b2b else "one call, L2 flushed",
                     "slots": p.slots, "split": p.split, "event_us_unstamped": round(1000 * statistics.median(plain), 2),
                     "event_us_stamped": round(1000 * ms, 2), "copy_us": round(copy_us, 2),
                     "pass_bytes_each_way": pass_bytes, "max_rel_err": err,
                     "passes": [{"pass": kk, **{m: list(v) for m, v in row.items()}} for kk, row in table],
                     "steps": [{"pass": kk, **st_} for kk, st_ in step_medians(table)],
                     "leave": list(leave), "marks": "first / median / last block, us from the first begin",
                     "pass0_on_sms": siblings, "pass0_blocks": per_block})
        for arr in (dx, dy):
            arr.free()
    if args.json:
        write_json({"device": device_json(dev), "records": recs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
