"""DLPack in both directions, in ctypes: the C structs of the DLPack header
(dlpack.h, ABI 1.x), making a capsule that lends an array's memory to a
consumer, and reading a capsule that a producer lends us.

A capsule named ``dltensor`` holds a ``DLManagedTensor``; ``dltensor_versioned``
a ``DLManagedTensorVersioned`` (DLPack >= 1.0, what a consumer gets when it
passes ``max_version=(1, x)``). The consumer renames the capsule
(``used_dltensor``/``used_dltensor_versioned``) and calls the struct's deleter
when it is done; a capsule that nobody consumed calls the deleter itself when
it is garbage-collected. Either way the deleter drops the reference that kept
the lending object (a DeviceArray) alive. No GPU is involved here.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import dtypes

__all__ = ["DLDevice", "DLDataType", "DLTensor", "DLManagedTensor", "DLManagedTensorVersioned",
           "KDL_CPU", "KDL_CUDA", "KDL_CUDA_HOST", "KDL_CUDA_MANAGED", "DEVICE_NAMES",
           "make_capsule", "read_capsule", "Borrowed", "dtype_to_dl", "dl_to_dtype"]

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan",
                8: "Metal", 9: "VPI", 10: "ROCm", 11: "ROCm host", 12: "ExtDev",
                13: "CUDA managed", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon", 17: "MAIA"}
# DLDataTypeCode
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6
DLPACK_VERSION = (1, 0)
_FLAG_READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", _DELETER_V), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

# -- dtypes --------------------------------------------------------------------


def dtype_to_dl(dt) -> DLDataType:
    dt = np.dtype(dt)
    if dt.kind == "b":
        code = _BOOL
    elif dt.kind == "i":
        code = _INT
    elif dt.kind == "u":
        code = _UINT
    elif dt.kind == "f":
        code = _FLOAT
    elif dt.kind == "c":
        code = _COMPLEX
    elif dtypes.is_bf16(dt):
        code = _BFLOAT
    else:
        raise BufferError(f"dtype {dt} has no DLPack type code")
    return DLDataType(code, dt.itemsize * 8, 1)


def dl_to_dtype(t: DLDataType) -> np.dtype:
    if t.lanes != 1:
        raise BufferError(f"DLPack vector types ({t.lanes} lanes) are not supported")
    code, bits = t.code, t.bits
    if code == _BFLOAT and bits == 16:
        return dtypes.bf16()
    kind = {_INT: "i", _UINT: "u", _FLOAT: "f", _COMPLEX: "c", _BOOL: "b"}.get(code)
    if kind is None or bits % 8:
        raise BufferError(f"DLPack dtype (code {code}, {bits} bits) is not supported")
    return np.dtype("?") if kind == "b" else np.dtype(f"{kind}{bits // 8}")


# -- producing: a capsule that lends memory --------------------------------------
# Address of a managed struct -> (struct, shape array, owner): what its deleter
# releases. The deleter may run on any thread that holds the GIL.
_lent: dict = {}
_lent_lock = threading.Lock()


def _release(addr):
    with _lent_lock:
        _lent.pop(addr, None)


@_DELETER
def _deleter(p):
    _release(ctypes.cast(p, ctypes.c_void_p).value)


@_DELETER_V
def _deleter_v(p):
    _release(ctypes.cast(p, ctypes.c_void_p).value)


# Capsule names: PyCapsule keeps the pointer, not a copy, so they live here.
_NAME, _NAME_V = b"dltensor", b"dltensor_versioned"
_USED, _USED_V = b"used_dltensor", b"used_dltensor_versioned"
_pyapi = ctypes.pythonapi
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_SetName.restype = ctypes.c_int
_pyapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_GetName.restype = ctypes.c_char_p
_pyapi.PyCapsule_GetName.argtypes = [ctypes.py_object]
# The destructor gets the capsule as a borrowed PyObject*: read it with the raw API.
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _pyapi))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pyapi))


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # A capsule still carrying its original name was never consumed: no
    # consumer will call the deleter, so the capsule does.
    for name in (_NAME, _NAME_V):
        if _raw_is_valid(capsule, name):
            _release(_raw_get_pointer(capsule, name))
            return


def make_capsule(ptr: int, shape, dtype, owner, *, device_id=0, versioned=False,
                 read_only=False):
    """A DLPack capsule over ``ptr`` (a C-contiguous array of ``shape`` and
    ``dtype`` on CUDA device ``device_id``); ``owner`` stays alive until the
    consumer calls the deleter (or the capsule is dropped unconsumed)."""
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*[int(s) for s in shape])
    if versioned:
        m = DLManagedTensorVersioned()
        m.version = DLPackVersion(*DLPACK_VERSION)
        m.deleter = _deleter_v
        m.flags = _FLAG_READ_ONLY if read_only else 0
        name = _NAME_V
    else:
        m = DLManagedTensor()
        m.deleter = _deleter
        name = _NAME
    t = m.dl_tensor
    t.data = int(ptr) or None
    t.device = DLDevice(KDL_CUDA, int(device_id))
    t.ndim = ndim
    t.dtype = dtype_to_dl(dtype)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = None          # NULL: compact row-major
    t.byte_offset = 0
    addr = ctypes.addressof(m)
    with _lent_lock:
        _lent[addr] = (m, shape_arr, owner)
    return _pyapi.PyCapsule_New(addr, name, _capsule_destructor)


def lent_count() -> int:
    """How many capsules' memory is still lent out (for tests)."""
    return len(_lent)


# -- consuming: a capsule a producer lends us --------------------------------------
class Borrowed:
    """What a producer's capsule described, with the producer's deleter
    called when this object goes away (after the last DeviceArray over the
    memory is gone)."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "_managed", "_versioned",
                 "__weakref__")

    def __init__(self, capsule):
        if _pyapi.PyCapsule_IsValid(capsule, _NAME_V):
            addr = _pyapi.PyCapsule_GetPointer(capsule, _NAME_V)
            m = DLManagedTensorVersioned.from_address(addr)
            if m.version.major > DLPACK_VERSION[0]:
                raise BufferError(f"DLPack {m.version.major}.{m.version.minor} is newer than "
                                  f"this reader ({DLPACK_VERSION[0]}.x)")
            _pyapi.PyCapsule_SetName(capsule, _USED_V)
            self._versioned = True
        elif _pyapi.PyCapsule_IsValid(capsule, _NAME):
            addr = _pyapi.PyCapsule_GetPointer(capsule, _NAME)
            m = DLManagedTensor.from_address(addr)
            _pyapi.PyCapsule_SetName(capsule, _USED)
            self._versioned = False
        else:
            raise BufferError(f"not a DLPack capsule (or one already consumed): "
                              f"{_pyapi.PyCapsule_GetName(capsule)!r}")
        self._managed = m
        t = m.dl_tensor
        self.device = (int(t.device.device_type), int(t.device.device_id))
        self.dtype = dl_to_dtype(t.dtype)
        self.shape = tuple(int(t.shape[i]) for i in range(t.ndim))
        self.strides = None if not t.strides else tuple(int(t.strides[i]) for i in range(t.ndim))
        self.ptr = int(t.data or 0) + int(t.byte_offset)

    def contiguous(self) -> bool:
        """Compact row-major (strides in elements; size-1 dims may have any)."""
        if self.strides is None:
            return True
        want = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != want:
                return False
            want *= n
        return True

    def release(self):
        m, self._managed = self._managed, None
        if m is not None and m.deleter:
            m.deleter(ctypes.byref(m))

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


def read_capsule(capsule) -> Borrowed:
    return Borrowed(capsule)
