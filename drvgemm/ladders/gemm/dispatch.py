"""``gemm()`` and ``plan()``: check the operands, choose a rung, an
instantiation and a split of K (plan.py, by the time model of
analysis/gemm_model.py), compile it, and launch what the rung's host side
computes from the compiled kernel (registry.py).

The plan cache. A call with device operands whose every property the checks
depend on is the same as a call already made -- the operands' types, shapes,
dtypes, contiguity and device, C's presence, kernel, precision, out_dtype,
whether alpha and beta are zero, the stream, and the alignment class (address
modulo 16) of the three pointers -- reuses that call's ``_Call``: the chosen
instantiation, compiled, its workspace, and the launch list of its last
pointers (prepacked arguments, tensor maps), so a repeat call costs a probe
of each operand (``interop.probe``: the pointer and the properties above, read the
cheapest way each array type offers), one dict lookup and the launch. The
first call with any new property goes through every check, as strictly as
ever, and fills the cache; nothing that the checks reject is ever cached.
"""
from __future__ import annotations

import operator
import threading

import numpy as np

from ...analysis.devices import CATALOGUE, find
from ...runtime import driver, dtypes, interop
from ...runtime.driver import DeviceArray
from ...runtime.errors import NoDeviceError
from ...runtime.kernel import compile_once
from ...runtime.launch import launch
from . import plan as planning
from . import tuned
from .registry import RUNGS, Rung, by_name, rung_kernel

__all__ = ["gemm", "plan", "plan_shape", "kernels", "rung", "input_dtype", "device_arch_ok",
           "PRECISIONS", "plan_cache_info", "clear_plan_cache"]

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def input_dtype(precision: str) -> np.dtype:
    """The numpy dtype a rung of this precision takes for A and B."""
    try:
        return dtypes.numpy_dtype(precision)
    except ValueError:
        raise ValueError(f"unknown precision {precision!r}") from None


def _precision_of_dtype(dt: np.dtype) -> str:
    p = dtypes.precision_of(dt)
    if p is None:
        raise TypeError(f"A and B must be float32, float16 or bfloat16 (ml_dtypes), not {dt}")
    return p


def kernels(precision=None) -> list[str]:
    """The registered rungs in ladder order, or those of one precision."""
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; the precisions are "
                         f"{', '.join(PRECISIONS)}")
    return [r.name for r in RUNGS if precision is None or r.precision == precision]


def rung(name: str) -> Rung:
    table = by_name()
    if name not in table:
        raise ValueError(f"unknown kernel {name!r}; registered: {', '.join(table) or 'none'}")
    return table[name]


def device_arch_ok(r: Rung) -> bool:
    """Whether the current device runs ``r`` (sm_90a rungs: exactly sm_90)."""
    return planning.arch_ok(r, driver.device().cc)


def _dtype_of(x) -> np.dtype:
    """A numpy dtype from a dtype, a type or a precision name ('bf16', ...)."""
    if isinstance(x, str) and x in ("fp32", "fp16", "bf16"):
        return dtypes.numpy_dtype(x)
    if isinstance(x, str) and x == "bfloat16":
        return dtypes.bf16()
    try:
        return np.dtype(x)
    except TypeError:
        raise TypeError(f"out_dtype {x!r} is not a dtype") from None


_PREC_NAME = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16"}


def _out_name(dt: np.dtype) -> str:
    return _PREC_NAME.get(dt) or "bf16"


# ---------------------------------------------------------------------------
# operands
# ---------------------------------------------------------------------------
_TORCH_DTYPES = {"torch.float32": np.dtype(np.float32), "torch.float16": np.dtype(np.float16)}


def _torch_dtype(x):
    name = str(x.dtype)
    return dtypes.bf16() if name == "torch.bfloat16" else _TORCH_DTYPES.get(name)


def _operand(x, what):
    """(is_device, shape, dtype, array) for a numpy array or a device array;
    rows must be contiguous. The checked path of every first call."""
    if isinstance(x, np.ndarray):
        if x.ndim != 2:
            raise ValueError(f"{what} must be 2-D, got shape {x.shape}")
        if not x.flags.c_contiguous:
            raise ValueError(f"{what} is not C-contiguous (rows must be contiguous, row-major); "
                             "use np.ascontiguousarray")
        return False, x.shape, x.dtype, x
    if isinstance(x, DeviceArray):
        if x.ndim != 2:
            raise ValueError(f"{what} must be 2-D, got shape {x.shape}")
        return True, x.shape, x.dtype, x
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        # PyTorch: its own attributes (its __cuda_array_interface__ has no bfloat16)
        if not x.is_cuda:
            raise TypeError(f"{what} is a PyTorch tensor on {x.device}, not on the GPU")
        shape = tuple(x.shape)
        if len(shape) != 2:
            raise ValueError(f"{what} must be 2-D, got shape {shape}")
        dt = _torch_dtype(x)
        if dt is None:
            raise TypeError(f"A and B must be float32, float16 or bfloat16, not {x.dtype}")
        if not x.is_contiguous():
            raise ValueError(f"{what} has strides {tuple(x.stride())}: rows must be contiguous "
                             "and row-major (call .contiguous())")
        return True, shape, dt, x
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"{what} must be a numpy array, a DeviceArray or an object with "
                        f"__cuda_array_interface__, not {type(x).__name__}")
    shape = tuple(cai["shape"])
    if len(shape) != 2:
        raise ValueError(f"{what} must be 2-D, got shape {shape}")
    dt = dtypes.of_interface(x, cai["typestr"])
    strides = cai.get("strides")
    if strides is not None and shape[0] * shape[1] > 0:
        if tuple(strides) != (shape[1] * dt.itemsize, dt.itemsize):
            raise ValueError(f"{what} has strides {tuple(strides)}: rows must be contiguous "
                             "and row-major (call .contiguous() / cupy.ascontiguousarray)")
    return True, shape, dt, x


def _pointer(x) -> int:
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        return int(x.data_ptr())
    return driver.device_pointer(x)


# ---------------------------------------------------------------------------
# one checked request
# ---------------------------------------------------------------------------
class _Request:
    """The outcome of the checks of one call: what to compute and with what."""
    __slots__ = ("m", "n", "k", "a_dt", "math", "out_dt", "narrow", "on_device", "a", "b",
                 "c", "rung", "alpha", "beta", "kernel")


def _math_precision(in_prec: str, precision, r: Rung | None) -> str:
    """The math of the call: the inputs' own unless precision="tf32" opts
    float32 inputs into TF32 (fp32 rungs stay candidates); a named kernel
    brings its own (a TF32 rung named for float32 inputs is TF32)."""
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)} or None, "
                         f"not {precision!r}")
    if precision == "tf32" and in_prec != "fp32":
        raise ValueError(f"precision='tf32' applies to float32 inputs; A and B are {in_prec}")
    if precision not in (None, "tf32") and precision != in_prec:
        raise ValueError(f"precision={precision!r} does not match the inputs ({in_prec}); "
                         "leave it None or pass 'tf32' for float32 inputs")
    math = precision or in_prec
    if r is not None:
        allowed = ("tf32", "fp32") if math == "tf32" else (math,)
        if precision is None and in_prec == "fp32":
            allowed = ("fp32", "tf32")     # a named rung says which math it does
        if r.precision not in allowed:
            raise ValueError(f"{r.name} computes in {r.precision}, but precision={precision!r} "
                             f"asks for {math}")
        math = r.precision
    return math


def _check(a, b, c, alpha, beta, kernel, out_dtype, precision) -> _Request:
    a_dev, a_shape, a_dt, a_obj = _operand(a, "A")
    b_dev, b_shape, b_dt, b_obj = _operand(b, "B")
    if a_dt != b_dt:
        raise TypeError(f"A is {a_dt} but B is {b_dt}: both must have the same dtype")
    in_prec = _precision_of_dtype(a_dt)
    m, k = a_shape
    k2, n = b_shape
    if k != k2:
        raise ValueError(f"A is {m}x{k} and B is {k2}x{n}: inner dimensions differ ({k} != {k2})")
    out_dt = np.dtype(np.float32) if out_dtype is None else _dtype_of(out_dtype)
    c_obj, c_dev = None, a_dev
    if c is not None:
        c_dev, c_shape, c_dt, c_obj = _operand(c, "C")
        if c_shape != (m, n):
            raise ValueError(f"C must be {m}x{n} (M x N), got {c_shape[0]}x{c_shape[1]}")
        if out_dtype is not None and c_dt != out_dt:
            raise TypeError(f"C is {c_dt} but out_dtype is {out_dt}")
        out_dt = c_dt
    if out_dt != np.float32 and out_dt != a_dt:
        raise TypeError(f"C must be float32 or the inputs' own type ({a_dt}), not {out_dt}")
    narrow = out_dt != np.float32
    if c is None and beta != 0:
        raise ValueError("beta != 0 needs an input C")
    if len({a_dev, b_dev, c_dev}) != 1:
        raise TypeError("A, B and C must all be host (numpy) arrays or all device arrays")
    try:
        alpha, beta = float(alpha), float(beta)
    except (TypeError, ValueError):
        raise TypeError("alpha and beta must be real numbers") from None
    r = None
    if kernel != "auto":
        r = rung(kernel)
        if input_dtype(r.precision) != a_dt:
            raise TypeError(f"{r.name} takes {r.precision} inputs ({input_dtype(r.precision)}), "
                            f"but A and B are {a_dt}")
        if narrow and not r.narrow_output:
            raise TypeError(f"{r.name} writes a float32 C; a {out_dt} C needs a rung that can "
                            f"write one ({', '.join(x.name for x in RUNGS if x.narrow_output)})")
    q = _Request()
    q.m, q.n, q.k, q.a_dt, q.out_dt, q.narrow, q.on_device = m, n, k, a_dt, out_dt, narrow, a_dev
    q.math = _math_precision(in_prec, precision, r)
    q.a, q.b, q.c, q.rung, q.alpha, q.beta, q.kernel = a_obj, b_obj, c_obj, r, alpha, beta, kernel
    return q


# ---------------------------------------------------------------------------
# choosing
# ---------------------------------------------------------------------------
_live_target = None


def _target():
    """The live device's Target (the H200 figures when there is no GPU)."""
    global _live_target
    if _live_target is None:
        if driver.has_gpu():
            d = driver.device()
            _live_target = planning.target(d.name, tuple(d.cc), d.sm_count)
        else:
            return planning.target()
    return _live_target


_choices: dict = {}
_tuned_file = None   # this GPU's winners file of drvgemm tune (ladders/gemm/tuned.py)


def tuned_file():
    """The live device's ``drvgemm tune`` winners file (None without a GPU,
    or with the cache off); auto prefers its entries."""
    global _tuned_file
    if _tuned_file is None and driver.has_gpu():
        d = driver.device()
        _tuned_file = tuned.tuned_path(d.name, tuple(d.cc)) or False
    return _tuned_file or None


def _choose(m, n, k, math, out, beta_reads_c, kernel, residues, t) -> planning.Plan:
    key = (m, n, k, math, out, beta_reads_c, kernel, residues, t)
    p = _choices.get(key)
    if p is None:
        if len(_choices) > 4096:
            _choices.clear()
        won = None
        if kernel == "auto":
            won = tuned.lookup(tuned_file(), tuned.signature(m, n, k, math, out, beta_reads_c))
        p = _choices[key] = planning.choose(m, n, k, math, out=out, beta_reads_c=beta_reads_c,
                                            kernel=kernel, residues=residues, t=t, tuned=won)
    return p


def plan_shape(m: int, n: int, k: int, *, precision: str = "bf16", out_dtype=None,
               beta: float = 0.0, kernel: str = "auto", device: str | None = None,
               residues=(0, 0, 0)) -> planning.Plan:
    """The plan for a shape, with no arrays and no GPU: ``precision`` is
    the math (fp32, tf32, bf16, fp16; tf32 means float32 inputs opted into
    TF32), ``device`` a catalogue name (None: the live GPU, else the H200)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    try:
        m, n, k = (operator.index(v) for v in (m, n, k))
    except TypeError:
        raise TypeError(f"M, N, K must be integers, got {m!r}, {n!r}, {k!r}") from None
    if min(m, n, k) < 0:
        raise ValueError(f"M, N, K must be >= 0, got {m}, {n}, {k}")
    in_prec = "fp32" if precision == "tf32" else precision
    out = "fp32" if out_dtype is None else _out_name(_dtype_of(out_dtype))
    if out not in ("fp32", in_prec):
        raise TypeError(f"C must be float32 or the inputs' own type ({in_prec}), not {out}")
    if kernel != "auto":
        _math_precision(in_prec, precision, rung(kernel))
    if device:      # a catalogue device: the model alone
        known = [d.name for d in CATALOGUE if d.resources is not None and d.ceilings is not None]
        entry = find(device)
        if entry is None or entry.name not in known:
            raise ValueError(f"device {device!r}: the model plans for a catalogue device with "
                             f"resources and ceilings: {', '.join(known)}")
        return planning.choose(m, n, k, precision, out=out,
                               beta_reads_c=beta != 0, kernel=kernel, residues=tuple(residues),
                               t=planning.target(device))
    return _choose(m, n, k, precision, out, beta != 0, kernel,
                   tuple(residues), _target())


def plan(a, b, c=None, *, alpha=1.0, beta=0.0, kernel="auto", stream=None, out_dtype=None,
         precision=None) -> planning.Plan:
    """What ``gemm`` with the same arguments launches, and why (a Plan:
    kernel, instantiation, split, grid, predicted_s, alternatives, ...).
    Launches nothing; with host arrays or no GPU the pointers count as
    aligned and the device as an H200."""
    q = _check(a, b, c, alpha, beta, kernel, out_dtype, precision)
    residues = (0, 0, 0)
    if q.on_device:
        ptrs = [_pointer(x) for x in (q.a, q.b)] + [_pointer(q.c) if q.c is not None else 0]
        residues = tuple(p % 16 for p in ptrs)
    return _choose(q.m, q.n, q.k, q.math, _out_name(q.out_dt), q.beta != 0, kernel, residues,
                   _target())


# ---------------------------------------------------------------------------
# workspaces: one per (stream, host side)
# ---------------------------------------------------------------------------
class _Workspace:
    """Device scratch of one stream and one host side, zeroed when
    allocated, shared by every shape and entry of the host side. A host side
    that needs it zero at the start of its launches leaves all of it zero at
    the end (rung 30: its counters and partials, whose offsets move with
    the shape); launches on one
    stream are ordered, so they never share it at the same time."""
    __slots__ = ("array", "ptr", "nbytes")

    def __init__(self):
        self.array, self.ptr, self.nbytes = None, 0, 0

    def ensure(self, nbytes: int, stream):
        if nbytes <= self.nbytes:
            return
        size = max(nbytes, 2 * self.nbytes, 1 << 20)
        new = driver.empty((size,), np.uint8)
        new.fill_bytes(0, stream)   # stream-ordered before the launch that uses it
        old = self.array
        self.array, self.ptr, self.nbytes = new, new.ptr, size
        if old is not None:
            driver.synchronize()    # launches queued on the old buffer are done with it
            old.free()


_workspaces: dict = {}


def _workspace(handle: int, host: str) -> _Workspace:
    key = (handle, host)
    ws = _workspaces.get(key)
    if ws is None:
        ws = _workspaces[key] = _Workspace()
    return ws


# ---------------------------------------------------------------------------
# the plan of a call, and the cache of them
# ---------------------------------------------------------------------------
# cu/tools/scale.cu's entries, by C's element type
SCALE_C_ENTRIES = {"fp32": "scale_c", "bf16": "scale_c_bf16", "fp16": "scale_c_fp16"}


def _scale_c(c_dev, count, beta, stream, precision="fp32"):
    """C = beta*C (beta == 0 writes zeros without reading C): K = 0 for rungs
    whose host side cannot describe an empty K extent (TMA). ``precision``:
    C's element type ("fp32", or "bf16" / "fp16" for a 16-bit C)."""
    k = compile_once("scale.cu", SCALE_C_ENTRIES[precision])
    blocks = max(1, min((count + 255) // 256, 65535))
    launch(k, blocks, 256, [c_dev, count, float(beta)], stream=stream)


class _Call:
    """Everything a call of one signature needs past its checks: the plan,
    the compiled instantiation, the workspace, and the launches of the last
    pointers and scalars (reused as they are when the next call brings the
    same ones)."""
    __slots__ = ("m", "n", "k", "out_dt", "kind", "plan", "rung", "kernel", "split", "narrow",
                 "workspace", "memo", "scale_prec", "binding")

    def __init__(self, q: _Request, p: planning.Plan | None, handle: int):
        self.m, self.n, self.k, self.out_dt, self.narrow = q.m, q.n, q.k, q.out_dt, q.narrow
        self.plan, self.memo, self.workspace, self.kernel, self.rung = p, None, None, None, None
        self.split, self.binding = 1, None
        self.scale_prec = (_out_name(q.out_dt) if q.narrow else "fp32")
        if q.m == 0 or q.n == 0:
            self.kind = "empty"
            return
        r = p.rung
        self.rung = r
        if q.k == 0 and not r.host_side.takes_empty_k:
            self.kind = "scale"
            return
        self.kind = "launch"
        # the instantiation launched: the split-K build for K in pieces
        self.kernel = rung_kernel(r, p.aligned, narrow_output=q.narrow,
                                  split_k=r.host_side.split_k_build(r, q.k, p.split))
        self.split = p.split
        if p.workspace_bytes:
            self.workspace = _workspace(handle, r.host)
            self.workspace.ensure(p.workspace_bytes, handle)
        # the launches of this signature, rebuilt per pointers (host.Binding)
        self.binding = r.host_side.binding(r, self.kernel, q.m, q.n, q.k, stream=handle,
                                           narrow_output=q.narrow, split=p.split)

    def run(self, C, pa, pb, pc, alpha, beta, handle):
        """Enqueue the product on stream ``handle`` into C (at ``pc``)."""
        kind = self.kind
        if kind == "launch":
            ws = self.workspace.ptr if self.workspace is not None else 0
            memo = self.memo
            sig = (pa, pb, pc, alpha, beta, ws)
            keep = None
            if memo is not None and memo[0] == sig:
                calls = memo[1]
            else:
                binding = self.binding
                calls, keep = binding(pa, pb, pc, alpha, beta, ws)
                # staging copies are redone every call (the data may have changed)
                self.memo = (sig, calls) if binding.replayable and not keep else None
            s = handle or None
            for kern, grid, block, args, smem, cluster in calls:
                if cluster is None:
                    launch(kern, grid, block, args, smem=smem, stream=s)
                else:
                    launch(kern, grid, block, args, smem=smem, stream=s, cluster=cluster)
            del keep   # frees staging copies, stream-ordered after the launches
        elif kind == "scale":
            _scale_c(pc, self.m * self.n, beta, handle or None, self.scale_prec)
        return C


_calls: dict = {}
_MAX_CALLS = 4096
_stats = {"hits": 0, "misses": 0}
_lock = threading.Lock()


def plan_cache_info() -> dict:
    """{'hits', 'misses', 'size'} of the per-call plan cache."""
    return {"hits": _stats["hits"], "misses": _stats["misses"], "size": len(_calls)}


def clear_plan_cache():
    """Forget every cached call plan, choice and workspace (after a context
    reset, or to time first calls)."""
    with _lock:
        _calls.clear()
        _choices.clear()
        _workspaces.clear()
        _stats["hits"] = _stats["misses"] = 0
        global _live_target, _tuned_file
        _live_target = None
        _tuned_file = None


# The cached calls hold the old context's workspaces, staging buffers and
# pointers: a replay after drvgemm.reset() would launch on dead memory.
driver.on_reset(clear_plan_cache)


def _key(a, b, c, alpha, beta, kernel, stream, out_dtype, precision):
    """(key, pa, pb, pc, handle) of a call with device operands the cache
    knows, or None (then the checked path decides)."""
    pa = interop.probe(a)
    pb = interop.probe(b)
    if pa is None or pb is None:
        return None
    if c is None:
        pc, c_sig = 0, None
    else:
        p = interop.probe(c)
        if p is None:
            return None
        pc, c_sig = p
    handle = 0 if stream is None else driver.stream_handle(stream)
    key = (pa[1], pb[1], c_sig, kernel, precision, out_dtype, alpha == 0, beta == 0, handle,
           pa[0] & 15, pb[0] & 15, pc & 15)
    return key, pa[0], pb[0], pc, handle


# ---------------------------------------------------------------------------
# gemm()
# ---------------------------------------------------------------------------
def gemm(a, b, c=None, *, alpha=1.0, beta=0.0, kernel="auto", stream=None, out_dtype=None,
         precision=None):
    """C = alpha * A @ B + beta * C with a registered rung.

    A (M x K) and B (K x N) are row-major float32, float16 or bfloat16
    (ml_dtypes); C (M x N) is float32 or, for rungs that can write it, the
    inputs' own 16-bit type: pass such a ``c``, or ``out_dtype`` when there
    is none. numpy in -> numpy out (when ``c`` is given it is updated in
    place and returned); device arrays in (DeviceArray, CuPy, PyTorch) -> the
    result stays on the device. ``beta == 0`` never reads C.
    ``kernel``: "auto" (the instantiation plan() predicts fastest for the
    shape) or a name from ``drvgemm.kernels()``. ``precision``: None (the
    inputs' own math: float32 stays fp32) or "tf32" (float32 inputs may use
    TF32 tensor cores). ``drvgemm.plan(...)`` with the same arguments says
    what this call launches and why.
    """
    call = None
    try:
        hit = _key(a, b, c, alpha, beta, kernel, stream, out_dtype, precision)
        if hit is not None:
            call = _calls.get(hit[0])
            if call is not None:
                alpha, beta = float(alpha), float(beta)
    except (TypeError, ValueError, AttributeError):
        hit, call = None, None   # the checked path says what is wrong
    if call is None:
        return _checked_gemm(a, b, c, alpha, beta, kernel, stream, out_dtype, precision, hit)
    _stats["hits"] += 1
    _, pa, pb, pc, handle = hit
    if c is None:
        C = driver.empty((call.m, call.n), call.out_dt)
        pc = C.ptr
    else:
        C = c
    call.run(C, pa, pb, pc, alpha, beta, handle)
    return _result(C, c, True, stream, a)


def _checked_gemm(a, b, c, alpha, beta, kernel, stream, out_dtype, precision, hit):
    template = c if c is not None else a     # the caller's array type comes back
    a, b, c = interop.as_input(a), interop.as_input(b), interop.as_input(c)
    q = _check(a, b, c, alpha, beta, kernel, out_dtype, precision)
    _stats["misses"] += 1
    m, n, k = q.m, q.n, q.k
    if m == 0 or n == 0:
        if c is not None:
            return c
        return np.empty((m, n), q.out_dt) if not q.on_device else \
            interop.like(driver.empty((m, n), q.out_dt), template)
    if kernel == "auto" and not driver.has_gpu():
        raise NoDeviceError("gemm", -1, "NO_GPU", driver.no_gpu_reason() or "no GPU")
    handle = driver.stream_handle(stream)
    # Operands on the device.
    if q.on_device:
        A, B = q.a, q.b
        C = q.c if c is not None else driver.empty((m, n), q.out_dt)
    else:
        A = driver.to_device(q.a, stream)
        B = driver.to_device(q.b, stream)
        if c is not None and q.beta != 0:
            C = driver.to_device(q.c, stream)
        else:
            C = driver.empty((m, n), q.out_dt)
    pa, pb, pc = _pointer(A), _pointer(B), _pointer(C)
    p = _choose(m, n, k, q.math, _out_name(q.out_dt), q.beta != 0, kernel,
                (pa % 16, pb % 16, pc % 16), _target())
    call = _Call(q, p, handle)
    call.run(C, pa, pb, pc, q.alpha, q.beta, handle)
    if q.on_device and hit is not None:
        with _lock:
            if len(_calls) >= _MAX_CALLS:
                _calls.clear()
            _calls[hit[0]] = call
    return _result(C, c, q.on_device, stream, template)


def _result(C, c, on_device, stream, template):
    """What gemm() returns, built in this one place: device operands -> C in
    the caller's array type (the caller's ``c`` itself, or a new array of
    ``template``'s kind: torch in -> torch out); host operands -> the host
    result (``c`` updated in place and returned, or a new array), copied on
    ``stream`` behind the launches (only that stream is waited for)."""
    if on_device:
        return interop.like(C, template)
    if c is not None:
        C.to_host(out=c, stream=stream)
        return c
    return C.to_host(stream=stream)
