"""Every registered rung against a float64 reference, for hypothesis-drawn
shapes: exact mode (small integers, must match exactly), random mode (a
K-dependent elementwise bound), NaN-poisoned output, beta = 0 with NaN in C,
beta != 0, host and device operands."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import drvgemm
from drvgemm.ladders.gemm import dispatch as ladder
from drvgemm.ladders.gemm.registry import RUNGS

from gemm_check import check, inputs

pytestmark = pytest.mark.gpu

PRIMES = [2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021]


def dims(r):
    tiles = sorted({r.tile_m, r.tile_n, 8, 16, 32, 64, 128})
    near_tiles = [t + d for t in tiles for d in (-1, 0, 1) if t + d >= 1]
    return st.one_of(st.just(1), st.sampled_from(PRIMES), st.sampled_from(near_tiles),
                     st.integers(1, 1100))


def run(r, m, n, k, seed, mode, alpha, beta, on_device):
    a, b, c0 = inputs(r.precision, m, n, k, seed, mode)
    c_in = np.full((m, n), np.nan, np.float32) if beta == 0 else c0.copy()
    if on_device:
        A, B, C = drvgemm.to_device(a), drvgemm.to_device(b), drvgemm.to_device(c_in)
        drvgemm.gemm(A, B, C, alpha=alpha, beta=beta, kernel=r.name)
        out = C.to_host()
    else:
        out = drvgemm.gemm(a, b, c_in, alpha=alpha, beta=beta, kernel=r.name)
    check(out, a, b, c0, alpha, beta, precision=r.precision, mode=mode,
          label=f"{r.name} seed={seed}", u_in=r.input_roundoff or None)


def runnable(r):
    from drvgemm.ladders.gemm.dispatch import device_arch_ok as _device_arch_ok
    return _device_arch_ok(r)


@pytest.mark.parametrize("name", [r.name for r in RUNGS])
def test_rung_property(gpu, name, request):
    r = ladder.rung(name)
    if not runnable(r):
        pytest.skip(f"{name} needs {r.arch}, device is {gpu.arch}")

    @settings(max_examples=int(os.environ.get("GEMM_EXAMPLES", "40")), deadline=None, suppress_health_check=list(HealthCheck))
    @given(m=dims(r), n=dims(r), k=dims(r), seed=st.integers(0, 2**31 - 1),
           mode=st.sampled_from(["exact", "random"]),
           beta=st.sampled_from([0.0, 0.0, 1.0, -0.5]),
           on_device=st.booleans())
    def prop(m, n, k, seed, mode, beta, on_device):
        if mode == "exact" and r.precision != "fp32" and k > 2048:
            k = 2048
        alpha = 2.0 if mode == "exact" else 1.0
        run(r, m, n, k, seed, mode, alpha, beta, on_device)

    prop()


@pytest.mark.parametrize("name", [r.name for r in RUNGS])
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (1031, 977, 1500), (2048, 257, 4099)])
def test_rung_large_shapes(gpu, name, shape):
    r = ladder.rung(name)
    if not runnable(r):
        pytest.skip(f"{name} needs {r.arch}")
    m, n, k = shape
    run(r, m, n, k, seed=m + n + k, mode="random", alpha=1.0, beta=0.0, on_device=True)


@pytest.mark.parametrize("name", [r.name for r in RUNGS])
def test_k_zero_gives_beta_c_and_empty_outputs(gpu, name):
    r = ladder.rung(name)
    if not runnable(r):
        pytest.skip(f"{name} needs {r.arch}")
    dt = ladder.input_dtype(r.precision)
    c0 = np.arange(35, dtype=np.float32).reshape(5, 7)
    out = drvgemm.gemm(np.zeros((5, 0), dt), np.zeros((0, 7), dt), c0.copy(), beta=3.0,
                       kernel=name)
    np.testing.assert_array_equal(out, 3.0 * c0)
    out = drvgemm.gemm(np.zeros((5, 0), dt), np.zeros((0, 7), dt),
                       np.full((5, 7), np.nan, np.float32), beta=0.0, kernel=name)
    np.testing.assert_array_equal(out, np.zeros((5, 7), np.float32))
    assert drvgemm.gemm(np.ones((0, 3), dt), np.ones((3, 4), dt), kernel=name).shape == (0, 4)


def test_auto_picks_a_rung_per_precision(gpu):
    a = np.ones((33, 17), np.float32)
    b = np.ones((17, 9), np.float32)
    np.testing.assert_array_equal(drvgemm.gemm(a, b), np.full((33, 9), 17, np.float32))


def test_cupy_operands_stay_on_device(gpu):
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((65, 33), dtype=np.float32)
    b = rng.standard_normal((33, 47), dtype=np.float32)
    A, B = cupy.asarray(a), cupy.asarray(b)
    C = cupy.full((65, 47), cupy.nan, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    out = drvgemm.gemm(A, B, C, kernel=drvgemm.kernels("fp32")[-1])
    assert out is C
    drvgemm.synchronize()
    np.testing.assert_allclose(cupy.asnumpy(C), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
