"""Arrays in, arrays out, in the caller's own type.

``as_input(x)``: what the dispatchers take as they are (numpy arrays,
DeviceArrays, ``__cuda_array_interface__`` objects) comes back unchanged; a
DLPack producer without the CUDA array interface (JAX, a DLPack-only array)
on a CUDA device becomes a DeviceArray view of its memory (no copy), one on
the CPU a numpy array; a DLPack array on any other device is a ValueError.

``like(result, template)``: the result of a call in the type of the caller's
input -- numpy in, numpy out; DeviceArray in, DeviceArray out; PyTorch in,
a torch tensor out (torch.from_dlpack: no copy, the tensor keeps the
DeviceArray alive); CuPy in, a CuPy array out (cupy.from_dlpack, else
cupy.asarray over the CUDA array interface). A result that is already the
caller's object (an ``out=`` / ``c=`` updated in place) is returned as it is.
Other device types get the DeviceArray. torch and CuPy are never imported
here: an input of theirs means they already are.
"""
from __future__ import annotations

import sys

import numpy as np

from . import driver
from .driver import DeviceArray

__all__ = ["as_input", "like", "library_of", "probe"]


def library_of(obj) -> str:
    """'numpy', 'drvgemm', 'torch', 'cupy' or 'other' for an array object."""
    if isinstance(obj, np.ndarray):
        return "numpy"
    if isinstance(obj, DeviceArray):
        return "drvgemm"
    root = type(obj).__module__.split(".", 1)[0]
    if root in ("torch", "cupy"):
        return root
    return "other"


def as_input(x):
    """``x`` in a form the dispatchers take (see the module docstring)."""
    if x is None or isinstance(x, (np.ndarray, DeviceArray)):
        return x
    if hasattr(x, "__cuda_array_interface__") or not hasattr(x, "__dlpack__"):
        return x
    dev = driver.foreign_device_array(x, type(x).__name__)
    if dev is not None:
        return dev
    return np.from_dlpack(x)     # a CPU DLPack producer: host data


class _InOrder:
    """A DeviceArray handed to torch / CuPy without the wait ``__dlpack__``
    does for an unknown producer stream: a dispatcher's result was queued on
    the stream the caller gave (or the legacy default stream, torch's and
    CuPy's default too), so the caller's library reads it in order -- as it
    would over the CUDA array interface."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, **kw):
        return self.array.__dlpack__(stream=-1, max_version=max_version)


def like(result, template):
    """``result`` (a numpy array or a DeviceArray) in the array type of
    ``template`` (the caller's input)."""
    if result is template or not isinstance(result, DeviceArray):
        return result
    base = result._base
    if base is template or (isinstance(base, tuple) and any(x is template for x in base)):
        return template          # a view of the caller's own array (out= / c=)
    lib = library_of(template)
    if lib == "torch":
        return sys.modules["torch"].from_dlpack(_InOrder(result))
    if lib == "cupy":
        cupy = sys.modules["cupy"]
        try:
            return cupy.from_dlpack(_InOrder(result))
        except Exception:    # an older CuPy: the CUDA array interface
            return cupy.asarray(result)
    return result


def probe(x):
    """(pointer, signature) of a device array, the cheapest way its type
    offers, for the per-call caches of gemm() and softmax(): the signature
    holds every property their checks depend on (type, shape, dtype,
    contiguity, device), so an equal signature passes the same checks. None:
    a type the caches do not know (the checked path decides)."""
    t = type(x)
    if t is DeviceArray:
        return x.ptr, (t, x.shape, x.dtype)
    mod = t.__module__
    if mod.startswith("torch"):
        return x.data_ptr(), (t, x.shape, x.dtype, x.is_contiguous(), x.get_device())
    if mod.startswith("cupy"):
        return x.data.ptr, (t, x.shape, x.dtype, x.flags.c_contiguous, x.device.id)
    return None
