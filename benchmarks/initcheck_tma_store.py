"""Does compute-sanitizer's initcheck see what the copy engine writes?

    compute-sanitizer --tool initcheck python benchmarks/initcheck_tma_store.py EPILOGUE

Runs the bf16 Hopper rung once with C in fresh (uninitialised) device memory,
with the given epilogue (0: the threads store C; 2: TMA stores from shared
memory), copies C back and checks every element against the exact result.
If initcheck reports the copy-back as reading uninitialised memory for
EPILOGUE=2 but not for EPILOGUE=0, while the result is exact, the report is
about the tool (writes by the copy engine are not tracked), not the kernel.
"""
import argparse
import dataclasses
import sys

import numpy as np

import drvgemm
from drvgemm.ladders.gemm import dispatch, hopper, registry
from drvgemm.runtime import tensormap
from drvgemm.runtime.launch import launch


def main(epilogue: int) -> int:
    base = dispatch.rung("20_tma_wgmma_bf16")
    d = {**base.defines, "EPILOGUE": epilogue}
    r = dataclasses.replace(base, name=f"{base.name}[EPILOGUE={epilogue}]", defines=d,
                            smem=hopper.wgmma_smem_bytes(d["STAGES"], epilogue))
    m, n, k = 70, 136, 40
    # A fresh seed per run: memory left over from an earlier run of the same
    # product cannot pass for this one's result.
    rng = np.random.default_rng()
    a = rng.integers(-4, 5, (m, k)).astype(np.float32).astype(dispatch.input_dtype("bf16"))
    b = rng.integers(-4, 5, (k, n)).astype(np.float32).astype(dispatch.input_dtype("bf16"))
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C = drvgemm.empty((m, n), np.float32)          # never written by the host
    kern = registry.rung_kernel(r, True)
    cfg = hopper.wgmma_gemm_launch_config(r, A, B, C, m, n, k, 1.0, 0.0, kernel=kern)
    launch(kern, cfg["grid"], cfg["block"], cfg["args"],
           smem=cfg["smem"], cluster=cfg["cluster"])
    drvgemm.synchronize()
    got = C.to_host()
    exact = np.array_equal(got.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))
    print(f"EPILOGUE={epilogue}: TMA-store path {'on' if cfg['args'][2] is not tensormap.UNUSED_MAP else 'off'}, "
          f"result {'exact' if exact else 'WRONG'}", flush=True)
    return 0 if exact else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="the bf16 Hopper rung once into fresh device memory, "
                                             "for compute-sanitizer's initcheck")
    ap.add_argument("epilogue", nargs="?", type=int, choices=(0, 2), default=2,
                    help="0: the threads store C; 2: TMA stores from shared memory (default)")
    sys.exit(main(ap.parse_args().epilogue))
