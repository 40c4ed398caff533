"""The softmax ladder's registry: each rung (cu/softmax/softmax_0*.cu) and its
configurations, each declared once with its compile-time constants, from
which grid, block, defines and shared memory derive. The semantics and the
ladder's ideas: drvgemm/ladders/softmax/plan.py."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...analysis.banks import row_tile_crowded
from ...runtime import dtypes

__all__ = ["kernels", "rung", "catalogue", "pipelined", "SoftmaxConfig", "SoftmaxRung",
           "SOFTMAX_RUNGS", "DTYPE_CODES", "INT_MAX", "dtype_name", "numpy_dtype", "source_of",
           "RESIDENT_CONFIGS", "STREAM_CONFIG", "CLUSTER_CONFIGS", "PIPELINED_CONFIGS",
           "ROW_TILE_CONFIGS", "PACKED_CONFIGS",
           "SOURCE_DEFINES", "WindowConfig", "WindowRung", "WINDOW_RUNGS", "WINDOW_CONFIGS",
           "HELD_VALUES", "PACKED_CLUSTER_COLS",
           "WINDOW_REGISTRY", "window_configs", "window_precisions", "vec_of", "WATCHDOG_NS",
           "WS_MAX_SLOTS", "MAX_WINDOW_COLS", "window_catalogue_configs"]

INT_MAX = 2**31 - 1


# precision name -> the DTYPE define of cu/softmax/softmax_common.cuh
DTYPE_CODES = {"fp32": 0, "bf16": 1, "fp16": 2}

# The defines each source needs (each kernel #errors on a missing one).
SOURCE_DEFINES = {
    "softmax_01_naive.cu": ("DTYPE", "THREADS"),
    "softmax_02_online.cu": ("DTYPE", "THREADS"),
    "softmax_03_warp_shuffle.cu": ("DTYPE", "THREADS"),
    "softmax_04_vectorized.cu": ("DTYPE", "THREADS", "ROW_THREADS", "ELEMS", "VEC", "MIN_BLOCKS",
                                 "UNROLL", "PACKED_COLS"),
    "softmax_05_cluster.cu": ("DTYPE", "THREADS", "ELEMS", "VEC", "CLUSTER", "MIN_BLOCKS"),
    "softmax_06_pipelined.cu": ("DTYPE", "THREADS", "ELEMS", "VEC", "CLUSTER", "STAGES",
                                "MIN_BLOCKS", "EVICT_FIRST"),
    "softmax_10_row_tile.cu": ("DTYPE", "THREADS", "ROW_THREADS", "ELEMS", "MIN_BLOCKS",
                               "BUFFERS", "CROWDED"),
}
# The sources whose kernels wait for the grid before them (griddepcontrol.wait,
# cu/include/grid_dependency.cuh) ahead of their first global-memory access, so
# that they are launched as dependent launches (Kernel.dependent_launch): the
# rungs auto takes (rung 09's split rows with the cooperative attribute too).
# The teaching rungs 01-03 and 05 stay as written.
DEPENDENT_LAUNCH_SOURCES = frozenset({
    "softmax_04_vectorized.cu", "softmax_06_pipelined.cu", "softmax_07_any_row.cu",
    "softmax_08_any_row_cluster.cu", "softmax_09_split_row.cu", "softmax_10_row_tile.cu",
    "softmax_11_any_row_pipelined.cu"})
# Rung 04's file compiles its three entries in one unit, and the label
# numbers in one entry's SASS follow the others' code: a config passes the
# constants of the entries it does not launch too (these, fixed), so that
# every instantiation's machine code stays what the SASS manifest recorded.
RUNG04_COMPANION = {"ROW_THREADS": 32, "ELEMS": 32, "UNROLL": 4, "PACKED_COLS": 1}
# entry -> source, for every entry of rungs 01..06 and 10
ENTRY_SOURCES = {
    "softmax_01_naive": "softmax_01_naive.cu",
    "softmax_02_online": "softmax_02_online.cu",
    "softmax_03_warp_shuffle_warp": "softmax_03_warp_shuffle.cu",
    "softmax_03_warp_shuffle_block": "softmax_03_warp_shuffle.cu",
    "softmax_04_vectorized_rows": "softmax_04_vectorized.cu",
    "softmax_04_vectorized_stream": "softmax_04_vectorized.cu",
    "softmax_04_vectorized_packed": "softmax_04_vectorized.cu",
    "softmax_05_cluster": "softmax_05_cluster.cu",
    "softmax_06_pipelined": "softmax_06_pipelined.cu",
    "softmax_10_row_tile": "softmax_10_row_tile.cu",
}


def dtype_name(dtype) -> str:
    """'fp32' / 'bf16' / 'fp16' for a supported numpy dtype, else TypeError."""
    name = dtypes.precision_of(dtype)
    if name is None:
        raise TypeError(f"softmax takes float32, bfloat16 or float16 input, got "
                        f"{np.dtype(dtype)}")
    return name


def _softmax_precision(name: str) -> str:
    if name not in DTYPE_CODES:
        raise ValueError(f"precision must be one of {', '.join(DTYPE_CODES)}, got {name!r}")
    return name


def numpy_dtype(name: str) -> np.dtype:
    return dtypes.numpy_dtype(_softmax_precision(name))


def element_bytes(name: str) -> int:
    """numpy_dtype(name).itemsize, without loading ml_dtypes for bf16."""
    return dtypes.itemsize(_softmax_precision(name))


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
    walks: bool = False       # rung 10: the blocks walk the tiles (as many as fit at once)
    # rung 04's packed entry: contiguous 16-byte aligned rows of exactly this
    # many elements, several whole rows a vector, elems // packed_cols rows a thread
    packed_cols: int = 0

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
        """The grid is as many clusters as fit at once, each walking rows
        (rung 06) or tiles of rows (rung 10)."""
        return self.stages > 0 or self.walks

    @property
    def capacity(self) -> int | None:
        """Longest row this config can take (None: any)."""
        if self.packed_cols:
            return self.packed_cols
        if self.elems:
            return self.row_threads * self.elems * self.cluster
        return None

    def row_capacity(self, itemsize: int, crowded: bool = False) -> int | None:
        """Longest row of ``itemsize``-byte elements this config can take:
        ``capacity``, except rung 10's (softmax_10_row_tile.cu, MAX_COLS):
        its 16-bit word slots also hold a row's lone first and last elements,
        one more; a ``crowded`` row on a lane group (its slots crowd the
        banks: analysis.banks.row_tile_crowded) is held as 16-byte vectors of
        its window instead, ``elems // vec - 1`` a lane between the first and
        the last, which lanes 0 and 1 hold beside them, and a row starting
        anywhere in a vector spans them up to vec - 1 elements short."""
        cap = self.capacity
        if cap is None or self.entry != "softmax_10_row_tile":
            return cap
        if crowded and self.row_threads > 1:
            vec = 16 // itemsize
            return (self.row_threads * (self.elems // vec - 1) + 2) * vec - (vec - 1)
        return cap + 1 if itemsize == 2 else cap

    @property
    def limit(self) -> int | None:
        """Longest row ``pick`` hands to this config (None: any)."""
        return self.capacity if self.elems else self.max_cols

    @property
    def rows_per_block(self) -> int:
        if self.packed_cols:
            return self.threads * (self.elems // self.packed_cols)
        return self.threads // self.row_threads

    def vec(self, itemsize: int) -> int:
        """Elements per vector load when aligned: 16 bytes, but never more
        than a thread holds."""
        if not self.vector:
            return 1
        v = 16 // itemsize
        return min(v, self.elems) if self.elems else v

    def defines(self, precision: str, vec: int) -> dict:
        """Every define the config's source needs, always all of them (the
        kernels refuse to compile without one): a value that does not apply
        to this config is passed as what it is (CLUSTER=1, STAGES=0,
        UNROLL=0 for a register-resident config, ELEMS=0 for a streaming one)."""
        every = {"DTYPE": DTYPE_CODES[precision], "THREADS": self.threads,
                 "ROW_THREADS": self.row_threads, "ELEMS": self.elems, "VEC": vec,
                 "MIN_BLOCKS": self.min_blocks, "UNROLL": self.unroll, "CLUSTER": self.cluster,
                 "STAGES": self.stages, "EVICT_FIRST": int(self.evict_first),
                 "BUFFERS": self.tile_buffers(element_bytes(precision)),
                 "CROWDED": 0}  # rung 10: the plan's verdict on the banks (banks.row_tile_crowded)
        source = source_of(self.entry)
        if source == "softmax_04_vectorized.cu":
            if not self.elems:        # a streaming config: the rows entry's constants
                every.update(ROW_THREADS=RUNG04_COMPANION["ROW_THREADS"],
                             ELEMS=RUNG04_COMPANION["ELEMS"])
            if not self.unroll:       # a register-resident config: the stream entry's
                every["UNROLL"] = RUNG04_COMPANION["UNROLL"]
            every["PACKED_COLS"] = self.packed_cols or RUNG04_COMPANION["PACKED_COLS"]
        return {k: every[k] for k in SOURCE_DEFINES[source]}

    def tile_buffers(self, itemsize: int) -> int:
        """Rung 10: tile buffers per block, two where two fit the 48 KiB of
        static shared memory (the next tile's copies then fly while this one
        is reduced), else one; 1 for every other config."""
        if not self.walks:
            return 1
        return 2 if 2 * self.tile_stride(itemsize) <= 48 * 1024 else 1

    def tile_stride(self, itemsize: int) -> int:
        """Rung 10: bytes of one tile buffer (its longest run of rows, 32
        bytes of slack, rounded up to whole 128-byte bank rows so that both
        buffers meet the banks alike; softmax_10_row_tile.cu, TILE_STRIDE)."""
        tile = self.rows_per_block * self.row_capacity(itemsize) * itemsize + 32
        return -(-tile // 128) * 128

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
            tiles = -(-rows // self.rows_per_block)
            return (min(tiles, resident) if self.walks and resident else tiles, 1, 1)
        if self.persistent:
            n = min(rows, resident) if resident else min(rows, INT_MAX // self.cluster)
            return (max(1, n) * self.cluster, 1, 1)
        return (rows * self.cluster, 1, 1)

    def fits(self, cols: int, cc: tuple, itemsize: int = 4) -> bool:
        if self.packed_cols:
            return cols == self.packed_cols and tuple(cc) >= _arch_cc(self.arch)
        crowded = (self.entry == "softmax_10_row_tile"
                   and row_tile_crowded(cols, self.row_threads, itemsize))
        lim = self.row_capacity(itemsize, crowded) if self.elems else self.max_cols
        return (lim is None or cols <= lim) and tuple(cc) >= _arch_cc(self.arch)

    def describe(self, vec: int | None = None) -> str:
        parts = [self.entry, f"threads={self.threads}"]
        if self.row_threads < self.threads:
            parts.append(f"rows/block={self.rows_per_block}")
        if self.elems:
            parts.append(f"elems={self.elems}")
        if self.packed_cols:
            parts.append(f"packed_cols={self.packed_cols}")
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

    def pick(self, cols: int, cc: tuple = (9, 0), itemsize: int = 4) -> SoftmaxConfig:
        for c in self.configs:
            if c.fits(cols, cc, itemsize):
                return c
        caps = [c for c in self.configs if tuple(cc) >= _arch_cc(c.arch)]
        if not caps:
            raise ValueError(f"{self.name} needs {self.configs[0].arch} or newer; the device "
                             f"is sm_{cc[0]}{cc[1]}")
        longest = caps[-1].row_capacity(itemsize) if caps[-1].elems else caps[-1].limit
        raise ValueError(f"{self.name} takes rows of at most {longest} elements, "
                         f"got {cols}; use kernel='auto' or softmax_04_vectorized")

    def supports(self, cols: int, cc: tuple = (9, 0), precision: str = "fp32") -> bool:
        """Whether some config takes rows of ``cols``. The ladder rungs hold
        fp32 values whatever the element type; rung 10's 16-bit lanes also
        hold a row's lone first and last elements, one more (row_capacity)."""
        itemsize = element_bytes(precision)
        return any(c.fits(cols, cc, itemsize) for c in self.configs)


def _resident(row_threads, elems, threads=None, **kw):
    return SoftmaxConfig("softmax_04_vectorized_rows", threads or max(row_threads, 128),
                         row_threads, elems=elems, vector=True, **kw)


# Register-resident buckets of rung 04: rows of up to 4 * row_threads elements
# with a few lanes each (many rows per block), then a warp per row, then a
# block per row. 32 fp32 per thread is the most that leaves room for two
# 512-thread blocks per SM (64 registers each) without spilling.
# _resident(1, 8) is for 16-bit rows of 8 (one lane, one 16-byte vector); the
# first-fit pick hands rows of 5..8 to _resident(2, 4) (fp32: one vector a lane).
RESIDENT_CONFIGS = (
    _resident(1, 4), _resident(2, 4), _resident(1, 8), _resident(4, 4), _resident(8, 4),
    _resident(16, 4), _resident(32, 4), _resident(32, 8), _resident(32, 16), _resident(32, 32),
    _resident(128, 16), _resident(128, 32), _resident(256, 32),
    _resident(512, 32, min_blocks=2),
)
STREAM_CONFIG = SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True)
# Rung 04's packed entry, by row length: rows of 1, 2 or 4 elements, several
# whole rows a 16-byte vector (fp32 takes 1 and 2; its rows of 4 are a vector
# each in the rows entry), 16 elements a thread: four fp32 vectors or two
# 16-bit ones, all loads of a thread issued before its first use. Only
# auto's route takes them (aligned, contiguous rows of exactly that length),
# so they are not among the rung's configs that ``pick`` walks.
PACKED_CONFIGS = tuple(SoftmaxConfig("softmax_04_vectorized_packed", 256, 1, elems=16,
                                     vector=True, packed_cols=c) for c in (1, 2, 4))
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

# Rung 10 by row length: 256-thread blocks of lane groups of 1..32 lanes
# holding up to 32 values each (rows of up to 32 x ROW_THREADS; 16 for rows
# of <= 16), four blocks an SM at 64 registers (no spills), a tile of up to
# 32 KiB of fp32 each (two tile buffers where two fit 48 KiB: every 16-bit
# config and fp32 rows of <= 16): the fewest lanes a row, so a block's run is
# as long as its tile allows. The blocks walk the tiles: prepare() launches
# as many as fit at once. Longer rows on one lane, in 128-thread blocks
# (benchmarks/softmax_row_tile_lanes.py, eighteenth round): 40 slots (rows of
# 33..40, 16-bit 34..41; two 20 KiB tile buffers, 64 registers at eight blocks
# an SM): fp32 262144 x 33 0.92 of copy against 0.76 on two lanes of 32 and
# 0.78 on rung 07; 64 slots (rows of 41..64, 16-bit 42..65; 128 registers at
# four blocks an SM, one 32 KiB fp32 tile buffer or two of 16-bit): bf16
# 131072 x 65 0.95 against 0.77 on two lanes, fp32 262144 x 63 0.89 against
# rung 07's 0.80. One lane a row puts a warp's 32 rows a row apart: where that
# crowds the banks (fp32 x 48: 0.40 against rung 07's 0.94) the planner puts
# the row on rung 07 (plan.one_lane_spreads). Two lanes of 32 slots, which
# took rows of 33..64 before (bf16 x 33 0.70, x 65 0.77), are gone: the one
# lane of 64 holds every row they held. Four lanes of 40 slots: the crowded
# rows of 106..137 16-bit / 118..149 fp32 elements, which four lanes hold as
# 16-byte vectors (row_capacity; twenty-seventh round: bf16 131072 x 127 0.72
# -> 0.80 of copy, fp32 0.89 -> 0.94).
ROW_TILE_CONFIGS = (
    SoftmaxConfig("softmax_10_row_tile", 256, 1, elems=16, min_blocks=4, walks=True),
    SoftmaxConfig("softmax_10_row_tile", 256, 1, elems=32, min_blocks=4, walks=True),
    SoftmaxConfig("softmax_10_row_tile", 128, 1, elems=40, min_blocks=8, walks=True),
    SoftmaxConfig("softmax_10_row_tile", 128, 1, elems=64, min_blocks=4, walks=True),
) + tuple(SoftmaxConfig("softmax_10_row_tile", 256, rt, elems=e, min_blocks=4, walks=True)
          for rt, e in ((4, 32), (4, 40), (8, 32), (16, 32), (32, 32)))

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
    SoftmaxRung("softmax_10_row_tile", "softmax_10_row_tile.cu",
                "short contiguous rows: a block's run of rows copied to shared memory in "
                "16-byte vectors whatever the row length, reduced there, written back",
                reads=1, configs=ROW_TILE_CONFIGS),
]


# ---------------------------------------------------------------------------
# rungs 07..09 and 11: the 16-byte window (cu/softmax/softmax_window.cuh) --
# any row length, any row alignment, any row pitch, every vector inside a row
# one 128-bit access; only the first and last vector of a row element-wise.
# ---------------------------------------------------------------------------
WATCHDOG_NS = 2_000_000_000   # a split-row wait that outlasts 2 s traps instead of hanging
WS_MAX_SLOTS = 1024           # split rows: row slots in the workspace's counter head
MAX_WINDOW_COLS = INT_MAX - 65536   # window coordinates are 32-bit: cols plus a chunk must fit

WINDOW_SOURCES = {
    "softmax_07_any_row": "softmax_07_any_row.cu",
    "softmax_08_any_row_cluster": "softmax_08_any_row_cluster.cu",
    "softmax_09_split_row": "softmax_09_split_row.cu",
    "softmax_09_split_row_stream": "softmax_09_split_row.cu",
    "softmax_11_any_row_pipelined": "softmax_11_any_row_pipelined.cu",
}
WINDOW_KINDS = {"softmax_07_any_row": "rows", "softmax_08_any_row_cluster": "cluster",
                "softmax_09_split_row": "split", "softmax_09_split_row_stream": "split_stream",
                "softmax_11_any_row_pipelined": "pipelined"}
WINDOW_DEFINES = {
    "rows": ("DTYPE", "THREADS", "ROW_THREADS", "ITEMS", "RPT", "MIN_BLOCKS", "PACKED"),
    "cluster": ("DTYPE", "THREADS", "ITEMS", "CLUSTER", "MIN_BLOCKS", "PACKED"),
    "split": ("DTYPE", "THREADS", "ITEMS", "MIN_BLOCKS", "WATCHDOG_NS", "WS_MAX_SLOTS", "PACKED",
              "SITEMS"),
    "split_stream": ("DTYPE", "THREADS", "ITEMS", "MIN_BLOCKS", "WATCHDOG_NS", "WS_MAX_SLOTS",
                     "PACKED", "SITEMS"),
    "pipelined": ("DTYPE", "THREADS", "ITEMS", "CLUSTER", "STAGES", "MIN_BLOCKS", "PACKED"),
}


def vec_of(precision: str) -> int:
    """Elements per 16-byte vector: 4 fp32, 8 bf16/fp16."""
    return 16 // element_bytes(precision)


def window_precisions(cfg) -> tuple:
    """The precisions a window config is registered for (by its vector)."""
    return ("fp32",) if cfg.vec == 4 else ("bf16", "fp16")


@dataclass(frozen=True)
class WindowConfig:
    """One instantiation of rungs 07..09 and 11, declared once. ``items``: 16-byte
    vectors a thread holds per row (per chunk for the split rungs); ``vec``:
    the elements of a vector it is registered for (4: fp32, 8: bf16/fp16), so
    ``items * vec * rpt`` fp32 values sit in a thread's registers (at most 32
    where ``min_blocks`` caps registers at 64). Grid, block and defines all
    derive from here and the plan (split rungs: ``split`` blocks a row,
    ``slots`` rows in flight)."""
    entry: str
    threads: int
    items: int
    vec: int
    row_threads: int = 0      # 07: lanes per row (a power of two <= 32) or == threads
    rpt: int = 1              # 07: rows per lane group, loaded together
    cluster: int = 1          # 08, 11: blocks per row
    min_blocks: int = 1       # __launch_bounds__ second argument
    packed: bool = False      # 07/08/09/11, 16-bit: values held as loaded, two a register
    stages: int = 0           # 11: landing buffers of one slice each per block
    shared_items: int = 0     # 09, fp32 or packed: more vectors a thread per chunk, in shared memory

    def __post_init__(self):
        if self.entry not in WINDOW_SOURCES:
            raise ValueError(f"unknown window entry {self.entry!r}")
        if self.vec not in (4, 8):
            raise ValueError(f"{self.entry}: vec is 4 (fp32) or 8 (16-bit), got {self.vec}")
        if self.kind == "rows" and self.row_threads != self.threads and not (
                1 <= self.row_threads <= 32 and self.row_threads & (self.row_threads - 1) == 0):
            raise ValueError(f"{self.entry}: row_threads must be a power of two <= 32 or threads")
        if self.kind in ("cluster", "pipelined") and not 2 <= self.cluster <= 16:
            raise ValueError(f"{self.entry}: cluster of 2..16 blocks")
        if (self.kind == "pipelined") != (self.stages > 0):
            raise ValueError(f"{self.entry}: landing buffers are rung 11's, and it needs some")
        if self.shared_items < 0 or (self.shared_items and (
                (self.vec != 4 and not self.packed) or self.kind != "split")):
            raise ValueError(f"{self.entry}: vectors in shared memory are for fp32 or packed "
                             "16-bit chunks of rung 09's resident entry")
        if self.packed and (self.vec != 8 or self.kind not in ("rows", "cluster", "pipelined",
                                                               "split")):
            raise ValueError(f"{self.entry}: packed values are for 16-bit rows of rungs 07/08/09/11 "
                             "(not 09's streamed entry)")

    @property
    def kind(self) -> str:
        return WINDOW_KINDS[self.entry]

    @property
    def persistent(self) -> bool:
        """Rung 11: the grid is as many clusters as fit at once, each walking
        rows. Not 07 / 08 (a block or cluster per row group) nor 09 (a grid
        that fits at once by construction)."""
        return self.kind == "pipelined"

    def smem(self) -> int:
        """Dynamic shared memory per block: rung 11's landing buffers, rung
        09's shared part of a chunk."""
        return (self.stages * self.items + self.shared_items) * self.threads * 16

    def grid(self, rows: int, resident: int | None = None) -> tuple:
        """Rung 11's blocks: min(rows, resident) clusters (``resident``: how
        many fit on the GPU at once), one cluster per row without that
        number (correct too: the kernel takes any number of clusters)."""
        n = min(rows, resident) if resident else min(rows, INT_MAX // self.cluster)
        return (max(1, n) * self.cluster, 1, 1)

    @property
    def source(self) -> str:
        return WINDOW_SOURCES[self.entry]

    @property
    def arch(self) -> str:
        return "sm_90" if self.kind in ("cluster", "pipelined") else "sm_80"

    @property
    def values(self) -> int:
        """Elements a thread keeps in registers."""
        return self.items * self.vec * self.rpt


    @property
    def window(self) -> int:
        """16-byte vectors one row group (07), cluster (08, 11) or chunk (09) covers."""
        if self.kind == "rows":
            return self.row_threads * self.items
        return self.threads * (self.items + self.shared_items) * self.cluster

    @property
    def rows_per_block(self) -> int:
        if self.kind == "rows":
            return (self.threads // self.row_threads) * self.rpt
        return 1

    @property
    def blocks_per_sm(self) -> int:
        """Blocks an SM holds at 64 registers a thread (what min_blocks
        promises; the rows rung's small blocks fill 1024 threads an SM)."""
        return 1024 // self.threads if self.kind == "rows" else self.min_blocks

    def defines(self, precision: str) -> dict:
        if vec_of(precision) != self.vec:
            raise ValueError(f"{self.describe()} is registered for {self.vec}-element vectors, "
                             f"{precision} has {vec_of(precision)}")
        every = {"DTYPE": DTYPE_CODES[precision], "THREADS": self.threads,
                 "ROW_THREADS": self.row_threads, "ITEMS": self.items, "RPT": self.rpt,
                 "CLUSTER": self.cluster, "STAGES": self.stages, "MIN_BLOCKS": self.min_blocks,
                 "WATCHDOG_NS": WATCHDOG_NS, "WS_MAX_SLOTS": WS_MAX_SLOTS,
                 "PACKED": int(self.packed), "SITEMS": self.shared_items}
        return {k: every[k] for k in WINDOW_DEFINES[self.kind]}

    def fits(self, cols: int, cc: tuple = (9, 0), aligned: bool = False) -> bool:
        """The config holds a row of ``cols`` at any alignment, or starting on
        16 bytes when ``aligned`` (split rungs: any length, in as many chunks
        as it takes)."""
        if tuple(cc) < _arch_cc(self.arch):
            return False
        if self.kind in ("split", "split_stream"):
            return cols <= MAX_WINDOW_COLS
        return cols + (0 if aligned else self.vec - 1) <= self.window * self.vec

    def describe(self) -> str:
        parts = [self.entry, f"threads={self.threads}"]
        if self.kind == "rows":
            parts.append(f"row_threads={self.row_threads}")
        parts.append(f"items={self.items}")
        if self.kind == "rows":
            parts.append(f"rpt={self.rpt}")
        if self.kind in ("cluster", "pipelined"):
            parts.append(f"cluster={self.cluster}")
        if self.stages:
            parts.append(f"stages={self.stages}")
        parts += [f"min_blocks={self.min_blocks}", f"vec={self.vec}"]
        if self.packed:
            parts.append("packed")
        if self.shared_items:
            parts.append(f"shared_items={self.shared_items}")
        return " ".join(parts)


# A thread of a 64-register config holds 32 values as fp32 (8 fp32 vectors, 4
# 16-bit ones), or 64 16-bit values packed two a register (8 vectors).
HELD_VALUES = 32


def _lane_rows(rt, items, vec):
    """Lane groups of rt <= 32 threads in 256-thread blocks, four blocks an SM
    (64 registers a thread); RPT tops a group up to 16 values (4 fp32
    vectors, 2 16-bit ones: 64 / 32 B in flight a thread) so short rows still
    keep bytes outstanding; 32 values over 4 row windows would spill."""
    return WindowConfig("softmax_07_any_row", 256, items, vec, row_threads=rt,
                        rpt=max(1, (16 // vec) // items), min_blocks=4)


def _window_configs(vec: int) -> tuple:
    max_items = HELD_VALUES // vec   # unpacked: 32 fp32 values a thread, 64 registers, no spill
    # 16-bit: also 6 and 8 vectors a thread (5..8 for a block per row), packed
    # (the same registers)
    more = (6, 8) if vec == 8 else ()
    out = [_lane_rows(rt, it, vec) for rt in (1, 2, 4, 8, 16) for it in (1, 2, 3, 4)]
    out += [_lane_rows(32, it, vec) for it in [1, 2, 3, 4] + ([6, 8] if vec == 4 else [])]
    # a block per row: 1024 threads an SM of 64-register threads (2 blocks of
    # 512, 4 of 256, 8 of 128), so one block's loads overlap another's stores
    out += [WindowConfig("softmax_07_any_row", t, it, vec, row_threads=t, min_blocks=1024 // t)
            for t in (128, 256, 512) for it in range(1, max_items + 1)]
    out += [WindowConfig("softmax_07_any_row", t, it, vec, row_threads=t, min_blocks=1024 // t,
                         packed=True)
            for t in (128, 256, 512) for it in (range(5, 9) if vec == 8 else ())]
    # clusters of 512-thread blocks, two an SM
    out += [WindowConfig("softmax_08_any_row_cluster", 512, it, vec, cluster=c, min_blocks=2,
                         packed=it > max_items)
            for c in range(2, 9) for it in [*range(max(1, max_items // 2), max_items + 1), *more]]
    # clusters of 7 and 8 256-thread blocks, four an SM: measured better than
    # 512-thread clusters on 50257-element rows (fp32 8192 x 50257: 0.775 at
    # 7 x 256 x 8 items vs 0.743 at 4 x 512 x 7; bf16 0.514 vs 0.457)
    out += [WindowConfig("softmax_08_any_row_cluster", 256, it, vec, cluster=c, min_blocks=4)
            for c in (7, 8) for it in range(max(1, max_items // 2), max_items + 1)]
    # 16-bit, packed: clusters of 2..8 256-thread blocks, four an SM, holding
    # what fp32's 7 and 8 x 256 x 8 hold in half the blocks or fewer
    out += [WindowConfig("softmax_08_any_row_cluster", 256, it, vec, cluster=c, min_blocks=4,
                         packed=True)
            for c in range(2, 9) for it in more]
    # a cluster of 8 with more values a thread (one block an SM) for the
    # longest rows that still fit registers (151936)
    out += [WindowConfig("softmax_08_any_row_cluster", 512, it, vec, cluster=8, min_blocks=1)
            for it in ((10, 12) if vec == 4 else (5, 6))]
    # split chunks, two 512-thread blocks an SM (264 resident on an H200):
    # up to 32 values a thread, 64 KiB of a row a block
    out += [WindowConfig("softmax_09_split_row", 512, it, vec, min_blocks=2)
            for it in ((2, 4, 8) if vec == 4 else (1, 2, 4))]
    # 16-bit, packed: 64 values a thread, 64 KiB of a row a block, so the
    # resident grid holds twice what the unpacked chunks hold (half the passes
    # over 16 x 1048576: two of 8 rows, not four of 4)
    if vec == 8:
        out.append(WindowConfig("softmax_09_split_row", 512, 8, vec, min_blocks=2, packed=True))
        # packed with 11 vectors a thread in shared memory (88 KiB a block):
        # 136 KiB of a row a block, so 16-bit 16 x 1048576 fits the resident grid
        # in one pass, not two. Taken where it makes fewer passes
        # (plan._plan_split). 7 in registers next to 10 in shared memory (the
        # same bytes; measured on the H100, fortieth round: bf16 16 x 1048576
        # 0.846 of copy against two passes' 0.789) spilled 8 B under NVRTC 13.0,
        # 8 next to any shared part under either.
        out.append(WindowConfig("softmax_09_split_row", 512, 6, vec, min_blocks=2, packed=True,
                                shared_items=11))
    # fp32: 7 vectors a thread in registers and 9 in shared memory (72 KiB a
    # block), 128 KiB of a row a block: the same doubling (8 in registers with
    # any shared part spills at 64 registers)
    if vec == 4:
        out.append(WindowConfig("softmax_09_split_row", 512, 7, vec, min_blocks=2, shared_items=9))
    out.append(WindowConfig("softmax_09_split_row_stream", 512, 4 if vec == 4 else 2, vec,
                            min_blocks=2))
    # rung 11, one block an SM, three landing buffers of a slice (two where three
    # would pass 227 KiB), sized for the vocabulary rows at any alignment: 50257
    # (12566 / 6284 vectors), 128256 (32064 / 16033), 151936 (37985 / 18993), and
    # 16-bit 262144 (32768, aligned). Measured on the H200 (benchmarks/softmax_pipelined.py,
    # of copy): fp32 8192 x 50257 256 x 13 x 4: 0.821 (rung 08 0.765), 512 x 151936
    # 256 x 19 x 8: 0.852 (rung 04 streamed 0.636); bf16 8192 x 50257 512 x 7 x 2:
    # 0.890 (256 x 13 x 2 0.837, rung 08 0.749), 1024 x 128256 256 x 8 x 8: 0.873
    # (256 x 16 x 4 0.773), 512 x 151936 512 x 10 x 4: 0.833 (rung 08 0.730). The
    # 16-bit rows run best on 16 warps an SM or on few values a thread; fp32 on
    # 8 warps with more values. 16-bit rows of 57K..82K (64000, 65536), which
    # no config above held 0.7 full, take 512 x 8 x 2 / 512 x 10 x 2 (thirty-
    # sixth round, results/h200-softmax-route-gaps.json, of copy): bf16 8192 x
    # 64000 0.925 / 0.912 against rung 08's 0.838, 1024 x 65536 0.864 / 0.862
    # against 0.848.
    # Slices for the lengths between those, where auto fell back to rung 08 or a
    # slice under 0.8 full (fortieth round, H100, benchmarks/softmax_route_gaps.py,
    # of copy, one call / back to back): bf16 4096 x 36001 on 512 x 5 x 2 0.920 / 0.895
    # (rung 08 0.773 / 0.783); fp32 4096 x 72001 on 512 x 9 x 4 0.925 / 0.927 (rung 08
    # 0.696 / 0.695); bf16 1024 x 200064 on 512 x 7 x 7 0.949 / 0.952, 8192 x 200019
    # 0.924 / 0.925 (512 x 8 x 8 0.878 / 0.898, 0.879 / 0.874); 2048 x 202048 on
    # 512 x 8 x 7 0.934 / 0.928 (512 x 8 x 8 0.883 / 0.883).
    pipe = ((256, 13, 4, 3), (512, 9, 4, 2), (256, 16, 8, 3), (256, 19, 8, 2)) if vec == 4 else \
        ((512, 5, 2, 2), (512, 7, 2, 3), (512, 8, 2, 3), (512, 10, 2, 2), (256, 8, 8, 3),
         (512, 10, 4, 2), (512, 7, 7, 2), (512, 8, 7, 3), (512, 8, 8, 3))
    out += [WindowConfig("softmax_11_any_row_pipelined", t, it, vec, cluster=c, stages=s,
                         packed=vec == 8)
            for t, it, c, s in pipe]
    return tuple(out)


WINDOW_REGISTRY = {4: _window_configs(4), 8: _window_configs(8)}
WINDOW_CONFIGS = WINDOW_REGISTRY[4] + WINDOW_REGISTRY[8]
# The longest 16-bit row (elements, starting on 16 bytes) a packed cluster holds.
PACKED_CLUSTER_COLS = max(c.window * c.vec for c in WINDOW_REGISTRY[8]
                          if c.packed and c.kind == "cluster")


def window_configs(precision: str | None = None) -> tuple:
    """Every window config (of one precision's vector width when given)."""
    return WINDOW_CONFIGS if precision is None else WINDOW_REGISTRY[vec_of(precision)]


@dataclass(frozen=True)
class WindowRung:
    """A rung of 16-byte-window kernels: its configs for both vector widths;
    the dispatcher plans among them (dispatch.window_plan)."""
    name: str
    source: str
    summary: str
    reads: int
    entries: tuple

    def configs_for(self, precision: str) -> tuple:
        return tuple(c for c in window_configs(precision) if c.entry in self.entries)

    @property
    def configs(self) -> tuple:
        return tuple(c for c in WINDOW_CONFIGS if c.entry in self.entries)

    def supports(self, cols: int, cc: tuple = (9, 0), precision: str = "fp32") -> bool:
        return any(c.fits(cols, cc) for c in self.configs_for(precision))


WINDOW_RUNGS: list[WindowRung] = [
    WindowRung("softmax_07_any_row", "softmax_07_any_row.cu",
               "the 16-byte window: 128-bit accesses at any row length, alignment and pitch; "
               "lane groups for short rows, a block per row up to 16K fp32",
               reads=1, entries=("softmax_07_any_row",)),
    WindowRung("softmax_08_any_row_cluster", "softmax_08_any_row_cluster.cu",
               "the window over a thread-block cluster, (max, sum) through DSMEM",
               reads=1, entries=("softmax_08_any_row_cluster",)),
    WindowRung("softmax_09_split_row", "softmax_09_split_row.cu",
               "few long rows split over the whole GPU, synchronised through a global "
               "workspace (cooperative launch)",
               reads=1, entries=("softmax_09_split_row", "softmax_09_split_row_stream")),
    WindowRung("softmax_11_any_row_pipelined", "softmax_11_any_row_pipelined.cu",
               "persistent window clusters: the next rows' windows arrive by bulk copies "
               "while this one is written (rung 06's pipeline at any length and alignment)",
               reads=1, entries=("softmax_11_any_row_pipelined",)),
]


def kernels() -> list[str]:
    """Names of the softmax rungs, in ladder order (their numbers)."""
    return sorted([r.name for r in SOFTMAX_RUNGS] + [r.name for r in WINDOW_RUNGS])


def rung(name: str):
    """The SoftmaxRung (01..06, 10) or WindowRung (07..09, 11) of that name."""
    for r in list(SOFTMAX_RUNGS) + list(WINDOW_RUNGS):
        if r.name == name:
            return r
    raise ValueError(f"unknown softmax kernel {name!r}; choose 'auto' or one of "
                     f"{', '.join(kernels())}")


def source_of(entry: str) -> str:
    """The source file of a config's entry."""
    try:
        return ENTRY_SOURCES[entry]
    except KeyError:
        raise ValueError(f"unknown softmax entry {entry!r}") from None


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
    for c in PACKED_CONFIGS:
        out.append((c.describe(c.vec(4)), source_of(c.entry), c.entry, c.defines("fp32", c.vec(4)),
                    None))
    for c in window_catalogue_configs():
        prec = window_precisions(c)[0]
        out.append((f"{c.describe()} {prec}", c.source, c.entry, c.defines(prec),
                    "sm_90" if c.arch == "sm_90" else None))
    return out


def window_catalogue_configs() -> list:
    """One window config per family (entry, block shape, blocks an SM, lane
    groups or block rows, vector width): the one holding the most values a
    thread, the register-tightest. The compile-only report lists these; the
    CPU tests compile every instantiation."""
    best = {}
    for c in WINDOW_CONFIGS:
        key = (c.entry, c.threads, c.min_blocks, c.row_threads == c.threads, c.vec)
        if key not in best or (c.values, c.cluster) > (best[key].values, best[key].cluster):
            best[key] = c
    return list(best.values())
