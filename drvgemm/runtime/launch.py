"""Argument checking, packing and the launch itself.

The hot path is kept short on purpose: for each launch shape a launcher is
generated once; it packs the arguments with one ``struct.pack_into`` into a
per-kernel buffer whose slot addresses were computed once from the PTX
parameter list, and calls cuda.bindings' cuLaunchKernel with the address of
that parameter array. Only when packing fails do we walk the arguments again
to say which one is wrong and why.

Launch kinds: plain (cuLaunchKernel, the C fast path when built), clusters
and other launch attributes (cuLaunchKernelEx), cooperative launches
(``cooperative=True``: a launcher like the plain ones -- the C path's
cuLaunchKernelEx with the cooperative attribute, or the Python path's
cuLaunchCooperativeKernel -- or with a cluster or attributes cuLaunchKernelEx
with the cooperative attribute; the first launch of a shape checks that the
whole grid can be resident at once, which a grid-wide sync needs). Inside a
``drvgemm.graph()`` block, ``stream=None`` is the graph's capture stream on the
thread that opened it (driver.stream_handle).
"""
from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass
from _thread import get_ident as _get_ident

import numpy as np

from . import driver
from .driver import DeviceArray
from .kernel import Kernel, Param

__all__ = ["launch", "launch_py", "fast_path", "LaunchConfig", "launch_config",
           "cooperative_limit", "slot_type"]

_FORMATS = {"u8": "B", "s8": "b", "b8": "B", "u16": "H", "s16": "h", "b16": "H",
            "u32": "I", "s32": "i", "b32": "I", "f32": "f",
            "u64": "Q", "s64": "q", "b64": "Q", "f64": "d"}
_INT_RANGES = {"u8": (0, 2**8 - 1), "s8": (-2**7, 2**7 - 1), "b8": (0, 2**8 - 1),
               "u16": (0, 2**16 - 1), "s16": (-2**15, 2**15 - 1), "b16": (0, 2**16 - 1),
               "u32": (0, 2**32 - 1), "s32": (-2**31, 2**31 - 1), "b32": (0, 2**32 - 1),
               "u64": (0, 2**64 - 1), "s64": (-2**63, 2**63 - 1), "b64": (0, 2**64 - 1)}
_F32_MAX = float(np.finfo(np.float32).max)


def slot_type(p: Param) -> str:
    """The PTX type a parameter is packed as: its own, or the signed type of
    the same width where the C++ source declares a signed integer (NVRTC
    writes ``short`` and ``signed char`` as .u16 / .u8, which would refuse -1).
    A Param says so with ``signed=True`` (derived from the source's
    signature) or with an .s type."""
    t = p.ptx_type
    if getattr(p, "signed", False) and t[0] in "ub" and t[1:] in ("8", "16", "32", "64"):
        return "s" + t[1:]
    return t

@dataclass(frozen=True)
class LaunchConfig:
    """One launch of a kernel, as a rung's host side computes it: grid, block,
    dynamic shared memory, the argument list and, for thread-block clusters,
    the cluster shape. ``keepalive`` holds what must outlive the enqueueing of
    the launch (stream-ordered scratch copies)."""
    grid: tuple
    block: tuple
    smem: int = 0
    args: tuple = ()
    cluster: tuple | None = None
    keepalive: tuple = ()


def launch_config(kernel, cfg: LaunchConfig, stream=None):
    """``launch(kernel, ...)`` with the shape and arguments of ``cfg``."""
    launch(kernel, cfg.grid, cfg.block, cfg.args, smem=cfg.smem, stream=stream,
           cluster=cfg.cluster)


class _Packer:
    """Packs one kernel's arguments into a C buffer laid out like the
    kernel's parameter list, and holds the void** array that points into it.
    Each thread has its own packer per kernel (the buffer is written and
    then read by the driver during the launch), so no lock is taken."""

    def __init__(self, params: list[Param]):
        self.params = params
        fmt, offset = "<", 0
        offsets = []
        for p in params:
            pad = (-offset) % p.align
            fmt += "x" * pad
            offset += pad
            offsets.append(offset)
            if p.is_bytes:
                fmt += f"{p.size}s"
            elif p.ptx_type == "f16":
                fmt += "e"
            else:
                fmt += _FORMATS[slot_type(p)]
            offset += p.size
        self.fmt = struct.Struct(fmt)
        self.offsets = tuple(offsets)
        self.buf = ctypes.create_string_buffer(max(offset, 1))
        base = ctypes.addressof(self.buf)
        self.array = (ctypes.c_void_p * max(len(params), 1))(*[base + o for o in offsets])
        self.array_addr = ctypes.addressof(self.array) if params else 0
        self.n = len(params)
        # Slots that may hold a device pointer: 64-bit integer slots.
        self.address_slots = tuple(p.index for p in params if p.ptx_type in ("u64", "s64", "b64"))
        self.bytes_slots = tuple(p.index for p in params if p.is_bytes)
        self.make_runner = self._generate()

    def _generate(self):
        """Write, for exactly this parameter list, a factory of launchers:
        each launcher unpacks the arguments in one assignment, tests each
        pointer slot's type inline, packs with one pack_into and calls
        cuLaunchKernel with the launch shape bound in its closure. Anything
        unusual (a foreign array, a wrong count, a TensorMap) goes through
        ``convert``, which checks every argument and names the bad one."""
        n = self.n
        names = [f"a{i}" for i in range(n)]
        tup = ", ".join(names) + ("," if n == 1 else "")
        body = []
        if n:
            body += ["        try:",
                     f"            {tup} = args",
                     "        except (TypeError, ValueError):",
                     f"            {tup} = convert(args)"]
            if self.bytes_slots:
                body.append(f"        {tup} = convert(args)")
            else:
                for i in self.address_slots:
                    body.append(f"        if type(a{i}) is DA: a{i} = a{i}.ptr")
                    body.append(f"        elif type(a{i}) is not int: {tup} = convert(args)")
        if n:
            body += ["        try:",
                     f"            pack_into(buf, 0, {', '.join(names)})",
                     "        except Exception:",
                     f"            explain(({tup}))",
                     "            raise"]
        body += ["        err, = cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, smem, s, addr, 0)",
                 "        return err"]
        lines = ["def make_runner(cuLaunchKernel, fn, gx, gy, gz, bx, by, bz, smem, s):",
                 "    def run(args):"] + body + ["    return run"]
        scope = {"DA": DeviceArray, "convert": self.convert, "explain": self._explain,
                 "pack_into": self.fmt.pack_into, "buf": self.buf,
                 "addr": self.array_addr}
        exec("\n".join(lines), scope)  # noqa: S102 - generated from the PTX parameter list
        self.source = "\n".join(lines)
        return scope["make_runner"]

    def packed(self, args) -> bytes:
        """``args`` packed into a new parameter block (the C fast path's
        checked fallback); a wrong argument raises naming the parameter."""
        vals = self.convert(args)
        try:
            return self.fmt.pack(*vals)
        except Exception:
            self._explain(vals)
            raise

    def pack(self, args):
        """Pack ``args`` into the buffer."""
        vals = self.convert(args)
        try:
            self.fmt.pack_into(self.buf, 0, *vals)
        except Exception:
            self._explain(vals)
            raise

    def convert(self, args):
        """``args`` with every pointer and by-value slot reduced to what
        pack_into takes; a wrong count or kind raises TypeError naming the
        parameter."""
        try:
            count = len(args)
        except TypeError:
            raise TypeError(f"args must be a sequence of {self.n} kernel arguments, got "
                            f"{type(args).__name__}") from None
        if count != self.n:
            self._wrong_count(args)
        args = list(args)
        for i in self.address_slots:
            a = args[i]
            t = type(a)
            if t is DeviceArray:
                args[i] = a.ptr
            elif t is not int:
                args[i] = self._address(self.params[i], a)
        for i in self.bytes_slots:
            args[i] = self._bytes(self.params[i], args[i])
        return args

    # -- error paths: slow, precise ------------------------------------------
    def _wrong_count(self, args):
        sig = ", ".join(f"{p.name}: .{p.ptx_type}" for p in self.params)
        raise TypeError(f"kernel takes {self.n} arguments ({sig}), got {len(args)}")

    @staticmethod
    def _address(p: Param, a) -> int:
        if isinstance(a, (bool, np.bool_, float, np.floating)):
            raise TypeError(f"{p.describe()} expects a device pointer or 64-bit integer, "
                            f"got {type(a).__name__} {a!r}")
        if isinstance(a, np.integer):
            return int(a)
        if isinstance(a, int):
            return a
        return driver.device_pointer(a, what=p.describe())

    @staticmethod
    def _bytes(p: Param, a) -> bytes:
        raw = getattr(a, "param_bytes", a)
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != p.size:
            raise TypeError(f"{p.describe()} is a {p.size}-byte by-value parameter; pass an "
                            f"object with .param_bytes of {p.size} bytes (e.g. a TensorMap), "
                            f"got {type(a).__name__}")
        return bytes(raw)

    def _explain(self, args):
        for p, a in zip(self.params, args):
            if p.is_bytes:
                continue
            t = slot_type(p)
            if t in ("f32", "f64", "f16"):
                if isinstance(a, (DeviceArray,)) or hasattr(a, "__cuda_array_interface__"):
                    raise TypeError(f"{p.describe()} is a scalar, but got a device array")
                if not isinstance(a, (int, float, np.integer, np.floating)) or isinstance(a, bool):
                    raise TypeError(f"{p.describe()} expects a float, got {type(a).__name__}")
                if t == "f32" and abs(float(a)) > _F32_MAX and np.isfinite(float(a)):
                    raise ValueError(f"{p.describe()}: {a!r} overflows float32")
                continue
            lo, hi = _INT_RANGES[t]
            if isinstance(a, (DeviceArray,)) or hasattr(a, "__cuda_array_interface__"):
                raise TypeError(f"{p.describe()} is a scalar, but got a device array "
                                "(a pointer where a scalar belongs)")
            if isinstance(a, (float, np.floating)):
                raise TypeError(f"{p.describe()} expects an integer, got float {a!r}")
            if not isinstance(a, (int, np.integer)):
                raise TypeError(f"{p.describe()} expects an integer, got {type(a).__name__}")
            if not lo <= int(a) <= hi:
                raise ValueError(f"{p.describe()}: {int(a)} is out of range [{lo}, {hi}]")


def _dims(v, what) -> tuple:
    if isinstance(v, (int, np.integer)):
        t = (int(v), 1, 1)
    else:
        t = tuple(int(x) for x in v)
        if not 1 <= len(t) <= 3:
            raise ValueError(f"{what} must have 1 to 3 dimensions, got {v!r}")
        t = t + (1,) * (3 - len(t))
    if any(x < 1 for x in t):
        raise ValueError(f"{what} {t} has a dimension < 1")
    return t


def _check_config(kernel: Kernel, grid, block, smem):
    """Validate a launch shape against the device and the kernel; returns
    (gx, gy, gz, bx, by, bz, smem)."""
    kernel.function  # loads the module on first use
    dev = driver.device()
    g, b = _dims(grid, "grid"), _dims(block, "block")
    smem = int(smem)
    for i, (x, lim) in enumerate(zip(b, dev.max_block_dims)):
        if x > lim:
            raise ValueError(f"block {b}: dimension {'xyz'[i]} = {x} exceeds the device "
                             f"limit {lim}")
    threads = b[0] * b[1] * b[2]
    max_threads = kernel.max_threads
    if threads > max_threads:
        why = "its __launch_bounds__ / register use" if max_threads < \
            dev.max_threads_per_block else "the device"
        raise ValueError(f"block {b} has {threads} threads; {kernel.name} allows at most "
                         f"{max_threads} per block ({why})")
    for i, (x, lim) in enumerate(zip(g, dev.max_grid_dims)):
        if x > lim:
            raise ValueError(f"grid {g}: dimension {'xyz'[i]} = {x} exceeds the device "
                             f"limit {lim}")
    if smem < 0:
        raise ValueError("smem must be >= 0")
    static = kernel.static_smem
    if smem + static > dev.smem_per_block_optin:
        raise ValueError(f"{kernel.name} asks for {smem} B of dynamic shared memory "
                         f"(+ {static} B static), but the device allows at most "
                         f"{dev.smem_per_block_optin} B per block "
                         f"({dev.smem_per_block_optin - static} B dynamic for this kernel)")
    # Above 48 KiB a kernel must opt in (the kernel only ever raises its limit).
    kernel.set_max_dynamic_smem(smem)
    return g + b + (smem,)


_cu_streams = {}  # integer handle -> cuda.bindings CUstream
_MAX_RUNNERS = 4096  # per kernel; a program sweeping shapes must not grow without bound


@driver.on_reset
def _drop_streams():
    # Handles of the old context; a new stream may get the same number.
    _cu_streams.clear()


def cooperative_limit(kernel: Kernel, block, smem, cluster=None) -> tuple[int, str]:
    """(most blocks a cooperative launch of ``kernel`` may have, how that was
    found): every block of a grid that syncs grid-wide must be resident at
    once, i.e. blocks/SM from the occupancy query x SMs (or, for clusters,
    co-resident clusters x blocks per cluster)."""
    b = _dims(block, "block")
    threads = b[0] * b[1] * b[2]
    dev = driver.device()
    if cluster is not None:
        c = _dims(cluster, "cluster")
        n = driver.occupancy_max_active_clusters(kernel.function, c, b, smem, c)
        per = c[0] * c[1] * c[2]
        return n * per, f"{n} co-resident clusters of {per} blocks"
    per_sm = driver.occupancy_max_active_blocks(kernel.function, threads, smem)
    return per_sm * dev.sm_count, f"{per_sm} blocks/SM x {dev.sm_count} SMs"


def _check_cooperative(kernel, grid, block, smem, cluster):
    g = _dims(grid, "grid")
    blocks = g[0] * g[1] * g[2]
    limit, how = cooperative_limit(kernel, block, smem, cluster)
    if blocks > limit:
        b = _dims(block, "block")
        raise ValueError(
            f"cooperative launch of {kernel.name}: grid {g} has {blocks} blocks, but at most "
            f"{limit} blocks of {b[0] * b[1] * b[2]} threads with {smem} B of dynamic shared "
            f"memory can be resident at once ({how}); a grid-wide sync would never return. "
            f"Use a grid of at most {limit} blocks (a grid-stride loop covers the rest)"
            + ("" if limit else "; this block does not fit on an SM at all"))


def _cu_stream(handle: int):
    obj = _cu_streams.get(handle)
    if obj is None:
        obj = _cu_streams[handle] = driver.bindings().CUstream(handle)
    return obj


def _packer(kernel: Kernel, thread: int) -> _Packer:
    packer = kernel.packers.get(thread)
    if packer is None:
        packer = kernel.packers[thread] = _Packer(kernel.params)
    return packer


def _runner(kernel: Kernel, grid, block, smem, handle, thread, cooperative=False):
    """Check a launch shape against the device and the kernel (and a
    cooperative grid against the blocks that can be resident at once), and
    build (and cache, when the shape is hashable) the launcher for it.
    Cooperative launchers sit in the same cache under their own key."""
    cfg = _check_config(kernel, grid, block, smem)
    if cooperative:
        _check_cooperative(kernel, grid, block, cfg[6], None)
    # None is the legacy default stream, and the cheapest for cuda.bindings to convert.
    if _dependent(kernel):
        call = _cuLaunchKernelEx(cooperative, _dependent_attribute())
    else:
        call = _cuLaunchCooperativeKernel() if cooperative else _cuLaunchKernel()
    run = _packer(kernel, thread).make_runner(call, kernel.function, *cfg,
                                              _cu_stream(handle) if handle else None)
    if isinstance(grid, (int, tuple)) and isinstance(block, (int, tuple)):
        runners = kernel.runners
        if len(runners) >= _MAX_RUNNERS:
            runners.clear()
        key = (grid, block, smem, handle, thread)
        runners[key + (_COOPERATIVE,) if cooperative else key] = run
    return run


_LAUNCH_DOC = """Launch ``kernel`` on ``grid`` x ``block`` with ``args`` (a sequence
    matching the kernel's parameters) and ``smem`` bytes of dynamic shared
    memory, on ``stream`` (default: the legacy default stream). ``cluster``
    (x, y, z) launches thread-block clusters through cuLaunchKernelEx. A
    kernel whose ``dependent_launch`` is True is launched with programmatic
    stream serialization (it waits for the grid before it itself)."""


def launch_py(kernel: Kernel, grid, block, args, *, smem=0, stream=None, cluster=None,
              attributes=(), cooperative=False):
    # The common case costs one dict lookup and one call: the launcher for
    # this (grid, block, smem, stream) was built and checked on first use.
    if stream is None:
        # 0 (the legacy default stream), or this thread's capture stream.
        handle = driver.stream_handle(None) if _capturing_threads else 0
    elif type(stream) is driver.Stream and stream.ptr:
        handle = stream.ptr
    else:
        handle = driver.stream_handle(stream)
    thread = _get_ident()
    if cluster is None and not attributes:
        # A cooperative launch is checked against the resident blocks on the
        # first launch of its shape, then launched like any other.
        try:
            run = kernel.runners[(grid, block, smem, handle, thread, _COOPERATIVE) if cooperative
                                 else (grid, block, smem, handle, thread)]
        except (KeyError, TypeError):
            run = _runner(kernel, grid, block, smem, handle, thread, bool(cooperative))
        err = run(args)
        if err:
            if err in _NO_CONTEXT:
                # First launch from a new thread: make the context current, retry.
                driver.ensure_context()
                err = run(args)
            if err:
                _raise(kernel, grid, block, smem, err)
        return
    if _dependent(kernel):
        attributes = (*attributes, _dependent_attribute())
    cfg = _check_config(kernel, grid, block, smem)
    if cooperative:
        _check_cooperative(kernel, grid, block, cfg[6], cluster)
    packer = _packer(kernel, thread)
    packer.pack(args)
    err = driver.launch_kernel_ex(kernel.function, cfg[0:3], cfg[3:6], cfg[6],
                                  _cu_stream(handle), packer.array_addr,
                                  cluster=_dims(cluster, "cluster") if cluster else None,
                                  attributes=attributes, cooperative=bool(cooperative))
    if err in _NO_CONTEXT:
        driver.ensure_context()
        err = driver.launch_kernel_ex(kernel.function, cfg[0:3], cfg[3:6], cfg[6],
                                      _cu_stream(handle), packer.array_addr,
                                      cluster=_dims(cluster, "cluster") if cluster else None,
                                      attributes=attributes, cooperative=bool(cooperative))
    if err != 0:
        _raise(kernel, grid, block, smem, err)


launch_py.__doc__ = _LAUNCH_DOC + """ ``cooperative=True`` launches
    cooperatively (cooperative_groups grid.sync() works), after checking the
    grid against the blocks that can be resident at once (on the first launch
    of each shape; later ones reuse its launcher).

    The Python implementation: every launch when drvgemm.runtime._fastlaunch (C) is
    not built, and in any case the first launch of each shape, cluster and
    attribute launches, streams given as objects, and any launch whose
    arguments the C path does not take as they are."""


# ---------------------------------------------------------------------------
# The C fast path (drvgemm/runtime/_fastlaunch.c): for a (grid, block, smem, stream)
# that launched once through launch_py, a Launcher that packs the arguments
# and calls the driver's cuLaunchKernel from C. Slot kinds it packs itself
# (by-value byte blocks, TensorMaps, are _BYTES_KIND):
_FAST_KINDS = {"u64": 0, "s64": 0, "b64": 0, "s32": 1, "u32": 2, "b32": 2, "f32": 3, "f64": 4}
_BYTES_KIND = 5


def _driver_launch_address() -> int:
    """The driver's cuLaunchKernel, with the default-stream semantics
    cuda.bindings itself uses."""
    return driver.proc_address("cuLaunchKernel", per_thread_stream=None)


_fast_address = None
_fast_ex_address = None


def _fast_launcher(kernel: Kernel, grid, block, smem, stream, cooperative=False):
    """A C Launcher for a shape that has just launched through launch_py (a
    cooperative grid checked there), or None where the C path cannot serve it."""
    global _fast_address, _fast_ex_address
    if _fastlaunch is None:
        return None
    kinds = [_BYTES_KIND if p.is_bytes else _FAST_KINDS.get(slot_type(p))
             for p in kernel.params]
    if any(k is None for k in kinds):
        return None  # narrow scalars: the Python path
    if _fast_address is None:
        _fast_address = _driver_launch_address()
    if not _fast_address:
        return None
    ex = 0
    ex_attributes = ((_fastlaunch.EX_DEPENDENT if _dependent(kernel) else 0) |
                     (_fastlaunch.EX_COOPERATIVE if cooperative else 0))
    if ex_attributes:
        if _fast_ex_address is None:
            _fast_ex_address = driver.proc_address("cuLaunchKernelEx", per_thread_stream=None)
        ex = _fast_ex_address
        if not ex:
            return None
    handle = 0 if stream is None else int(stream)
    cfg = _check_config(kernel, grid, block, smem)
    # This thread's packer (launch_py just used it): its layout and its checked
    # packing serve the C launcher's fallback, which leaves the buffer alone.
    packer = _packer(kernel, _get_ident())
    return _fastlaunch.Launcher(_fast_address, kernel.handle, cfg[:6], cfg[6], handle,
                                kinds, packer.offsets, packer.fmt.size, DeviceArray, packer.packed,
                                tuple(p.size for p in kernel.params), ex, ex_attributes)


def _dependent(kernel) -> bool:
    """Whether ``kernel`` is launched with programmatic stream serialization
    (``Kernel.dependent_launch``; objects that are not Kernels never are)."""
    return getattr(kernel, "dependent_launch", False) is True


_dependent_attr = None


def _dependent_attribute():
    """The launch attribute of a dependent launch (cuda.bindings' object,
    built once)."""
    global _dependent_attr
    if _dependent_attr is None:
        d = driver.bindings()
        a = d.CUlaunchAttribute()
        a.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        a.value.programmaticStreamSerializationAllowed = 1
        _dependent_attr = a
    return _dependent_attr


def _first_launch(kernel, grid, block, args, *, smem=0, stream=None, cluster=None,
                  attributes=(), cooperative=False):
    """A shape the C path has not seen: launch through Python (which checks
    everything), then keep a C Launcher for the next time."""
    launch_py(kernel, grid, block, args, smem=smem, stream=stream, cluster=cluster,
              attributes=attributes, cooperative=cooperative)
    if stream is None and driver.capturing_graph() is not None:
        return   # stream=None was the capture stream: not what None means later
    if cluster is None and not attributes and (stream is None or type(stream) is int):
        # The C path's key; a cooperative launcher has its own (the part the C
        # module names: it builds the same key to look the launcher up).
        key = (grid, block, smem, stream) + ((_fastlaunch.COOPERATIVE_KEY,) if cooperative else ())
        try:
            hash(key)
        except TypeError:
            return
        fast = kernel.fast_launchers
        if len(fast) >= _MAX_RUNNERS:
            fast.clear()
        fast[key] = _fast_launcher(kernel, grid, block, smem, stream, bool(cooperative))


def _fast_failed(err, kernel, grid, block, smem):
    """A C-path launch returned ``err``: a thread with no current context
    gets one (the C path then retries through Python); anything else raises."""
    if err in _NO_CONTEXT:
        driver.ensure_context()
        return
    _raise(kernel, grid, block, smem, err)


try:
    if os.environ.get("DRVGEMM_NO_FASTLAUNCH"):
        raise ImportError("disabled by DRVGEMM_NO_FASTLAUNCH")
    from . import _fastlaunch
    if not all(hasattr(_fastlaunch, a) for a in ("set_capturing", "Encoder",
                                                  "EX_COOPERATIVE", "COOPERATIVE_KEY")):
        # Built from an older _fastlaunch.c: it would send stream=None launches
        # past a graph capture, or lack the tensor-map encoder, dependent or
        # cooperative launches. Rebuild it (pip install -e .) to get it back.
        raise ImportError("drvgemm.runtime._fastlaunch is out of date")
except ImportError:
    _fastlaunch = None

_capturing_threads = 0


def capture_begun():
    """A thread started capturing a graph (runtime/graph.py): the C path hands
    stream=None launches to Python, which knows the capture stream."""
    global _capturing_threads
    _capturing_threads += 1
    if _fastlaunch is not None:
        _fastlaunch.set_capturing(_capturing_threads)


def capture_ended():
    global _capturing_threads
    _capturing_threads = max(0, _capturing_threads - 1)
    if _fastlaunch is not None:
        _fastlaunch.set_capturing(_capturing_threads)

if _fastlaunch is not None:
    _fastlaunch.bind(launch_py, _first_launch, _fast_failed)
    launch = _fastlaunch.launch
else:
    launch = launch_py


def fast_module():
    """drvgemm.runtime._fastlaunch, or None where it is not in use."""
    return _fastlaunch


def fast_path() -> str:
    """Which launch path drvgemm.launch takes: 'C' (drvgemm.runtime._fastlaunch)
    or 'Python' (not built, or DRVGEMM_NO_FASTLAUNCH set)."""
    return "C" if _fastlaunch is not None else "Python"


def _raise(kernel, grid, block, smem, err):
    g, b = _dims(grid, "grid"), _dims(block, "block")
    driver.raise_cuda(f"launch of {kernel.name} grid={g} block={b} smem={smem}", err)


_launch_fn = None


def _cuLaunchKernel():
    """cuda.bindings' cuLaunchKernel: with the parameter array passed as an
    address it builds no per-argument Python objects."""
    global _launch_fn
    if _launch_fn is None:
        _launch_fn = driver.bindings().cuLaunchKernel
    return _launch_fn


# The key part that sets a cooperative launcher apart in Kernel.runners (the
# Python path's cache; the C path's, Kernel.fast_launchers, uses
# _fastlaunch.COOPERATIVE_KEY).
_COOPERATIVE = "cooperative"


def _cuLaunchKernelEx(cooperative, *attributes):
    """cuda.bindings' cuLaunchKernelEx, called the way the runners call
    cuLaunchKernel, for one runner: its configuration (the runner's fixed
    shape and stream, the cooperative flag, ``attributes``) is built on the
    first call and kept, so a dependent launch through Python costs what a
    plain one does (built on every call: 10.6-10.9 us against 4.9-5.6,
    results/launch_overhead.json)."""
    launch_ex = driver.bindings().cuLaunchKernelEx
    cfg = None

    def call(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        nonlocal cfg
        if cfg is None:
            cfg = driver.launch_config_ex((gx, gy, gz), (bx, by, bz), smem,
                                          0 if stream is None else stream,
                                          attributes=attributes, cooperative=cooperative)
        return launch_ex(cfg, fn, params, extra)
    return call


def _cuLaunchCooperativeKernel():
    """cuda.bindings' cuLaunchCooperativeKernel, called the way the runners
    call cuLaunchKernel (it has no ``extra`` argument)."""
    coop = driver.bindings().cuLaunchCooperativeKernel

    def call(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        return coop(fn, gx, gy, gz, bx, by, bz, smem, stream, params)
    return call


# CUDA_ERROR_INVALID_CONTEXT: a thread with no current context (CUresult is
# an int enum, so the driver's result compares equal to it);
# CUDA_ERROR_CONTEXT_IS_DESTROYED: a thread still holding the context that a
# reset() replaced.
_INVALID_CONTEXT = 201
NO_CONTEXT = _NO_CONTEXT = (201, 709)   # also what hopper.py's staging copies retry on
