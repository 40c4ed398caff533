"""Rung 30's kernel before and after a change to its source, side by side in
one run: the same launches and workspace, C compared bit for bit, times
interleaved (batches of 50 back-to-back launches, median of 7 rounds).

    python3 benchmarks/rung30_before_after.py OLD_SOURCE

OLD_SOURCE is the earlier cu/gemm/30_small_m.cu, e.g. the seventh round's
(one reduction level, one kernel parameter fewer), made from the history and
not committed:

    git show 07b10b6:cu/gemm/30_small_m.cu > /tmp/old30.cu

Output of the eighth round: benchmarks/results/h200-small-m-paired.txt.
"""
import argparse
import statistics

import numpy as np
import drvgemm
from drvgemm.ladders.gemm import small_m
from drvgemm.ladders.gemm.registry import by_name
from drvgemm.runtime import driver, dtypes, timing
from drvgemm.runtime.launch import launch

CASES = [("30_small_m_bf16", 1, 4096, 4096, 4), ("30_small_m_bf16", 8, 4096, 4096, 4),
         ("30_small_m_bf16", 2, 5120, 5120, 3), ("30_small_m_bf16", 16, 8192, 8192, 2),
         ("30_small_m_bf16", 1, 128256, 4096, 8), ("30_small_m_fp32", 1, 4096, 4096, 9),
         ("30_small_m_bf16_r32", 32, 4096, 11008, 4)]


def main(old: str) -> None:
    for name, m, n, k, split in CASES:
        r = by_name()[name]
        dt = np.float32 if r.precision == "fp32" else dtypes.bf16()
        rng = np.random.default_rng(0)
        A = drvgemm.to_device(rng.standard_normal((m, k)).astype(np.float32).astype(dt))
        B = drvgemm.to_device(rng.standard_normal((k, n)).astype(np.float32).astype(dt))
        C = driver.empty((m, n), np.float32)
        ws = drvgemm.to_device(np.zeros(small_m.SMALL_M.workspace_bytes(r, m, n, split) // 4 + 64, np.float32))
        d = r.instantiation_defines(True)
        new = drvgemm.compile(r.source, r.entry, defines=d, arch="sm_90")
        old = drvgemm.compile(old, r.entry, defines=d, arch="sm_90")
        [(_, cfg)] = small_m.SMALL_M.launches(r, new, A, B, C, m, n, k, 1.0, 0.0, split=split,
                                              workspace=ws.ptr)
        args_new = cfg.args
        args_old = cfg.args[:-1]
        # the old kernel: no group argument; its tiles start right after the
        # 256-aligned strip counters (the same place as one level's here)
        strips, z = cfg.args[10], cfg.args[11]
        work_old = args_old[4] + -(-strips * z * 4 // 256) * 256
        args_old = args_old[:3] + (work_old,) + args_old[4:]
        outs = {}
        for label, kern, args in (("old", old, args_old), ("new", new, args_new)):
            launch(kern, cfg.grid, cfg.block, args, smem=cfg.smem)
            driver.synchronize()
            outs[label] = C.to_host().copy()
        same = np.array_equal(outs["old"], outs["new"])
        t = {"old": [], "new": []}
        for rep in range(7):
            for label, kern, args in (("old", old, args_old), ("new", new, args_new)):
                t[label].append(timing.batch_median_ms(
                    lambda kern=kern, args=args: launch(kern, cfg.grid, cfg.block, args, smem=cfg.smem),
                    50, 3) * 1e3)
        o, nw = statistics.median(t["old"]), statistics.median(t["new"])
        print(f"{name} {m}x{n}x{k} split={split}: old {o:.2f} us, new {nw:.2f} us, new/old {nw / o:.3f}, "
              f"same C bits {same}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="rung 30 before and after a change to its source, same run")
    ap.add_argument("old_source", help="the earlier cu/gemm/30_small_m.cu (from the history, e.g. git show 07b10b6:...)")
    main(ap.parse_args().old_source)
