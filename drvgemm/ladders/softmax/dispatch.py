"""Softmax over the last axis (the rows of a 2-D array): compiling and
launching the plan of a launch (plan.py) and ``softmax()``; the kernels are
cu/softmax/softmax_*.cu, their configurations registry.py.

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

The rungs, what ``kernel="auto"`` takes and why: plan.py beside this module
(pure Python, no GPU). Here besides: the split rung's workspace and the
float64 reference.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ...analysis.devices import CATALOGUE as DEVICE_CATALOGUE, find as find_device
from ...runtime import driver, dtypes, interop
from ...runtime.kernel import compile as compile_kernel
from ...runtime.kernel import dependent_launch_arch
from ...runtime.launch import launch
from .plan import (H200_SM_COUNT, SoftmaxPlan, config_plan, plan, predict_copy_ratio,
                   split_workspace_layout, window_plan, window_vectors)
from .registry import (DEPENDENT_LAUNCH_SOURCES, INT_MAX, WS_MAX_SLOTS, dtype_name,
                       element_bytes, rung, vec_of)

__all__ = ["softmax", "reference", "plan", "plan_device", "config_plan", "window_plan", "compiled",
           "compiled_kernel", "prepare", "resident_clusters", "SoftmaxPlan",
           "split_workspace_layout", "workspace", "reset_workspace", "run_plan",
           "predict_copy_ratio", "window_vectors", "H200_SM_COUNT"]


# ---------------------------------------------------------------------------
# the device a plan is made for, with no array (``drvgemm plan --softmax``)
# ---------------------------------------------------------------------------
def plan_device(name: str | None = None) -> tuple[str, tuple, int]:
    """(name, compute capability, SM count) to plan for: the catalogue
    device ``name`` ("H100", "a100"), else the live GPU, else the H200 --
    what ``plan(..., cc=, sm_count=)`` takes."""
    if name:
        entry = find_device(name)
        known = [d.name for d in DEVICE_CATALOGUE if d.resources is not None and d.resources.cc]
        if entry is None or entry.name not in known:
            raise ValueError(f"device {name!r}: softmax plans for a catalogue device with "
                             f"known resources: {', '.join(known)}")
        return entry.name, tuple(entry.resources.cc), entry.resources.sm_count
    if driver.has_gpu():
        d = driver.device()
        return d.name, tuple(d.cc), d.sm_count
    return "H200", (9, 0), H200_SM_COUNT


# ---------------------------------------------------------------------------
# compiling a plan
# ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def compiled(source: str, entry: str, defines: tuple, arch=None):
    """A softmax or memory kernel, compiled once per process (disk-cached across);
    a dependent launch where its source waits for the grid before it."""
    k = compile_kernel(source, entry, defines=dict(defines), arch=arch)
    k.dependent_launch = source in DEPENDENT_LAUNCH_SOURCES and dependent_launch_arch(k.arch)
    return k


def compiled_kernel(p: SoftmaxPlan, arch=None):
    """The Kernel for a plan (compiled once per process, disk-cached across)."""
    return compiled(p.source, p.entry, p.defines, arch)


_resident_cache: dict = {}


def resident_clusters(kernel, cfg, smem: int) -> int:
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


def _fit_split(p: SoftmaxPlan, resident: int) -> SoftmaxPlan:
    """A split plan re-derived for ``resident`` co-resident blocks (the
    driver's count; the pure-Python plan assumed min_blocks per SM): every
    block of a cooperative grid must be resident at once."""
    if p.slots * p.split <= resident:
        return p
    if p.config.kind == "split":
        if p.split > resident:
            raise RuntimeError(f"{p.describe()}: {p.split} blocks a row, only {resident} "
                               "resident on this device")
        slots, split = min(max(1, resident // p.split), WS_MAX_SLOTS), p.split
    else:
        slots = min(p.slots, resident)
        split = max(1, resident // slots)
    return dataclasses.replace(p, grid=(slots * split, 1, 1), slots=slots, split=split,
                               workspace_bytes=split_workspace_layout(slots, split)["bytes"])


def prepare(p: SoftmaxPlan, rows: int, arch=None):
    """(kernel, plan) ready to launch: compiled, with a persistent plan's
    grid set to the clusters that fit at once and a split plan's grid to the
    blocks that fit at once. GPU only."""
    k = compiled_kernel(p, arch)
    if p.split:
        p = _fit_split(p, resident_clusters(k, p.config, p.smem))
    elif getattr(p.config, "persistent", False):
        p = dataclasses.replace(p, grid=p.config.grid(rows, resident_clusters(k, p.config, p.smem)))
    elif p.config.cluster > 8:
        resident_clusters(k, p.config, p.smem)  # sets the non-portable size attribute
    return k, p


# ---------------------------------------------------------------------------
# the split rung's workspace and the launch of any plan
# ---------------------------------------------------------------------------
_workspaces: dict = {}   # stream handle -> DeviceArray


def workspace(nbytes: int, stream=None):
    """The split rung's counters and pairs for launches on ``stream``: one
    buffer per stream (launches on one stream run in order, so they may share
    counters; on two streams they may not), allocated zeroed, grown when a
    plan needs more. Every launch that completes leaves the counters at zero;
    after one that did not (a trap), ``reset_workspace()``."""
    handle = driver.stream_handle(stream) if stream is not None else 0
    buf = _workspaces.get(handle)
    if buf is None or buf.nbytes < nbytes:
        if buf is not None:
            driver.synchronize()
            buf.free()
        buf = driver.empty((max(int(nbytes), 1 << 16),), np.uint8)
        buf.fill_bytes(0)
        driver.synchronize()
        _workspaces[handle] = buf
    return buf


def reset_workspace():
    """Zero every split-row workspace (after a launch that did not finish)."""
    for buf in _workspaces.values():
        buf.fill_bytes(0)
    driver.synchronize()


def run_plan(k, p: SoftmaxPlan, x, y, rows: int, cols: int, ldx=None, ldy=None, stream=None):
    """Enqueue plan ``p`` (compiled as ``k``, from ``prepare``) on ``stream``:
    the split rung with its workspace, cooperatively."""
    if p.split:
        ws = workspace(p.workspace_bytes, stream)
        launch(k, p.grid, p.block, p.args(x, y, rows, cols, ldx, ldy, ws.ptr), smem=p.smem,
               stream=stream, cooperative=True)
    else:
        launch(k, p.grid, p.block, p.args(x, y, rows, cols, ldx, ldy), smem=p.smem,
               stream=stream, cluster=p.cluster)


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
def _rows_cols(shape) -> tuple[int, int]:
    """(rows, cols) of an array whose last axis is the softmax's: every axis
    before it is a row index (a 1-D array is one row)."""
    if len(shape) == 0:
        raise ValueError("softmax takes an array of at least one axis (the last is the "
                         "softmax's), got a scalar")
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def _device_view(x, what="softmax"):
    """(pointer, shape, dtype, row pitch in elements) of a
    __cuda_array_interface__ object whose rows are its last axis. Rows must
    be contiguous (unit element stride); the row pitch may exceed the row (a
    column slice of a wider array) when it is a whole number of elements;
    the axes before the last must step through the rows at that one pitch
    (a batch of such rows: (batch, heads, rows) of a contiguous tensor, or
    of a column slice of one)."""
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"{what} takes a numpy array or a device array "
                        f"(__cuda_array_interface__), got {type(x).__name__}")
    shape = tuple(int(s) for s in cai["shape"])
    dt = dtypes.of_interface(x, cai["typestr"])
    rows, cols = _rows_cols(shape)
    strides = cai.get("strides")
    pitch = cols
    if strides is not None and rows > 0 and cols > 0:
        strides = tuple(int(s) for s in strides)
        # the axes that step (size > 1), innermost first
        lead = [(n, st) for n, st in zip(shape[:-1], strides[:-1]) if n > 1][::-1]
        ok = cols <= 1 or strides[-1] == dt.itemsize
        if lead:
            step = lead[0][1]
            ok = ok and step >= cols * dt.itemsize and step % dt.itemsize == 0
            inner = step
            for n, st in lead:          # each outer axis steps over the whole inner block
                ok = ok and st == inner
                inner = st * n
            if ok:
                pitch = step // dt.itemsize
        if not ok:
            raise ValueError(f"{what} needs rows of contiguous elements (the last axis) at one "
                             f"row pitch of at least the row, in whole elements, through every "
                             f"axis before it; got strides {strides} for shape {shape} "
                             f"({dt.itemsize}-byte elements): make it contiguous first")
    return int(cai["data"][0]), shape, dt, pitch


_plans: dict = {}   # the plan cache: shape, dtype, kernel, alignment and pitch classes -> (kernel, plan)


def _prepared(rows, cols, precision, kernel, px, py, ldx, ldy):
    """(kernel, plan) for a call, cached on everything the choice depends on
    (the host cost of a call is what small shapes are measured by)."""
    vec = vec_of(precision)
    key = (rows, cols, precision, kernel, px % 16, py % 16, ldx % vec, ldy % vec,
           ldx == cols, ldy == cols)
    hit = _plans.get(key)
    if hit is None:
        dev = driver.device()
        aligned = px % 16 == 0 and py % 16 == 0
        itemsize = element_bytes(precision)
        same_phase = (py - px) % 16 == 0 and ((ldy - ldx) * itemsize) % 16 == 0
        p = plan(rows, cols, precision, kernel=kernel, aligned=aligned, cc=dev.cc,
                 ldx=ldx, ldy=ldy, same_phase=same_phase, x_aligned=px % 16 == 0,
                 sm_count=dev.sm_count)
        if len(_plans) >= 4096:
            _plans.clear()
        hit = _plans[key] = prepare(p, rows)
    return hit


# Device calls that passed the checks, by what the checks depend on: the
# probe signatures of x and out (None: allocated), the kernel name and the
# pointers' 16-byte phases -> (kernel, plan, rows, cols, dtype). Only
# contiguous rows are kept (their pitch is the row), so a hit needs no view.
_calls: dict = {}
_MAX_CALLS = 1024


@driver.on_reset
def _drop_calls():
    # kept plans name the old context's pointers; the split rung's workspaces
    # went with it
    _calls.clear()
    _workspaces.clear()


def _contiguous(sig) -> bool:
    return len(sig) == 3 or bool(sig[3])     # DeviceArray, or torch / CuPy's flag


def softmax(x, *, kernel: str = "auto", out=None, stream=None):
    """Softmax over the last axis of an array of one or more axes (see the
    module docstring for the semantics): every axis before the last is a row
    index, as torch.softmax(x, dim=-1) takes them.

    ``x``: a numpy array (the result comes back as numpy) or a device array
    (DeviceArray, or anything with ``__cuda_array_interface__``: the result is
    a DeviceArray, or ``out`` when given, enqueued on ``stream`` and not
    synchronised). Device rows may start at any element (offset views) and sit
    at any row pitch of whole elements (column slices), one pitch through every
    leading axis; rungs 01..06 and 10 take contiguous rows only. dtype float32,
    bfloat16 (ml_dtypes) or float16; the output has the same dtype, the
    arithmetic is fp32. ``kernel``: 'auto' or
    a name from ``kernels()``. ``out``: a device array of x's shape and dtype
    to write into (device inputs only; its own pitch).
    """
    try:
        px = interop.probe(x)
        py = None if out is None else interop.probe(out)
        key = None
        if px is not None and (out is None or py is not None):
            key = (px[1], None if py is None else py[1], kernel, px[0] & 15,
                   0 if py is None else py[0] & 15)
            hit = _calls.get(key)
        else:
            hit = None
    except (TypeError, ValueError, AttributeError):
        key = hit = None                  # the checked path says what is wrong
    if hit is None:
        return _checked_softmax(x, kernel, out, stream, key)
    k, p, rows, cols, dt, shape = hit
    if out is None:
        y = driver.empty(shape, dt)
        run_plan(k, p, px[0], y.ptr, rows, cols, cols, cols, stream=stream)
        return interop.like(y, x)
    run_plan(k, p, px[0], py[0], rows, cols, cols, cols, stream=stream)
    return out


def _checked_softmax(x, kernel, out, stream, key):
    if kernel != "auto":
        rung(kernel)  # unknown names fail before anything touches the GPU
    template = out if out is not None else x     # the caller's array type comes back
    x, out = interop.as_input(x), interop.as_input(out)
    on_host = isinstance(x, np.ndarray)
    if on_host:
        shape, dt, ptr, ldx = tuple(x.shape), x.dtype, None, None
    else:
        ptr, shape, dt, ldx = _device_view(x)
    precision = dtype_name(dt)
    rows, cols = _rows_cols(shape)
    if rows > INT_MAX or cols > INT_MAX:
        raise ValueError(f"rows and cols must each be below 2^31, got {rows} x {cols}")
    ldy = cols
    if out is not None:
        if on_host:
            raise TypeError("out= takes a device array and goes with a device input; "
                            "a numpy input returns a new numpy array")
        out_ptr, out_shape, out_dt, ldy = _device_view(out, "out")
        if tuple(out_shape) != shape or out_dt != dt:
            raise ValueError(f"out must be {' x '.join(map(str, shape))} {dt} (x's shape and "
                             f"dtype), got {tuple(out_shape)} {out_dt}")
        if out_ptr % dt.itemsize or (ptr is not None and ptr % dt.itemsize):
            raise ValueError(f"x and out must be aligned to their {dt.itemsize}-byte elements")

    if on_host and (rows == 0 or cols == 0):
        return np.empty(shape, dt)

    if out is None:
        out = driver.empty(shape, dt)
        out_ptr = out.ptr
    if rows == 0 or cols == 0:
        return interop.like(out, template)
    dev_x = driver.to_device(np.ascontiguousarray(x), stream) if on_host else x
    if on_host:
        ptr, ldx = dev_x.ptr, cols
    ldx = cols if ldx is None or rows == 1 else ldx
    ldy = cols if ldy is None or rows == 1 else ldy
    k, p = _prepared(rows, cols, precision, kernel, ptr, out_ptr, ldx, ldy)
    run_plan(k, p, ptr, out_ptr, rows, cols, ldx, ldy, stream=stream)
    if on_host:
        return out.to_host(stream=stream)   # queued behind the launch; waits for that stream
    if key is not None and ldx == cols and ldy == cols and _contiguous(key[0]) and (
            key[1] is None or _contiguous(key[1])):
        if len(_calls) >= _MAX_CALLS:
            _calls.clear()
        _calls[key] = (k, p, rows, cols, dt, shape)
    return interop.like(out, template)
