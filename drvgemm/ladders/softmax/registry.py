"""The softmax ladder's registry: each rung (cu/softmax_0*.cu) and its
configurations, each declared once with its compile-time constants, from
which grid, block, defines and shared memory derive. The semantics and the
ladder's ideas: drvgemm/ladders/softmax/dispatch.py."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...runtime import dtypes

__all__ = ["kernels", "rung", "catalogue", "pipelined", "SoftmaxConfig", "SoftmaxRung",
           "SOFTMAX_RUNGS", "DTYPE_CODES", "INT_MAX", "dtype_name", "numpy_dtype", "source_of",
           "RESIDENT_CONFIGS", "STREAM_CONFIG", "CLUSTER_CONFIGS", "PIPELINED_CONFIGS"]

INT_MAX = 2**31 - 1


# precision name -> the DTYPE define of cu/softmax_common.cuh
DTYPE_CODES = {"fp32": 0, "bf16": 1, "fp16": 2}


def dtype_name(dtype) -> str:
    """'fp32' / 'bf16' / 'fp16' for a supported numpy dtype, else TypeError."""
    name = dtypes.precision_of(dtype)
    if name is None:
        raise TypeError(f"softmax takes float32, bfloat16 or float16 input, got "
                        f"{np.dtype(dtype)}")
    return name


def numpy_dtype(name: str) -> np.dtype:
    if name not in DTYPE_CODES:
        raise ValueError(f"precision must be one of {', '.join(DTYPE_CODES)}, got {name!r}")
    return dtypes.numpy_dtype(name)


# ---------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SoftmaxConfig:
    """One kernel of a rung with its compile-time constants. Declared once:
    grid, block, defines and the longest row it takes all derive from it.

    ``row_threads`` threads share a row: up to 32 (a power of two) packs
    ``threads // row_threads`` rows into a block; equal to ``threads`` gives a
    block per row (times ``cluster`` blocks on sm_90). ``elems`` > 0 keeps
    that many elements per thread in registers (the row must fit:
    ``cols <= row_threads * elems * cluster``); ``elems`` = 0 streams the row
    and takes any length, ``max_cols`` then only says up to where ``pick``
    prefers it. ``stages`` > 0 (rung 06) makes the kernel persistent, with
    that many shared-memory landing buffers of one slice each (used when the
    loads are 16-byte vectors; see ``smem``)."""
    entry: str
    threads: int
    row_threads: int
    elems: int = 0
    cluster: int = 1
    min_blocks: int = 1       # __launch_bounds__ second argument (caps registers)
    unroll: int = 0           # streaming kernels: vectors in flight per thread
    vector: bool = False      # 16-byte loads when the shape and pointers allow
    arch: str = "sm_80"       # lowest architecture
    max_cols: int | None = None
    stages: int = 0           # persistent kernels: landing buffers per block
    evict_first: bool = False # persistent kernels: L2 evict-first hint on the bulk copies

    def __post_init__(self):
        if self.row_threads != self.threads and not (
                self.row_threads <= 32 and self.row_threads & (self.row_threads - 1) == 0):
            raise ValueError(f"{self.entry}: row_threads must be a power of two <= 32 or "
                             f"equal threads ({self.threads})")
        if self.cluster > 1 and self.row_threads != self.threads:
            raise ValueError(f"{self.entry}: a cluster needs a block per row")
        if self.stages and not (self.elems and self.row_threads == self.threads):
            raise ValueError(f"{self.entry}: landing buffers hold a block's register slice")

    @property
    def persistent(self) -> bool:
        """The grid is as many clusters as fit at once, each walking rows."""
        return self.stages > 0

    @property
    def capacity(self) -> int | None:
        """Longest row this config can take (None: any)."""
        if self.elems:
            return self.row_threads * self.elems * self.cluster
        return None

    @property
    def limit(self) -> int | None:
        """Longest row ``pick`` hands to this config (None: any)."""
        return self.capacity if self.elems else self.max_cols

    @property
    def rows_per_block(self) -> int:
        return self.threads // self.row_threads

    def vec(self, itemsize: int) -> int:
        """Elements per vector load when aligned: 16 bytes, but never more
        than a thread holds."""
        if not self.vector:
            return 1
        v = 16 // itemsize
        return min(v, self.elems) if self.elems else v

    def defines(self, precision: str, vec: int) -> dict:
        d = {"DTYPE": DTYPE_CODES[precision], "THREADS": self.threads, "VEC": vec}
        if self.row_threads != self.threads or self.elems:
            d["ROW_THREADS"] = self.row_threads
        if self.elems:
            d["ELEMS"] = self.elems
        if self.cluster > 1 or self.entry == "softmax_06_pipelined":
            # always for 06: its source defaults to a cluster of 8
            d["CLUSTER"] = self.cluster
        if self.min_blocks > 1:
            d["MIN_BLOCKS"] = self.min_blocks
        if self.unroll:
            d["UNROLL"] = self.unroll
        if self.stages:
            d["STAGES"] = self.stages
        if self.evict_first:
            d["EVICT_FIRST"] = 1
        return d

    def smem(self, itemsize: int, vec: int) -> int:
        """Dynamic shared memory per block: the landing buffers, which exist
        only when the loads are 16-byte vectors (bulk copies need 16-byte
        aligned addresses and sizes)."""
        if self.stages and vec * itemsize == 16:
            return self.stages * self.threads * self.elems * itemsize
        return 0

    def grid(self, rows: int, resident: int | None = None) -> tuple:
        """Blocks for ``rows`` rows. A persistent config launches
        min(rows, resident) clusters (``resident``: how many fit on the GPU
        at once); without that number, one cluster per row, which is correct
        too (the kernel takes any number of clusters)."""
        if self.row_threads < self.threads:
            return (-(-rows // self.rows_per_block), 1, 1)
        if self.persistent:
            n = min(rows, resident) if resident else min(rows, INT_MAX // self.cluster)
            return (max(1, n) * self.cluster, 1, 1)
        return (rows * self.cluster, 1, 1)

    def fits(self, cols: int, cc: tuple) -> bool:
        lim = self.limit
        return (lim is None or cols <= lim) and tuple(cc) >= _arch_cc(self.arch)

    def describe(self, vec: int | None = None) -> str:
        parts = [self.entry, f"threads={self.threads}"]
        if self.row_threads < self.threads:
            parts.append(f"rows/block={self.rows_per_block}")
        if self.elems:
            parts.append(f"elems={self.elems}")
        if self.cluster > 1:
            parts.append(f"cluster={self.cluster}")
        if self.stages:
            parts.append(f"stages={self.stages}")
            if self.min_blocks > 1:
                parts.append(f"min_blocks={self.min_blocks}")
        if self.evict_first:
            parts.append("evict_first")
        if vec is not None:
            parts.append(f"vec={vec}")
        return " ".join(parts)


def _arch_cc(arch: str) -> tuple:
    n = int(arch[3:].rstrip("a"))
    return (n // 10, n % 10)


@dataclass(frozen=True)
class SoftmaxRung:
    name: str
    source: str
    summary: str
    reads: int                       # reads of the input per element (best config)
    configs: tuple = field(default_factory=tuple)   # smallest limit first

    def pick(self, cols: int, cc: tuple = (9, 0)) -> SoftmaxConfig:
        for c in self.configs:
            if c.fits(cols, cc):
                return c
        caps = [c for c in self.configs if tuple(cc) >= _arch_cc(c.arch)]
        if not caps:
            raise ValueError(f"{self.name} needs {self.configs[0].arch} or newer; the device "
                             f"is sm_{cc[0]}{cc[1]}")
        raise ValueError(f"{self.name} takes rows of at most {caps[-1].limit} elements, "
                         f"got {cols}; use kernel='auto' or softmax_04_vectorized")

    def supports(self, cols: int, cc: tuple = (9, 0)) -> bool:
        return any(c.fits(cols, cc) for c in self.configs)


def _resident(row_threads, elems, threads=None, **kw):
    return SoftmaxConfig("softmax_04_vectorized_rows", threads or max(row_threads, 128),
                         row_threads, elems=elems, vector=True, **kw)


# Register-resident buckets of rung 04: rows of up to 4 * row_threads elements
# with a few lanes each (many rows per block), then a warp per row, then a
# block per row. 32 fp32 per thread is the most that leaves room for two
# 512-thread blocks per SM (64 registers each) without spilling.
RESIDENT_CONFIGS = (
    _resident(1, 4), _resident(2, 4), _resident(4, 4), _resident(8, 4), _resident(16, 4),
    _resident(32, 4), _resident(32, 8), _resident(32, 16), _resident(32, 32),
    _resident(128, 16), _resident(128, 32), _resident(256, 32),
    _resident(512, 32, min_blocks=2),
)
STREAM_CONFIG = SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True)
CLUSTER_CONFIGS = tuple(
    SoftmaxConfig("softmax_05_cluster", 512, 512, elems=32, cluster=c, min_blocks=2,
                  vector=True, arch="sm_90")
    for c in (2, 4, 8))


def pipelined(threads, elems, cluster, stages, **kw):
    """A rung 06 config: one block per slice of ``threads * elems`` elements,
    ``stages`` landing buffers of one slice each."""
    return SoftmaxConfig("softmax_06_pipelined", threads, threads, elems=elems, cluster=cluster,
                         stages=stages, vector=True, arch="sm_90", **kw)


# Rung 06 by row length: from 1025 columns every block owns 16384 elements
# (64 KiB of fp32, the register slice of rung 05), so a row of up to
# 16384 * c elements takes a cluster of c. Three 64 KiB landing buffers (192
# KiB) keep two rows in flight while a third is read out, at one block per
# SM. Rows of up to 1024 take small blocks with 4 KiB buffers instead, a dozen
# to an SM, so that one block's reductions overlap the others' (auto prefers
# rung 04 there; this keeps the rung sensible for every shape).
# Cluster sizes and slices from `python -m drvgemm.tools.softmax_sweep` on the H200:
# at 65536 columns 8 blocks of 256 x 32 (two per SM) beat 4 of 512 x 32 (0.89 vs
# 0.87 of copy), at 131072 256 x 64 beat 512 x 32 (0.905 vs 0.896).
PIPELINED_CONFIGS = (pipelined(128, 8, 1, 4), pipelined(512, 32, 1, 3), pipelined(512, 32, 2, 3),
              pipelined(256, 32, 8, 3, min_blocks=2), pipelined(256, 64, 8, 3))

SOFTMAX_RUNGS: list[SoftmaxRung] = [
    SoftmaxRung("softmax_01_naive", "softmax_01_naive.cu",
                "three passes over the row (max, sum, write), shared-memory tree reductions",
                reads=3, configs=(SoftmaxConfig("softmax_01_naive", 256, 256),)),
    SoftmaxRung("softmax_02_online", "softmax_02_online.cu",
                "online max and sum in one pass (rescale the sum when the max grows)",
                reads=2, configs=(SoftmaxConfig("softmax_02_online", 256, 256),)),
    SoftmaxRung("softmax_03_warp_shuffle", "softmax_03_warp_shuffle.cu",
                "__shfl_xor_sync reductions: a warp per short row, a block per long row",
                reads=2, configs=(
                    SoftmaxConfig("softmax_03_warp_shuffle_warp", 256, 32, max_cols=1024),
                    SoftmaxConfig("softmax_03_warp_shuffle_block", 512, 512))),
    SoftmaxRung("softmax_04_vectorized", "softmax_04_vectorized.cu",
                "16-byte loads, the row held in registers when it fits (one read)",
                reads=1, configs=RESIDENT_CONFIGS + (STREAM_CONFIG,)),
    SoftmaxRung("softmax_05_cluster", "softmax_05_cluster.cu",
                "a long row split over a thread-block cluster, (max, sum) through DSMEM",
                reads=1, configs=CLUSTER_CONFIGS),
    SoftmaxRung("softmax_06_pipelined", "softmax_06_pipelined.cu",
                "persistent clusters; the next rows arrive by bulk copies while this one "
                "is written",
                reads=1, configs=PIPELINED_CONFIGS),
]


def kernels() -> list[str]:
    """Names of the softmax rungs, in ladder order."""
    return [r.name for r in SOFTMAX_RUNGS]


def rung(name: str) -> SoftmaxRung:
    for r in SOFTMAX_RUNGS:
        if r.name == name:
            return r
    raise ValueError(f"unknown softmax kernel {name!r}; choose 'auto' or one of "
                     f"{', '.join(kernels())}")


def source_of(entry: str) -> str:
    """The source file of a config's entry."""
    for r in SOFTMAX_RUNGS:
        if any(c.entry == entry for c in r.configs):
            return r.source
    raise ValueError(entry)


def catalogue() -> list[tuple]:
    """(label, source, entry, defines, arch) for every softmax config (fp32,
    with the vector width it takes when aligned): what ``drvgemm compile`` /
    the compile-only report lists. arch is None where the report's
    architecture will do, 'sm_90' for clusters."""
    out = []
    for r in SOFTMAX_RUNGS:
        for c in r.configs:
            vec = c.vec(4)
            out.append((c.describe(vec), r.source, c.entry,
                        c.defines("fp32", vec), "sm_90" if c.arch == "sm_90" else None))
    return out
