"""A kernel faults (a store through a wild pointer) and the context is
poisoned. On the H200's driver (580, CUDA 13.0) the error then outlives any
context in that process: ``drvgemm.reset()`` says so and points to
``drvgemm.isolated``, which is how a session goes on -- the faulting work runs
in a child, its error comes back, and the parent's GPU stays usable. The
fault itself always runs in a child, so the test session survives it."""
import numpy as np
import pytest

import drvgemm

pytestmark = pytest.mark.gpu

FAULT = r'''
extern "C" __global__ void wild_store(float* p, long long offset) {
    p[offset + threadIdx.x] = 1.0f;     // far outside any allocation
}
'''


def _fault_then_reset_or_explain():
    """Runs in the child; returns what it saw."""
    import drvgemm
    seen = {}
    bad = drvgemm.compile(FAULT, "wild_store")
    saxpy = drvgemm.compile("saxpy.cu", "saxpy")
    x = drvgemm.to_device(np.arange(256, dtype=np.float32))
    drvgemm.launch(saxpy, 1, 256, (1.0, x, x, 256))      # loaded before the fault
    drvgemm.synchronize()
    try:
        drvgemm.launch(bad, 1, 32, (x, 1 << 40))
        drvgemm.synchronize()
        seen["fault"] = None
    except drvgemm.CudaError as e:
        seen["fault"] = e.name
    try:                                                  # sticky: everything fails now
        drvgemm.to_device(np.ones(4, np.float32)).to_host()
        seen["sticky"] = None
    except drvgemm.CudaError as e:
        seen["sticky"] = e.name
    try:
        drvgemm.reset()
        y = drvgemm.to_device(np.arange(256, dtype=np.float32))
        drvgemm.launch(saxpy, 1, 256, (2.0, y, y, 256))  # the same Kernel, reloaded
        drvgemm.synchronize()
        seen["reset"], seen["saxpy"] = "recovered", y.to_host()
    except drvgemm.CudaError as e:
        seen["reset"] = str(e)
    return seen


def _fault_only():
    import drvgemm
    bad = drvgemm.compile(FAULT, "wild_store")
    x = drvgemm.to_device(np.zeros(256, np.float32))
    drvgemm.launch(bad, 1, 32, (x, 1 << 40))
    drvgemm.synchronize()
    return "no fault"


def test_fault_is_sticky_and_reset_says_what_to_do(gpu):
    seen = drvgemm.isolated(_fault_then_reset_or_explain, timeout=300)
    assert seen["fault"] in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED"), seen
    assert seen["sticky"] is not None, "the fault did not poison the context?"
    if seen["reset"] == "recovered":            # a driver that lets a process recover
        np.testing.assert_array_equal(seen["saxpy"], 3 * np.arange(256, dtype=np.float32))
    else:
        assert "drvgemm.isolated" in seen["reset"], seen["reset"]


def test_isolated_returns_the_fault_and_the_parent_goes_on(gpu):
    with pytest.raises(drvgemm.CudaError) as e:
        drvgemm.isolated(_fault_only, timeout=300)
    assert e.value.name in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED")
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    b = np.arange(20, dtype=np.float32).reshape(4, 5) - 7
    np.testing.assert_array_equal(drvgemm.gemm(a, b), (a.astype(np.float64) @ b))
