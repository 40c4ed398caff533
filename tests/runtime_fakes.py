"""A stand-in for cuda.bindings.driver that records what drvgemm's runtime
asks of it (enums and value types are the real ones), and the device of an
H200, for CPU tests of the driver layer: copies, streams, capture, reset,
function attributes, cooperative launches."""
import itertools

from drvgemm.runtime.driver import DeviceProperties

H200 = DeviceProperties(
    name="NVIDIA H200 (stand-in)", cc=(9, 0), sm_count=132, total_memory=141 * 2**30,
    smem_per_sm=233472, smem_per_block=49152, smem_per_block_optin=232448,
    smem_reserved_per_block=1024, regs_per_sm=65536, regs_per_block=65536,
    max_threads_per_sm=2048, max_threads_per_block=1024, max_blocks_per_sm=32, warp_size=32,
    l2_size=60 * 2**20, clock_khz=1980000, mem_clock_khz=3201000, bus_width_bits=6144,
    max_block_dims=(1024, 1024, 64), max_grid_dims=(2**31 - 1, 65535, 65535),
    driver_version="13.0")


class StandInArray:
    """A device array for benchmark scripts run on a stand-in device: its
    shape and dtype, no bytes (reads come back as zeros, writes and frees
    do nothing)."""
    def __init__(self, shape, dtype="uint8"):
        import numpy as np
        self.shape, self.dtype, self.ptr, self.nbytes = shape, np.dtype(dtype), 0x1000, 0

    def fill_bytes(self, v):
        return self

    def to_host(self):
        import numpy as np
        return np.zeros(self.shape, self.dtype)

    def free(self):
        pass


class FakeDriver:
    def __init__(self):
        from cuda.bindings import driver as real
        self._real = real
        self.calls = []
        self._next = itertools.count(0x7f0000000000, 0x100000)
        self._streams = itertools.count(0x5000, 0x10)
        self.capturing = set()
        self.attrs = {}          # (function, name) -> value
        self.frees = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _rec(self, *call):
        self.calls.append(call)

    def names(self):
        return [c[0] for c in self.calls]

    # context
    def cuCtxSetCurrent(self, ctx):
        self._rec("cuCtxSetCurrent", ctx)
        return (0,)

    def cuCtxSynchronize(self):
        self._rec("cuCtxSynchronize")
        return (0,)

    def cuDevicePrimaryCtxRelease(self, dev):
        self._rec("cuDevicePrimaryCtxRelease", dev)
        return (0,)

    def cuDevicePrimaryCtxReset(self, dev):
        self._rec("cuDevicePrimaryCtxReset", dev)
        return (0,)

    def cuDevicePrimaryCtxRetain(self, dev):
        self._rec("cuDevicePrimaryCtxRetain", dev)
        return (0, "ctx-new")

    # memory
    def cuMemAlloc(self, nbytes):
        p = next(self._next)
        self._rec("cuMemAlloc", nbytes, p)
        return (0, p)

    def cuMemFree(self, ptr):
        self.frees.append(int(ptr))
        self._rec("cuMemFree", int(ptr))
        return (0,)

    def cuMemcpyHtoD(self, dst, src, n):
        self._rec("cuMemcpyHtoD", dst, n)
        return (0,)

    def cuMemcpyDtoH(self, dst, src, n):
        self._rec("cuMemcpyDtoH", src, n)
        return (0,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        self._rec("cuMemcpyHtoDAsync", dst, n, int(stream))
        return (0,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        self._rec("cuMemcpyDtoHAsync", src, n, int(stream))
        return (0,)

    # streams, events
    def cuStreamCreate(self, flags):
        h = next(self._streams)
        self._rec("cuStreamCreate", h)
        return (0, self._real.CUstream(h))

    def cuStreamDestroy(self, s):
        self._rec("cuStreamDestroy", int(s))
        return (0,)

    def cuStreamSynchronize(self, s):
        self._rec("cuStreamSynchronize", int(s))
        return (0,)

    def cuEventCreate(self, flags):
        return (0, "event")

    def cuEventDestroy(self, e):
        self._rec("cuEventDestroy")
        return (0,)

    # capture
    def cuStreamBeginCapture(self, s, mode):
        self.capturing.add(int(s))
        self._rec("cuStreamBeginCapture", int(s), mode.name)
        return (0,)

    def cuStreamEndCapture(self, s):
        self.capturing.discard(int(s))
        self._rec("cuStreamEndCapture", int(s))
        return (0, "graph")

    def cuGraphGetNodes(self, g, n=0):
        return (0, [], 3)

    def cuGraphInstantiate(self, g, flags):
        self._rec("cuGraphInstantiate", g)
        return (0, "exec")

    def cuGraphLaunch(self, e, s):
        self._rec("cuGraphLaunch", e, int(s))
        return (0,)

    def cuGraphExecDestroy(self, e):
        self._rec("cuGraphExecDestroy")
        return (0,)

    def cuGraphDestroy(self, g):
        self._rec("cuGraphDestroy")
        return (0,)

    # functions
    def cuFuncGetAttribute(self, attr, fn):
        name = attr.name[len("CU_FUNC_ATTRIBUTE_"):]
        return (0, self.attrs.get((fn, name), 7))

    def cuFuncSetAttribute(self, fn, attr, value):
        name = attr.name[len("CU_FUNC_ATTRIBUTE_"):]
        self.attrs[(fn, name)] = value
        self._rec("cuFuncSetAttribute", name, value)
        return (0,)

    def cuLaunchKernelEx(self, cfg, fn, params, extra):
        self._rec("cuLaunchKernelEx", cfg, fn)
        return (0,)


def install(monkeypatch, fake=None):
    """Put a FakeDriver under drvgemm.runtime.driver as if cuInit had
    succeeded on an H200."""
    from drvgemm.runtime import driver
    fake = fake or FakeDriver()
    monkeypatch.setattr(driver, "_driver", fake)
    monkeypatch.setattr(driver, "_context", "ctx")
    monkeypatch.setattr(driver, "_device_handle", 0)
    monkeypatch.setattr(driver, "_props", H200)
    monkeypatch.setattr(driver, "_init_error", None)
    # reset() moves the generation: undone after the test, with this thread's
    monkeypatch.setattr(driver, "_generation", driver._generation)
    monkeypatch.setattr(driver._tls, "gen", driver._generation, raising=False)
    return fake


def loaded(kernel, fn="fn", max_threads=1024, static_smem=0):
    """Make a compiled Kernel look loaded (no module load, no GPU)."""
    kernel._function = fn
    kernel._function_int = 0x1234
    kernel._max_threads = max_threads
    kernel._static_smem = static_smem
    kernel._dynamic_smem_limit = 48 * 1024 - static_smem
    from drvgemm.runtime import kernel as kmod
    kmod._LOADED_KERNELS.add(kernel)
    return kernel


class LaunchingDriver(FakeDriver):
    """FakeDriver that also loads modules and launches (records the stream),
    so gemm() and softmax() run their whole host path on the CPU."""

    ATTRS = {"MAX_THREADS_PER_BLOCK": 1024, "SHARED_SIZE_BYTES": 0,
             "MAX_DYNAMIC_SHARED_SIZE_BYTES": 48 * 1024}

    def cuModuleLoadData(self, image):
        return (0, "module")

    def cuModuleGetFunction(self, module, name):
        return (0, self._real.CUfunction(0x4000))

    def cuFuncGetAttribute(self, attr, fn):
        name = attr.name[len("CU_FUNC_ATTRIBUTE_"):]
        return (0, self.attrs.get((fn, name), self.ATTRS.get(name, 0)))

    def cuGetProcAddress(self, *a):
        return (1, 0)            # no C fast path: every launch through cuLaunchKernel below

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self._rec("cuLaunchKernel", (gx, gy, gz), 0 if stream is None else int(stream))
        return (0,)

    def cuLaunchKernelEx(self, cfg, fn, params, extra):
        self._rec("cuLaunchKernel", (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ), int(cfg.hStream))
        return (0,)

    def cuLaunchCooperativeKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params):
        self._rec("cuLaunchKernel", (gx, gy, gz), 0 if stream is None else int(stream))
        return (0,)

    def cuMemsetD8Async(self, ptr, value, n, stream):
        self._rec("cuMemsetD8Async", int(stream))
        return (0,)

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn, threads, smem):
        return (0, 2)

    def cuOccupancyMaxActiveClusters(self, fn, cfg):
        return (0, 16)
