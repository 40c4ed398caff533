"""Split-K through a workspace, shared by the host sides that split K (rung
20's, hopper.py, and the plain SIMT rung 08's, host.py): the layout of the
partial products and the launch of their deterministic reduction.

With K in S pieces, piece s takes the k-tiles ``split_ranges(KT, S)[s]`` and
writes its raw fp32 partial product, an M x N row-major matrix, at
workspace + s * split_stride(M, N) elements. A second launch,
cu/gemm/split_reduce.cu, adds the S slices element by element in split order
0, 1, ..., S - 1, applies alpha and beta and writes C in its own type: the
same bits on every run, whatever the grid (no atomics)."""
from __future__ import annotations

from ...runtime import driver
from ...runtime.kernel import compile_once
from ...runtime.launch import LaunchConfig

__all__ = ["SLICE_ALIGN", "split_ranges", "split_stride", "split_workspace_bytes",
           "REDUCE_ENTRIES", "DEEP_REDUCE_ENTRIES", "deep_reduce", "reduce_kernel",
           "reduce_launch", "reduce_launch_config", "split_kernel"]

SLICE_ALIGN = 64      # elements: each split's slice of the workspace starts 256-byte aligned
REDUCE_THREADS = 256  # split_reduce.cu: four elements of C per thread
# C's type -> the entry of split_reduce.cu that writes it
REDUCE_ENTRIES = {"fp32": "split_reduce_f32", "bf16": "split_reduce_bf16",
                  "fp16": "split_reduce_fp16"}
# ... and its deep entry, which keeps 16 slices' loads in flight per thread
# at one block an SM: for a C too small to give every SM a block of the plain
# entry, split more than DEEP_MIN_SPLITS times (a long K over a small C).
DEEP_REDUCE_ENTRIES = {"fp32": "split_reduce_deep_f32", "bf16": "split_reduce_deep_bf16",
                       "fp16": "split_reduce_deep_fp16"}
DEEP_MIN_SPLITS = 4


def split_ranges(kt: int, splits: int) -> list:
    """The k-tiles [kt0, kt1) of each piece, as the kernels compute them:
    together they cover [0, kt) once, and differ in length by at most one
    (none is empty while splits <= kt)."""
    return [(s * kt // splits, (s + 1) * kt // splits) for s in range(splits)]


def split_stride(m: int, n: int) -> int:
    """Elements between two splits' partials in the workspace: M * N rounded
    up to SLICE_ALIGN, so each slice starts 256-byte aligned (16 bytes are what
    the reduction's vector loads need)."""
    return -(-(int(m) * int(n)) // SLICE_ALIGN) * SLICE_ALIGN


def split_workspace_bytes(m: int, n: int, split: int) -> int:
    """Device scratch for ``split`` pieces of K: S fp32 partials of M x N
    (none for split 1). Enough for any K: a launch may use fewer pieces."""
    return 0 if int(split) <= 1 else 4 * int(split) * split_stride(m, n)


def reduce_kernel(out: str = "fp32", deep: bool = False):
    """The compiled reduction writing a C of ``out`` ("fp32", "bf16" or
    "fp16") for the current device (sm_90 with none), cached per process;
    ``deep``: its deep entry (deep_reduce)."""
    entry = (DEEP_REDUCE_ENTRIES if deep else REDUCE_ENTRIES).get(out)
    if entry is None:
        raise ValueError(f"the split-K reduction writes fp32, bf16 or fp16, not {out!r}")
    return compile_once("split_reduce.cu", entry, dependent_launch=True)


def deep_reduce(m, n, splits, sm_count) -> bool:
    """Whether the reduction of ``splits`` partials of M x N takes the deep
    entry: more than DEEP_MIN_SPLITS of them, over a C whose 4-element groups
    give at most one block of REDUCE_THREADS to each SM (the plain entry's 8
    blocks an SM would stand idle there). Same bits either way."""
    groups = -(-(int(m) * int(n)) // 4)
    return int(splits) > DEEP_MIN_SPLITS and groups <= REDUCE_THREADS * int(sm_count)


def reduce_launch(partials, c, m, n, splits, alpha, beta, out: str = "fp32") -> tuple:
    """(kernel, LaunchConfig) of the reduction into a C of ``out``: the
    plain or the deep entry (deep_reduce), on reduce_launch_config's grid."""
    deep = deep_reduce(m, n, splits, driver.device().sm_count)
    return (reduce_kernel(out, deep),
            reduce_launch_config(partials, c, m, n, splits, alpha, beta))


def reduce_launch_config(partials, c, m, n, splits, alpha, beta) -> LaunchConfig:
    """The launch of split_reduce.cu over an M x N C from ``splits`` partials:
    four elements per thread, at most 8 blocks of 256 threads per SM (a
    grid-stride loop does the rest)."""
    count = int(m) * int(n)
    groups = -(-count // 4)
    blocks = max(1, min(-(-groups // REDUCE_THREADS), 8 * driver.device().sm_count))
    return LaunchConfig((blocks, 1, 1), (REDUCE_THREADS, 1, 1), 0,
                        (partials, c, count, split_stride(m, n), int(splits), float(alpha),
                         float(beta)))


def split_kernel(rung, kernel, *, aligned=True, narrow_output=False):
    """The instantiation that runs K in more than one piece: ``kernel`` when it
    is the split-K build (SPLIT_K=1, registry.rung_kernel(..., split_k=True)),
    else that build, compiled (cached). The SPLIT_K=0 build launched for
    several pieces would write C from each: it is never used for that."""
    if getattr(kernel, "split_k", False):
        return kernel
    return _split_build(rung, aligned, narrow_output)


def _split_build(rung, aligned, narrow_output):
    """registry.rung_kernel(rung, aligned, narrow_output=..., split_k=True):
    the registry (which imports this module) installs it on import."""
    raise RuntimeError("drvgemm.ladders.gemm.registry is not imported")
