"""The CUDA driver API as drvgemm uses it: context, device properties,
memory, streams, events, module loading, function attributes, occupancy
queries and the translation of every CUresult into a CudaError that says
what went wrong and, where it helps, why.

Every call into ``cuda.bindings.driver`` is made from drvgemm/runtime/: here,
and in launch.py (the hot launch path, which binds cuLaunchKernel once) and
tensormap.py (cuTensorMapEncodeTiled, stream-ordered scratch copies), both of
which get the initialised module from ``bindings()``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .errors import CudaError, NoDeviceError

try:
    from cuda.bindings import driver as _cuda_driver
    _bindings_error = None
except Exception as e:  # pragma: no cover - a missing or broken cuda-bindings
    _cuda_driver = None
    _bindings_error = e

__all__ = ["device", "has_gpu", "no_gpu_reason", "default_arch", "DeviceProperties",
           "DeviceArray", "to_device", "empty", "Stream", "Event", "synchronize",
           "memcpy_dtod", "check"]

_state_lock = threading.Lock()
_tls = threading.local()
_driver = None          # the cuda.bindings.driver module once cuInit succeeded
_init_error = None      # NoDeviceError explaining why there is no GPU
_context = None         # primary context of the selected device
_device_handle = None
_props = None

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
        "every later call in this process fails. Restart the process; run the kernel "
        "under `compute-sanitizer --tool memcheck` to find the access.",
    "CUDA_ERROR_LAUNCH_FAILED":
        "a kernel faulted; the context is now unusable. Restart the process and run "
        "under compute-sanitizer.",
    "CUDA_ERROR_MISALIGNED_ADDRESS":
        "a vector or cp.async access used an address that is not aligned to its width "
        "(16 B for float4); the context is now unusable.",
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
def _init():
    """cuInit + primary context of device 0, once per process. Raises
    NoDeviceError when there is no driver library or no device."""
    global _driver, _init_error, _context, _device_handle
    if _context is not None:
        return
    if _init_error is not None:
        raise _init_error
    with _state_lock:
        if _context is not None:
            return
        driver = _cuda_driver
        if driver is None:  # pragma: no cover - missing package
            _init_error = NoDeviceError("import cuda.bindings.driver", -1, "NO_BINDINGS",
                                        f"cuda-bindings is not importable: {_bindings_error}")
            raise _init_error from None
        try:
            (err,) = driver.cuInit(0)
        except Exception as e:
            # cuda.bindings raises (rather than returning a code) when the
            # driver library libcuda.so is not installed at all.
            _init_error = NoDeviceError(
                "cuInit", -1, "NO_DRIVER",
                f"no CUDA driver library on this machine ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else e})")
            raise _init_error from None
        _driver = driver
        if err != 0:
            name, desc = _name_and_description(driver, err)
            if name in ("CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INSUFFICIENT_DRIVER"):
                _init_error = NoDeviceError("cuInit", int(err), name, desc)
                raise _init_error
            raise_cuda("cuInit", err)
        count = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            _init_error = NoDeviceError("cuDeviceGetCount", 100, "CUDA_ERROR_NO_DEVICE",
                                        "the driver sees no CUDA device")
            raise _init_error
        dev = check(driver.cuDeviceGet(0), "cuDeviceGet")
        ctx = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        _device_handle = dev
        _context = ctx
        _tls.current = True


def ensure_context():
    """Make the primary context current on the calling thread (cheap after
    the first call on each thread)."""
    if getattr(_tls, "current", False):
        return
    _init()
    check(_driver.cuCtxSetCurrent(_context), "cuCtxSetCurrent")
    _tls.current = True


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
    when used as a context manager exits, or when garbage-collected."""

    __slots__ = ("ptr", "shape", "dtype", "nbytes", "_owner", "__weakref__")

    def __init__(self, shape, dtype, ptr=None, owner=True):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"negative dimension in shape {shape}")
        self.shape = shape
        self.dtype = _as_dtype(dtype)
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize
        if ptr is None:
            ensure_context()
            # cuMemAlloc refuses 0 bytes; keep a null pointer for empty arrays.
            ptr = int(check(_driver.cuMemAlloc(self.nbytes), f"cuMemAlloc({self.nbytes})")) \
                if self.nbytes else 0
        self.ptr = int(ptr)
        self._owner = owner and self.ptr != 0

    # -- protocol ----------------------------------------------------------
    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None}

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
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif out.nbytes != self.nbytes or not out.flags.c_contiguous:
            raise ValueError("out must be a C-contiguous array of the same size")
        if self.nbytes:
            ensure_context()
            check(_driver.cuMemcpyDtoH(out.ctypes.data, self.ptr, self.nbytes), "cuMemcpyDtoH")
        return out

    def copy_from_host(self, host: np.ndarray):
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.nbytes != self.nbytes:
            raise ValueError(f"host array has {host.nbytes} bytes, device array {self.nbytes}")
        if self.nbytes:
            ensure_context()
            check(_driver.cuMemcpyHtoD(self.ptr, host.ctypes.data, self.nbytes), "cuMemcpyHtoD")
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
        """Another shape/dtype over the same bytes (no copy, no ownership)."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        shape = (self.nbytes // dtype.itemsize,) if shape is None else shape
        v = DeviceArray(shape, dtype, ptr=self.ptr, owner=False)
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


def to_device(array) -> DeviceArray:
    host = np.ascontiguousarray(array)
    d = DeviceArray(host.shape, host.dtype)
    d.copy_from_host(host)
    return d


def empty(shape, dtype=np.float32) -> DeviceArray:
    return DeviceArray(shape, dtype)


def memcpy_dtod(dst, src, nbytes, stream=None):
    ensure_context()
    check(_driver.cuMemcpyDtoDAsync(device_pointer(dst), device_pointer(src), int(nbytes),
                                    stream_handle(stream)), "cuMemcpyDtoDAsync")


def mem_alloc(nbytes: int) -> int:
    """A raw device allocation (cuMemAlloc) kept for the life of the process,
    for small workspaces; DeviceArray is the owning type for everything else."""
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
    """The device address of a DeviceArray or any __cuda_array_interface__
    object (CuPy, PyTorch, Numba); TypeError for host arrays."""
    if type(obj) is DeviceArray:
        return obj.ptr
    if isinstance(obj, int):
        return obj
    if isinstance(obj, np.ndarray):
        raise TypeError(f"{what} is a host (numpy) array; pass drvgemm.to_device(x) instead")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    raise TypeError(f"{what} is {type(obj).__name__}, not a device array: expected a "
                    "DeviceArray or an object with __cuda_array_interface__")


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

    def synchronize(self):
        check(_driver.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def __cuda_stream__(self):
        return (0, self.ptr)

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
    """An integer CUstream from None (legacy default stream), an int, a
    drvgemm Stream, a cuda.core stream (__cuda_stream__), a CuPy stream
    (.ptr) or a PyTorch stream (.cuda_stream)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    if isinstance(stream, Stream):
        if not stream.ptr:
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

    def record(self, stream=None):
        check(_driver.cuEventRecord(self.handle, stream_handle(stream)), "cuEventRecord")
        return self

    def synchronize(self):
        check(_driver.cuEventSynchronize(self.handle), "cuEventSynchronize")

    def elapsed_ms(self, end: "Event") -> float:
        return check(_driver.cuEventElapsedTime(self.handle, end.handle), "cuEventElapsedTime")

    def __del__(self):
        try:
            if _driver is not None:
                _driver.cuEventDestroy(self.handle)
        except Exception:
            pass


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


def get_function(module, entry: str):
    return check(_driver.cuModuleGetFunction(module, entry.encode()),
                 f"cuModuleGetFunction({entry})")


def function_attribute(function, name: str) -> int:
    a = getattr(_driver.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)
    return check(_driver.cuFuncGetAttribute(a, function), f"cuFuncGetAttribute({name})")


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
                     attributes=()):
    """cuLaunchKernelEx for launches with a cluster shape or other launch
    attributes (not the hot path)."""
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
    attrs.extend(attributes)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    (err,) = d.cuLaunchKernelEx(cfg, function, params_addr, 0)
    return err
