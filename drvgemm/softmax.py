"""Softmax over the rows of a 2-D array: the ladder of kernels in
cu/softmax_0*.cu, its registry, and ``softmax()`` dispatch.

Semantics (every rung, and ``reference`` below, compute the same thing):
``y[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r)``, in fp32
arithmetic whatever the storage type (fp32, bf16 or fp16 in; the output has
the input's dtype).

* ``-inf`` entries (masks) contribute nothing and come out as 0.
* A row that is entirely ``-inf`` comes out as NaN in every entry: 0/0, the
  value the formula gives and the one ``torch.softmax`` returns. A masked-out
  row is an error upstream more often than not, and NaN says so where zeros
  would hide it.
* A NaN anywhere in a row makes the whole row NaN; a ``+inf`` makes at least
  its own entry NaN (the rest of the row is not specified).
* Large magnitudes (|x| up to the fp32 range) are safe: only differences
  ``x - max <= 0`` are exponentiated.

The ladder (each rung adds one idea; ``kernels()`` lists them), with the
global-memory traffic per element (R = read, W = write):

- softmax_01_naive: three passes (max, sum, write), shared-memory tree
  reductions. 3R + 1W.
- softmax_02_online: max and sum in one online pass, the sum rescaled when the
  max grows. 2R + 1W.
- softmax_03_warp_shuffle: __shfl_xor_sync butterflies; a warp per short row,
  a block per long one. 2R + 1W.
- softmax_04_vectorized: 16-byte loads; the row held in registers when it
  fits one block (1R + 1W), else streamed twice (2R + 1W).
- softmax_05_cluster (sm_90): a row too long for one block split over a
  thread-block cluster, (max, sum) exchanged through distributed shared
  memory. 1R + 1W.
- softmax_06_pipelined (sm_90): persistent clusters, one per set of SMs that
  fits at once, each walking many rows; bulk copies (TMA) bring the next rows'
  slices into shared memory while the current row is reduced and written, and
  (max, sum) travel by st.async into the peers' shared memory. 1R + 1W, with
  the reads never paused.

``kernel="auto"`` takes the register-resident rung 04 while a row fits one
block (16384 elements); on sm_90 the pipelined rung 06 up to 131072 when the
rows allow 16-byte copies (rung 05 when they do not); rung 04's streaming
kernel beyond.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np

from . import dtypes

__all__ = ["softmax", "kernels", "rung", "reference", "plan", "config_plan", "compiled_kernel",
           "prepare", "resident_clusters", "catalogue", "pipelined",
           "SoftmaxConfig", "SoftmaxRung", "SoftmaxPlan", "SOFTMAX_RUNGS", "DTYPE_CODES",
           "dtype_name", "numpy_dtype"]

INT_MAX = 2**31 - 1


def _bf16():
    return dtypes.bf16()


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
_RESIDENT = (
    _resident(1, 4), _resident(2, 4), _resident(4, 4), _resident(8, 4), _resident(16, 4),
    _resident(32, 4), _resident(32, 8), _resident(32, 16), _resident(32, 32),
    _resident(128, 16), _resident(128, 32), _resident(256, 32),
    _resident(512, 32, min_blocks=2),
)
_STREAM = SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True)
_CLUSTERS = tuple(
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
# Cluster sizes and slices from `python -m drvgemm.membench --sweep` on the H200:
# at 65536 columns 8 blocks of 256 x 32 (two per SM) beat 4 of 512 x 32 (0.89 vs
# 0.87 of copy), at 131072 256 x 64 beat 512 x 32 (0.905 vs 0.896).
_PIPELINED = (pipelined(128, 8, 1, 4), pipelined(512, 32, 1, 3), pipelined(512, 32, 2, 3),
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
                reads=1, configs=_RESIDENT + (_STREAM,)),
    SoftmaxRung("softmax_05_cluster", "softmax_05_cluster.cu",
                "a long row split over a thread-block cluster, (max, sum) through DSMEM",
                reads=1, configs=_CLUSTERS),
    SoftmaxRung("softmax_06_pipelined", "softmax_06_pipelined.cu",
                "persistent clusters; the next rows arrive by bulk copies while this one "
                "is written",
                reads=1, configs=_PIPELINED),
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


def _source_of(entry: str) -> str:
    for r in SOFTMAX_RUNGS:
        if any(c.entry == entry for c in r.configs):
            return r.source
    raise ValueError(entry)


def catalogue() -> list[tuple]:
    """(label, source, entry, defines, arch) for every softmax config (fp32,
    with the vector width it takes when aligned) and every memory-lesson
    kernel: what ``drvgemm compile`` / the compile-only report lists. arch is
    None where the report's architecture will do, 'sm_90' for clusters."""
    out = []
    for r in SOFTMAX_RUNGS:
        for c in r.configs:
            vec = c.vec(4)
            out.append((c.describe(vec), r.source, c.entry,
                        c.defines("fp32", vec), "sm_90" if c.arch == "sm_90" else None))
    from . import membench
    out += [(k.name, k.source, k.entry, {}, None) for k in membench.MEM_KERNELS]
    return out


# ---------------------------------------------------------------------------
# planning (pure Python: no GPU)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SoftmaxPlan:
    rung: str
    config: SoftmaxConfig
    source: str
    entry: str
    defines: tuple          # sorted (name, value) pairs
    grid: tuple
    block: tuple
    vec: int
    smem: int = 0           # dynamic shared memory per block, bytes

    def describe(self) -> str:
        return self.config.describe(self.vec)

    @property
    def cluster(self):
        """The launch-time cluster shape: always None, since every cluster
        size is compiled into its kernel with __cluster_dims__."""
        return None


def _auto_config(rows: int, cols: int, cc: tuple, bulk: bool) -> tuple[str, SoftmaxConfig]:
    """``bulk``: rows start on 16-byte boundaries and are whole 16-byte
    vectors (what rung 06's copies need to run at all in their fast form)."""
    for c in _RESIDENT:
        if c.fits(cols, cc):
            return "softmax_04_vectorized", c
    if bulk:
        for c in _PIPELINED:
            if c.cluster > 1 and c.fits(cols, cc):
                return "softmax_06_pipelined", c
    for c in _CLUSTERS:
        if c.fits(cols, cc) and rows * c.cluster <= INT_MAX:
            return "softmax_05_cluster", c
    return "softmax_04_vectorized", _STREAM


def plan(rows: int, cols: int, precision: str = "fp32", *, kernel: str = "auto",
         aligned: bool = True, cc: tuple = (9, 0), resident: int | None = None) -> SoftmaxPlan:
    """Which kernel, constants, grid and block run a rows x cols softmax.
    ``aligned``: both pointers are 16-byte aligned (vector loads also need
    ``cols`` to be a multiple of the vector; checked here). ``resident``:
    for persistent configs, how many of its clusters fit on the GPU at once
    (``resident_clusters``); None gives one cluster per row."""
    if precision not in DTYPE_CODES:
        raise ValueError(f"precision must be one of {', '.join(DTYPE_CODES)}, got {precision!r}")
    if not (1 <= rows <= INT_MAX and 1 <= cols <= INT_MAX):
        raise ValueError(f"rows and cols must be in [1, 2^31 - 1], got {rows} x {cols}")
    itemsize = numpy_dtype(precision).itemsize
    if kernel == "auto":
        name, cfg = _auto_config(rows, cols, cc, aligned and cols % (16 // itemsize) == 0)
    else:
        name, cfg = kernel, rung(kernel).pick(cols, cc)
    if cfg.cluster > 1 and not cfg.persistent and rows * cfg.cluster > INT_MAX:
        raise ValueError(f"{rows} rows x {cfg.cluster} blocks per row exceed the grid")
    return config_plan(cfg, rows, cols, precision, aligned=aligned, resident=resident, rung_name=name)


def config_plan(cfg: SoftmaxConfig, rows: int, cols: int, precision: str = "fp32", *,
                aligned: bool = True, resident: int | None = None,
                rung_name: str | None = None) -> SoftmaxPlan:
    """The plan of one explicit config (``cols`` must fit it)."""
    itemsize = numpy_dtype(precision).itemsize
    vec = cfg.vec(itemsize)
    if vec > 1 and not (aligned and cols % vec == 0):
        vec = 1
    defines = tuple(sorted(cfg.defines(precision, vec).items()))
    source = _source_of(cfg.entry)
    name = rung_name or next(r.name for r in SOFTMAX_RUNGS if r.source == source)
    return SoftmaxPlan(name, cfg, source, cfg.entry, defines,
                       cfg.grid(rows, resident), (cfg.threads, 1, 1), vec,
                       cfg.smem(itemsize, vec))


@functools.lru_cache(maxsize=None)
def _compiled(source: str, entry: str, defines: tuple, arch):
    from .kernel import compile as compile_kernel
    return compile_kernel(source, entry, defines=dict(defines), arch=arch)


def compiled_kernel(p: SoftmaxPlan, arch=None):
    """The Kernel for a plan (compiled once per process, disk-cached across)."""
    return _compiled(p.source, p.entry, p.defines, arch)


_resident_cache: dict = {}


def resident_clusters(kernel, cfg: SoftmaxConfig, smem: int) -> int:
    """How many clusters of ``cfg`` (blocks, for a cluster of 1) fit on the
    device at once with ``smem`` bytes of dynamic shared memory: the grid of a
    persistent config. A cluster must sit inside one GPC, so this is the
    driver's count, not SMs // cluster. GPU only; cached per kernel."""
    key = (id(kernel), smem)
    n = _resident_cache.get(key)
    if n is not None:
        return n
    from . import driver
    fn = kernel.function
    if cfg.cluster > 8:
        driver.set_function_attribute(fn, "NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)
    if smem > kernel._dynamic_smem_limit:
        driver.set_function_attribute(fn, "MAX_DYNAMIC_SHARED_SIZE_BYTES", smem)
        kernel._dynamic_smem_limit = smem
    if cfg.cluster > 1:
        n = driver.occupancy_max_active_clusters(fn, (cfg.cluster, 1, 1), (cfg.threads, 1, 1),
                                                 smem, (cfg.cluster, 1, 1))
    else:
        n = driver.occupancy_max_active_blocks(fn, cfg.threads, smem) * driver.device().sm_count
    if n < 1:
        raise ValueError(f"{cfg.describe()} with {smem} B of shared memory per block does "
                         f"not fit on {driver.device().name}")
    _resident_cache[key] = n
    return n


def prepare(p: SoftmaxPlan, rows: int, arch=None):
    """(kernel, plan) ready to launch: compiled, with a persistent plan's
    grid set to the clusters that fit at once. GPU only."""
    k = compiled_kernel(p, arch)
    if p.config.persistent:
        p = dataclasses.replace(p, grid=p.config.grid(rows, resident_clusters(k, p.config, p.smem)))
    elif p.config.cluster > 8:
        resident_clusters(k, p.config, p.smem)  # sets the non-portable size attribute
    return k, p


# ---------------------------------------------------------------------------
# the float64 reference
# ---------------------------------------------------------------------------
def reference(x) -> np.ndarray:
    """Row softmax in float64 with the semantics above (NaN for an all -inf
    row): the yardstick for every rung's tests."""
    x64 = np.asarray(x).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(x64, axis=-1, keepdims=True)
        e = np.exp(x64 - m)
        return e / np.sum(e, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# the public entry
# ---------------------------------------------------------------------------
def _device_view(x):
    """(pointer, shape, dtype) of a __cuda_array_interface__ object, checking
    that its rows are contiguous."""
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"softmax takes a numpy array or a device array "
                        f"(__cuda_array_interface__), got {type(x).__name__}")
    shape = tuple(int(s) for s in cai["shape"])
    try:
        dt = np.dtype(x.dtype)       # DeviceArray: bfloat16 survives here, not in typestr
    except (TypeError, AttributeError):
        dt = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None and len(shape) == 2:
        want = (shape[1] * dt.itemsize, dt.itemsize)
        if any(s != w and n > 1 for s, w, n in zip(strides, want, shape)):
            raise ValueError(f"softmax needs C-contiguous rows; got strides {tuple(strides)} "
                             f"for shape {shape} (expected {want})")
    return int(cai["data"][0]), shape, dt


def softmax(x, *, kernel: str = "auto", out=None, stream=None):
    """Softmax over the last axis of a 2-D array (see the module docstring
    for the semantics).

    ``x``: a numpy array (the result comes back as numpy) or a device array
    (DeviceArray, or anything with ``__cuda_array_interface__``: the result is
    a DeviceArray, or ``out`` when given, enqueued on ``stream`` and not
    synchronised). dtype float32, bfloat16 (ml_dtypes) or float16; the output
    has the same dtype, the arithmetic is fp32. ``kernel``: 'auto' or a name
    from ``kernels()``. ``out``: a device array of x's shape and dtype to
    write into (device inputs only).
    """
    if kernel != "auto":
        rung(kernel)  # unknown names fail before anything touches the GPU
    on_host = isinstance(x, np.ndarray)
    if on_host:
        shape, dt, ptr = x.shape, x.dtype, None
    else:
        ptr, shape, dt = _device_view(x)
    if len(shape) != 2:
        raise ValueError(f"softmax takes a 2-D array (rows x cols), got shape {tuple(shape)}")
    precision = dtype_name(dt)
    rows, cols = (int(s) for s in shape)
    if rows > INT_MAX or cols > INT_MAX:
        raise ValueError(f"rows and cols must each be below 2^31, got {rows} x {cols}")
    if out is not None:
        if on_host:
            raise TypeError("out= takes a device array and goes with a device input; "
                            "a numpy input returns a new numpy array")
        out_ptr, out_shape, out_dt = _device_view(out)
        if tuple(out_shape) != (rows, cols) or out_dt != dt:
            raise ValueError(f"out must be {rows}x{cols} {dt}, got {tuple(out_shape)} {out_dt}")

    if on_host and (rows == 0 or cols == 0):
        return np.empty(shape, dt)

    from . import driver
    from .launch import launch
    if out is None:
        out = driver.empty((rows, cols), dt)
        out_ptr = out.ptr
    if rows == 0 or cols == 0:
        return out
    dev_x = driver.to_device(np.ascontiguousarray(x)) if on_host else x
    if on_host:
        ptr = dev_x.ptr
        if stream is not None:
            # the upload went through the legacy stream, which a non-blocking
            # stream does not wait for
            driver.synchronize()
    p = plan(rows, cols, precision, kernel=kernel,
             aligned=ptr % 16 == 0 and out_ptr % 16 == 0, cc=driver.device().cc)
    k, p = prepare(p, rows)
    launch(k, p.grid, p.block, (dev_x, out, rows, cols), smem=p.smem, stream=stream,
           cluster=p.cluster)
    if on_host:
        driver.synchronize()
        return out.to_host()
    return out
