"""Instruction ceilings of the current GPU: how many FLOP/s the SMs reach
when they do nothing but FFMA, or nothing but one shape of mma.sync, on
values already in registers (cu/ceilings.cu). The tensor-core rungs are
judged against these, measured in the same run as the rungs themselves,
rather than against datasheet peaks that mma.sync cannot reach on Hopper
(only wgmma can).

``drvgemm ceilings`` (drvgemm/cli/ceilings.py) prints them; ``measure_ceilings()``
returns them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..runtime import driver, timing
from ..runtime.kernel import compile as compile_kernel
from ..runtime.launch import launch

SOURCE = "ceilings.cu"
BLOCKS_PER_SM = 8          # x 256 threads = 2048, an SM's full complement
THREADS = 256
CHAINS = 4                 # independent accumulators per thread / warp (cu/ceilings.cu)


@dataclass(frozen=True)
class Ceiling:
    key: str               # name in measure_ceilings()'s result
    entry: str             # kernel in cu/ceilings.cu
    precision: str         # roofline precision it is the peak of
    flop_per_iter: int     # per thread (FFMA) or per warp (mma.sync), one loop iteration
    per_warp: bool
    iters: int             # loop count: ~10 ms at the H200's rates
    label: str


CEILINGS = (
    # 4*CHAINS chains x 16 FMAs x 2 FLOP per thread and iteration.
    Ceiling("ffma_fp32", "ffma_peak", "fp32", 4 * CHAINS * 16 * 2, False, 4096,
            "FFMA fp32"),
    # CHAINS MMAs per warp and iteration; m16n8k8 = 2*16*8*8 FLOP.
    Ceiling("mma_tf32", "mma_tf32_peak", "tf32", CHAINS * 2 * 16 * 8 * 8, True, 65536,
            "mma.sync.m16n8k8 tf32"),
    # m16n8k16 = 2*16*8*16 FLOP.
    Ceiling("mma_bf16", "mma_bf16_peak", "bf16", CHAINS * 2 * 16 * 8 * 16, True, 65536,
            "mma.sync.m16n8k16 bf16"),
    Ceiling("mma_fp16", "mma_fp16_peak", "fp16", CHAINS * 2 * 16 * 8 * 16, True, 65536,
            "mma.sync.m16n8k16 fp16"),
)


def flops(c: Ceiling, blocks: int, iters: int) -> int:
    """FLOP one launch of ``c`` performs."""
    units = blocks * THREADS // 32 if c.per_warp else blocks * THREADS
    return units * iters * c.flop_per_iter


def ceiling_launch(c: Ceiling, scale: float = 1.0, out=None):
    """(run, flop): a callable that launches ``c`` once over the whole GPU
    (``BLOCKS_PER_SM`` x SM-count blocks of 256 threads, the loop count
    times ``scale``) and the FLOP of one launch. ``out``: the sink buffer
    (made when None)."""
    blocks = driver.device().sm_count * BLOCKS_PER_SM
    if out is None:
        out = driver.empty((blocks * THREADS,), np.float32)
    k = compile_kernel(SOURCE, c.entry)
    iters = max(1, int(c.iters * scale))
    args = [out, iters, 0.5, 0] if c.per_warp else [out, iters, 0.999, 0.001, 0]
    return (lambda: launch(k, blocks, THREADS, args)), flops(c, blocks, iters)


def measure_ceilings(*, reps: int = 10, scale: float = 1.0) -> dict:
    """{"ffma_fp32": TFLOP/s, "mma_tf32": ..., "mma_bf16": ..., "mma_fp16": ...}
    on the current GPU: median of ``reps`` timed launches of
    ``BLOCKS_PER_SM`` x SM-count blocks of 256 threads each, L2 left alone
    (nothing here touches memory). ``scale`` multiplies the loop counts."""
    out = driver.empty((driver.device().sm_count * BLOCKS_PER_SM * THREADS,), np.float32)
    result = {}
    for c in CEILINGS:
        run, flop = ceiling_launch(c, scale, out)
        ms = timing.median_ms(run, warmup=2, reps=reps, flush_l2=False)
        result[c.key] = flop / (ms * 1e-3) / 1e12
    return result


def roofline_peaks(ceilings: dict) -> dict:
    """measure_ceilings()'s result as roofline peaks: {"fp32": FLOP/s, ...},
    for drvgemm.analysis.devices.RooflineSpec.with_measured."""
    by_key = {c.key: c for c in CEILINGS}
    return {by_key[k].precision: v * 1e12 for k, v in ceilings.items() if k in by_key}


def format_table(ceilings: dict, device_name: str = "") -> str:
    lines = [f"Instruction ceilings{' of ' + device_name if device_name else ''} "
             "(register-only loops, one wave of 8 x 256-thread blocks per SM)"]
    w = max(len(c.label) for c in CEILINGS)
    for c in CEILINGS:
        if c.key in ceilings:
            lines.append(f"  {c.label:<{w}}  {ceilings[c.key]:8.1f} TFLOP/s")
    return "\n".join(lines)


_device_ceilings = None


def copy_bandwidth(nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus
    bytes written (the figure memory-bound kernels are compared with)."""
    src = driver.empty((nbytes,), "uint8").fill_bytes(1)
    dst = driver.empty((nbytes,), "uint8")
    ms = timing.median_ms(lambda: driver.memcpy_dtod(dst, src, nbytes), warmup=2, reps=reps)
    src.free()
    dst.free()
    return 2 * nbytes / (ms * 1e-3)


def device_ceilings() -> dict:
    """The live GPU's measured ceilings as roofline figures, measured once per
    process: {"fp32", "tf32", "bf16", "fp16": FLOP/s, "dram_bw": B/s}."""
    global _device_ceilings
    if _device_ceilings is None:
        measured = roofline_peaks(measure_ceilings())
        measured["dram_bw"] = copy_bandwidth()
        _device_ceilings = measured
    return dict(_device_ceilings)
