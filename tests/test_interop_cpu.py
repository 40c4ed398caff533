"""DLPack both ways and arrays in the caller's type, with stand-in producers
and consumers: CPU only (no memory is touched, only described)."""
import sys
import types

import numpy as np
import pytest

from drvgemm.runtime import dlpack, driver, dtypes, interop
from drvgemm.runtime.driver import DeviceArray

PTR = 0x7f0000001000


def dev(shape=(3, 4), dtype=np.float32, ptr=PTR):
    return DeviceArray(shape, dtype, ptr=ptr, owner=False)


class Producer:
    """A DLPack-only CUDA array (like a JAX array): no CUDA array interface."""

    def __init__(self, ptr=PTR, shape=(5, 6), dtype=np.float16, device=dlpack.KDL_CUDA,
                 versioned=True):
        self.ptr, self.shape, self.dtype, self.device = ptr, shape, dtype, device
        self.versioned, self.calls = versioned, []

    def __dlpack_device__(self):
        return (self.device, 0)

    def __dlpack__(self, stream=None, max_version=None):
        self.calls.append((stream, max_version))
        cap = dlpack.make_capsule(self.ptr, self.shape, self.dtype, self,
                                  versioned=self.versioned and max_version is not None)
        return cap


@pytest.mark.parametrize("versioned", [False, True])
def test_device_array_capsule_round_trips(versioned):
    a = dev((3, 4), dtypes.bf16())
    before = dlpack.lent_count()
    cap = a.__dlpack__(stream=-1, max_version=(1, 0) if versioned else None)
    assert a.__dlpack_device__() == (dlpack.KDL_CUDA, 0)
    assert dlpack.lent_count() == before + 1
    b = dlpack.read_capsule(cap)
    assert (b.ptr, b.shape, b.dtype, b.device, b.strides) == (PTR, (3, 4), dtypes.bf16(), (2, 0),
                                                              None)
    assert b._versioned is versioned
    with pytest.raises(BufferError, match="already consumed"):
        dlpack.read_capsule(cap)
    b.release()                                  # the consumer is done: the lender is free
    assert dlpack.lent_count() == before
    del cap


def test_unconsumed_capsule_releases_its_array():
    before = dlpack.lent_count()
    a = dev()
    cap = a.__dlpack__(stream=-1)
    assert dlpack.lent_count() == before + 1
    del cap
    assert dlpack.lent_count() == before


def test_dlpack_refuses_another_device():
    with pytest.raises(BufferError, match="cannot move"):
        dev().__dlpack__(stream=-1, dl_device=(1, 0))


def test_dlpack_producers_are_device_arrays_and_pointers():
    p = Producer(shape=(5, 6), dtype=np.float16)
    assert driver.device_pointer(p, "x") == PTR
    assert p.calls[-1] == (1, (1, 0))           # asked for a versioned capsule, legacy stream
    d = driver.to_device(p)                       # a view, no copy
    assert isinstance(d, DeviceArray) and (d.ptr, d.shape, d.dtype) == (PTR, (5, 6), np.float16)
    old = Producer(versioned=False)
    old.__dlpack__ = lambda stream=None: dlpack.make_capsule(PTR, (2,), np.int32, old)
    assert interop.as_input(old).shape == (2,)   # a pre-1.0 producer (no max_version)


def test_host_and_foreign_dlpack_producers():
    host = np.arange(6, dtype=np.float32)

    class CpuProducer:
        __dlpack__ = host.__dlpack__
        __dlpack_device__ = host.__dlpack_device__

    with pytest.raises(TypeError, match="host DLPack array.*to_device"):
        driver.device_pointer(CpuProducer(), "x")
    got = interop.as_input(CpuProducer())
    assert isinstance(got, np.ndarray) and (got == host).all()
    with pytest.raises(ValueError, match="device type 4 \\(OpenCL\\).*CUDA device arrays"):
        driver.device_pointer(Producer(device=4), "x")


def test_non_contiguous_inputs_are_refused():
    class Strided:
        __cuda_array_interface__ = {"shape": (4, 4), "typestr": "<f4", "data": (PTR, False),
                                    "version": 3, "strides": (32, 4)}
    with pytest.raises(ValueError, match="strides \\(32, 4\\).*C-contiguous"):
        driver.foreign_device_array(Strided(), "A")


def test_like_returns_the_callers_type(monkeypatch):
    r = dev()
    host = np.zeros(3)
    assert interop.like(host, np.zeros(1)) is host          # numpy in, numpy out
    assert interop.like(r, dev()) is r                       # DeviceArray in, out
    caller = Producer()
    view = driver.foreign_device_array(caller)
    assert interop.like(view, caller) is caller             # a view of the caller's own out=
    seen = {}

    def from_dlpack(x):
        seen["capsule"] = dlpack.read_capsule(x.__dlpack__(stream=1, max_version=(1, 0)))
        return ("tensor", x)

    torch = types.ModuleType("torch")
    torch.from_dlpack = from_dlpack
    monkeypatch.setitem(sys.modules, "torch", torch)
    Tensor = type("Tensor", (), {"__module__": "torch"})
    kind, wrapped = interop.like(r, Tensor())
    assert kind == "tensor" and seen["capsule"].ptr == r.ptr   # no synchronize() was needed
    cupy = types.ModuleType("cupy")
    cupy.from_dlpack = lambda x: ("cupy", dlpack.read_capsule(x.__dlpack__(stream=7)).shape)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    ndarray = type("ndarray", (), {"__module__": "cupy._core.core"})
    assert interop.like(r, ndarray()) == ("cupy", (3, 4))
    assert interop.library_of(object()) == "other" and interop.like(r, object()) is r


def test_dtype_codes():
    for dt in (np.float32, np.float16, np.int8, np.uint64, np.bool_, np.complex64,
               dtypes.bf16()):
        assert dlpack.dl_to_dtype(dlpack.dtype_to_dl(dt)) == np.dtype(dt)
    assert dlpack.dtype_to_dl(dtypes.bf16()).code == 4
    with pytest.raises(BufferError, match="lanes"):
        dlpack.dl_to_dtype(dlpack.DLDataType(2, 32, 4))
