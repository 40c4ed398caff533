"""Where softmax's time goes on the row lengths that stay below 0.85 of copy:
each shape's auto kernel and torch.softmax under Nsight Compute, side by side.

    python benchmarks/softmax_ncu.py [--shapes bf16:65536x129 ...] [--raw PATH]

Runs itself under ``ncu --clock-control none`` and profiles one call of each
(after a warm-up call): ``drvgemm.softmax(x, out=y)`` and ``torch.softmax``
on the same values. Prints, per kernel: duration, DRAM bytes and
throughput, instructions issued per element, issue activity, achieved
occupancy, shared-memory bank conflicts and the largest stall reasons (warps
stalled per issued instruction). Elements, not bytes, are the unit of the
instruction count, so fp32 and bf16 of one shape compare directly.
"""
from __future__ import annotations

import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))

from drvgemm.tools import ncu  # noqa: E402

# The shapes below 0.85 of copy in the committed suite (results/h200-softmax-shapes.json),
# and two that reach 0.9 for reference (bf16 524288 x 31, 100000 x 128).
SHAPES = ("bf16:262144x33", "bf16:131072x127", "bf16:65536x129", "bf16:524288x31",
          "bf16:100000x128", "fp32:262144x33", "fp32:65536x129", "fp32:131072x127",
          "bf16:16x1048576", "fp32:16x1048576", "fp32:64x262144", "fp32:1024x50257")
STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "membar", "wait", "lg_throttle",
          "mio_throttle", "math_pipe_throttle", "not_selected", "selected", "no_instruction",
          "branch_resolving", "sleeping", "drain", "dispatch_stall", "tex_throttle")
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed", "smsp__inst_executed.sum",
           "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "sm__warps_active.avg.pct_of_peak_sustained_active",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
           "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_global_ld.sum"] + \
          [f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS]
KERNEL_FILTER = "regex:softmax|SoftMax|Softmax"   # ours; torch's cunn_SoftMaxForward*


def _parse_shape(text):
    prec, _, rc = text.partition(":")
    rows, cols = (int(v) for v in rc.lower().split("x"))
    return prec, rows, cols


def child(args):
    """The profiled program: per shape, drvgemm's auto then torch, each twice."""
    import numpy as np
    import torch

    import drvgemm
    from drvgemm.runtime import driver
    from drvgemm.tools.memory_bench import softmax_inputs
    for spec in args.shapes:
        prec, rows, cols = _parse_shape(spec)
        x = softmax_inputs(rows, cols, prec)
        X = driver.to_device(x)
        Y = driver.empty(x.shape, x.dtype)
        # torch's copy of the same values (bf16 has no numpy dtype torch takes)
        tx = (torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if prec == "bf16"
              else torch.from_numpy(x)).cuda()
        for label, fn in (("drvgemm", lambda: drvgemm.softmax(X, out=Y)),
                          ("torch", lambda: torch.softmax(tx, dim=-1))):
            fn()
            driver.synchronize()
            print(f"CALL {spec} {label} elements={rows * cols}", flush=True)
            fn()
            driver.synchronize()
        X.free()
        Y.free()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), help="PREC:ROWSxCOLS ...")
    ap.add_argument("--raw", help="write ncu's CSV here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    proc = ncu.profile_child(__file__, ["--page", "raw", "--kernel-name", KERNEL_FILTER,
                                        "--metrics", ",".join(METRICS)], ["--shapes", *args.shapes], args.raw)
    if proc is None:
        print("ncu not found")
        return 1
    calls = [c.split() for c in ncu.calls(proc.stdout)]
    try:
        recs = ncu.parse_ncu_csv(proc.stdout)
    except ncu.NcuError as e:
        print(f"ncu failed ({proc.returncode}): {e}\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}")
        return 1
    # Two launches a call (warm-up, measured): the second of each pair.
    if len(recs) != 2 * len(calls):
        print(f"{len(recs)} kernels for {len(calls)} calls: cannot pair them; see --raw")
        return 1
    for (spec, label, el), rec in zip(calls, recs[1::2]):
        elements = int(el.split("=")[1])
        v = {k: (val[0] if isinstance(val, tuple) else val) for k, val in rec.items()}
        us = v["gpu__time_duration.sum"] / 1e3
        dram = (v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"]) / 1e6
        ipe = v["smsp__inst_executed.sum"] * 32 / elements
        stalls = sorted(((v.get(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio") or 0, s)
                         for s in STALLS), reverse=True)[:5]
        print(f"{spec:18s} {label:8s} {us:8.1f} us  dram {dram:7.1f} MB "
              f"{v['dram__throughput.avg.pct_of_peak_sustained_elapsed']:5.1f}%  "
              f"thread-inst/elem {ipe:6.1f}  issue {v['smsp__issue_active.avg.pct_of_peak_sustained_active']:5.1f}%  "
              f"warps {v['sm__warps_active.avg.pct_of_peak_sustained_active']:5.1f}%  "
              f"lds {v['smsp__inst_executed_op_shared_ld.sum']:.3g} conflicts "
              f"{v['l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum']:.3g}  "
              f"{rec['Kernel Name'][0][:40]}")
        print("    stalls/issue: " + ", ".join(f"{s} {x:.2f}" for x, s in stalls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
