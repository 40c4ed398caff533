"""Rung 20's family figures (analysis/gemm_model.FAMILIES: efficiency and fixed
cost per member) against a measured sweep of benchmarks/wgmma_family.py, with
no GPU (the scoring is drvgemm/tools/family_fit.py):

    python3 benchmarks/fit_wgmma_family.py SWEEP.json [--members NAME ...] [--fit]

For every measured (member, split, shape) point it predicts the GPU time with
the tree's figures (gemm_model.predict, operands already staged, as the sweep
times them; C of the sweep's type, fp32), then prints per member the squared
log error over its points, and over all shapes the choice loss: the sum of
log(measured time of the (member, split) the model picks among the measured
ones / the fastest measured). With --fit, each member's (efficiency, fixed
cost, cost of a wave past the first) is refitted by least squares of
log(predicted / measured) over its own points (a grid, then a finer grid
around the best), and the same scores are
printed for the fitted figures: what to put in FAMILIES, and what it would
change."""
from __future__ import annotations

import argparse
import dataclasses
import sys

from drvgemm.ladders.gemm import plan as planning
from drvgemm.tools.family_fit import (fit, load, pickable, predict, scores, sweep_members,
                                      tree_figures)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--members", nargs="+", default=None,
                    help="registered entries (default: every rung-20 member in the sweep)")
    ap.add_argument("--fit", action="store_true")
    args = ap.parse_args(argv)
    target = planning.target("H200")
    names = args.members or sweep_members(args.sweep)
    rungs, fams = tree_figures(names)
    points = load(args.sweep, set(names))
    err, loss = scores(points, rungs, fams, target)
    print(f"{len(points)} shapes; the tree's figures: choice loss {loss:.3f}")
    for n in names:
        f = fams[n]
        print(f"  {n:28s} {f.name:14s} efficiency {f.efficiency:.3f} fixed "
              f"{f.fixed_s * 1e6:5.2f} us, a wave {f.wave_s * 1e6:4.2f} us: squared log error "
              f"{err[n]:.3f}")
    if not args.fit:
        return 0
    fitted = {}
    for n in names:
        eff, fixed, wave, e, count = fit(points, rungs[n], fams[n], target)
        fitted[n] = dataclasses.replace(fams[n], efficiency=eff, fixed_s=fixed, wave_s=wave)
        print(f"  fitted {n:21s} efficiency {eff:.3f} fixed {fixed * 1e6:5.2f} us, a wave past "
              f"the first {wave * 1e6:4.2f} us: squared log error {e:.3f} over {count} points")
    err2, loss2 = scores(points, rungs, fitted, target)
    print(f"fitted figures: choice loss {loss:.3f} -> {loss2:.3f}")
    for (m, n, k), times in sorted(points.items()):
        def pick(fs):
            pred = {key: predict(rungs[key[0]], fs[key[0]], key[1], m, n, k, target, key[2])
                    for key in times
                    if pickable(times, rungs[key[0]], m, n, k, *key[1:], target.ceilings.sm_count)}
            return min(pred, key=pred.get)

        def name(key):
            return f"{key[0]}/{key[1]}{' folded' if key[2] else ''}"
        a, b = pick(fams), pick(fitted)
        best = min(times, key=times.get)
        print(f"  {m}x{n}x{k}: best {name(best)} {times[best] * 1e6:.1f} us; tree picks "
              f"{name(a)} {times[a] * 1e6:.1f}; fitted picks {name(b)} {times[b] * 1e6:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
