"""What a softmax pass that reads all, then writes all, can reach: the time
of a device copy of N bytes against a read of N bytes followed by a write of
N bytes (two kernels, back to back on one stream), with torch on the GPU:

    python benchmarks/read_write_phases.py [--sizes 16,64,128] [--reps 20] [--json PATH]

Each size is MiB each way (fp32 elements). The read is ``x.sum()`` (one pass
over x, a few bytes written), the write ``y.fill_(1.0)``, the copy
``y.copy_(x)``; L2 is flushed before every timed call (a buffer of twice its
size overwritten). Rung 09's passes (read a chunk, wait for the row, write
it) run at ~0.70 of copy: if read + write in sequence already cost that much
more than a copy, the phases themselves are the limit, not the rung's work
between them.

``--resident`` adds the probe kernels of cu/tools/read_write_phases.cu, which
move the bytes the way a resident pass of rung 09 does, without the softmax:
a grid of every block that fits (512 threads, two an SM up to 7 vectors) reads VECS 16-byte
vectors a thread into registers, then writes them; ``phases_local`` lets each
block write as soon as its own loads landed, ``phases_global`` only once every
block of the grid has loaded (a grid-wide counter between the two phases),
for VECS in --vecs and 1, 2 or 4 passes; each against the copy of the same
bytes in the same run.

``--groups`` (forty-fifth round) times a part of a resident grid loading:
the first ACTIVE blocks of a grid of every block that fits (512 threads, 8
vectors a thread, two an SM) read their 64 KiB chunk and add its sum to one
float a block, the rest return at once -- by LDG into registers (as rung 09
does) and by bulk copies into shared memory (the copy engine's queue), for
ACTIVE the whole grid and half of it (one block an SM where the scheduler
deals the first blocks one an SM, as rung 09's timeline saw). A group of rows
staggered inside one launch (rung 09's lost STAGGER_GROUPS) is half a grid
loading: whether bulk copies pull more bytes a second there than LDG does.
``--sizes=`` (empty) leaves out the torch comparison."""
from __future__ import annotations

import argparse
import json
import statistics
import sys


def _median_ms(torch, fn, flush, reps):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="16,64,128", help="MiB each way, comma-separated")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--resident", action="store_true",
                   help="also the resident read-all-then-write-all probe kernels (drvgemm)")
    p.add_argument("--stream-sizes", default="16,32,48,64,128",
                   help="--resident: MiB each way of the one-way stream probes")
    p.add_argument("--variants", default="",
                   help="--resident: extra builds of the phases kernels, NAME:KEY=V,... (e.g. "
                        "plain:STREAMING=0 expf:COMPUTE=1), each timed next to the default")
    p.add_argument("--vecs", default="4,7,14", help="--resident: vectors a thread, comma-separated "
                   "(up to 7: two blocks an SM, as rung 09's; more: one)")
    p.add_argument("--groups", action="store_true",
                   help="a part of a resident grid loading: LDG into registers against bulk copies")
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("read_write_phases.py needs torch with CUDA on the GPU machine", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("read_write_phases.py: torch sees no CUDA device", file=sys.stderr)
        return 2
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    scratch = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
    flush = lambda: scratch.fill_(0.5)  # noqa: E731
    recs = []
    for mib in (int(s) for s in args.sizes.split(",") if s):
        n = mib * (1 << 20) // 4
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        out = torch.empty((), device="cuda")
        copy = _median_ms(torch, lambda: y.copy_(x), flush, args.reps)
        read = _median_ms(torch, lambda: torch.sum(x, dim=0, out=out), flush, args.reps)
        write = _median_ms(torch, lambda: y.fill_(1.0), flush, args.reps)
        both = _median_ms(torch, lambda: (torch.sum(x, dim=0, out=out), y.fill_(1.0)), flush, args.reps)
        rec = {"mib_each_way": mib, "copy_ms": copy, "read_ms": read, "write_ms": write,
               "read_then_write_ms": both, "copy_over_read_then_write": copy / both}
        recs.append(rec)
        print(f"{mib:5d} MiB: copy {1e3 * copy:7.1f} us, read {1e3 * read:7.1f}, write "
              f"{1e3 * write:7.1f}, read then write {1e3 * both:7.1f} us: copy / (read then "
              f"write) = {copy / both:.3f}", flush=True)
        del x, y
    if args.resident:
        recs += _resident(torch, flush, args)
    if args.groups:
        recs += _groups(torch, flush, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "records": recs}, f, indent=1)
    return 0


def _resident(torch, flush, args):
    import drvgemm
    threads = 512
    counters = torch.zeros(2, dtype=torch.int32, device="cuda")
    recs = []
    for vecs in (int(v) for v in args.vecs.split(",")):
        base = dict(VECS=vecs, THREADS=threads, MIN_BLOCKS=2 if vecs <= 7 else 1)
        builds = {"": {}}
        for spec in filter(None, args.variants.split(" ")):
            tag, _, kv = spec.partition(":")
            builds[tag] = {k: int(v) for k, v in (x.split("=") for x in kv.split(",") if x)}
        kern = {name + (f" {tag}" if tag else ""): drvgemm.compile(
                    "read_write_phases.cu", name, defines={**base, **extra})
                for tag, extra in builds.items() for name in ("phases_local", "phases_global")}
        # every build's grid the same: the fewest blocks any of them keeps resident
        limit, how = min(drvgemm.runtime.launch.cooperative_limit(k, threads, 0)
                         for k in kern.values())
        grid = limit
        for passes in (1, 2, 4):
            n = grid * threads * vecs * passes * 4          # fp32 elements each way
            x = torch.randn(n, device="cuda")
            rec = {"vecs": vecs, "passes": passes, "grid": grid, "resident": how,
                   "mib_each_way": n * 4 / 2**20}
            y = torch.empty_like(x)
            rec["copy_ms"] = _median_ms(torch, lambda: y.copy_(x), flush, args.reps)
            for name, k in kern.items():
                y.zero_()
                coop = name.startswith("phases_global")
                run = lambda: drvgemm.launch(k, grid, threads,  # noqa: E731
                                             (x, y, passes, counters), cooperative=coop)
                rec[name + "_ms"] = _median_ms(torch, run, flush, args.reps)
                if " " not in name:     # the copying builds (COMPUTE 0) only
                    rec[name + "_correct"] = bool(torch.equal(x, y))
                rec[name + "_of_copy"] = rec["copy_ms"] / rec[name + "_ms"]
            print(f"resident {vecs:2d} vectors x {passes} passes ({rec['mib_each_way']:.0f} MiB, "
                  f"grid {grid}): copy {1e3 * rec['copy_ms']:.1f} us; of copy: "
                  + ", ".join(f"{name[7:]} {rec[name + '_of_copy']:.3f}" for name in kern)
                  + f" (correct {rec['phases_local_correct']} / {rec['phases_global_correct']})",
                  flush=True)
            recs.append(rec)
            del x, y
    recs += _streams(torch, flush, args, drvgemm, threads)
    return recs


def _groups(torch, flush, args):
    """The first `active` blocks of a resident grid load their chunks, by LDG
    into registers and by bulk copies into shared memory: TB/s of the bytes
    the active blocks read, whole grid and half of it, with the sums checked."""
    import drvgemm
    from drvgemm.runtime.launch import cooperative_limit
    threads, vecs = 512, 8
    chunk = vecs * threads * 16                        # bytes a block
    smem = {"group_load_regs": 0, "group_load_bulk": chunk}
    kern = {n: drvgemm.compile("read_write_phases.cu", n,
                               defines=dict(VECS=vecs, THREADS=threads, MIN_BLOCKS=2)) for n in smem}
    kern["group_load_bulk"].set_max_dynamic_smem(chunk)
    # two blocks an SM, as rung 09's chunks (more would fit these kernels)
    grid = min([2 * torch.cuda.get_device_properties(0).multi_processor_count]
               + [cooperative_limit(k, threads, smem[n])[0] for n, k in kern.items()])
    x = torch.randn(grid * chunk // 4, device="cuda")
    want = x.view(grid, -1).sum(dim=1)
    sums = torch.zeros(grid, device="cuda")
    recs = []
    for active in (grid, grid // 2):
        rec = {"group_blocks": active, "grid": grid, "chunk_bytes": chunk, "mib": active * chunk / 2**20}
        for name, k in kern.items():
            run = lambda k=k, name=name: drvgemm.launch(k, grid, threads, (x, sums, active),  # noqa: E731
                                                        smem=smem[name])
            sums.zero_()
            run()
            torch.cuda.synchronize()
            rec[name + "_correct"] = bool(torch.allclose(sums[:active], want[:active], rtol=1e-3, atol=1e-2)
                                          and not sums[active:].any())
            ms = _median_ms(torch, run, flush, args.reps)
            rec[name + "_ms"] = ms
            rec[name + "_tbps"] = active * chunk / ms / 1e9
        print(f"groups: {active} of {grid} blocks load {rec['mib']:.1f} MiB: LDG "
              f"{rec['group_load_regs_tbps']:.2f} TB/s ({1e3 * rec['group_load_regs_ms']:.1f} us), bulk "
              f"{rec['group_load_bulk_tbps']:.2f} TB/s ({1e3 * rec['group_load_bulk_ms']:.1f} us); correct "
              f"{rec['group_load_regs_correct']} / {rec['group_load_bulk_correct']}", flush=True)
        recs.append(rec)
    return recs


def _streams(torch, flush, args, drvgemm, threads):
    """One-way streams of a chunk a block (cu/tools/read_write_phases.cu):
    the read's and the write's own rates, a read then a write (two launches),
    and a read then a copy of the same bytes, whose second read finds them in
    L2 where they fit (a two-pass softmax's pattern: statistics, then
    normalise): each against the device copy in the same run."""
    vecs = 4
    defines = dict(VECS=vecs, THREADS=threads, MIN_BLOCKS=1)
    k = {n: drvgemm.compile("read_write_phases.cu", n, defines=defines)
         for n in ("stream_read", "stream_write", "stream_copy")}
    recs = []
    for mib in (int(s) for s in args.stream_sizes.split(",") if s):
        n = mib * (1 << 20) // 4
        grid = n // (4 * vecs * threads)
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        sums = torch.zeros(grid, device="cuda")
        read = lambda: drvgemm.launch(k["stream_read"], grid, threads, (x, sums))  # noqa: E731
        write = lambda: drvgemm.launch(k["stream_write"], grid, threads, (y, 1.0))  # noqa: E731
        copy = lambda: drvgemm.launch(k["stream_copy"], grid, threads, (x, y))  # noqa: E731
        rec = {"stream_mib_each_way": mib, "vecs": vecs, "grid": grid}
        rec["device_copy_ms"] = _median_ms(torch, lambda: y.copy_(x), flush, args.reps)
        rec["kernel_copy_ms"] = _median_ms(torch, copy, flush, args.reps)
        rec["read_ms"] = _median_ms(torch, read, flush, args.reps)
        rec["write_ms"] = _median_ms(torch, write, flush, args.reps)
        rec["read_then_write_ms"] = _median_ms(torch, lambda: (read(), write()), flush, args.reps)
        rec["read_then_copy_ms"] = _median_ms(torch, lambda: (read(), copy()), flush, args.reps)
        c = rec["device_copy_ms"]
        gb = n * 4 / 1e9   # GB; over ms: TB/s
        print(f"streams {mib:4d} MiB: device copy {1e3 * c:6.1f} us; kernel copy "
              f"{c / rec['kernel_copy_ms']:.3f} of it; read {gb / rec['read_ms']:.2f} TB/s, write "
              f"{gb / rec['write_ms']:.2f} TB/s; read then write "
              f"{c / rec['read_then_write_ms']:.3f} of "
              f"copy, read then copy (L2 re-read) {c / rec['read_then_copy_ms']:.3f}", flush=True)
        recs.append(rec)
        del x, y
    return recs


if __name__ == "__main__":
    sys.exit(main())
