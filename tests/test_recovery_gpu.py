"""A kernel faults (a store through a wild pointer), the context is poisoned,
``drvgemm.reset()`` gives a fresh one, and a correct launch and a gemm() give
right answers afterwards. The scenario runs in a child process
(drvgemm.isolated): reset() is recovery inside that process, and a driver
that could not recover takes only the child with it, not the test session."""
import numpy as np
import pytest

import drvgemm

pytestmark = pytest.mark.gpu

FAULT = r'''
extern "C" __global__ void wild_store(float* p, long long offset) {
    p[offset + threadIdx.x] = 1.0f;     // far outside any allocation
}
'''


def _fault_then_reset():
    """Runs in the child; returns what it saw."""
    import drvgemm
    from drvgemm.runtime import driver
    seen = {}
    bad = drvgemm.compile(FAULT, "wild_store")
    saxpy = drvgemm.compile("saxpy.cu", "saxpy")
    x = drvgemm.to_device(np.arange(256, dtype=np.float32))
    drvgemm.launch(saxpy, 1, 256, (1.0, x, x, 256))      # loaded before the fault
    drvgemm.synchronize()
    old = drvgemm.to_device(np.ones(4, np.float32))
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
    seen["generation"] = drvgemm.reset()
    try:
        old.to_host()
        seen["stale"] = None
    except drvgemm.StaleObjectError as e:
        seen["stale"] = str(e)
    try:
        drvgemm.launch(saxpy, 1, 256, (1.0, old, old, 4))
        seen["stale_arg"] = None
    except drvgemm.StaleObjectError as e:
        seen["stale_arg"] = str(e)
    # The same Kernel objects, reloaded lazily in the new context.
    y = drvgemm.to_device(np.arange(256, dtype=np.float32))
    drvgemm.launch(saxpy, 1, 256, (2.0, y, y, 256))
    drvgemm.synchronize()
    seen["saxpy"] = y.to_host()
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    b = np.arange(20, dtype=np.float32).reshape(4, 5) - 7
    seen["gemm"] = drvgemm.gemm(a, b)
    seen["gemm_want"] = a.astype(np.float64) @ b
    with drvgemm.graph() as g:                         # graphs and streams work again
        drvgemm.launch(saxpy, 1, 256, (1.0, y, y, 256))
    g.replay()
    g.synchronize()
    seen["graph"] = y.to_host()
    seen["driver_generation"] = driver.generation()
    return seen


def test_fault_reset_and_go_on(gpu):
    seen = drvgemm.isolated(_fault_then_reset, timeout=300)
    assert seen["fault"] in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED"), seen
    assert seen["sticky"] is not None, "the fault did not poison the context?"
    assert seen["generation"] == 1 == seen["driver_generation"]
    assert seen["stale"] and "before drvgemm.reset()" in seen["stale"]
    assert seen["stale_arg"] and "parameter" in seen["stale_arg"]
    ar = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal(seen["saxpy"], 3 * ar)
    np.testing.assert_array_equal(seen["gemm"], seen["gemm_want"])
    np.testing.assert_array_equal(seen["graph"], 6 * ar)
