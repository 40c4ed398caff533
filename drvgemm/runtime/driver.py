"""The CUDA driver API as drvgemm uses it: context, device properties,
memory, streams, events, module loading, function attributes, occupancy
queries and the translation of every CUresult into a CudaError that says
what went wrong and, where it helps, why; and recovery: ``reset()`` gives the
process a fresh primary context after a sticky fault.

Context generations: every ``reset()`` bumps ``generation()``. Objects that
hold driver handles of the old context (DeviceArrays, Streams, Events,
graphs) are marked stale at the reset and raise ``StaleObjectError`` when
used, instead of handing a dead handle to the driver; caches of other modules
(loaded modules and functions, launchers, tensor maps, workspaces) are
dropped by the callbacks they registered with ``on_reset``.

Every call into ``cuda.bindings.driver`` is made from drvgemm/runtime/: here,
and in launch.py (the hot launch path, which binds cuLaunchKernel once) and
tensormap.py (cuTensorMapEncodeTiled, stream-ordered scratch copies), both of
which get the initialised module from ``bindings()``.
"""
from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from . import dlpack, dtypes
from .errors import CudaError, NoDeviceError, StaleObjectError

try:
    from cuda.bindings import driver as _cuda_driver
    _bindings_error = None
except Exception as e:  # pragma: no cover - a missing or broken cuda-bindings
    _cuda_driver = None
    _bindings_error = e

__all__ = ["device", "has_gpu", "no_gpu_reason", "default_arch", "DeviceProperties",
           "DeviceArray", "to_device", "empty", "Stream", "Event", "synchronize",
           "memcpy_dtod", "check", "reset", "on_reset", "generation", "FUNCTION_ATTRIBUTES",
           "SETTABLE_FUNCTION_ATTRIBUTES"]

_state_lock = threading.Lock()
_tls = threading.local()
_driver = None          # the cuda.bindings.driver module once cuInit succeeded
_init_error = None      # (call, code, name, description): why there is no GPU
_context = None         # primary context of the selected device
_device_handle = None
_props = None
_generation = 0         # bumped by reset(): handles of older generations are dead
_reset_hooks = []       # callables run by reset(), in registration order
_live_arrays = weakref.WeakSet()   # DeviceArrays, marked stale by reset()
_live_handles = weakref.WeakSet()  # Streams, Events, graphs: objects with _invalidate()

# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
_HINTS = {
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION":
        "the PTX was written by a newer compiler than this driver's JIT accepts "
        "(PTX ISA {ptx} vs driver {driver}). Load a cubin for the device's architecture "
        "instead (drvgemm compiles .cu straight to cubin), or use an NVRTC no newer than "
        "the driver.",
    "CUDA_ERROR_INVALID_VALUE":
        "on a launch this usually means a block or grid size beyond the device's limits, or "
        "more dynamic shared memory than the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES "
        "attribute (drvgemm raises it automatically up to the device's opt-in maximum).",
    "CUDA_ERROR_ILLEGAL_ADDRESS":
        "a kernel read or wrote outside its allocations. The CUDA context is now unusable: "
        "every later call fails until drvgemm.reset() (a fresh context; arrays from before "
        "are gone) or a restart; run the kernel under `compute-sanitizer --tool memcheck` "
        "to find the access.",
    "CUDA_ERROR_LAUNCH_FAILED":
        "a kernel faulted; the context is now unusable until drvgemm.reset() (or a "
        "restart). Run under compute-sanitizer.",
    "CUDA_ERROR_MISALIGNED_ADDRESS":
        "a vector or cp.async access used an address that is not aligned to its width "
        "(16 B for float4); the context is now unusable until drvgemm.reset().",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE":
        "a cooperative launch asked for more blocks than can be resident at once "
        "(blocks/SM from the occupancy query x SMs).",
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED":
        "a call that waits for the GPU (a synchronisation, a synchronous copy) was made "
        "while the stream was being captured into a graph; inside drvgemm.graph() use "
        "device arrays only.",
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED":
        "the graph capture was invalidated by an earlier unsupported call on the stream.",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES":
        "the block needs more registers than the SM has for it: registers per thread x "
        "threads per block > 65536. Cap registers (--maxrregcount / __launch_bounds__) or "
        "use fewer threads.",
    "CUDA_ERROR_NO_BINARY_FOR_GPU":
        "the cubin was built for another architecture than this device's; compile with "
        "arch=None to target the current device.",
    "CUDA_ERROR_INVALID_PTX":
        "the driver's JIT rejected the PTX; assemble it with drvgemm.compile to see the "
        "ptxas log.",
    "CUDA_ERROR_OUT_OF_MEMORY": "the device has no memory left for this allocation.",
}


def _name_and_description(driver, err):
    try:
        _, name = driver.cuGetErrorName(err)
        _, desc = driver.cuGetErrorString(err)
        return name.decode(), desc.decode()
    except Exception:  # the driver can't even name it
        return f"CUresult {int(err)}", "unknown error"


def raise_cuda(call, err, **hint_fields):
    driver = _driver
    name, desc = _name_and_description(driver, err)
    hint = _HINTS.get(name)
    if hint and hint_fields:
        try:
            hint = hint.format(**hint_fields)
        except KeyError:
            pass
    if name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" and not hint_fields:
        hint = hint.format(ptx="of the module", driver=driver_version_string())
    raise CudaError(call, int(err), name, desc, hint)


def check(result, call):
    """Check a cuda.bindings result tuple and return its payload."""
    err = result[0]
    if err != 0:
        raise_cuda(call, err)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


# ---------------------------------------------------------------------------
# initialisation
# ---------------------------------------------------------------------------
def _no_device():
    """A fresh NoDeviceError for the stored reason, each time: re-raising one
    stored object would append every raise's frames (and their locals, e.g.
    a 100 MB host array given to to_device) to its traceback for good."""
    return NoDeviceError(*_init_error)


def _init():
    """cuInit + primary context of device 0, once per process. Raises
    NoDeviceError when there is no driver library or no device."""
    global _driver, _init_error, _context, _device_handle
    if _context is not None:
        return
    if _init_error is not None:
        raise _no_device()
    with _state_lock:
        if _context is not None:
            return
        driver = _cuda_driver
        if driver is None:  # pragma: no cover - missing package
            _init_error = ("import cuda.bindings.driver", -1, "NO_BINDINGS",
                           f"cuda-bindings is not importable: {_bindings_error}")
            raise _no_device() from None
        try:
            (err,) = driver.cuInit(0)
        except Exception as e:
            # cuda.bindings raises (rather than returning a code) when the
            # driver library libcuda.so is not installed at all.
            _init_error = ("cuInit", -1, "NO_DRIVER",
                           f"no CUDA driver library on this machine ({type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else e})")
            raise _no_device() from None
        _driver = driver
        if err != 0:
            name, desc = _name_and_description(driver, err)
            if name in ("CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INSUFFICIENT_DRIVER"):
                _init_error = ("cuInit", int(err), name, desc)
                raise _no_device()
            raise_cuda("cuInit", err)
        count = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            _init_error = ("cuDeviceGetCount", 100, "CUDA_ERROR_NO_DEVICE",
                           "the driver sees no CUDA device")
            raise _no_device()
        dev = check(driver.cuDeviceGet(0), "cuDeviceGet")
        ctx = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        _device_handle = dev
        _context = ctx
        _tls.gen = _generation


def ensure_context():
    """Make the primary context current on the calling thread (cheap after
    the first call on each thread, and again after a reset())."""
    if getattr(_tls, "gen", None) == _generation and _context is not None:
        return
    _init()
    check(_driver.cuCtxSetCurrent(_context), "cuCtxSetCurrent")
    _tls.gen = _generation


def generation() -> int:
    """The context generation: 0 until the first reset(), then 1, 2, ..."""
    return _generation


# ---------------------------------------------------------------------------
# recovery
# ---------------------------------------------------------------------------
def on_reset(callback):
    """Register ``callback()`` to run at every ``reset()``, before the new
    context exists: drop whatever holds handles of the old one (loaded
    modules, launchers, encoded tensor maps, workspaces, plan caches). Usable
    as a decorator; returns ``callback``. Callbacks must not call the driver."""
    _reset_hooks.append(callback)
    return callback


def reset():
    """After a sticky fault (an illegal address, a trap): give the process a
    fresh primary context and go on.

    Every cache that holds handles of the old context is dropped (the
    ``on_reset`` callbacks: kernels reload their modules lazily on the next
    launch, launchers are rebuilt, tensor maps re-encoded); DeviceArrays,
    Streams, Events and graphs made before are marked stale and raise
    ``StaleObjectError`` when used (their memory and handles went with the old
    context). Function attributes set with ``Kernel.set_attribute`` must be set
    again. Memory other libraries (PyTorch, CuPy) allocated in the primary
    context is destroyed too. Call it with no other thread using the GPU.
    Returns the new generation."""
    global _context, _generation
    _init()
    with _state_lock:
        errors = []
        # Old handles first: nothing below may hand one back to the driver.
        for a in list(_live_arrays):
            _mark_stale(a)
        for h in list(_live_handles):
            try:
                h._invalidate()
            except Exception as e:  # pragma: no cover - a broken object
                errors.append(e)
        for hook in list(_reset_hooks):
            try:
                hook()
            except Exception as e:
                errors.append(e)
        d, dev = _driver, _device_handle
        # Our retain is released, then the context is destroyed whoever else
        # retains it (cuDevicePrimaryCtxReset), then a new one is retained.
        # The first two may report the sticky error itself: ignored.
        d.cuDevicePrimaryCtxRelease(dev)
        d.cuDevicePrimaryCtxReset(dev)
        try:
            ctx = check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        except CudaError as e:
            # Seen on the H200 (driver 580, CUDA 13.0) after an illegal address:
            # the driver keeps the error for the life of the process, a fresh
            # primary context included. Only a new process gets a usable GPU.
            raise CudaError("drvgemm.reset()", e.code, e.name, e.description, hint=(
                "the driver keeps this error for the rest of the process, so no "
                "context can be made again here; run experiments that may fault "
                "through drvgemm.isolated(fn, ...), which returns the child's "
                "result or raises its error and leaves this process's GPU usable")) from None
        check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        _context = ctx
        _generation += 1
        _tls.gen = _generation
    if errors:
        raise RuntimeError(f"drvgemm.reset(): the context was reset, but {len(errors)} reset "
                           f"callback(s) failed: {errors[0]!r}") from errors[0]
    return _generation


def has_gpu() -> bool:
    try:
        _init()
        return True
    except NoDeviceError:
        return False


def no_gpu_reason() -> str | None:
    """None when a GPU is usable, else one line saying why not."""
    try:
        _init()
        return None
    except NoDeviceError as e:
        return e.description


def bindings():
    """The cuda.bindings.driver module, initialised (for launch.py / tensormap.py)."""
    ensure_context()
    return _driver


def proc_address(symbol: str, per_thread_stream=False) -> int:
    """The address of a driver entry point (cuGetProcAddress, CUDA 12.0 ABI),
    for the C fast paths (runtime/_fastlaunch.c); 0 where the driver has
    none. ``per_thread_stream``: None follows cuda.bindings' own setting
    (CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM), as a launch must."""
    d = bindings()
    flags = d.CUdriverProcAddress_flags
    if per_thread_stream is None:
        per_thread_stream = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM",
                                           "0") not in ("", "0")
    flag = (flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM if per_thread_stream
            else flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM)
    res = d.cuGetProcAddress(symbol.encode(), 12000, flag)
    err, pfn = res[0], res[1]
    if err != 0 or not pfn:
        return 0
    return int(pfn)


def driver_version() -> int:
    _init()
    return check(_driver.cuDriverGetVersion(), "cuDriverGetVersion")


def driver_version_string() -> str:
    try:
        v = driver_version()
        return f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:
        return "unknown"


# ---------------------------------------------------------------------------
# device properties
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceProperties:
    name: str
    cc: tuple
    sm_count: int
    total_memory: int
    smem_per_sm: int
    smem_per_block: int
    smem_per_block_optin: int
    smem_reserved_per_block: int
    regs_per_sm: int
    regs_per_block: int
    max_threads_per_sm: int
    max_threads_per_block: int
    max_blocks_per_sm: int
    warp_size: int
    l2_size: int
    clock_khz: int
    mem_clock_khz: int
    bus_width_bits: int
    max_block_dims: tuple
    max_grid_dims: tuple
    driver_version: str

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def __str__(self):
        return (f"{self.name} (sm_{self.cc[0]}{self.cc[1]}, {self.sm_count} SMs, "
                f"{self.total_memory / 2**30:.0f} GiB, L2 {self.l2_size / 2**20:.0f} MiB, "
                f"{self.clock_khz / 1000:.0f} MHz, driver CUDA {self.driver_version})")


def device() -> DeviceProperties:
    """Properties of the current GPU (device 0)."""
    global _props
    if _props is not None:
        return _props
    _init()
    d = _driver
    A = d.CUdevice_attribute
    dev = _device_handle

    def attr(name):
        return check(d.cuDeviceGetAttribute(getattr(A, "CU_DEVICE_ATTRIBUTE_" + name), dev),
                     f"cuDeviceGetAttribute({name})")

    name = check(d.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = name.split(b"\0", 1)[0].decode()
    _props = DeviceProperties(
        name=name,
        cc=(attr("COMPUTE_CAPABILITY_MAJOR"), attr("COMPUTE_CAPABILITY_MINOR")),
        sm_count=attr("MULTIPROCESSOR_COUNT"),
        total_memory=check(d.cuDeviceTotalMem(dev), "cuDeviceTotalMem"),
        smem_per_sm=attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        smem_per_block=attr("MAX_SHARED_MEMORY_PER_BLOCK"),
        smem_per_block_optin=attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        smem_reserved_per_block=attr("RESERVED_SHARED_MEMORY_PER_BLOCK"),
        regs_per_sm=attr("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        regs_per_block=attr("MAX_REGISTERS_PER_BLOCK"),
        max_threads_per_sm=attr("MAX_THREADS_PER_MULTIPROCESSOR"),
        max_threads_per_block=attr("MAX_THREADS_PER_BLOCK"),
        max_blocks_per_sm=attr("MAX_BLOCKS_PER_MULTIPROCESSOR"),
        warp_size=attr("WARP_SIZE"),
        l2_size=attr("L2_CACHE_SIZE"),
        clock_khz=attr("CLOCK_RATE"),
        mem_clock_khz=attr("MEMORY_CLOCK_RATE"),
        bus_width_bits=attr("GLOBAL_MEMORY_BUS_WIDTH"),
        max_block_dims=(attr("MAX_BLOCK_DIM_X"), attr("MAX_BLOCK_DIM_Y"), attr("MAX_BLOCK_DIM_Z")),
        max_grid_dims=(attr("MAX_GRID_DIM_X"), attr("MAX_GRID_DIM_Y"), attr("MAX_GRID_DIM_Z")),
        driver_version=driver_version_string(),
    )
    return _props


def default_arch() -> str:
    """The current device's architecture, or sm_90 when there is no GPU."""
    if has_gpu():
        return device().arch
    return "sm_90"


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------
def _as_dtype(dtype):
    return np.dtype(dtype)


class DeviceArray:
    """A contiguous array in device memory. Freed when ``free()`` is called,
    when used as a context manager exits, or when garbage-collected. Speaks
    ``__cuda_array_interface__`` (v3) and DLPack (``__dlpack__``,
    ``__dlpack_device__``), so torch.from_dlpack / cupy.from_dlpack /
    torch.as_tensor take it without a copy.

    ``generation`` is the context generation it was allocated in; a
    ``drvgemm.reset()`` turns every DeviceArray of an older generation into a
    stale one whose every use raises StaleObjectError."""

    __slots__ = ("ptr", "shape", "dtype", "nbytes", "_owner", "_base", "generation",
                 "__weakref__")

    def __init__(self, shape, dtype, ptr=None, owner=True, base=None):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"negative dimension in shape {shape}")
        self.shape = shape
        self.dtype = _as_dtype(dtype)
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize
        self._owner = False
        self._base = base      # what keeps borrowed memory alive (a parent array, a capsule)
        if ptr is None:
            ensure_context()
            # cuMemAlloc refuses 0 bytes; keep a null pointer for empty arrays.
            ptr = int(check(_driver.cuMemAlloc(self.nbytes), f"cuMemAlloc({self.nbytes})")) \
                if self.nbytes else 0
            _note_capture_allocation(self)
        self.ptr = int(ptr)
        self._owner = owner and self.ptr != 0
        self.generation = _generation
        _live_arrays.add(self)

    # -- protocols -----------------------------------------------------------
    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def __dlpack_device__(self):
        return (dlpack.KDL_CUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this array's memory (no copy unless
        ``copy=True``). ``stream``: the consumer's stream (None or 1: the
        legacy default stream, 2: per-thread default, -1: no ordering, else a
        CUstream handle); drvgemm does not track which stream wrote the array,
        so unless the consumer says -1 every queued kernel is waited for
        first. ``max_version`` >= (1, 0) gives a versioned capsule."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"drvgemm cannot move a DeviceArray to DLPack device "
                              f"{tuple(dl_device)}; it lives on (2, 0) (CUDA device 0)")
        src = self
        if copy:
            src = DeviceArray(self.shape, self.dtype)
            src.copy_(self)
        if stream is not None and stream != -1:
            synchronize()
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack.make_capsule(src.ptr, src.shape, src.dtype, src, versioned=versioned)

    @property
    def size(self):
        return self.nbytes // self.dtype.itemsize

    @property
    def ndim(self):
        return len(self.shape)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr=0x{self.ptr:x})"

    # -- copies --------------------------------------------------------------
    def to_host(self, out=None, stream=None) -> np.ndarray:
        """A numpy copy. With ``stream``: the copy is queued on that stream
        behind its earlier work (cuMemcpyDtoHAsync) and that stream alone is
        waited for; without, a synchronous copy on the legacy default stream.
        Refused inside a graph capture (a graph cannot return host data)."""
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif out.nbytes != self.nbytes or not out.flags.c_contiguous:
            raise ValueError("out must be a C-contiguous array of the same size")
        if self.nbytes:
            ensure_context()
            h = stream_handle(stream)
            if h:
                _refuse_while_capturing(h, "copying a result to the host")
                check(_driver.cuMemcpyDtoHAsync(out.ctypes.data, self.ptr, self.nbytes,
                                                _driver.CUstream(h)), "cuMemcpyDtoHAsync")
                check(_driver.cuStreamSynchronize(_driver.CUstream(h)), "cuStreamSynchronize")
            else:
                check(_driver.cuMemcpyDtoH(out.ctypes.data, self.ptr, self.nbytes),
                      "cuMemcpyDtoH")
        return out

    def copy_from_host(self, host: np.ndarray, stream=None):
        """Upload ``host``. With ``stream``: queued on that stream
        (cuMemcpyHtoDAsync; pageable memory is staged before the call returns,
        so ``host`` may be reused at once), so later work on the stream sees
        it; without, a synchronous copy."""
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.nbytes != self.nbytes:
            raise ValueError(f"host array has {host.nbytes} bytes, device array {self.nbytes}")
        if self.nbytes:
            ensure_context()
            h = stream_handle(stream)
            if h:
                _refuse_while_capturing(h, "uploading a host array")
                check(_driver.cuMemcpyHtoDAsync(self.ptr, host.ctypes.data, self.nbytes,
                                                _driver.CUstream(h)), "cuMemcpyHtoDAsync")
            else:
                check(_driver.cuMemcpyHtoD(self.ptr, host.ctypes.data, self.nbytes),
                      "cuMemcpyHtoD")
        return self

    def copy_(self, src, stream=None):
        """Device-to-device copy from another DeviceArray of the same size."""
        memcpy_dtod(self, src, self.nbytes, stream)
        return self

    def fill_bytes(self, byte: int, stream=None):
        if self.nbytes:
            ensure_context()
            check(_driver.cuMemsetD8Async(self.ptr, byte & 0xFF, self.nbytes, stream_handle(stream)),
                  "cuMemsetD8Async")
        return self

    def view(self, dtype=None, shape=None) -> "DeviceArray":
        """Another shape/dtype over the same bytes (no copy, no ownership; the
        view keeps this array alive)."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        shape = (self.nbytes // dtype.itemsize,) if shape is None else shape
        v = DeviceArray(shape, dtype, ptr=self.ptr, owner=False, base=self)
        if v.nbytes != self.nbytes:
            raise ValueError("view must cover the same number of bytes")
        return v

    # -- lifetime ------------------------------------------------------------
    def free(self):
        if self._owner and self.ptr:
            self._owner = False
            if _driver is not None:
                (err,) = _driver.cuMemFree(self.ptr)
                if err != 0 and err != _driver.CUresult.CUDA_ERROR_DEINITIALIZED:
                    raise_cuda("cuMemFree", err)
        self.ptr = 0
        self._base = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


_ptr_slot = DeviceArray.ptr   # the slot itself, for stale arrays


def _stale(obj, what=None):
    gen = getattr(obj, "generation", "?")
    return StaleObjectError(
        f"{what + ': ' if what else ''}{obj!r} was created in CUDA context generation {gen}, "
        f"before drvgemm.reset() (now generation {_generation}): its memory went with the "
        "old context. Allocate it again (drvgemm.to_device / drvgemm.empty).")


class _StaleDeviceArray(DeviceArray):
    """What a DeviceArray becomes at reset(): every use that would reach its
    (dead) memory raises StaleObjectError; freeing it does nothing (the old
    context took its memory, and the address may belong to a new allocation)."""

    __slots__ = ()

    @property
    def ptr(self):
        raise _stale(self)

    @property
    def __cuda_array_interface__(self):
        raise _stale(self)

    def __dlpack__(self, **kw):
        raise _stale(self)

    def to_host(self, out=None, stream=None):
        raise _stale(self)

    def copy_from_host(self, host, stream=None):
        raise _stale(self)

    def copy_(self, src, stream=None):
        raise _stale(self)

    def fill_bytes(self, byte, stream=None):
        raise _stale(self)

    def view(self, dtype=None, shape=None):
        raise _stale(self)

    def free(self):
        self._owner = False
        self._base = None

    def __repr__(self):
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype}, stale: generation "
                f"{self.generation})")


def _mark_stale(a):
    a._owner = False
    a.__class__ = _StaleDeviceArray


def to_device(array, stream=None) -> DeviceArray:
    """A DeviceArray holding ``array``.

    A host array (numpy, anything ``np.asarray`` takes, a CPU DLPack producer)
    is copied -- queued on ``stream`` when one is given (see
    DeviceArray.copy_from_host). A DeviceArray comes back as it is; another
    device array (``__cuda_array_interface__``, or ``__dlpack__`` on a CUDA
    device) is wrapped without a copy, the wrapper keeping it alive."""
    if isinstance(array, DeviceArray):
        if type(array) is _StaleDeviceArray:
            raise _stale(array)
        return array
    if not isinstance(array, np.ndarray):
        dev = foreign_device_array(array)
        if dev is not None:
            return dev
        if hasattr(array, "__dlpack__") and not hasattr(array, "__array__"):
            array = np.from_dlpack(array)
    host = np.ascontiguousarray(array)
    d = DeviceArray(host.shape, host.dtype)
    d.copy_from_host(host, stream)
    return d


def foreign_device_array(obj, what="argument"):
    """A DeviceArray view (no copy) of a device array from another library:
    ``__cuda_array_interface__`` first, else ``__dlpack__`` with a CUDA
    device. None for anything else (host arrays, scalars); ValueError for a
    DLPack producer on another device or with non-contiguous strides."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(s) for s in cai["shape"])
        dt = dtypes.of_interface(obj, cai["typestr"])
        strides = cai.get("strides")
        if strides is not None and not _compact(shape, strides, dt.itemsize):
            raise ValueError(f"{what} has strides {tuple(strides)} for shape {shape}: drvgemm "
                             "takes C-contiguous device arrays (call .contiguous() / "
                             "cupy.ascontiguousarray)")
        return DeviceArray(shape, dt, ptr=int(cai["data"][0]), owner=False, base=obj)
    if not hasattr(obj, "__dlpack__") or isinstance(obj, np.ndarray):
        return None
    dev_fn = getattr(obj, "__dlpack_device__", None)
    kind, dev_id = dev_fn() if dev_fn is not None else (None, None)
    if kind is not None and int(kind) not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
        if int(kind) in (dlpack.KDL_CPU, dlpack.KDL_CUDA_HOST):
            return None    # host memory: the caller copies it
        raise ValueError(f"{what} is a DLPack array on device type {int(kind)} "
                         f"({dlpack.DEVICE_NAMES.get(int(kind), 'unknown')}); drvgemm takes "
                         "CUDA device arrays")
    try:
        capsule = obj.__dlpack__(stream=1, max_version=dlpack.DLPACK_VERSION)
    except TypeError:      # a producer from before DLPack 1.0
        capsule = obj.__dlpack__(stream=1)
    b = dlpack.read_capsule(capsule)
    if b.device[0] not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
        raise ValueError(f"{what} is a DLPack array on device type {b.device[0]} "
                         f"({dlpack.DEVICE_NAMES.get(b.device[0], 'unknown')}); drvgemm takes "
                         "CUDA device arrays")
    if not b.contiguous():
        raise ValueError(f"{what} has DLPack strides {b.strides} (elements) for shape "
                         f"{b.shape}: drvgemm takes C-contiguous device arrays")
    return DeviceArray(b.shape, b.dtype, ptr=b.ptr, owner=False, base=(b, obj))


def _compact(shape, strides, itemsize) -> bool:
    want = itemsize
    for n, st in zip(reversed(shape), reversed(tuple(strides))):
        if n != 1 and st != want:
            return False
        want *= n
    return True


def empty(shape, dtype=np.float32) -> DeviceArray:
    return DeviceArray(shape, dtype)


def memcpy_dtod(dst, src, nbytes, stream=None):
    ensure_context()
    check(_driver.cuMemcpyDtoDAsync(device_pointer(dst), device_pointer(src), int(nbytes),
                                    stream_handle(stream)), "cuMemcpyDtoDAsync")


def mem_alloc(nbytes: int) -> int:
    """A raw device allocation (cuMemAlloc) kept for the life of the process,
    for small workspaces; DeviceArray is the owning type for everything else.
    A reset() frees it with the old context: a module caching one must drop
    it in an ``on_reset`` callback."""
    d = bindings()
    return int(check(d.cuMemAlloc(int(nbytes)), f"cuMemAlloc({nbytes})"))


def memset_d8_async(ptr: int, value: int, nbytes: int, stream=None) -> None:
    """cuMemsetD8Async on ``stream`` (stream-ordered)."""
    d = bindings()
    check(d.cuMemsetD8Async(int(ptr), value & 0xFF, int(nbytes), d.CUstream(stream_handle(stream))),
          "cuMemsetD8Async")


def memory_info() -> tuple:
    """(free, total) bytes of device memory."""
    ensure_context()
    return check(_driver.cuMemGetInfo(), "cuMemGetInfo")


def device_pointer(obj, what="argument") -> int:
    """The device address of a DeviceArray, an integer address, or any device
    array from another library (``__cuda_array_interface__``: CuPy, PyTorch,
    Numba; or ``__dlpack__`` on a CUDA device: JAX, ...); TypeError for host
    arrays and booleans, StaleObjectError for an array from before a reset()."""
    t = type(obj)
    if t is DeviceArray:
        return obj.ptr
    if t is _StaleDeviceArray:
        raise _stale(obj, what)
    if isinstance(obj, (bool, np.bool_)):
        raise TypeError(f"{what} is a bool ({obj!r}), not a device pointer")
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, np.ndarray):
        raise TypeError(f"{what} is a host (numpy) array; pass drvgemm.to_device(x) instead")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    if hasattr(obj, "__dlpack__"):
        dev = foreign_device_array(obj, what)
        if dev is None:
            raise TypeError(f"{what} is a host DLPack array ({type(obj).__name__}); pass "
                            "drvgemm.to_device(x) instead")
        _keep_for_launch(dev)
        return dev.ptr
    raise TypeError(f"{what} is {type(obj).__name__}, not a device array: expected a "
                    "DeviceArray or an object with __cuda_array_interface__ or __dlpack__")


# A DLPack producer's memory is lent to us for as long as the wrapper lives;
# a raw pointer taken from it must outlive the enqueueing of the launch that
# uses it: the last few wrappers stay referenced (the producer object itself
# keeps the memory; this only keeps the producer's capsule protocol happy).
_recent_wrappers = []


def _keep_for_launch(dev):
    _recent_wrappers.append(dev)
    del _recent_wrappers[:-64]


# ---------------------------------------------------------------------------
# streams and events
# ---------------------------------------------------------------------------
class Stream:
    """A non-blocking CUDA stream."""

    def __init__(self):
        ensure_context()
        self.handle = check(_driver.cuStreamCreate(
            _driver.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        self.ptr = int(self.handle)
        self.generation = _generation
        _live_handles.add(self)

    def synchronize(self):
        check(_driver.cuStreamSynchronize(_driver.CUstream(stream_handle(self))),
              "cuStreamSynchronize")

    def __cuda_stream__(self):
        return (0, stream_handle(self))

    def _invalidate(self):
        # reset(): the handle died with its context; never destroy it.
        self.ptr = 0
        self.stale = True

    def close(self):
        if self.ptr and _driver is not None:
            _driver.cuStreamDestroy(self.handle)
            self.ptr = 0

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def stream_handle(stream) -> int:
    """An integer CUstream from None (the legacy default stream, or -- inside
    a ``drvgemm.graph()`` block, on the thread that opened it -- the graph's
    capture stream), an int, a drvgemm Stream, a cuda.core stream
    (__cuda_stream__), a CuPy stream (.ptr) or a PyTorch stream
    (.cuda_stream)."""
    if stream is None:
        cap = getattr(_tls, "capture", None)
        return cap[-1].handle if cap else 0
    if isinstance(stream, int):
        return stream
    if isinstance(stream, Stream):
        if not stream.ptr:
            if getattr(stream, "stale", False):
                raise StaleObjectError(
                    f"the stream was created before drvgemm.reset() (generation "
                    f"{stream.generation}, now {_generation}); create a new drvgemm.Stream")
            raise ValueError("the stream was closed; create a new drvgemm.Stream")
        return stream.ptr
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if v is not None:
            return int(v)
    raise TypeError(f"stream {stream!r} is not a CUDA stream")


class Event:
    def __init__(self, timing=True):
        ensure_context()
        flags = _driver.CUevent_flags.CU_EVENT_DEFAULT if timing else \
            _driver.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self.handle = check(_driver.cuEventCreate(flags), "cuEventCreate")
        self.generation = _generation
        _live_handles.add(self)

    def _live(self):
        if self.handle is None:
            raise StaleObjectError(f"the event was created before drvgemm.reset() (generation "
                                   f"{self.generation}, now {_generation})")
        return self.handle

    def record(self, stream=None):
        check(_driver.cuEventRecord(self._live(), stream_handle(stream)), "cuEventRecord")
        return self

    def synchronize(self):
        check(_driver.cuEventSynchronize(self._live()), "cuEventSynchronize")

    def elapsed_ms(self, end: "Event") -> float:
        return check(_driver.cuEventElapsedTime(self._live(), end._live()), "cuEventElapsedTime")

    def _invalidate(self):
        self.handle = None

    def __del__(self):
        try:
            if _driver is not None and self.handle is not None:
                _driver.cuEventDestroy(self.handle)
        except Exception:
            pass


# ---------------------------------------------------------------------------
# stream capture (drvgemm.graph uses these; runtime/graph.py)
# ---------------------------------------------------------------------------
def push_capture(graph):
    """Make ``graph`` (with .handle, its stream's handle, and .keep, a list)
    the target of ``stream=None`` on this thread."""
    cap = getattr(_tls, "capture", None)
    if cap is None:
        cap = _tls.capture = []
    cap.append(graph)


def pop_capture(graph):
    cap = getattr(_tls, "capture", None)
    if cap and cap[-1] is graph:
        cap.pop()


def capturing_graph():
    """The graph this thread is capturing into, or None."""
    cap = getattr(_tls, "capture", None)
    return cap[-1] if cap else None


def _note_capture_allocation(a):
    """An allocation made while capturing is baked into the graph by address:
    the graph keeps it alive for as long as it can be replayed."""
    cap = getattr(_tls, "capture", None)
    if cap:
        cap[-1].keep.append(a)


_HOST_DATA = ("a graph cannot move host data; pass device arrays (drvgemm.to_device) to "
              "the calls you capture")


def _refuse_while_capturing(handle, what, why=_HOST_DATA):
    cap = getattr(_tls, "capture", None)
    if cap and any(g.handle == handle for g in cap):
        raise ValueError(f"{what} inside a drvgemm.graph() capture: {why}")


def stream_capturing(handle) -> bool:
    ensure_context()
    st = check(_driver.cuStreamIsCapturing(_driver.CUstream(int(handle))), "cuStreamIsCapturing")
    return st == _driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE


def begin_capture(handle):
    ensure_context()
    check(_driver.cuStreamBeginCapture(
        _driver.CUstream(int(handle)),
        _driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture")


def end_capture(handle):
    """The captured CUgraph (raises when the capture was invalidated)."""
    return check(_driver.cuStreamEndCapture(_driver.CUstream(int(handle))), "cuStreamEndCapture")


def instantiate_graph(graph):
    return check(_driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")


def graph_node_count(graph) -> int:
    _, n = check(_driver.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
    return int(n)


def launch_graph(exec_graph, handle):
    check(_driver.cuGraphLaunch(exec_graph, _driver.CUstream(int(handle))), "cuGraphLaunch")


def destroy_graph(graph=None, exec_graph=None):
    if _driver is None:
        return
    if exec_graph is not None:
        _driver.cuGraphExecDestroy(exec_graph)
    if graph is not None:
        _driver.cuGraphDestroy(graph)


def register_handle(obj):
    """Track an object holding driver handles: reset() calls its
    ``_invalidate()`` (which must not call the driver)."""
    _live_handles.add(obj)


def stream_synchronize(stream) -> None:
    """Wait for the work queued on one stream (None: the legacy default one)."""
    ensure_context()
    h = stream_handle(stream)
    _refuse_while_capturing(h, "waiting for the capture stream",
                            "nothing runs until the graph is replayed (g.replay(), then "
                            "g.synchronize())")
    check(_driver.cuStreamSynchronize(_driver.CUstream(h)), "cuStreamSynchronize")


def synchronize():
    """Wait for all work on the device; raises the CudaError of a kernel
    that faulted."""
    ensure_context()
    check(_driver.cuCtxSynchronize(), "cuCtxSynchronize")


# ---------------------------------------------------------------------------
# modules, functions, attributes, occupancy
# ---------------------------------------------------------------------------
def load_module(cubin: bytes, what: str):
    ensure_context()
    err, module = _driver.cuModuleLoadData(cubin)
    if err != 0:
        raise_cuda(f"cuModuleLoadData({what})", err)
    return module


def module_global(module, symbol: str) -> tuple[int, int]:
    """(device address, bytes) of a __device__ or __constant__ variable of a
    loaded module (cuModuleGetGlobal)."""
    ptr, size = check(_driver.cuModuleGetGlobal(module, symbol.encode()),
                      f"cuModuleGetGlobal({symbol})")
    return int(ptr), int(size)


def get_function(module, entry: str):
    return check(_driver.cuModuleGetFunction(module, entry.encode()),
                 f"cuModuleGetFunction({entry})")


# Every CUfunction_attribute, by the name after CU_FUNC_ATTRIBUTE_, with
# what it says (read with cuFuncGetAttribute).
FUNCTION_ATTRIBUTES = {
    "MAX_THREADS_PER_BLOCK": "most threads per block (launch bounds, registers, device)",
    "SHARED_SIZE_BYTES": "static shared memory per block, bytes",
    "CONST_SIZE_BYTES": "user constant memory, bytes",
    "LOCAL_SIZE_BYTES": "local memory per thread (stack, spills), bytes",
    "NUM_REGS": "registers per thread",
    "PTX_VERSION": "PTX ISA version the function was compiled for (major*10+minor)",
    "BINARY_VERSION": "binary architecture (major*10+minor)",
    "CACHE_MODE_CA": "1 when compiled with -Xptxas --dlcm=ca",
    "MAX_DYNAMIC_SHARED_SIZE_BYTES": "dynamic shared memory a launch may ask for, bytes",
    "PREFERRED_SHARED_MEMORY_CARVEOUT": "preferred shared-memory share of L1/shared, percent "
                                        "(-1: no preference)",
    "CLUSTER_SIZE_MUST_BE_SET": "1 when the kernel must be launched with a cluster shape",
    "REQUIRED_CLUSTER_WIDTH": "compile-time cluster width (0: none)",
    "REQUIRED_CLUSTER_HEIGHT": "compile-time cluster height (0: none)",
    "REQUIRED_CLUSTER_DEPTH": "compile-time cluster depth (0: none)",
    "NON_PORTABLE_CLUSTER_SIZE_ALLOWED": "1 when clusters above the portable 8 blocks may run",
    "CLUSTER_SCHEDULING_POLICY_PREFERENCE": "0 default, 1 spread, 2 load balancing",
    "DEVICE_NODE_UPDATE_SUPPORTED": "1 when device-side graph node updates are supported",
    "SHARED_MEMORY_MODE": "shared memory mode",
}

_CLUSTER_POLICIES = {"default": 0, "spread": 1, "load_balancing": 2}
_CARVEOUTS = {"default": -1, "max_l1": 0, "max_shared": 100}


def _check_int(name, value, lo, hi, hint=""):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"function attribute {name} takes an integer, got "
                        f"{type(value).__name__} {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"function attribute {name} = {v} is out of range [{lo}, {hi}]"
                         + (f": {hint}" if hint else ""))
    return v


def _set_max_dynamic(value, ctx):
    hi = ctx.get("optin", 2**31 - 1) - ctx.get("static_smem", 0)
    return _check_int("MAX_DYNAMIC_SHARED_SIZE_BYTES", value, 0, hi,
                      f"the device allows {ctx.get('optin')} B of shared memory per block, "
                      f"{ctx.get('static_smem', 0)} B of which this kernel declares statically")


def _set_carveout(value, ctx):
    if isinstance(value, str):
        if value not in _CARVEOUTS:
            raise ValueError(f"PREFERRED_SHARED_MEMORY_CARVEOUT: use a percentage 0..100, -1 or "
                             f"one of {sorted(_CARVEOUTS)}, not {value!r}")
        return _CARVEOUTS[value]
    return _check_int("PREFERRED_SHARED_MEMORY_CARVEOUT", value, -1, 100,
                      "a percentage of the unified L1/shared capacity, -1 for no preference")


def _set_flag(name):
    def f(value, ctx):
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        return _check_int(name, value, 0, 1, "0 or 1")
    return f


def _set_cluster_dim(name):
    def f(value, ctx):
        return _check_int(name, value, 0, 32, "blocks along one axis of a cluster "
                          "(the product must be at most 8, or 16 with non-portable sizes)")
    return f


def _set_policy(value, ctx):
    if isinstance(value, str):
        if value not in _CLUSTER_POLICIES:
            raise ValueError(f"CLUSTER_SCHEDULING_POLICY_PREFERENCE: use one of "
                             f"{sorted(_CLUSTER_POLICIES)} (or 0, 1, 2), not {value!r}")
        return _CLUSTER_POLICIES[value]
    return _check_int("CLUSTER_SCHEDULING_POLICY_PREFERENCE", value, 0, 2,
                      "0 default, 1 spread, 2 load balancing")


# The attributes cuFuncSetAttribute takes, each with its validator:
# value (and {"optin": ..., "static_smem": ...}) -> the int to set.
SETTABLE_FUNCTION_ATTRIBUTES = {
    "MAX_DYNAMIC_SHARED_SIZE_BYTES": _set_max_dynamic,
    "PREFERRED_SHARED_MEMORY_CARVEOUT": _set_carveout,
    "REQUIRED_CLUSTER_WIDTH": _set_cluster_dim("REQUIRED_CLUSTER_WIDTH"),
    "REQUIRED_CLUSTER_HEIGHT": _set_cluster_dim("REQUIRED_CLUSTER_HEIGHT"),
    "REQUIRED_CLUSTER_DEPTH": _set_cluster_dim("REQUIRED_CLUSTER_DEPTH"),
    "NON_PORTABLE_CLUSTER_SIZE_ALLOWED": _set_flag("NON_PORTABLE_CLUSTER_SIZE_ALLOWED"),
    "CLUSTER_SCHEDULING_POLICY_PREFERENCE": _set_policy,
}


def attribute_name(name: str) -> str:
    """'max_dynamic_shared_size_bytes', 'MAX_DYNAMIC_SHARED_SIZE_BYTES' or
    'CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES' -> the short upper name."""
    if not isinstance(name, str):
        raise TypeError(f"a function attribute is named by a string, not {type(name).__name__}")
    n = name.upper()
    if n.startswith("CU_FUNC_ATTRIBUTE_"):
        n = n[len("CU_FUNC_ATTRIBUTE_"):]
    if n not in FUNCTION_ATTRIBUTES:
        raise ValueError(f"unknown function attribute {name!r}; known: "
                         f"{', '.join(n.lower() for n in FUNCTION_ATTRIBUTES)}")
    return n


def validate_function_attribute(name: str, value, ctx: dict) -> tuple[str, int]:
    """(short name, int value) for ``set_attribute(name, value)``, or a
    ValueError/TypeError saying why not (read-only, out of range)."""
    n = attribute_name(name)
    check_fn = SETTABLE_FUNCTION_ATTRIBUTES.get(n)
    if check_fn is None:
        raise ValueError(f"function attribute {n.lower()} is read-only; settable: "
                         f"{', '.join(x.lower() for x in SETTABLE_FUNCTION_ATTRIBUTES)}")
    return n, check_fn(value, ctx)


def function_attribute(function, name: str) -> int:
    a = getattr(_driver.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)
    return check(_driver.cuFuncGetAttribute(a, function), f"cuFuncGetAttribute({name})")


# Attributes this process's driver refused to read: the bindings may name an
# attribute newer than the driver (cuda-bindings 13.3 over a CUDA 13.0 driver),
# which answers CUDA_ERROR_INVALID_VALUE. Not asked again, so the refused call is
# made once per process, not once per read (compute-sanitizer reports each one).
_REFUSED_FUNCTION_ATTRIBUTES: set[str] = set()


def function_attributes(function) -> dict:
    """Every attribute this driver knows, lower-case names -> int (an
    attribute the driver does not answer for is left out)."""
    out = {}
    for n in FUNCTION_ATTRIBUTES:
        a = getattr(_driver.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + n, None)
        if a is None or n in _REFUSED_FUNCTION_ATTRIBUTES:
            continue
        err, v = _driver.cuFuncGetAttribute(a, function)
        if err == 0:
            out[n.lower()] = int(v)
        elif int(err) == int(_driver.CUresult.CUDA_ERROR_INVALID_VALUE):
            _REFUSED_FUNCTION_ATTRIBUTES.add(n)
    return out


def set_function_attribute(function, name: str, value: int):
    a = getattr(_driver.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)
    check(_driver.cuFuncSetAttribute(function, a, int(value)), f"cuFuncSetAttribute({name}={value})")


def occupancy_max_active_blocks(function, block_threads: int, dynamic_smem: int) -> int:
    ensure_context()
    return check(_driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        function, int(block_threads), int(dynamic_smem)),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor")


def occupancy_available_dynamic_smem(function, blocks: int, block_threads: int) -> int:
    ensure_context()
    return check(_driver.cuOccupancyAvailableDynamicSMemPerBlock(
        function, int(blocks), int(block_threads)), "cuOccupancyAvailableDynamicSMemPerBlock")


def occupancy_max_potential_block_size(function, dynamic_smem: int, block_limit: int = 0):
    ensure_context()
    return check(_driver.cuOccupancyMaxPotentialBlockSize(
        function, None, int(dynamic_smem), int(block_limit)), "cuOccupancyMaxPotentialBlockSize")


def occupancy_max_active_clusters(function, grid, block, smem, cluster) -> int:
    """cuOccupancyMaxActiveClusters for a cluster launch configuration."""
    d = bindings()
    cfg = d.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = int(smem)
    attr = d.CUlaunchAttribute()
    attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    return check(d.cuOccupancyMaxActiveClusters(function, cfg), "cuOccupancyMaxActiveClusters")


def launch_kernel_ex(function, grid, block, smem, stream, params_addr, cluster=None,
                     attributes=(), cooperative=False):
    """cuLaunchKernelEx for launches with a cluster shape, a cooperative
    launch (grid-wide sync) or other launch attributes (not the hot path)."""
    cfg = launch_config_ex(grid, block, smem, stream, cluster=cluster, attributes=attributes,
                           cooperative=cooperative)
    (err,) = bindings().cuLaunchKernelEx(cfg, function, params_addr, 0)
    return err


def launch_config_ex(grid, block, smem, stream, cluster=None, attributes=(), cooperative=False):
    """cuLaunchKernelEx's CUlaunchConfig: the shape, the stream (a CUstream or
    an integer handle) and the attributes (a cluster shape, cooperative, then
    ``attributes`` as given)."""
    d = bindings()
    cfg = d.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = int(smem)
    cfg.hStream = stream if isinstance(stream, d.CUstream) else d.CUstream(int(stream))
    attrs = []
    if cluster is not None:
        a = d.CUlaunchAttribute()
        a.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster
        attrs.append(a)
    if cooperative:
        a = d.CUlaunchAttribute()
        a.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        a.value.cooperative = 1
        attrs.append(a)
    attrs.extend(attributes)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    return cfg
