"""Rung 30's streaming model (analysis/gemm_model.StreamFigures) against the
measured sweeps of benchmarks/rung30_sweep.py, with no GPU:

    python3 benchmarks/fit_stream_model.py [SWEEP.json ...]

For the registered geometry (4 warps on one strip, a 6-deep ring) at every
measured split count it prints the predicted and measured times, then two
scores for the figures in the tree: the squared log error over all points,
and the loss of the choice (the sum over shapes of log(measured time of the
split the model picks / the fastest measured)). Default input: the committed
results/h200-rung30-sweep*.json."""
from __future__ import annotations

import argparse
import collections
import glob
import json
import math
import os

from drvgemm.analysis import gemm_model as gm
from drvgemm.ladders.gemm import plan as planning, registry, small_m

REGISTERED = "30_small_m_bf16_w4n1s6"   # rung30_sweep.py's name of the registered geometry
HERE = os.path.dirname(os.path.abspath(__file__))


def predicted_s(r, target, m, n, k, split):
    g = small_m.geometry(r)
    strips, zchunks, splits, sps = g.shape(m, n, k, split)
    c = gm.StreamCandidate(r.precision, g.rows, g.strip, g.kstep, g.threads,
                           planning.blocks_per_sm(r, target), g.in_flight_bytes, strips, zchunks,
                           splits, sps, small_m.reduction_group(splits))
    # the sweeps time launches, not gemm() calls: the GPU's time, without the host's
    return gm.predict_stream(c, m, n, k, in_bytes=2, out_bytes=2, dev=target.ceilings).gpu_s


def main(paths):
    target = planning.target("H200")
    r = registry.by_name()["30_small_m_bf16"]
    for path in paths:
        measured = collections.defaultdict(dict)
        for x in json.load(open(path))["records"]:
            if x["kernel"] == REGISTERED:
                measured[(x["m"], x["n"], x["k"])][x["split"]] = x["median_ms"] * 1e-3
        err = loss = 0.0
        print(f"== {os.path.basename(path)}: predicted / measured us by split")
        for (m, n, k), times in measured.items():
            pred = {s: predicted_s(r, target, m, n, k, s) for s in times}
            err += sum(math.log(pred[s] / times[s]) ** 2 for s in times)
            pick = min(pred, key=pred.get)
            loss += math.log(times[pick] / min(times.values()))
            cells = " ".join(f"{s}:{pred[s] * 1e6:.0f}/{times[s] * 1e6:.0f}" for s in sorted(times))
            print(f"  {m}x{n}x{k}: picks {pick} ({times[pick] / min(times.values()):.3f} of the "
                  f"best)  {cells}")
        print(f"  squared log error {err:.3f}, choice loss {loss:.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="rung 30's streaming model against measured sweeps (no GPU)")
    ap.add_argument("sweeps", nargs="*", metavar="SWEEP.json",
                    help="rung30_sweep.py results (default: the committed results/h200-rung30-sweep*.json)")
    main(ap.parse_args().sweeps or sorted(glob.glob(os.path.join(HERE, "results", "h200-rung30-sweep*.json"))))
