"""Host cost of one gemm() call against torch.matmul(out=), side by side in
one process: N back-to-back calls of a 16 x 16 x 16 product (so the GPU
never holds the host back), device tensors, C preallocated, for fp32 and
bf16 inputs (fp32 C).

    python benchmarks/gemm_call_overhead.py [--calls 3000] [--json PATH]

Per path: the host time to enqueue N calls over N ("host_us": what the
caller's thread spends per call) and the wall time to the end of the last
kernel over N ("wall_us"), the median of 5 repetitions after a warm-up.
drvgemm runs on torch tensors (data_ptr, the cached plan) and on
DeviceArrays; torch is optional (without it only the DeviceArray path runs).
The plan cache's hit count after the run shows the repeat calls took the
cached path.

``--shapes`` adds the call cost on the products the shape suite finds slow
to launch (rung 20's small, short-K, long-K and odd shapes, rung 30's
decode), each with its calls cycling through ``--sets`` copies of A, B and C
(new pointers every call, as the suite's L2 rotation and a caller's
allocator give them) and with one set: the host time per call, the wall time
per call (the GPU time when the host keeps ahead), the GPU's own time per
call (the calls enqueued behind a kernel that holds the GPU: ``gpu_us``), and
torch.matmul(out=) on the same tensors. Where wall is near host and above
gpu, the calls are host-bound. ``--profile PATH`` writes cProfile's top functions of
the rotating drvgemm calls there."""
import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time

import numpy as np

import drvgemm
from drvgemm.ladders.gemm import dispatch
from drvgemm.runtime import dtypes


def timed(fn, calls, sync, repeats=5):
    fn(200)
    sync()
    host, wall = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(calls)
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        host.append((t1 - t0) / calls * 1e6)
        wall.append((t2 - t0) / calls * 1e6)
    return statistics.median(host), statistics.median(wall)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--json", default=None)
    ap.add_argument("--shapes", action="store_true",
                    help="also the rotating-operand call cost on the suite's slow-to-launch shapes")
    ap.add_argument("--sets", type=int, default=64)
    ap.add_argument("--profile", default=None)
    args = ap.parse_args(argv)
    n = args.size
    try:
        import torch
    except ImportError:
        torch = None
    records = []
    rng = np.random.default_rng(0)
    for prec in ("fp32", "bf16"):
        dt = dtypes.numpy_dtype(prec)
        a = rng.standard_normal((n, n), dtype=np.float32).astype(dt)
        b = rng.standard_normal((n, n), dtype=np.float32).astype(dt)
        A, B = drvgemm.to_device(a), drvgemm.to_device(b)
        C = drvgemm.empty((n, n), np.float32)
        paths = {}

        def drv_dev(k, A=A, B=B, C=C):
            g = drvgemm.gemm
            for _ in range(k):
                g(A, B, C)
        paths["drvgemm.gemm(DeviceArray)"] = (drv_dev, drvgemm.synchronize)
        if torch is not None:
            tdt = torch.float32 if prec == "fp32" else torch.bfloat16
            ta = torch.from_numpy(a.astype(np.float32)).to("cuda", tdt)
            tb = torch.from_numpy(b.astype(np.float32)).to("cuda", tdt)
            tc = torch.empty((n, n), device="cuda", dtype=torch.float32)
            tc16 = torch.empty((n, n), device="cuda", dtype=tdt)

            def drv_torch(k, ta=ta, tb=tb, tc=tc):
                g = drvgemm.gemm
                for _ in range(k):
                    g(ta, tb, tc)

            def torch_mm(k, ta=ta, tb=tb, tc=tc16):
                mm = torch.matmul
                for _ in range(k):
                    mm(ta, tb, out=tc)
            paths["drvgemm.gemm(torch)"] = (drv_torch, torch.cuda.synchronize)
            paths["torch.matmul(out=)"] = (torch_mm, torch.cuda.synchronize)
        before = dispatch.plan_cache_info()["hits"]
        for name, (fn, sync) in paths.items():
            host, wall = timed(fn, args.calls, sync)
            records.append({"path": name, "precision": prec, "m": n, "n": n, "k": n,
                            "host_us": round(host, 2), "wall_us": round(wall, 2)})
            print(f"{prec:5} {name:28} host {host:7.2f} us/call   wall {wall:7.2f} us/call")
        p = drvgemm.plan(A, B, C)
        print(f"      chosen: {p.instantiation} split {p.split}; plan-cache hits "
              f"{dispatch.plan_cache_info()['hits'] - before}")
    shape_records = shape_costs(args.sets, args.profile) if args.shapes else []
    if args.json:
        out = {"device": str(drvgemm.device()), "launch_path": drvgemm.launch_path(),
               "calls": args.calls, "records": records, "shape_records": shape_records}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


# (M, N, K, precision): rung 20's small squares, short and long K, odd sizes
# that need staging, a split-K product; rung 30 and the swapped tiles at decode.
SHAPES = [(128, 128, 128, "bf16"), (512, 512, 512, "bf16"), (4096, 4096, 128, "bf16"),
          (1000, 700, 900, "bf16"), (127, 8191, 131, "bf16"), (128, 128, 65536, "bf16"),
          (1024, 1024, 1024, "tf32"), (1, 4096, 4096, "bf16"), (8, 4096, 4096, "bf16"),
          (2, 5120, 5120, "bf16"), (16, 11008, 4096, "bf16"), (32, 4096, 11008, "bf16"),
          (1, 4096, 4096, "tf32"), (1, 4096, 4096, "fp32"), (1000, 700, 900, "fp32")]


def gpu_us(fn, calls, torch):
    """The GPU's own time per call, the host out of the way: the calls are
    enqueued behind a kernel that keeps the GPU busy for longer than the
    host takes to enqueue them, and timed by events around them. None when
    the host did not get ahead (the figure would be the host's)."""
    fn(20)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    hold_s = 60e-6 * calls + 2e-3
    torch.cuda._sleep(int(hold_s * 2.0e9))     # cycles at up to ~2 GHz
    t0 = time.perf_counter()
    start.record()
    fn(calls)
    end.record()
    enqueued = time.perf_counter() - t0
    end.synchronize()
    gpu = start.elapsed_time(end) * 1e3 / calls
    return None if enqueued > hold_s * 0.8 else gpu


def shape_costs(sets, profile_path, calls=400):
    import torch
    records, prof = [], cProfile.Profile()
    for m, n, k, prec in SHAPES:
        tdt = {"bf16": torch.bfloat16, "fp32": torch.float32, "tf32": torch.float32}[prec]
        kw = {"precision": "tf32"} if prec == "tf32" else {}
        ops = [(torch.rand(m, k, device="cuda").to(tdt), torch.rand(k, n, device="cuda").to(tdt),
                torch.empty(m, n, device="cuda", dtype=tdt)) for _ in range(sets)]
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"

        def drv(cnt, s):
            g = drvgemm.gemm
            for i in range(cnt):
                a, b, c = ops[i % s]
                g(a, b, c, **kw)

        def tmm(cnt, s):
            mm = torch.matmul
            for i in range(cnt):
                a, b, c = ops[i % s]
                mm(a, b, out=c)
        p = drvgemm.plan(ops[0][0], ops[0][1], ops[0][2], **kw)
        for name, fn in (("drvgemm.gemm", drv), ("torch.matmul(out=)", tmm)):
            for s in (1, sets):
                host, wall = timed(lambda c, s=s: fn(c, s), calls, torch.cuda.synchronize)
                gpu = gpu_us(lambda c, s=s: fn(c, s), calls, torch)
                rec = {"path": name, "precision": prec, "m": m, "n": n, "k": k, "sets": s,
                       "host_us": round(host, 2), "wall_us": round(wall, 2),
                       "gpu_us": None if gpu is None else round(gpu, 2)}
                if name == "drvgemm.gemm":
                    rec["instantiation"], rec["split"] = p.instantiation, p.split
                records.append(rec)
                g = "  (host not ahead)" if gpu is None else f"{gpu:7.2f}"
                print(f"{prec:5} {m}x{n}x{k:<6} {name:20} sets {s:3}  host {host:7.2f} us/call"
                      f"   wall {wall:7.2f} us/call   gpu {g}", flush=True)
        if profile_path:
            prof.enable()
            drv(calls, sets)
            torch.cuda.synchronize()
            prof.disable()
        torch.backends.cuda.matmul.allow_tf32 = False
        del ops
    if profile_path:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(40)
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
        with open(profile_path, "w") as f:
            f.write(buf.getvalue())
    return records


if __name__ == "__main__":
    sys.exit(main())
