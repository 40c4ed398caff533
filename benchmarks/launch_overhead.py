"""Host overhead per launch of an empty kernel, side by side in one process:
drvgemm.launch (C and Python paths; plain, cooperative and dependent
launches), a CUDA graph of captured launches
replayed (drvgemm.graph: the replay's cost divided by the launches in it),
cuda.bindings' cuLaunchKernel (two argument styles), cuda.core's launch()
and CuPy's RawKernel.

    python benchmarks/launch_overhead.py [--launches 20000] [--json PATH]

Each path enqueues N launches and synchronises once; the figure is wall time
over N. Paths whose package is missing are reported as such."""
import argparse
import ctypes
import json
import statistics
import sys
import time

import numpy as np

import drvgemm

SOURCE = 'extern "C" __global__ void empty_kernel(float* p, int n) {}'


def per_launch_us(fn, n, repeats=3):
    fn(200)  # warm-up: module load, first-launch costs
    drvgemm.synchronize()
    done = getattr(fn, "launches", lambda n: n)(n)   # a graph replays whole batches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        drvgemm.synchronize()
        times.append((time.perf_counter() - t0) / done * 1e6)
    return statistics.median(times)


def path_drvgemm():
    k = drvgemm.compile("saxpy.cu", "empty_kernel")
    x = drvgemm.empty(16, np.float32)
    launch = drvgemm.launch

    def run(n):
        for _ in range(n):
            launch(k, 1, 32, (x, 16))
    run.once = lambda: launch(k, 1, 32, (x, 16))
    return run


GRAPH_LAUNCHES = 1000


def path_graph_replay():
    """GRAPH_LAUNCHES launches of the empty kernel captured once into a
    drvgemm.graph; each replay is one cuGraphLaunch. The figure is the
    replay's wall time (host submit and device execution, as for the other
    paths) over the launches it holds."""
    k = drvgemm.compile("saxpy.cu", "empty_kernel")
    x = drvgemm.empty(16, np.float32)
    launch = drvgemm.launch
    launch(k, 1, 32, (x, 16))
    with drvgemm.graph() as g:
        for _ in range(GRAPH_LAUNCHES):
            launch(k, 1, 32, (x, 16))

    def run(n):
        for _ in range(max(1, round(n / GRAPH_LAUNCHES))):
            g.replay()
    run.launches = lambda n: max(1, round(n / GRAPH_LAUNCHES)) * GRAPH_LAUNCHES
    run.once = g.replay
    run._keep = (g, x)
    return run


def path_bindings_tuples():
    from cuda.bindings import driver as cu
    k = drvgemm.compile("saxpy.cu", "empty_kernel")
    fn = k.function
    x = drvgemm.empty(16, np.float32)
    stream = cu.CUstream(0)

    def run(n):
        for _ in range(n):
            cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream,
                              ((x.ptr, 16), (ctypes.c_void_p, ctypes.c_int)), 0)
    run.once = lambda: cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream,
                                         ((x.ptr, 16), (ctypes.c_void_p, ctypes.c_int)), 0)
    return run


def path_bindings_prepacked(stream_none=False):
    """cuda.bindings' cuLaunchKernel with a pre-packed parameter array, on
    CUstream(0) -- or on None, as drvgemm's launcher calls it."""
    from cuda.bindings import driver as cu
    k = drvgemm.compile("saxpy.cu", "empty_kernel")
    fn = k.function
    x = drvgemm.empty(16, np.float32)
    vals = [ctypes.c_void_p(x.ptr), ctypes.c_int(16)]
    arr = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) for v in vals])
    addr = ctypes.addressof(arr)
    stream = None if stream_none else cu.CUstream(0)
    L = cu.cuLaunchKernel

    def run(n):
        for _ in range(n):
            L(fn, 1, 1, 1, 32, 1, 1, 0, stream, addr, 0)
    run.once = lambda: L(fn, 1, 1, 1, 32, 1, 1, 0, stream, addr, 0)
    run._keep = (vals, arr, x)   # the driver reads the parameters through addr
    return run

def path_cuda_core():
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device()
    dev.set_current()
    stream = dev.default_stream
    prog = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    ker = prog.compile("cubin").get_kernel("empty_kernel")
    cfg = LaunchConfig(grid=1, block=32)
    x = drvgemm.empty(16, np.float32)
    ptr, n16 = x.ptr, np.int32(16)

    def run(n):
        for _ in range(n):
            launch(stream, cfg, ker, ptr, n16)
    run.once = lambda: launch(stream, cfg, ker, ptr, n16)
    run._keep = x
    return run


def path_cupy():
    import cupy
    ker = cupy.RawKernel(SOURCE, "empty_kernel")
    x = cupy.empty(16, cupy.float32)
    n16 = np.int32(16)

    def run(n):
        for _ in range(n):
            ker((1,), (32,), (x, n16))
    run.once = lambda: ker((1,), (32,), (x, n16))
    return run


def path_drvgemm_python():
    """drvgemm's launch in Python alone (what drvgemm.launch is when the C
    fast path is not built)."""
    from drvgemm.runtime.launch import launch_py
    k = drvgemm.compile("saxpy.cu", "empty_kernel")
    x = drvgemm.empty(16, np.float32)

    def run(n):
        for _ in range(n):
            launch_py(k, 1, 32, (x, 16))
    run.once = lambda: launch_py(k, 1, 32, (x, 16))
    return run


def path_drvgemm_runner():
    """drvgemm's cached launcher for this shape, called directly: the launch
    minus launch()'s own dispatch (stream, cache lookup)."""
    import _thread
    from drvgemm.runtime.launch import launch_py
    k = drvgemm.compile("saxpy.cu", "empty_kernel")
    x = drvgemm.empty(16, np.float32)
    launch_py(k, 1, 32, (x, 16))
    run = k.runners[1, 32, 0, 0, _thread.get_ident()]
    args = (x, 16)

    def loop(n):
        for _ in range(n):
            run(args)
    loop.once = lambda: run(args)
    return loop


WAITING_SOURCE = r'''
extern "C" __global__ void waiting_kernel(float* p, int n) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
'''


def path_drvgemm_kind(kind, python=False):
    """drvgemm.launch of the empty kernel as a cooperative launch
    (cuLaunchKernelEx with the cooperative attribute from C; the Python path's
    cuLaunchCooperativeKernel) or as a dependent launch (a kernel that waits
    for the grid before it, with programmatic stream serialization)."""
    from drvgemm.runtime.launch import launch_py
    launch = launch_py if python else drvgemm.launch
    x = drvgemm.empty(16, np.float32)
    if kind == "dependent":
        k = drvgemm.compile(WAITING_SOURCE, "waiting_kernel")
        k.dependent_launch = True
        kw = {}
    else:
        k = drvgemm.compile("saxpy.cu", "empty_kernel")
        kw = {"cooperative": True}

    def run(n):
        for _ in range(n):
            launch(k, 1, 32, (x, 16), **kw)
    run.once = lambda: launch(k, 1, 32, (x, 16), **kw)
    return run


PATHS = [("drvgemm.launch", path_drvgemm),
         ("drvgemm.launch, Python path (launch_py)", path_drvgemm_python),
         ("drvgemm.launch, cooperative", lambda: path_drvgemm_kind("cooperative")),
         ("drvgemm.launch_py, cooperative", lambda: path_drvgemm_kind("cooperative", True)),
         ("drvgemm.launch, dependent", lambda: path_drvgemm_kind("dependent")),
         ("drvgemm.launch_py, dependent", lambda: path_drvgemm_kind("dependent", True)),
         (f"drvgemm.graph replay of {GRAPH_LAUNCHES} launches, per launch",
          path_graph_replay),
         ("drvgemm launch_py's launcher called directly", path_drvgemm_runner),
         ("cuda.bindings cuLaunchKernel, stream None, pre-packed",
          lambda: path_bindings_prepacked(stream_none=True)),
         ("cuda.bindings cuLaunchKernel, (values, types) tuples", path_bindings_tuples),
         ("cuda.bindings cuLaunchKernel, pre-packed void**", path_bindings_prepacked),
         ("cuda.core launch()", path_cuda_core),
         ("CuPy RawKernel", path_cupy)]


def pieces():
    """Host time of each step of drvgemm's launch path, alone, next to the raw
    cuda.bindings call: where the difference goes."""
    import _thread
    import struct
    from cuda.bindings import driver as cu
    from drvgemm.runtime.launch import launch as dl, launch_py
    k = drvgemm.compile("saxpy.cu", "empty_kernel")
    x = drvgemm.empty(16, np.float32)
    dl(k, 1, 32, (x, 16))
    launch_py(k, 1, 32, (x, 16))
    drvgemm.synchronize()
    print(f"drvgemm.launch path: {drvgemm.launch_path()}")
    ident = _thread.get_ident()
    run = k.runners[1, 32, 0, 0, ident]
    pk = k.packers[ident]
    fn = k.function
    vals = [ctypes.c_void_p(x.ptr), ctypes.c_int(16)]
    arr = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) for v in vals])
    addr = ctypes.addressof(arr)
    L = cu.cuLaunchKernel
    fmt = struct.Struct("<Qi")
    ba = bytearray(16)
    args = (x, 16)
    steps = {
        "pack_into, ctypes buffer": lambda: pk.fmt.pack_into(pk.buf, 0, x.ptr, 16),
        "pack_into, bytearray": lambda: fmt.pack_into(ba, 0, x.ptr, 16),
        "get_ident": _thread.get_ident,
        "runner cache lookup": lambda: k.runners[1, 32, 0, 0, ident],
        "cuLaunchKernel raw (bindings' array)": lambda: L(fn, 1, 1, 1, 32, 1, 1, 0, None, addr, 0),
        "cuLaunchKernel raw (drvgemm's array)": lambda: L(fn, 1, 1, 1, 32, 1, 1, 0, None,
                                                          pk.array_addr, 0),
        "drvgemm launch_py's launcher": lambda: run(args),
        "drvgemm.launch_py": lambda: launch_py(k, 1, 32, args),
        "drvgemm.launch": lambda: dl(k, 1, 32, args),
        "empty lambda": lambda: None,
    }
    # The other libraries' launches, timed the same way.
    keep = []
    for name, make in PATHS:
        if name.startswith("drvgemm"):
            continue
        try:
            path = make()
            keep.append(path)
            steps[name] = path.once
        except Exception as e:
            print(f"({name}: {type(e).__name__}: {e})")
    # Rounds over all steps in rotated order, so a machine whose speed drifts
    # (seen here: the same call 30% slower early in a run) favours no step;
    # each step's figure is its best burst over all rounds.
    names = list(steps)
    best = {nm: float("inf") for nm in names}
    for rnd in range(6):
        for nm in names[rnd % len(names):] + names[:rnd % len(names)]:
            f = steps[nm]
            for _ in range(4):
                # 500 calls: few enough that the launch queue never fills, so
                # a launching step is timed on the host alone.
                drvgemm.synchronize()
                t0 = time.perf_counter()
                for _ in range(500):
                    f()
                best[nm] = min(best[nm], (time.perf_counter() - t0) / 500)
    drvgemm.synchronize()
    print(f"{'step (host time per call, best burst of 500)':55s} {'us':>8s}")
    for nm in names:
        print(f"{nm:55s} {best[nm] * 1e6:8.3f}")
    import platform
    print(f"python {platform.python_version()} {platform.python_implementation()}, "
          f"cuda.bindings {getattr(__import__('cuda.bindings').bindings, '__version__', '?')}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--json", help="write the table as JSON")
    ap.add_argument("--pieces", action="store_true",
                    help="time each step of drvgemm's launch path alone")
    args = ap.parse_args(argv)
    reason = drvgemm.no_gpu_reason()
    if reason:
        print(f"no GPU found: {reason}")
        return 1
    if args.pieces:
        pieces()
        return 0
    print(f"{drvgemm.device()}; drvgemm.launch path: {drvgemm.launch_path()}; "
          f"{args.launches} launches per path, median of 3")
    rows = []
    # Measured twice in alternating order so a drifting machine shows up.
    for rnd in range(2):
        for name, make in (PATHS if rnd == 0 else PATHS[::-1]):
            try:
                us = per_launch_us(make(), args.launches)
            except Exception as e:  # a missing package or an API change
                rows.append({"path": name, "round": rnd, "us": None,
                             "note": f"{type(e).__name__}: {e}"})
                continue
            rows.append({"path": name, "round": rnd, "us": round(us, 3)})
    print(f"{'path':<55} {'round 1':>9} {'round 2':>9}")
    for name, _ in PATHS:
        r = [x for x in rows if x["path"] == name]
        cells = [f"{x['us']:.2f} us" if x["us"] is not None else "n/a" for x in r]
        print(f"{name:<55} {cells[0]:>9} {cells[1]:>9}")
        for x in r:
            if x.get("note") and x["round"] == 0:
                print(f"    ({x['note']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(drvgemm.device()), "launches": args.launches, "rows": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
