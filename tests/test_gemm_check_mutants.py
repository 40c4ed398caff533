"""The random-mode bound of gemm_check rejects wrong 16-bit kernels.

Numpy emulations of what a kernel would return: the right one (fp32
accumulation of exact products, k-tile by k-tile as the tensor cores add
them), and three mutants: the running sum kept in fp16, the running sum
rounded to bf16, and a kernel that drops the last 1-8 products of K. The
bound must pass the first and fail every mutant at the shapes where the old
bound (with a 2 * 2^-8 input term for bf16) let them through."""
import numpy as np
import pytest

import gemm_check
from gemm_check import check, inputs, products

SHAPES = [(1024, 1024, 1024), (2048, 257, 4099), (300, 300, 1100), (64, 64, 200)]
KSTEP = 16   # one mma.sync m16n8k16 / wgmma k16 step


def accumulate(a, b, acc_dtype):
    """C = A @ B with the running sum stored in ``acc_dtype`` after every
    k-step of KSTEP products (each step's 16 products summed in fp32, as
    one tensor-core instruction does)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), acc_dtype)
    for k0 in range(0, a.shape[1], KSTEP):
        step = a32[:, k0:k0 + KSTEP] @ b32[k0:k0 + KSTEP, :]
        acc = (acc.astype(np.float32) + step).astype(acc_dtype)
    return acc.astype(np.float32)


def _check(out, case, beta=0.0):
    a, b, c0, precision, prods = case
    check(out, a, b, c0, 1.0, beta, precision=precision, mode="random", label="emulated",
          prods=prods)


_cases = {}


def case(precision, shape):
    """(A, B, C, precision, products) of one shape, made once per session."""
    key = (precision, shape)
    if key not in _cases:
        m, n, k = shape
        a, b, c0 = inputs(precision, m, n, k, seed=m * 7 + n * 3 + k, mode="random")
        _cases[key] = (a, b, c0, precision, products(a, b))
    return _cases[key]


@pytest.fixture(params=SHAPES, ids=lambda s: "x".join(map(str, s)))
def shape(request):
    return request.param


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_fp32_accumulation_passes(shape, precision):
    cs = case(precision, shape)
    a, b, c0 = cs[:3]
    good = accumulate(a, b, np.float32)
    _check(good, cs)
    # beta != 0: the epilogue's two roundings are inside the bound too.
    _check((good + np.float32(-0.5) * c0).astype(np.float32), cs, beta=-0.5)
    # and so is a differently ordered fp32 sum (BLAS)
    _check(a.astype(np.float32) @ b.astype(np.float32), cs)


def test_fp16_accumulator_is_rejected(shape):
    cs = case("fp16", shape)
    with pytest.raises(AssertionError, match="error above bound"):
        _check(accumulate(cs[0], cs[1], np.float16), cs)


def test_bf16_running_sum_is_rejected(shape):
    import ml_dtypes
    cs = case("bf16", shape)
    with pytest.raises(AssertionError, match="error above bound"):
        _check(accumulate(cs[0], cs[1], ml_dtypes.bfloat16), cs)


@pytest.mark.parametrize("drop", range(1, 9))
def test_dropped_products_of_k_are_rejected(shape, drop):
    """A kernel whose k loop stops ``drop`` products short of K: the fp32
    result of the remaining products."""
    a, b, c0, _, (ab, _) = cs = case("bf16", shape)
    k = a.shape[1]
    tail = a[:, k - drop:].astype(np.float64) @ b[k - drop:].astype(np.float64)
    with pytest.raises(AssertionError, match="error above bound"):
        _check((ab - tail).astype(np.float32), cs)


def test_the_input_term_stays_for_tf32():
    """TF32 rounds inside the kernel: fp32 inputs rounded to 10 mantissa bits
    (rna) and then multiplied must pass, and the bound must be the one with
    the input term (without it the same honest result fails)."""
    m, n, k = 64, 64, 200
    a, b, c0 = inputs("tf32", m, n, k, seed=5, mode="random")

    def tf32(x):
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x1000) & 0xFFFFE000          # round half away, 13 low bits dropped
        return bits.astype(np.uint32).view(np.float32)

    out = accumulate(tf32(a), tf32(b), np.float32)
    check(out, a, b, c0, 1.0, 0.0, precision="tf32", mode="random", label="tf32")
    with pytest.raises(AssertionError, match="error above bound"):
        check(out, a, b, c0, 1.0, 0.0, precision="tf32", mode="random", label="no input term",
              u_in=0.0)


def test_bound_has_no_input_term_for_16_bit_inputs():
    assert gemm_check.U_IN["bf16"] == gemm_check.U_IN["fp16"] == 0.0
    mag = np.ones(1)
    assert gemm_check.error_bound("bf16", 1000, mag)[0] == pytest.approx(1002 * 2.0 ** -24)
