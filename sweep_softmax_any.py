"""GPU sweep of alternative any-row softmax instantiations on the weak shapes
(variants outside the planner's registry): copy ratio of each, against a
device copy of the same bytes, L2 flushed, median of 15."""
import json
import statistics
import sys
import time

import numpy as np

import drvgemm
from drvgemm import driver, timing
import drvgemm_softmax_any as A
from check_softmax_any import np_dtype, reference

T0 = time.time()
C = A.AnyRowConfig


def cl(t, it, vec, c, mb):
    return C("cluster", t, it, vec, cluster=c, min_blocks=mb)


def sp(it, vec, mb=2):
    return C("split", 512, it, vec, min_blocks=mb)


CASES = [
    (8192, 50257, "fp32", [cl(256, 7, 4, 8, 4), cl(256, 8, 4, 7, 4), cl(512, 4, 4, 8, 2), sp(8, 4), sp(4, 4)]),
    (1024, 50257, "fp32", [cl(256, 7, 4, 8, 4), cl(512, 4, 4, 8, 2)]),
    (1024, 128256, "fp32", [cl(256, 8, 4, 16, 4), cl(512, 4, 4, 16, 2), sp(8, 4)]),
    (512, 151936, "fp32", [cl(512, 5, 4, 16, 2), cl(256, 8, 4, 16, 4), sp(8, 4), sp(4, 4)]),
    (8192, 50257, "bf16", [cl(256, 4, 8, 7, 4), cl(256, 4, 8, 8, 4), cl(512, 2, 8, 8, 2), sp(4, 8)]),
    (1024, 128256, "bf16", [cl(512, 2, 8, 16, 2), cl(256, 4, 8, 16, 4), cl(512, 4, 8, 4, 2)]),
    (512, 151936, "bf16", [cl(512, 3, 8, 16, 2), cl(512, 4, 8, 10, 2), sp(4, 8)]),
    (2048, 32000, "bf16", [cl(256, 4, 8, 4, 4), cl(512, 2, 8, 4, 2), cl(512, 4, 8, 2, 2)]),
    (16, 1048576, "fp32", [sp(2, 4), sp(4, 4), sp(8, 4)]),
    (64, 262144, "fp32", [sp(2, 4), sp(4, 4), sp(8, 4)]),
    (4, 1048576, "bf16", [sp(1, 8), sp(2, 8), sp(4, 8)]),
]


def make_plan(cfg, rows, cols, prec):
    if cfg.kind == "cluster":
        return A.AnyRowPlan(cfg, prec, (rows * cfg.cluster, 1, 1), (cfg.threads, 1, 1), 0)
    nv = A.window_vectors(cols, cfg.vec, True)
    c, split, slots = A._plan_split(rows, nv, [cfg], driver.device().sm_count)
    return A.AnyRowPlan(c, prec, (slots * split, 1, 1), (c.threads, 1, 1), 0, split=split, slots=slots,
                        workspace_bytes=A.split_workspace_layout(slots, split)["bytes"], cooperative=True)


def time_plan(p, x, y, rows, cols):
    k = A.compiled(p)
    if p.config.kind == "cluster" and p.config.cluster > 8:
        driver.set_function_attribute(k.function, "NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)
    if p.split:
        if A._resident_blocks(k, p.config.threads) < p.grid[0]:
            return None, "not resident"
        ws = A.workspace(p.workspace_bytes)
        fn = lambda: drvgemm.launch(k, p.grid, p.block, (x.ptr, y.ptr, rows, cols, cols, cols, ws.ptr, p.split),  # noqa
                                    attributes=A._cooperative_attr())
    else:
        fn = lambda: drvgemm.launch(k, p.grid, p.block, (x.ptr, y.ptr, rows, cols, cols, cols))  # noqa
    y.fill_bytes(0xFF)
    fn()
    driver.synchronize()
    return statistics.median(timing.time_ms(fn, warmup=2, reps=15, flush_l2=True)), fn


def main():
    out = []
    for rows, cols, prec, variants in CASES:
        if time.time() - T0 > 80:
            print("sweep time budget reached", flush=True)
            break
        dt = np_dtype(prec)
        xh = (np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32) * 3).astype(dt)
        x = driver.to_device(xh)
        y = driver.empty((rows, cols), dt)
        moved = 2 * x.nbytes
        cp = statistics.median(timing.time_ms(lambda: driver.memcpy_dtod(y, x, x.nbytes), warmup=2, reps=15,
                                              flush_l2=True))
        default = A.plan(rows, cols, prec, True, driver.device().sm_count, cc=driver.device().cc)
        for cfg in [default.config] + variants:
            rec = {"rows": rows, "cols": cols, "precision": prec, "config": cfg.describe()}
            try:
                p = default if cfg is default.config else make_plan(cfg, rows, cols, prec)
                ms, _ = time_plan(p, x, y, rows, cols)
                if ms is None:
                    rec["error"] = "not resident"
                else:
                    idx = [0, rows // 2, rows - 1]
                    got = y.to_host().reshape(rows, cols)[idx].astype(np.float64)
                    ref = reference(xh[idx])
                    rec["max_rel_err"] = float(np.max(np.abs(got - ref) / ref))
                    rec["ratio"] = round(cp / ms, 3)
                    rec["describe"] = p.describe()
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"[:200]
            out.append(rec)
            print(f"[{time.time() - T0:5.1f}s] {rows}x{cols} {prec} {rec.get('describe', rec['config'])}: "
                  f"{rec.get('ratio', rec.get('error'))} err={rec.get('max_rel_err')}", flush=True)
        x.free()
        y.free()
    if len(sys.argv) > 1:
        json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
