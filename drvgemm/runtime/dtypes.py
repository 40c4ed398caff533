"""The three input types the kernels take, by precision name, so every module
agrees on what 'bf16' means on the host (ml_dtypes' bfloat16).

ml_dtypes is imported when a bfloat16 is first asked for, not with drvgemm:
its import takes ~0.5 s (numpy 2.4, ml_dtypes 0.7), more than the rest of
``import drvgemm``, and every command, worker and child process would pay it."""
from __future__ import annotations

import functools
import sys

import numpy as np


@functools.cache
def bf16() -> np.dtype:
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def is_bf16(dtype) -> bool:
    """Whether ``dtype`` is ml_dtypes' bfloat16, without importing it: until
    ml_dtypes is loaded no array or dtype of that type can exist."""
    return "ml_dtypes" in sys.modules and np.dtype(dtype) == bf16()


_ITEMSIZE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}


def itemsize(name: str) -> int:
    """Bytes of one element of precision ``name``, without loading ml_dtypes
    (a bfloat16 is two bytes whether or not its dtype exists yet)."""
    if name not in _ITEMSIZE:
        raise ValueError(f"precision must be one of fp32, tf32, fp16, bf16, got {name!r}")
    return _ITEMSIZE[name]


def numpy_dtype(name: str) -> np.dtype:
    """'fp32' / 'tf32' (float32 storage) / 'fp16' / 'bf16' -> numpy dtype."""
    if name in ("fp32", "tf32"):
        return np.dtype(np.float32)
    if name == "fp16":
        return np.dtype(np.float16)
    if name == "bf16":
        return bf16()
    raise ValueError(f"precision must be one of fp32, tf32, fp16, bf16, got {name!r}")


def precision_of(dtype) -> str | None:
    """'fp32' / 'fp16' / 'bf16' for a supported dtype, None otherwise."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        return "bf16"   # numpy reads the name only once ml_dtypes is loaded
    dt = np.dtype(dtype)
    if dt == np.float32:
        return "fp32"
    if dt == np.float16:
        return "fp16"
    if is_bf16(dt):
        return "bf16"
    return None


def of_interface(obj, typestr: str) -> np.dtype:
    """The element type of a ``__cuda_array_interface__`` object: its own
    ``dtype`` where numpy reads it (CuPy, DeviceArray-like views), else the
    typestr. The interface has no bfloat16: PyTorch gives a bfloat16 tensor
    the typestr of a 2-byte void ('<V2'), and its dtype (torch.bfloat16,
    which numpy does not read) says which it is."""
    dt = np.dtype(typestr)
    own = getattr(obj, "dtype", None)
    try:
        named = np.dtype(own) if own is not None else None
    except TypeError:
        named = None
    if named is not None and named.itemsize == dt.itemsize:
        return named
    if dt.kind == "V" and dt.itemsize == 2 and "bfloat16" in str(own):
        return bf16()
    return dt
