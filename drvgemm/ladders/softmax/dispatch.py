"""Softmax over the rows of a 2-D array: the ladder of kernels in
cu/softmax_0*.cu (registry.py), the plan of a launch and ``softmax()``.

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
from dataclasses import dataclass

import numpy as np

from ...runtime import driver, interop
from ...runtime.kernel import compile as compile_kernel
from ...runtime.launch import launch
from .registry import (CLUSTER_CONFIGS, DTYPE_CODES, INT_MAX, PIPELINED_CONFIGS,
                       RESIDENT_CONFIGS, STREAM_CONFIG,
                       SOFTMAX_RUNGS, SoftmaxConfig, dtype_name, numpy_dtype, rung, source_of)

__all__ = ["softmax", "reference", "plan", "config_plan", "compiled", "compiled_kernel",
           "prepare", "resident_clusters", "SoftmaxPlan"]


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
    for c in RESIDENT_CONFIGS:
        if c.fits(cols, cc):
            return "softmax_04_vectorized", c
    if bulk:
        for c in PIPELINED_CONFIGS:
            if c.cluster > 1 and c.fits(cols, cc):
                return "softmax_06_pipelined", c
    for c in CLUSTER_CONFIGS:
        if c.fits(cols, cc) and rows * c.cluster <= INT_MAX:
            return "softmax_05_cluster", c
    return "softmax_04_vectorized", STREAM_CONFIG


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
    source = source_of(cfg.entry)
    name = rung_name or next(r.name for r in SOFTMAX_RUNGS if r.source == source)
    return SoftmaxPlan(name, cfg, source, cfg.entry, defines,
                       cfg.grid(rows, resident), (cfg.threads, 1, 1), vec,
                       cfg.smem(itemsize, vec))


@functools.lru_cache(maxsize=None)
def compiled(source: str, entry: str, defines: tuple, arch=None):
    """A softmax or memory kernel, compiled once per process (disk-cached across)."""
    return compile_kernel(source, entry, defines=dict(defines), arch=arch)


def compiled_kernel(p: SoftmaxPlan, arch=None):
    """The Kernel for a plan (compiled once per process, disk-cached across)."""
    return compiled(p.source, p.entry, p.defines, arch)


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
    fn = kernel.function
    if cfg.cluster > 8:
        kernel.allow_non_portable_cluster()
    kernel.set_max_dynamic_smem(smem)   # the launch opts in to the same
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
    template = out if out is not None else x     # the caller's array type comes back
    x, out = interop.as_input(x), interop.as_input(out)
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

    if out is None:
        out = driver.empty((rows, cols), dt)
        out_ptr = out.ptr
    if rows == 0 or cols == 0:
        return interop.like(out, template)
    dev_x = driver.to_device(np.ascontiguousarray(x), stream) if on_host else x
    if on_host:
        ptr = dev_x.ptr
    p = plan(rows, cols, precision, kernel=kernel,
             aligned=ptr % 16 == 0 and out_ptr % 16 == 0, cc=driver.device().cc)
    k, p = prepare(p, rows)
    launch(k, p.grid, p.block, (dev_x, out, rows, cols), smem=p.smem, stream=stream,
           cluster=p.cluster)
    if on_host:
        return out.to_host(stream=stream)   # queued behind the launch; waits for that stream
    return interop.like(out, template)
