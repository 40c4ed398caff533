"""Rung 20's instantiations before and after a change to their source, side by
side in one run: on each shape the member and split auto plans (or the ones
named), built from the tree's source and from the copy in OLD_DIR with the
same defines, launched with the same tensor maps, grid and arguments; C
checked against float64, times interleaved batch by batch (L2 flushed before
each batch), cuBLAS (torch.matmul) timed alongside where torch is installed:

    python3 benchmarks/rung20_before_after.py OLD_DIR
        [--shapes bf16:2048 bf16:4096x4096x4096 fp16:128x4096x4096:20_tma_wgmma_fp16_16x64:2 ...]
        [--batch 10] [--reps 7] [--json PATH]

A shape is PRECISION:M[xNxK][:MEMBER[:SPLIT]]; C has the inputs' 16-bit type
(as the shape suite calls gemm with), fp32 for tf32; torch.matmul writes its own result. The old build must take
the tree's kernel arguments (a change inside the kernel, not of its signature).

OLD_DIR holds the earlier cu/gemm/20_tma_wgmma.cu and, when they changed too,
its 20_tma_wgmma/*.cuh (an #include finds OLD_DIR's copy first, then the
tree's). Made from the history, not committed; .gpu/ is git-ignored, so name
it in the device tool's `carry`:

    mkdir -p .gpu/old20/20_tma_wgmma
    git show HEAD~1:cu/gemm/20_tma_wgmma.cu > .gpu/old20/20_tma_wgmma.cu
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import drvgemm  # noqa: E402
from drvgemm.ladders.gemm import dispatch, hopper, registry  # noqa: E402
from drvgemm.runtime import driver, sass, sources  # noqa: E402
from drvgemm.runtime.launch import launch_config  # noqa: E402
from drvgemm.runtime.timing import batch_median_ms  # noqa: E402
from drvgemm.tools.bench import make_inputs, reference, rel_rmse  # noqa: E402
from drvgemm.tools.cublas import torch_matmul_call  # noqa: E402
from drvgemm.tools.records import device_json, write_json  # noqa: E402

SHAPES = ("bf16:2048", "bf16:3072", "bf16:4096", "bf16:8192", "bf16:512x4096x11008",
          "bf16:16x4096x4096", "bf16:128x128x65536", "fp16:4096", "tf32:4096")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_spec(spec):
    """(precision, m, n, k, member or None, split or None) of PRECISION:MxNxK[:MEMBER[:SPLIT]]."""
    fields = spec.split(":")
    prec, dims = fields[0], [int(v) for v in fields[1].lower().split("x")]
    m, n, k = dims * 3 if len(dims) == 1 else dims
    member = fields[2] if len(fields) > 2 and fields[2] else None
    split = int(fields[3]) if len(fields) > 3 else None
    return prec, m, n, k, member, split


def old_build(old_dir, r, narrow, split_k):
    """The instantiation's build from OLD_DIR's source, with the registry's defines."""
    tree = os.path.dirname(sources.find_source(r.source))
    k = drvgemm.compile(os.path.join(old_dir, os.path.basename(r.source)), r.entry,
                        defines=r.instantiation_defines(True, narrow, split_k), arch=r.arch,
                        options=[*r.options, f"-I{old_dir}", f"-I{tree}"])
    k.split_k = split_k     # split_k.split_kernel takes it as the split build
    return k


def cublas_batch(prec, a, b, batch):
    """(one batch of torch.matmul on the same inputs, ms a product; restore), or
    None without torch (drvgemm.tools.cublas.torch_matmul_call: C in the inputs'
    type, TF32 on for tf32 only)."""
    call = torch_matmul_call(prec, a, b)
    if call is None:
        return None
    enqueue, _, sync, restore = call
    return (lambda: batch_median_ms(enqueue, batch, 1, sync)), restore


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old_dir")
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES))
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(args.old_dir, "20_tma_wgmma.cu")):
        raise SystemExit(f"{args.old_dir}: no 20_tma_wgmma.cu (see this script's docstring)")
    dev = driver.device()
    recs = []
    for spec in args.shapes:
        prec, m, n, k, member, split = parse_spec(spec)
        narrow = prec != "tf32"
        plan = dispatch.plan_shape(m, n, k, precision=prec, out_dtype=None if not narrow
                                   else dispatch.input_dtype(prec),
                                   kernel=member or "auto")
        r = plan.rung
        split = split or plan.split
        if r.host != "tma":
            log(f"{spec}: {r.name} is not a rung-20 member: skipped")
            continue
        a, b = make_inputs(prec, m, n, k, seed=m + n + k)
        ref = reference(a, b)
        A, B = driver.to_device(a), driver.to_device(b)
        c_dt = a.dtype if narrow else np.float32
        ws = driver.to_device(np.zeros(max(1, r.workspace_bytes(m, n, split) // 4), np.float32))
        kernels = {"new": registry.rung_kernel(r, True, narrow_output=narrow, split_k=split > 1),
                   "old": old_build(args.old_dir, r, narrow, split > 1)}
        Cs, steps, err = {}, {}, {}
        for which, kern in kernels.items():
            Cs[which] = driver.to_device(np.full((m, n), np.nan, c_dt))
            steps[which] = hopper.split_launches(r, kern, A, B, Cs[which], m, n, k, 1.0, 0.0,
                                                 narrow_output=narrow, split=split,
                                                 workspace=ws if split > 1 else 0)

        def enqueue_of(which):
            return lambda: [launch_config(kern, cfg) for kern, cfg in steps[which]]
        for which in kernels:
            enqueue_of(which)()
            driver.synchronize()
            err[which] = rel_rmse(Cs[which].to_host().astype(np.float32), ref)
        same = bool(np.array_equal(Cs["new"].to_host().view(np.uint8),
                                   Cs["old"].to_host().view(np.uint8)))
        cublas, restore = cublas_batch(prec, a, b, args.batch) or (None, None)
        times = {"old": [], "new": [], "cublas": []}
        for _ in range(args.reps):
            for which in ("old", "new"):
                times[which].append(batch_median_ms(enqueue_of(which), args.batch, 1))
            if cublas:
                times["cublas"].append(cublas())
        if restore:
            restore()
        med = {w: statistics.median(t) for w, t in times.items() if t}
        flops = 2.0 * m * n * k
        rec = {"precision": prec, "m": m, "n": n, "k": k, "kernel": r.name, "split": split,
               "old_us": round(1e3 * med["old"], 2), "new_us": round(1e3 * med["new"], 2),
               "new_tflops": round(flops / med["new"] / 1e9, 1),
               "cublas_us": round(1e3 * med["cublas"], 2) if "cublas" in med else None,
               "bitwise_same": same, "rel_rmse": err,
               "sass_hash": {w: sass.kernel_sass_hash(kern)
                             for w, kern in kernels.items()}}
        if "cublas" in med:
            rec["old_of_cublas"] = round(med["cublas"] / med["old"], 3)
            rec["new_of_cublas"] = round(med["cublas"] / med["new"], 3)
        recs.append(rec)
        print(f"{spec:36s} {r.name} split {split}: old {rec['old_us']:9.2f} us  new "
              f"{rec['new_us']:9.2f} us ({rec['new_tflops']} TFLOP/s)  cuBLAS "
              f"{rec['cublas_us']} us  of cuBLAS old {rec.get('old_of_cublas')} new "
              f"{rec.get('new_of_cublas')}  same bits {same}  rmse new {err['new']:.1e}",
              flush=True)
        for x in (A, B, ws, *Cs.values()):
            x.free()
    if args.json:
        write_json({"device": device_json(dev), "old_dir": args.old_dir, "records": recs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
