"""SM clock and board power while one kernel runs back to back: is the GEMM
held below the clock the instruction ceiling runs at?

    python benchmarks/clock_probe.py [--seconds 2] [--json PATH]

For the mma.sync TF32 ceiling (cu/ceilings.cu) and the TF32 mma.sync rungs
at 4096^3 and 8192^3, launches back to back for ``--seconds`` while
nvidia-smi samples clocks.sm, power.draw and the active clock-event reasons
every 50 ms; prints the median clock and power of the samples taken while
the kernel ran, and the kernel's TFLOP/s over that time."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import drvgemm  # noqa: E402
from drvgemm.runtime import driver  # noqa: E402
from drvgemm.tools import ceilings  # noqa: E402

QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"


def sampled(run, seconds):
    """(launches, elapsed s, [(MHz, W, reasons)]) of ``run`` repeated for ``seconds``."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            run()
        n += 20
        driver.synchronize()
    dt = time.perf_counter() - t0
    time.sleep(0.1)
    smi.terminate()
    out = smi.communicate()[0]
    rows = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            rows.append((float(parts[0]), float(parts[1]), parts[2]))
        except (ValueError, IndexError):
            pass
    return n, dt, rows


def summary(name, flop, n, dt, rows):
    busy = rows[6:-2] or rows        # the samples after start-up, before the end
    mhz = statistics.median(r[0] for r in busy)
    watts = statistics.median(r[1] for r in busy)
    reasons = sorted({r[2] for r in busy})
    rec = {"kernel": name, "tflops": round(flop * n / dt / 1e12, 1), "sm_mhz": mhz,
           "power_w": watts, "clock_event_reasons": reasons, "samples": len(busy)}
    print(f"{name:34s} {rec['tflops']:7.1f} TFLOP/s  {mhz:6.0f} MHz  {watts:6.0f} W  "
          f"reasons {reasons}", flush=True)
    return rec


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--kernels", nargs="*", default=["15_mma_tf32_rotating", "11_mma_tf32"])
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    dev = driver.device()
    recs = []
    ceiling = next(c for c in ceilings.CEILINGS if c.key == "mma_tf32")
    run_ceiling, ceiling_flop = ceilings.ceiling_launch(ceiling, scale=1 / 8)
    recs.append(summary("ceiling mma_tf32", ceiling_flop, *sampled(run_ceiling, args.seconds)))
    for size in (4096, 8192):
        rng = np.random.default_rng(1)
        A = drvgemm.to_device(rng.standard_normal((size, size), dtype=np.float32))
        B = drvgemm.to_device(rng.standard_normal((size, size), dtype=np.float32))
        C = driver.empty((size, size), np.float32)
        for name in args.kernels:
            drvgemm.gemm(A, B, C, kernel=name)
            recs.append(summary(f"{name} {size}^3", 2.0 * size ** 3,
                                *sampled(lambda: drvgemm.gemm(A, B, C, kernel=name),
                                         args.seconds)))
        for x in (A, B, C):
            x.free()
    recs.append(summary("ceiling mma_tf32 (again)", ceiling_flop,
                        *sampled(run_ceiling, args.seconds)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev.name, "records": recs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
