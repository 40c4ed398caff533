"""Launch arguments that must be refused without a GPU (the packer that
every launch path uses)."""
import numpy as np
import pytest

import drvgemm
from drvgemm.runtime.launch import _Packer


@pytest.fixture(scope="module")
def saxpy():
    return drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90")


@pytest.mark.parametrize("value", [True, False, np.bool_(True)])
def test_bool_is_not_a_device_pointer(saxpy, value):
    """saxpy(float a, float* x, float* y, int n): a bool where x belongs is
    a mistake (True would be address 1), not a pointer."""
    with pytest.raises(TypeError, match=r"parameter 1 'x'.*bool"):
        _Packer(saxpy.params).pack([1.0, value, 0, 4])


@pytest.mark.parametrize("value", [True, False])
def test_generated_launcher_refuses_bool_as_pointer_and_does_not_launch(saxpy, value):
    """The fast path of a bound launch (Kernel.launcher / make_runner), not
    only the packer's slow path, refuses a bool for a pointer."""
    calls = []
    pk = _Packer(saxpy.params)
    run = pk.make_runner(lambda *a: calls.append(a) or (0,), "fn", 1, 1, 1, 32, 1, 1, 0, None)
    with pytest.raises(TypeError, match=r"parameter 1 'x'.*bool"):
        run([1.0, value, 0, 4])
    assert calls == []


@pytest.mark.parametrize("value", [True, False, np.bool_(True)])
def test_device_pointer_refuses_bool(value):
    """drvgemm.runtime.driver.device_pointer, what gemm() and the copies use
    to read an address: True is not address 1."""
    from drvgemm.runtime import driver
    with pytest.raises(TypeError, match="bool"):
        driver.device_pointer(value, what="x")
    assert driver.device_pointer(0x1000) == 0x1000
