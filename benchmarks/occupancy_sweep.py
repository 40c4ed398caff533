"""Does a memory-bound kernel reach peak bandwidth at 33-50% occupancy?

A copy kernel (cu/copy_occupancy.cu) is launched with exactly k blocks on
every SM: the grid is k x SM count and each block asks for the most dynamic
shared memory that still lets k blocks fit, so the occupancy model (checked
against the driver's answer) pins residency to k. k runs from 1 block per
SM to full occupancy; each point is timed (device events, L2 flushed, median)
and its bandwidth (bytes read + bytes written over time) is set beside
Little's law: to sustain a bandwidth B with latency L, L x B bytes must be in
flight. Each thread has UNROLL 16-byte loads in flight, so a point holds
k x threads/block x SMs x 16 x UNROLL bytes of reads in flight and can move at
most that over L. L is measured here with a pointer chase through DRAM.

    python benchmarks/occupancy_sweep.py [--plot out.png] [--json out.json]
        [--block 64] [--unroll 1,4] [--mib 256] [--reps 20]

With no GPU it prints the planned points (the model's numbers) and exits.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import drvgemm
from drvgemm.runtime import driver, timing
from drvgemm.analysis.occupancy import (SPECS, DeviceSpec, available_dynamic_smem, format_size,
                                        model)
from drvgemm.analysis.roofline import bytes_in_flight
from drvgemm.tools.records import device_json as _device_json

SOURCE = "copy_occupancy.cu"
SEED_EXAMPLE = dict(latency_cycles=800, clock_hz=2.175e9, bandwidth=360e9)


def plan(spec: DeviceSpec, resources, block: int):
    """[(blocks per SM, dynamic smem padding, model point)] from one block per
    SM to as many as fit with no padding."""
    full = model(spec, resources.registers, block, 0, resources.static_smem).blocks_per_sm
    points = []
    for k in range(1, full + 1):
        pad = available_dynamic_smem(spec, resources.registers, block, k, resources.static_smem)
        point = model(spec, resources.registers, block, pad, resources.static_smem)
        if point.blocks_per_sm == k:
            points.append((k, pad, point))
    return points


def measure_latency(span_mib=128, node_bytes=256, hops=20000, seed=0):
    """(ns, SM cycles) per dependent load through a random cycle of nodes
    spread over a region well beyond L2, started cold after an L2 flush."""
    k = drvgemm.compile(SOURCE, "chase_latency")
    slots = span_mib * 2**20 // 4
    stride = node_bytes // 4
    nodes = slots // stride
    order = np.random.default_rng(seed).permutation(nodes).astype(np.int64) * stride
    chain = np.zeros(slots, np.uint32)
    chain[order] = np.roll(order, -1).astype(np.uint32)
    d_chain = drvgemm.to_device(chain)
    sink = drvgemm.empty(1, np.uint32)
    cycles = drvgemm.empty(1, np.int64)
    start = int(order[0])
    ms = timing.median_ms(lambda: drvgemm.launch(k, 1, 1, (d_chain, start, hops, sink, cycles)),
                          warmup=1, reps=5)
    cyc = int(cycles.to_host()[0]) / hops
    return ms * 1e6 / hops, cyc


def run(args):
    dev = drvgemm.device()
    spec = DeviceSpec.from_device(dev)
    block = args.block
    n = args.mib * 2**20 // 16                      # float4 elements per buffer
    nbytes = n * 16
    host = np.arange(n * 4, dtype=np.float32) % 65521 + 1   # never zeros
    src = drvgemm.to_device(host)
    dst = drvgemm.empty(n * 4, np.float32)

    ns, cyc = measure_latency()
    latency_s = ns * 1e-9
    print(f"{dev}")
    print(f"DRAM latency (pointer chase, idle): {ns:.0f} ns = {cyc:.0f} SM cycles "
          f"({cyc / ns:.2f} GHz)")

    copy_ms = timing.median_ms(lambda: driver.memcpy_dtod(dst, src, nbytes), reps=args.reps)
    copy_gbps = 2 * nbytes / copy_ms / 1e6
    print(f"device-to-device copy of {nbytes / 2**20:.0f} MiB: {copy_gbps:.0f} GB/s "
          "(read + written)\n")

    records = []
    for unroll in args.unroll:
        k = drvgemm.compile(SOURCE, "copy_occupancy", defines={"UNROLL": unroll})
        res = k.resources
        if res is None:
            # The driver's view of the loaded function says the same thing.
            print(f"note: no ptxas figures for {k.entry} (log starts {k.log[:200]!r}); "
                  "using the driver's attributes", file=sys.stderr)
            a = k.attributes()
            from drvgemm.runtime.compiler import Resources
            res = Resources(registers=a["num_regs"], spill_stores=0, spill_loads=0,
                            stack=a["local_size_bytes"], static_smem=a["shared_size_bytes"])
        for blocks, pad, point in plan(spec, res, block):
            occ = drvgemm.occupancy(k, block, pad)
            grid = blocks * dev.sm_count
            ms = timing.median_ms(lambda: drvgemm.launch(k, grid, block, (src, dst, n), smem=pad),
                                  reps=args.reps)
            in_flight = blocks * block * dev.sm_count * 16 * unroll
            records.append(dict(
                kernel=f"copy_occupancy_u{unroll}", unroll=unroll, block=block,
                blocks_per_sm=blocks, driver_blocks_per_sm=occ.driver_blocks_per_sm,
                warps_per_sm=point.active_warps, occupancy=point.occupancy, smem_pad=pad,
                read_bytes_in_flight=in_flight, bytes=2 * nbytes, median_ms=ms,
                gbps=2 * nbytes / ms / 1e6, baseline=False))
        if not np.array_equal(dst.to_host(), host):
            raise SystemExit(f"copy_occupancy UNROLL={unroll} copied wrong data")
        dst.fill_bytes(0)

    best = max([r["gbps"] for r in records] + [copy_gbps])
    need = bytes_in_flight(latency_s, best / 2 * 1e9)   # reads only: half the counted bytes
    for r in records:
        r["little_gbps"] = min(best, 2 * r["read_bytes_in_flight"] / latency_s / 1e9)
    records.append(dict(kernel="copy", bytes=2 * nbytes, median_ms=copy_ms, gbps=copy_gbps,
                        baseline=True))
    seed_need = bytes_in_flight(SEED_EXAMPLE["latency_cycles"] / SEED_EXAMPLE["clock_hz"],
                                SEED_EXAMPLE["bandwidth"])
    summary = report(records, spec, dev, latency_s, best, need, seed_need)
    result = {"device": _device_json(dev), "block": block, "latency_ns": ns,
              "latency_cycles": cyc, "peak_gbps": best,
              "little_read_bytes_needed": need, "seed_example_bytes": round(seed_need),
              "summary": summary, "records": records}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"results written to {args.json}")
    if args.plot:
        plot(records, best, copy_gbps, args.plot, dev.name, ns)
    return 0


def report(records, spec, dev, latency_s, best, need, seed_need):
    print(f"Little's law: {latency_s * 1e9:.0f} ns x {best / 2:.0f} GB/s of reads = "
          f"{need / 1e6:.2f} MB of reads in flight on the GPU, "
          f"{need / dev.sm_count / 1e3:.1f} KB per SM "
          f"(the seed's example: 800 cycles x 360 GB/s at 2.175 GHz = {seed_need:,.0f} B)\n")
    head = (f"{'kernel':<18} {'blk/SM':>6} {'warps':>5} {'occ':>6} {'pad':>9} "
            f"{'in flight/SM':>12} {'GB/s':>7} {'of best':>7} {'Little':>7}")
    summary = {}
    for unroll in sorted({r["unroll"] for r in records if "unroll" in r}):
        rows = [r for r in records if r.get("unroll") == unroll]
        print(head)
        for r in rows:
            flag = "" if r["driver_blocks_per_sm"] in (None, r["blocks_per_sm"]) else \
                f"  driver says {r['driver_blocks_per_sm']} blocks/SM"
            print(f"{r['kernel']:<18} {r['blocks_per_sm']:>6} {r['warps_per_sm']:>5} "
                  f"{r['occupancy']:>6.1%} {format_size(r['smem_pad']):>9} "
                  f"{r['read_bytes_in_flight'] / dev.sm_count / 1e3:>9.1f} KB "
                  f"{r['gbps']:>7.0f} {r['gbps'] / best:>7.1%} {r['little_gbps']:>7.0f}{flag}")
        top = max(r["gbps"] for r in rows)
        knee = next(r for r in rows if r["gbps"] >= 0.95 * top)
        little = next((r for r in rows if r["read_bytes_in_flight"] >= need), None)
        summary[f"u{unroll}"] = dict(best_gbps=top, knee_occupancy=knee["occupancy"],
                                     little_occupancy=little and little["occupancy"])
        print(f"UNROLL={unroll}: best {top:.0f} GB/s; 95% of it from {knee['occupancy']:.1%} "
              f"occupancy ({knee['blocks_per_sm']} blocks/SM); Little's law (idle latency) "
              f"says {little['occupancy']:.1%}" if little else "Little's law: not reached")
        print()
    return summary


def plot(records, best, copy_gbps, path, name, ns):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot written")
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.axvspan(33, 50, color="0.9", label="33-50% (the seed's claim)")
    for unroll in sorted({r["unroll"] for r in records if "unroll" in r}):
        rows = [r for r in records if r.get("unroll") == unroll]
        x = [100 * r["occupancy"] for r in rows]
        line, = ax.plot(x, [r["gbps"] for r in rows], "o-", ms=3,
                        label=f"measured, {unroll} x 16 B loads in flight/thread")
        ax.plot(x, [r["little_gbps"] for r in rows], "--", color=line.get_color(),
                label=f"Little's law for {unroll} load{'s' * (unroll != 1)}, {ns:.0f} ns")
    ax.axhline(copy_gbps, color="k", lw=0.8, label=f"cuMemcpyDtoD {copy_gbps:.0f} GB/s")
    ax.set_xlabel("occupancy (% of warp slots)")
    ax.set_ylabel("GB/s (read + written)")
    ax.set_title(f"copy bandwidth vs occupancy, {name}")
    ax.set_xlim(0, 101)
    ax.set_ylim(0, best * 1.1)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def show_plan(args, reason):
    spec = SPECS["H200"]
    print(f"no GPU found ({reason}): nothing measured. The planned points on the "
          f"{spec.name} model:")
    for unroll in args.unroll:
        k = drvgemm.compile(SOURCE, "copy_occupancy", defines={"UNROLL": unroll}, arch="sm_90")
        print(f"UNROLL={unroll} ({k.resources.registers} registers/thread), "
              f"{args.block}-thread blocks:")
        for blocks, pad, point in plan(spec, k.resources, args.block):
            print(f"  {blocks:>3} blocks/SM  {point.active_warps:>3} warps  "
                  f"{point.occupancy:>6.1%}  pad {format_size(pad)}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plot", metavar="PATH", help="write a PNG plot (needs matplotlib)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--block", type=int, default=64, help="threads per block (default 64)")
    p.add_argument("--unroll", default="1,4",
                   help="16-byte loads in flight per thread, comma separated (default 1,4)")
    p.add_argument("--mib", type=int, default=256, help="MiB per buffer (default 256)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per point")
    args = p.parse_args(argv)
    args.unroll = [int(u) for u in args.unroll.split(",") if u.strip()]
    if args.block % 32 or not 32 <= args.block <= 1024:
        p.error("--block must be a multiple of 32 from 32 to 1024")
    reason = drvgemm.no_gpu_reason()
    if reason:
        return show_plan(args, reason)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
