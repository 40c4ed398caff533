"""Rung 20's family figures (analysis/gemm_model.FAMILIES: efficiency and fixed
cost per member) against a measured sweep of benchmarks/wgmma_family.py, with
no GPU:

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
import collections
import dataclasses
import json
import math
import sys

from drvgemm.analysis import gemm_model as gm
from drvgemm.ladders.gemm import plan as planning, registry

IN_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4}


def load(path, members):
    """{(m, n, k): {(member, split): seconds}} of the sweep's rung-20 records."""
    out = collections.defaultdict(dict)
    for r in json.load(open(path))["records"]:
        if r.get("baseline") or r["kernel"] not in members:
            continue
        out[(r["m"], r["n"], r["k"])][(r["kernel"], r["split"])] = r["median_ms"] * 1e-3
    return out


def predict(rung, fam, split, m, n, k, target):
    ws = rung.host_side.workspace_bytes(rung, m, n, split) > 0
    c = gm.Candidate(fam, rung.tile_m, rung.tile_n, split, ws,
                     planning.blocks_per_sm(rung, target), True, 0, 0)
    return gm.predict(c, m, n, k, in_bytes=IN_BYTES[rung.precision], out_bytes=4,
                      dev=target.ceilings).gpu_s   # the sweep times launches, not calls


def scores(points, rungs, fams, target):
    """(squared log error per member, choice loss)."""
    err = collections.Counter()
    loss = 0.0
    for (m, n, k), times in points.items():
        pred = {key: predict(rungs[key[0]], fams[key[0]], key[1], m, n, k, target) for key in times}
        for key, t in times.items():
            err[key[0]] += math.log(pred[key] / t) ** 2
        pick = min(pred, key=pred.get)
        loss += math.log(times[pick] / min(times.values()))
    return err, loss


def fit(points, rung, fam, target):
    """(efficiency, fixed_s, wave_s, error, points) minimising the member's
    squared log error: a coarse grid, then a finer one around its best."""
    mine = [((m, n, k), split, t) for (m, n, k), times in points.items()
            for (name, split), t in times.items() if name == rung.name]

    def error(eff, fixed, wave):
        f = dataclasses.replace(fam, efficiency=eff, fixed_s=fixed, wave_s=wave)
        return sum(math.log(predict(rung, f, split, m, n, k, target) / t) ** 2
                   for (m, n, k), split, t in mine)

    def search(effs, fixeds, waves_):
        return min((error(e, f, w), e, f, w) for e in effs for f in fixeds for w in waves_)

    _, e0, f0, w0 = search([0.2 + 0.05 * i for i in range(17)], [1e-6 * i for i in range(13)],
                           [0.25e-6 * i for i in range(13)])
    best = search([e0 - 0.04 + 0.01 * i for i in range(9)],
                  [max(0.0, f0 - 1e-6 + 0.25e-6 * i) for i in range(9)],
                  [max(0.0, w0 - 0.25e-6 + 0.0625e-6 * i) for i in range(9)])
    return best[1], best[2], best[3], best[0], len(mine)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--members", nargs="+", default=None,
                    help="registered entries (default: every rung-20 member in the sweep)")
    ap.add_argument("--fit", action="store_true")
    args = ap.parse_args(argv)
    target = planning.target("H200")
    by_name = registry.by_name()
    names = args.members or sorted({r["kernel"] for r in json.load(open(args.sweep))["records"]
                                    if by_name.get(r["kernel"]) is not None
                                    and by_name[r["kernel"]].host == "tma"})
    rungs = {n: by_name[n] for n in names}
    fams = {n: gm.FAMILIES[planning.family_of(r)] for n, r in rungs.items()}
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
            pred = {key: predict(rungs[key[0]], fs[key[0]], key[1], m, n, k, target)
                    for key in times}
            return min(pred, key=pred.get)
        a, b = pick(fams), pick(fitted)
        best = min(times, key=times.get)
        print(f"  {m}x{n}x{k}: best {best[0]}/{best[1]} {times[best] * 1e6:.1f} us; tree picks "
              f"{a[0]}/{a[1]} {times[a] * 1e6:.1f}; fitted picks {b[0]}/{b[1]} "
              f"{times[b] * 1e6:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
