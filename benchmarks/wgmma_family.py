"""Every member of rung 20's family (tile shapes) at every split count that
fills the GPU without drowning it, on the shapes the family is for, against
cuBLAS in the same run (``--members``: only these registered entries, which
may include other rungs with split-K launches, such as rung 30, side by side):

    python benchmarks/wgmma_family.py [--precision bf16 fp16 tf32]
        [--shapes 1024 2048 3072 4096 128x128x65536 512x4096x11008 ...]
        [--splits 1 2 4 8 16 32 64 128] [--batch 10] [--reps 7] [--json PATH]
        [--members 20_tma_wgmma_bf16_16x64 30_small_m_bf16 ...]
        [--set BN=128 STAGES=6 ...] [--fold on off]

What it answers: which (tile, split) wins per shape, what the split-K
reduction costs (its own kernel is timed inside each batch, as gemm() would
launch it; ``--fold on off`` times rung 20's splits both folded in the
kernel and through that launch), and how far each is from cuBLAS: the table a dispatcher's model
is checked against. A split count is tried only when the work units (tiles x
splits) stay within 4 waves of the SMs, and only up to the k-tiles of K.

Timing as benchmarks/wgmma_steps.py: `batch` products back to back between
two events, L2 flushed before each batch, median over `reps` batches; each
result checked (relative RMSE against float64) before it is timed. Inputs
random normal, C float32."""
from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

import drvgemm
from drvgemm.ladders.gemm import hopper, registry
from drvgemm.runtime import driver
from drvgemm.tools.bench import (batch_time_launches, batch_time_torch, log_best_against_baseline,
                                  make_inputs, reference, unless_it_fails)
from drvgemm.tools.records import gemm_record, results_json, write_json

DEFAULT_SHAPES = ["1024", "2048", "3072", "4096", "8192", "128x128x65536", "256x512x32768",
                  "512x4096x11008", "4096x4096x128", "16384x1024x1024", "1000x700x900",
                  "257x129x2049"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_shape(s):
    parts = [int(x) for x in s.lower().split("x")]
    if len(parts) == 1:
        return parts * 3
    if len(parts) == 3:
        return parts
    raise argparse.ArgumentTypeError(f"shape {s!r}: write N or MxNxK")


def members(prec, names=None):
    if names:
        return [r for r in registry.RUNGS if r.name in names and r.precision == prec]
    return [r for r in registry.RUNGS if r.host == "tma" and r.precision == prec]


def variant(r, sets):
    """Rung-20 member ``r`` with ``sets`` ({define: value}) replacing its
    defines, under a name that says so (shared memory follows STAGES)."""
    d = dict(r.defines, **sets)
    geo = hopper.Geometry.of(r.precision, d["BM"], d["BN"], d)
    smem = hopper.wgmma_smem_bytes(int(d["STAGES"]), int(d["EPILOGUE"]), geo.stage_bytes,
                                   geo.consumers)
    name = r.name + "".join(f"+{k}={v}" for k, v in sets.items())
    return dataclasses.replace(r, name=name, defines=d, smem=smem, tile_m=d["BM"],
                               tile_n=d["BN"], block=geo.block())


def work_units(r, m, n):
    """Tiles of the entry's launch along (M, N), before any split."""
    if r.host == "tma":
        return hopper.wgmma_work_units(hopper.geometry(r), m, n, 1)
    return -(-m // r.tile_m) * -(-n // r.tile_n)


def max_split(r, k):
    return hopper.k_tiles(hopper.geometry(r), k) if r.host == "tma" else k


# --fold: how rung 20 adds a split's pieces (split_launches' fold)
FOLD_WAYS = {"auto": "auto", "on": True, "off": False}


def bench_member(r, split, m, n, k, A, B, ref, batch, reps, fold="auto"):
    C = driver.to_device(np.full((m, n), np.nan, np.float32))
    # the instantiation gemm() would pick for these pointers (rung 30 has an
    # ALIGNED=0 build for K or N off its vector width)
    kern = registry.rung_kernel(r, r.host_side.aligned(r, m, n, k, A.ptr, B.ptr, C.ptr))
    nbytes = r.workspace_bytes(m, n, split)
    # zeroed: rung 30's split launches expect a zero workspace (and leave it so)
    ws = driver.to_device(np.zeros(max(1, nbytes // 4), np.float32))
    if r.host == "tma":
        steps = hopper.split_launches(r, kern, A, B, C, m, n, k, 1.0, 0.0, split=split,
                                      workspace=ws if split > 1 else 0, fold=fold)
    else:
        steps = r.launches(kern, A, B, C, m, n, k, 1.0, 0.0, split=split,
                           workspace=ws if split > 1 else 0)
    ms, err = batch_time_launches(steps, C, ref, batch, reps)
    main = steps[0][1]
    # rung 20's arguments carry the split it runs (clamped to the k-tiles)
    # and whether the kernel folds it
    used = main.args[11] if r.host == "tma" else split
    extra = {"folded": bool(main.args[12])} if r.host == "tma" and used > 1 else {}
    rec = gemm_record(r.name, r.precision, m, n, k, ms, err, False, timing="batch",
                      tflops_digits=2, split=used, grid=list(main.grid),
                      tile=[r.tile_m, r.tile_n], workspace_bytes=nbytes,
                      launches=len(steps), **extra)
    del steps
    C.free()
    ws.free()
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", nargs="+", default=["bf16"], choices=["bf16", "fp16", "tf32"])
    ap.add_argument("--shapes", nargs="+", type=parse_shape,
                    default=[parse_shape(s) for s in DEFAULT_SHAPES])
    ap.add_argument("--splits", nargs="+", type=int, default=list(hopper.SPLITS))
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", help="write the records here (DESIGN.md results format)")
    ap.add_argument("--members", nargs="+", help="registered entries to time (default: "
                    "every rung-20 member of the precision)")
    ap.add_argument("--set", nargs="+", default=[], metavar="DEFINE=VALUE",
                    help="also time each rung-20 member with these defines replaced")
    ap.add_argument("--fold", nargs="+", default=["auto"], choices=["auto", "on", "off"],
                    help="rung 20's splits: added in the kernel (on), by the reduction "
                    "launch (off), or as gemm() would (auto, the default); each way timed")
    args = ap.parse_args(argv)
    sets = {}
    for item in args.set:
        key, eq, value = item.partition("=")
        if not eq or not value.lstrip("-").isdigit():
            ap.error(f"--set {item!r}: write DEFINE=INTEGER")
        sets[key] = int(value)
    known = set(registry.by_name())
    for name in args.members or ():
        if name not in known:
            ap.error(f"--members: no registered entry {name!r}")

    dev = drvgemm.device()
    log(f"device: {dev}")
    records = []
    for prec in args.precision:
        for m, n, k in args.shapes:
            log(f"== {prec} {m}x{n}x{k}")
            a, b = make_inputs(prec, m, n, k, seed=m + n + k)
            ref = reference(a, b)
            A, B = driver.to_device(a), driver.to_device(b)
            rows = []
            entries = members(prec, args.members)
            if sets:
                entries += [variant(r, sets) for r in entries if r.host == "tma"]
            for r in entries:
                tiles = work_units(r, m, n)
                kt = max_split(r, k)
                for split in args.splits:
                    if split not in r.splits or split > kt or \
                            (split > 1 and tiles * split > 4 * dev.sm_count):
                        continue
                    folds = [FOLD_WAYS[w] for w in args.fold] if r.host == "tma" and split > 1 \
                        else ["auto"]
                    for fold in dict.fromkeys(folds):
                        rec = unless_it_fails(f"{r.name} split {split}", log, bench_member,
                                              r, split, m, n, k, A, B, ref, args.batch,
                                              args.reps, fold)
                        if rec is None:
                            continue
                        rows.append(rec)
                        how = " folded" if rec.get("folded") else ""
                        log(f"  {r.name:28s} split {split:3d}{how:7s} {rec['median_ms']:8.3f} "
                            f"ms {rec['tflops']:8.1f} TFLOP/s rel.RMSE {rec['rel_rmse']:.2e} "
                            f"grid {rec['grid'][0]}")
            base = batch_time_torch(prec, m, n, k, a, b, ref, args.batch, args.reps)
            if base is not None:
                rows.append(base)
                log(f"  {'cublas (torch.matmul)':28s}           {base['median_ms']:8.3f} ms")
            log_best_against_baseline(rows, log)
            records += rows
            A.free()
            B.free()
    if args.json:
        write_json(results_json(dev, records), args.json)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
