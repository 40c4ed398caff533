"""Rung 20's family figures (analysis/gemm_model.FAMILIES) against a measured
sweep of benchmarks/wgmma_family.py: each (member, split, shape) point's
predicted GPU time, the squared log error per member, the choice loss over
shapes (the sum of log(measured time of the (member, split) the model picks
among the measured ones / the fastest measured)), and a least-squares refit of
a member's figures. No GPU. benchmarks/fit_wgmma_family.py is its command;
the CPU tests hold the tree's figures to the losses benchmarks/notes quote."""
from __future__ import annotations

import collections
import dataclasses
import json
import math

from ..analysis import gemm_model as gm
from ..ladders.gemm import plan as planning, registry

def load(path, members):
    """{(m, n, k): {(member, split, folded): seconds}} of the sweep's rung-20
    records (``folded``: the split was added in the kernel; sweeps before
    the fold always reduced by a launch)."""
    out = collections.defaultdict(dict)
    for r in json.load(open(path))["records"]:
        if r.get("baseline") or r["kernel"] not in members:
            continue
        key = (r["kernel"], r["split"], bool(r.get("folded", False)))
        out[(r["m"], r["n"], r["k"])][key] = r["median_ms"] * 1e-3
    return out


def predict(rung, fam, split, m, n, k, target, folded=False):
    """The model's GPU time of ``split`` pieces the way they were run:
    ``folded`` in the kernel, else through the reduction launch."""
    ws = rung.host_side.workspace_bytes(rung, m, n, split) > 0 and not folded
    c = gm.Candidate(fam, rung.tile_m, rung.tile_n, split, ws,
                     planning.blocks_per_sm(rung, target), True, 0, 0)
    return gm.predict(c, m, n, k, in_bytes=planning.IN_BYTES[rung.precision], out_bytes=4,
                      dev=target.ceilings).gpu_s   # the sweep times launches, not calls


def pickable(times, rung, m, n, k, split, folded, sm_count) -> bool:
    """Whether the model may pick a measured point: gemm() runs it this way
    (a split is folded exactly when the host side folds it), or the sweep
    timed that split one way only (sweeps before the fold reduced every
    split by a launch)."""
    if (rung.name, split, not folded) not in times:
        return True
    return folded == rung.host_side.split_in_kernel(rung, m, n, k, split, sm_count)


def scores(points, rungs, fams, target):
    """(squared log error per member, choice loss: the model picks among the
    points gemm() would launch, against the fastest point measured)."""
    err = collections.Counter()
    loss = 0.0
    for (m, n, k), times in points.items():
        pred = {key: predict(rungs[key[0]], fams[key[0]], key[1], m, n, k, target, key[2])
                for key in times}
        for key, t in times.items():
            err[key[0]] += math.log(pred[key] / t) ** 2
        options = [key for key in pred
                   if pickable(times, rungs[key[0]], m, n, k, *key[1:], target.ceilings.sm_count)]
        pick = min(options, key=pred.get)
        loss += math.log(times[pick] / min(times.values()))
    return err, loss


def fit(points, rung, fam, target):
    """(efficiency, fixed_s, wave_s, error, points) minimising the member's
    squared log error: a coarse grid, then a finer one around its best."""
    mine = [((m, n, k), split, folded, t) for (m, n, k), times in points.items()
            for (name, split, folded), t in times.items() if name == rung.name]

    def error(eff, fixed, wave):
        f = dataclasses.replace(fam, efficiency=eff, fixed_s=fixed, wave_s=wave)
        return sum(math.log(predict(rung, f, split, m, n, k, target, folded) / t) ** 2
                   for (m, n, k), split, folded, t in mine)

    def search(effs, fixeds, waves_):
        return min((error(e, f, w), e, f, w) for e in effs for f in fixeds for w in waves_)

    _, e0, f0, w0 = search([0.2 + 0.05 * i for i in range(17)], [1e-6 * i for i in range(13)],
                           [0.25e-6 * i for i in range(13)])
    best = search([e0 - 0.04 + 0.01 * i for i in range(9)],
                  [max(0.0, f0 - 1e-6 + 0.25e-6 * i) for i in range(9)],
                  [max(0.0, w0 - 0.25e-6 + 0.0625e-6 * i) for i in range(9)])
    return best[1], best[2], best[3], best[0], len(mine)


def sweep_members(path) -> list[str]:
    """The registered rung-20 entries a sweep file measured."""
    by_name = registry.by_name()
    return sorted({r["kernel"] for r in json.load(open(path))["records"]
                   if by_name.get(r["kernel"]) is not None and by_name[r["kernel"]].host == "tma"})


def tree_figures(names):
    """({name: Rung}, {name: Family}): the entries and the tree's figures for them."""
    by_name = registry.by_name()
    rungs = {n: by_name[n] for n in names}
    return rungs, {n: gm.FAMILIES[planning.family_of(r)] for n, r in rungs.items()}


def tree_scores(path, names=None):
    """(squared log error per member, choice loss) of the tree's figures on a sweep."""
    names = names or sweep_members(path)
    rungs, fams = tree_figures(names)
    return scores(load(path, set(names)), rungs, fams, planning.target("H200"))
