"""``gemm()``: checks the operands, picks a rung and its instantiation,
compiles it, and launches what the rung's host side computes from the
compiled kernel (drvgemm/gemm/registry.py)."""
from __future__ import annotations

import numpy as np

from ...runtime import driver, dtypes
from ...runtime.driver import DeviceArray
from ...runtime.errors import NoDeviceError
from ...runtime.kernel import compile
from ...runtime.launch import launch, launch_config
from .registry import RUNGS, Rung, by_name, rung_kernel

__all__ = ["gemm", "kernels", "rung", "input_dtype", "device_arch_ok", "auto_rung",
           "PRECISIONS"]

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def _bf16():
    return dtypes.bf16()


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
    need = int(r.arch[3:].rstrip("a"))
    cc = driver.device().cc
    have = cc[0] * 10 + cc[1]
    if r.arch.endswith("a"):
        return have == need
    return have >= need


def auto_rung(precision: str, narrow_output=False) -> Rung:
    """The fastest rung for this precision that the device runs: the ladder is
    ordered so that the highest rung is the fastest at large sizes; an
    ``auto=False`` entry (a teaching rung kept for comparison) is skipped.
    ``narrow_output``: only rungs that can write C in the inputs' type."""
    cands = [r for r in RUNGS if r.precision == precision and r.auto
             and (r.narrow_output or not narrow_output)]
    cands = [r for r in cands if device_arch_ok(r)]
    if not cands:
        what = f"{precision} with a {precision} C" if narrow_output else precision
        raise ValueError(f"no registered rung runs {what} on this device")
    return cands[-1]


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


# ---------------------------------------------------------------------------
def _operand(x, what):
    """(is_device, shape, dtype, pointer-or-array) for a numpy array or a
    device array; rows must be contiguous."""
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
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"{what} must be a numpy array, a DeviceArray or an object with "
                        f"__cuda_array_interface__, not {type(x).__name__}")
    shape = tuple(cai["shape"])
    if len(shape) != 2:
        raise ValueError(f"{what} must be 2-D, got shape {shape}")
    dt = np.dtype(cai["typestr"])
    if dt.kind == "V" and dt.itemsize == 2 and "bfloat16" in str(getattr(x, "dtype", "")):
        dt = _bf16()
    strides = cai.get("strides")
    if strides is not None and shape[0] * shape[1] > 0:
        if tuple(strides) != (shape[1] * dt.itemsize, dt.itemsize):
            raise ValueError(f"{what} has strides {tuple(strides)}: rows must be contiguous "
                             "and row-major (call .contiguous() / cupy.ascontiguousarray)")
    return True, shape, dt, x


_scale_kernels = {}


def _scale_c(c_dev, count, beta, stream, precision="fp32"):
    """C = beta*C (beta == 0 writes zeros without reading C): K = 0 for rungs
    whose host side cannot describe an empty K extent (TMA). ``precision``:
    C's element type ("fp32", or "bf16" / "fp16" for a 16-bit C)."""
    entry = "scale_c" if precision == "fp32" else f"scale_c_{precision}"
    k = _scale_kernels.get(entry)
    if k is None:
        k = _scale_kernels[entry] = compile("scale.cu", entry)
    blocks = max(1, min((count + 255) // 256, 65535))
    launch(k, blocks, 256, [c_dev, count, float(beta)], stream=stream)


def gemm(a, b, c=None, *, alpha=1.0, beta=0.0, kernel="auto", stream=None, out_dtype=None):
    """C = alpha * A @ B + beta * C with a registered rung.

    A (M x K) and B (K x N) are row-major float32 (fp32 / tf32 rungs),
    float16 or bfloat16 (ml_dtypes); C (M x N) is float32, or -- for rungs
    that can write it (the Hopper bf16 / fp16 rungs) -- the inputs' own 16-bit
    type: pass such a ``c``, or ``out_dtype`` when there is none. numpy in ->
    numpy out (when ``c`` is given it is updated in place and returned);
    device arrays in (DeviceArray, CuPy, PyTorch) -> the result stays on the
    device. ``beta == 0`` never reads C. ``kernel``: a name from
    ``drvgemm.kernels()`` or "auto" (the fastest rung for the inputs'
    precision).
    """
    a_dev, a_shape, a_dt, a_obj = _operand(a, "A")
    b_dev, b_shape, b_dt, b_obj = _operand(b, "B")
    if a_dt != b_dt:
        raise TypeError(f"A is {a_dt} but B is {b_dt}: both must have the same dtype")
    precision = _precision_of_dtype(a_dt)
    m, k = a_shape
    k2, n = b_shape
    if k != k2:
        raise ValueError(f"A is {m}x{k} and B is {k2}x{n}: inner dimensions differ ({k} != {k2})")
    out_dt = np.dtype(np.float32) if out_dtype is None else _dtype_of(out_dtype)
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
    if c is None:
        c_dev = a_dev
        if beta != 0:
            raise ValueError("beta != 0 needs an input C")
    if len({a_dev, b_dev, c_dev}) != 1:
        raise TypeError("A, B and C must all be host (numpy) arrays or all device arrays")
    on_device = a_dev
    try:
        alpha, beta = float(alpha), float(beta)
    except (TypeError, ValueError):
        raise TypeError("alpha and beta must be real numbers") from None

    if kernel == "auto":
        if not driver.has_gpu():
            raise NoDeviceError("gemm", -1, "NO_GPU", driver.no_gpu_reason() or "no GPU")
        r = auto_rung(precision, narrow_output=narrow)
    else:
        r = rung(kernel)
        if input_dtype(r.precision) != a_dt:
            raise TypeError(f"{r.name} takes {r.precision} inputs ({input_dtype(r.precision)}), "
                            f"but A and B are {a_dt}")
        if narrow and not r.narrow_output:
            raise TypeError(f"{r.name} writes a float32 C; a {out_dt} C needs a rung that can "
                            f"write one ({', '.join(x.name for x in RUNGS if x.narrow_output)})")

    if m == 0 or n == 0:
        if c is not None:
            return c
        return np.empty((m, n), out_dt) if not on_device else driver.empty((m, n), out_dt)

    # Operands on the device.
    if on_device:
        A, B = a_obj, b_obj
        C = c_obj if c is not None else driver.empty((m, n), out_dt)
    else:
        A = driver.to_device(a_obj)
        B = driver.to_device(b_obj)
        if c is not None and beta != 0:
            C = driver.to_device(c_obj)
        else:
            C = driver.empty((m, n), out_dt)
    pa, pb, pc = (driver.device_pointer(x) for x in (A, B, C))

    host = r.host_side
    if k == 0 and not host.takes_empty_k:
        _scale_c(C, m * n, beta, stream, precision if narrow else "fp32")
    else:
        kern = rung_kernel(r, host.aligned(r, m, n, k, pa, pb, pc), narrow_output=narrow)
        steps = r.launches(kern, A, B, C, m, n, k, alpha, beta, stream=stream,
                           narrow_output=narrow)
        for step_kernel, cfg in steps:
            launch_config(step_kernel, cfg, stream)
        del steps   # frees any staging copies, stream-ordered after the launches

    if on_device:
        return C
    if stream is not None:
        driver.synchronize()  # the copy below runs on the legacy stream
    if c is not None:
        C.to_host(out=c)
        return c
    return C.to_host()
