"""Arrays come back in the caller's type, and DeviceArray's DLPack capsule
works with the real consumers: PyTorch and CuPy where installed (GPU)."""
import numpy as np
import pytest

import drvgemm
from drvgemm.runtime.driver import DeviceArray

pytestmark = pytest.mark.gpu


def _ab(seed=0, m=70, k=50, n=40):
    rng = np.random.default_rng(seed)
    return (rng.integers(-4, 5, (m, k)).astype(np.float32),
            rng.integers(-4, 5, (k, n)).astype(np.float32))


def test_numpy_and_device_array_types_come_back(gpu):
    a, b = _ab()
    out = drvgemm.gemm(a, b)
    assert type(out) is np.ndarray
    dev = drvgemm.gemm(drvgemm.to_device(a), drvgemm.to_device(b))
    assert type(dev) is DeviceArray
    np.testing.assert_array_equal(dev.to_host(), a.astype(np.float64) @ b)
    x = np.random.default_rng(1).standard_normal((8, 100)).astype(np.float32)
    assert type(drvgemm.softmax(x)) is np.ndarray
    assert type(drvgemm.softmax(drvgemm.to_device(x))) is DeviceArray


def test_torch_in_torch_out(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    a, b = _ab(2)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    out = drvgemm.gemm(ta, tb)
    assert isinstance(out, torch.Tensor) and out.is_cuda and out.shape == (70, 40)
    np.testing.assert_array_equal(out.cpu().numpy(), a.astype(np.float64) @ b)
    c = torch.zeros(70, 40, device="cuda")
    assert drvgemm.gemm(ta, tb, c) is c                     # in place: the caller's tensor
    np.testing.assert_array_equal(c.cpu().numpy(), a.astype(np.float64) @ b)
    x = torch.randn(16, 500, device="cuda")
    y = drvgemm.softmax(x)
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(y, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-7)
    # DeviceArray -> torch without a copy: both see the same memory.
    d = drvgemm.to_device(np.arange(6, dtype=np.float32))
    t = torch.from_dlpack(d)
    t += 1
    torch.cuda.synchronize()
    np.testing.assert_array_equal(d.to_host(), np.arange(6) + 1)
    # A DLPack-only producer (no CUDA array interface) is taken too.

    class OnlyDLPack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    got = drvgemm.gemm(OnlyDLPack(ta), OnlyDLPack(tb))
    assert type(got) is DeviceArray
    np.testing.assert_array_equal(got.to_host(), a.astype(np.float64) @ b)
    with pytest.raises(ValueError, match="C-contiguous"):
        drvgemm.gemm(OnlyDLPack(ta.t()), OnlyDLPack(tb))


def test_cupy_in_cupy_out(gpu):
    cupy = pytest.importorskip("cupy")
    a, b = _ab(3)
    ca, cb = cupy.asarray(a), cupy.asarray(b)
    out = drvgemm.gemm(ca, cb)
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(out), a.astype(np.float64) @ b)
    x = cupy.asarray(np.random.default_rng(4).standard_normal((8, 300)).astype(np.float32))
    assert isinstance(drvgemm.softmax(x), cupy.ndarray)
    d = drvgemm.to_device(np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(d)), np.arange(5))
