"""Rung 20 against cuBLAS under sustained load: each entry launched back to
back for ``--seconds`` while nvidia-smi samples the SM clock and board power
(benchmarks/clock_probe.py), in rotated order over ``--rounds`` rounds:

    python benchmarks/wgmma_power.py [--variants out16tma_bal out16tma_bal_cluster2]
        [--sizes 2048 4096 8192] [--seconds 2] [--rounds 2] [--json PATH]

Why: the bench (one batch at a time, L2 flushed in between) finds rung 20's
bf16 entry level with cuBLAS at 4096^3 (0.998), the shape suite (calls back to
back) 0.95. A GEMM held at the board's power limit runs at the clock its
energy per FLOP allows (the TF32 mma.sync rungs: benchmarks/notes/tf32-mma.md),
so the operand bytes moved per FLOP should matter there and not in short
bursts: a 2-block cluster that multicasts the 256-wide operand reads a third
fewer bytes from L2 per tile. The variants are benchmarks/wgmma_sweep.py's
(`--list` there), plus ``NAME:KEY=V,...`` over the common base. Every entry's
result is compared with float64 on a subset of rows before it is timed."""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))
sys.path.insert(0, _HERE)

import clock_probe  # noqa: E402
import wgmma_sweep  # noqa: E402

# The registered bf16 entry with a bf16 C, and the same with 2-block clusters.
EXTRA = {"out16tma_bal_cluster2": dict(EPILOGUE=2, OUT_16=1, BALANCE=1, CLUSTER=2)}


def variant(prec, name):
    if ":" in name:
        label, kv = name.split(":", 1)
        return label, wgmma_sweep.variant_rung(
            prec, label, {k: int(v) for k, v in (x.split("=") for x in kv.split(","))})
    defines = EXTRA.get(name)
    if defines is None:
        defines = wgmma_sweep.VARIANTS[name].defines
    return name, wgmma_sweep.variant_rung(prec, name, defines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="bf16", choices=["bf16"])
    p.add_argument("--variants", nargs="+", default=["out16tma_bal", "out16tma_bal_cluster2"])
    p.add_argument("--sizes", nargs="+", type=int, default=[2048, 4096, 8192])
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json")
    args = p.parse_args(argv)

    from drvgemm.runtime import driver
    from drvgemm.tools.bench import make_inputs, rel_rmse
    from drvgemm.tools.records import results_json, write_json
    dev = driver.device()
    prec = args.precision
    rungs = [variant(prec, v) for v in args.variants]
    records = []
    for size in args.sizes:
        m = n = k = size
        a, b = make_inputs(prec, m, n, k, seed=size)
        rows = np.arange(0, m, max(1, m // 64))
        ref = wgmma_sweep.reference_rows(a, b, rows)
        A, B = driver.to_device(a), driver.to_device(b)
        entries = [wgmma_sweep.rung_entry(prec, nm, r, m, n, k, A, B, None) for nm, r in rungs]
        entries += wgmma_sweep.baseline_entries(prec, m, n, k, a, b)
        good = []
        for e in entries:
            e.enqueue()
            err = rel_rmse(np.asarray(e.result())[rows], ref)
            print(f"{size}^3 {e.name:44s} rel. RMSE {err:.2e}", flush=True)
            if err < 2e-2:
                good.append(e)
        flop = 2.0 * m * n * k
        per = {e.name: [] for e in good}
        for rnd in range(args.rounds):
            order = good[rnd % len(good):] + good[:rnd % len(good)]
            for e in order:
                rec = clock_probe.summary(f"{e.name} {size}^3", flop,
                                          *clock_probe.sampled(e.enqueue, args.seconds))
                rec.update(size=size, round=rnd, entry=e.name, baseline=e.baseline,
                           meta={k2: v for k2, v in e.meta.items() if k2 != "defines"})
                per[e.name].append(rec)
                records.append(rec)
        best = max((statistics.median(r["tflops"] for r in per[e.name]) for e in good
                    if e.baseline), default=None)
        for e in good:
            t = statistics.median(r["tflops"] for r in per[e.name])
            mhz = statistics.median(r["sm_mhz"] for r in per[e.name])
            w = statistics.median(r["power_w"] for r in per[e.name])
            ratio = f"  x best cuBLAS {t / best:.3f}" if best and not e.baseline else ""
            print(f"== {size}^3 {e.name:44s} {t:7.1f} TFLOP/s {mhz:6.0f} MHz {w:5.0f} W{ratio}",
                  flush=True)
        for e in entries:
            if e.cleanup:
                e.cleanup()
        A.free()
        B.free()
    if args.json:
        write_json(results_json(dev, records), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
