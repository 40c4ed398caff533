"""gemm's kernels as dependent launches (Kernel.dependent_launch: programmatic
stream serialization, cu/include/grid_dependency.cuh) against the same
machine code launched plainly, back to back, side by side in one run:

    python3 benchmarks/dependent_launch.py [--shapes bf16:2048 bf16:16x8192x8192 ...]
        [--batch 20] [--reps 7] [--json PATH]

A shape is PRECISION:M[xNxK][:MEMBER[:SPLIT]] (benchmarks/rung20_before_after.py's
form), or softmax:PRECISION:ROWSxCOLS for auto's softmax plan; the plan's launches for it (rung 20 or rung 30, a split's reduction
included), through drvgemm.launch as gemm() makes them: "dependent" with the
registry's kernels, "plain" with a second compile of the same instantiation
whose dependent_launch is False. Device events around a batch of products /
batch (L2 flushed before each batch), the two interleaved batch by batch in
turns forwards and backwards (a first column can read ~1 us slow),
torch.matmul alongside; each C checked bit for bit against the plain one's,
and the host's enqueue time per product recorded (a batch whose enqueue
outruns the GPU would time the host).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from drvgemm.ladders.gemm import dispatch, hopper, registry  # noqa: E402
from drvgemm.runtime import driver, sass  # noqa: E402
from drvgemm.runtime.kernel import compile  # noqa: E402
from drvgemm.runtime.launch import launch_config  # noqa: E402
from drvgemm.runtime.timing import batch_median_ms  # noqa: E402
from drvgemm.tools.bench import make_inputs  # noqa: E402
from drvgemm.tools.cublas import torch_matmul_call  # noqa: E402
from drvgemm.tools.records import device_json, write_json  # noqa: E402
from rung20_before_after import parse_spec  # noqa: E402  (this script's folder)

SHAPES = ("bf16:1024", "bf16:1536", "bf16:2048", "bf16:3072", "bf16:4096",
          "bf16:1x4096x4096", "bf16:16x8192x8192", "bf16:4x14336x4096", "bf16:1x28672x8192",
          "bf16:8x128256x4096:30_small_m_bf16", "bf16:128x128x65536", "bf16:512x4096x11008",
          "bf16:128x5120x5120")
MODES = ("plain", "dependent")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def launches(r, dependent, A, B, C, m, n, k, narrow, split, ws):
    """The plan's (kernel, LaunchConfig) steps with the registry's kernels
    (dependent) or with plain compiles of the same instantiations."""
    def build(rr, aligned, narrow_output=False, split_k=False):
        k0 = registry.rung_kernel(rr, aligned, narrow_output=narrow_output, split_k=split_k)
        if dependent:
            return k0
        kp = compile(rr.source, rr.entry, defines=rr.instantiation_defines(
            aligned, narrow_output, split_k), arch=k0.arch, options=rr.options)
        kp.split_k = k0.split_k
        assert not kp.dependent_launch
        return kp
    if r.host == "tma":
        kern = build(r, True, narrow, split > 1)
        steps = hopper.split_launches(r, kern, A, B, C, m, n, k, 1.0, 0.0, narrow_output=narrow,
                                      split=split, workspace=ws if split > 1 else 0)
    else:
        kern = build(r, r.host_side.aligned(r, m, n, k, A.ptr, B.ptr, C.ptr))
        steps = r.launches(kern, A, B, C, m, n, k, 1.0, 0.0, split=split,
                           workspace=ws if split > 1 else 0)
    if not dependent:
        # a split's reduction: its plain twin too
        steps = [(kk if kk is kern else _plain_twin(kk), cfg) for kk, cfg in steps]
    return kern, steps


_twins = {}


def _plain_twin(kern):
    """The split's reduction (split_reduce.cu, the one helper in a plan's
    launches) compiled again, launched plainly."""
    if not kern.dependent_launch:
        return kern
    t = _twins.get(kern.entry)
    if t is None:
        t = _twins[kern.entry] = compile("split_reduce.cu", kern.entry, arch=kern.arch)
    return t


def softmax_record(spec, batch, reps):
    """softmax:PRECISION:ROWSxCOLS: auto's plan launched as a dependent launch
    and plainly (a second compile), torch.softmax and torch's copy of the same
    bytes alongside; the two outputs compared bit for bit."""
    import torch

    from drvgemm.ladders.softmax import dispatch as sdisp
    _, prec, dims = spec.split(":")
    rows, cols = (int(v) for v in dims.lower().split("x"))
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[prec]
    x = torch.randn(rows, cols, device="cuda", dtype=tdt) * 4
    ys = {w: torch.empty_like(x) for w in (*MODES, "copy")}
    p = sdisp.plan(rows, cols, prec, sm_count=driver.device().sm_count)
    k, p = sdisp.prepare(p, rows)
    kern = {"dependent": k,
            "plain": compile(p.source, p.entry, defines=dict(p.defines), arch=k.arch)}
    assert not kern["plain"].dependent_launch
    enq = {w: (lambda kk, y: lambda: sdisp.run_plan(kk, p, x.data_ptr(), y.data_ptr(), rows,
                                                    cols, cols, cols))(kern[w], ys[w])
           for w in MODES}
    enq["copy"] = lambda: ys["copy"].copy_(x)
    enq["torch"] = lambda: torch.softmax(x, dim=1)
    for f in enq.values():
        f()
    torch.cuda.synchronize()
    times = {w: [] for w in enq}
    for rep in range(reps):
        # the columns in turn forwards and backwards: a first column can read slow
        for w in (list(enq) if rep % 2 == 0 else list(enq)[::-1]):
            times[w].append(batch_median_ms(enq[w], batch, 1, torch.cuda.synchronize))
    med = {w: round(1e3 * statistics.median(t), 2) for w, t in times.items()}
    same = bool(torch.equal(ys["plain"], ys["dependent"]))
    rec = {"softmax": True, "precision": prec, "rows": rows, "cols": cols,
           "kernel": p.describe(), "dependent_launch": k.dependent_launch, "us": med,
           "of_copy": {w: round(med["copy"] / med[w], 3) for w in MODES},
           "bitwise_same": same, "sass_hash": sass.kernel_sass_hash(k)}
    print(f"{spec:32s} {p.describe()[:50]}: " + "  ".join(f"{w} {med[w]:.2f}" for w in med)
          + f"  of copy plain {rec['of_copy']['plain']} dependent "
          f"{rec['of_copy']['dependent']}  same {same}", flush=True)
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES))
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    dev = driver.device()
    recs = []
    for spec in args.shapes:
        if spec.startswith("softmax:"):
            recs.append(softmax_record(spec, args.batch, args.reps))
            continue
        prec, m, n, k, member, split = parse_spec(spec)
        narrow = prec != "tf32"
        plan = dispatch.plan_shape(m, n, k, precision=prec,
                                   out_dtype=dispatch.input_dtype(prec) if narrow else None,
                                   kernel=member or "auto")
        r = plan.rung
        split = split or plan.split
        if r.host not in ("tma", "small_m"):
            log(f"{spec}: {r.name} is neither rung 20 nor rung 30: skipped")
            continue
        narrow = narrow and r.host == "tma"
        a, b = make_inputs(prec, m, n, k, seed=m + n + k)
        A, B = driver.to_device(a), driver.to_device(b)
        c_dt = a.dtype if narrow else np.float32
        ws = driver.to_device(np.zeros(max(1, r.workspace_bytes(m, n, split) // 4), np.float32))
        Cs, enq, hashes = {}, {}, {}
        for mode in MODES:
            Cs[mode] = driver.to_device(np.full((m, n), np.nan, c_dt))
            kern, steps = launches(r, mode == "dependent", A, B, Cs[mode], m, n, k, narrow,
                                   split, ws)
            hashes[mode] = sass.kernel_sass_hash(kern)
            enq[mode] = (lambda st: lambda: [launch_config(kk, cfg) for kk, cfg in st])(steps)
            enq[mode]()
        driver.synchronize()
        call = torch_matmul_call(prec, a, b)
        times = {mode: [] for mode in MODES}
        times["cublas"] = []
        host = {mode: [] for mode in MODES}
        for rep in range(args.reps):
            for mode in (MODES if rep % 2 == 0 else MODES[::-1]):
                times[mode].append(batch_median_ms(enq[mode], args.batch, 1))
                t0 = time.perf_counter()
                for _ in range(args.batch):
                    enq[mode]()
                host[mode].append((time.perf_counter() - t0) / args.batch * 1e6)
                driver.synchronize()
            if call:
                enqueue, _, sync, _ = call
                times["cublas"].append(batch_median_ms(enqueue, args.batch, 1, sync))
        if call:
            call[3]()
        ref = Cs["plain"].to_host().view(np.uint8)
        same = {mode: bool(np.array_equal(Cs[mode].to_host().view(np.uint8), ref))
                for mode in MODES}
        med = {w: round(1e3 * statistics.median(t), 2) for w, t in times.items() if t}
        rec = {"precision": prec, "m": m, "n": n, "k": k, "kernel": r.name, "split": split,
               "us": med, "host_us_per_call": {w: round(statistics.median(h), 1)
                                               for w, h in host.items()},
               "bitwise_same": same, "sass_hash": hashes}
        if "cublas" in med:
            rec["of_cublas"] = {w: round(med["cublas"] / med[w], 3) for w in MODES}
        recs.append(rec)
        print(f"{spec:40s} {r.name} split {split}: " + "  ".join(
            f"{w} {med[w]:.2f}" for w in med) + f"  same {all(same.values())}  host "
              + " ".join(f"{w} {rec['host_us_per_call'][w]}" for w in MODES), flush=True)
        for x in (A, B, ws, *Cs.values()):
            x.free()
    if args.json:
        write_json({"device": device_json(dev), "records": recs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
