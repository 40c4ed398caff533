"""Checking a GEMM result the way the best testbeds do, with a message that
lets a failure be replayed (rung, M, N, K, seed, the worst element)."""
import numpy as np

from drvgemm.ladders.gemm.dispatch import input_dtype

# Rounding of an input that happens *inside* the kernel, and the unit
# roundoff of the fp32 accumulator. TF32 rungs take fp32 inputs and round
# them to 10 explicit mantissa bits themselves (rna: 2^-11; a rung that
# truncates says so with Rung.input_roundoff). bf16 and fp16 rungs take inputs
# that are already rounded, and the reference is computed from those same
# rounded values: no input term, and every product of two 8- or 11-bit
# mantissas is exact in fp32. fp32 inputs are used as they are (the 2^-24
# covers the product's rounding in a non-fused multiply).
U_IN = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "bf16": 0.0, "fp16": 0.0}
U_ACC = 2.0 ** -24
# Roundings after the dot product: alpha * acc and + beta * C, each one
# rounding of the fp32 result.
EPILOGUE_ROUNDINGS = 2


def error_bound(precision, k, mag, u_in=None):
    """The elementwise bound (2 u_in + (K + 2) u_acc) * (|alpha| |A| |B| + |beta C|):
    K additions into the accumulator, two roundings in the epilogue."""
    u = U_IN[precision] if u_in is None else u_in
    return (2 * u + (k + EPILOGUE_ROUNDINGS) * U_ACC) * mag + 1e-30


def inputs(precision, m, n, k, seed, mode):
    """A, B in the rung's input dtype and an fp32 C. 'exact': integers in
    [-8, 8] (exactly representable in every input type); 'random': normal."""
    rng = np.random.default_rng(seed)
    dt = input_dtype(precision)
    if mode == "exact":
        a = rng.integers(-8, 9, (m, k)).astype(np.float32)
        b = rng.integers(-8, 9, (k, n)).astype(np.float32)
        c = rng.integers(-8, 9, (m, n)).astype(np.float32)
    else:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = rng.standard_normal((m, n), dtype=np.float32)
    return a.astype(dt), b.astype(dt), c


def products(a, b):
    """(A @ B, |A| @ |B|) in float64: what check() compares against, for a
    caller that checks several results of the same operands."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 @ b64, np.abs(a64) @ np.abs(b64)


def check(out, a, b, c0, alpha, beta, *, precision, mode, label, u_in=None, prods=None):
    ab, abs_ab = products(a, b) if prods is None else prods
    ref = alpha * ab + (beta * c0.astype(np.float64) if beta != 0 else 0.0)
    m, k = a.shape
    n = b.shape[1]
    where = f"{label} M={m} N={n} K={k} alpha={alpha} beta={beta} mode={mode}"
    assert out.shape == (m, n), f"{where}: shape {out.shape}"
    bad_nan = ~np.isfinite(out)
    if bad_nan.any():
        i, j = np.argwhere(bad_nan)[0]
        raise AssertionError(f"{where}: {int(bad_nan.sum())} non-finite outputs, first at "
                             f"({i}, {j}) = {out[i, j]} (expected {ref[i, j]}): unwritten "
                             "output or C read with beta = 0")
    if mode == "exact":
        diff = np.abs(out - ref)
        if diff.max() != 0:
            i, j = np.unravel_index(np.argmax(diff), diff.shape)
            raise AssertionError(f"{where}: not exact, {int((diff != 0).sum())} elements differ; "
                                 f"worst ({i}, {j}) = {out[i, j]} vs {ref[i, j]}")
        return
    mag = np.abs(alpha) * abs_ab + (np.abs(beta * c0) if beta != 0 else 0)
    bound = error_bound(precision, k, mag, u_in)
    ratio = np.abs(out - ref) / bound
    if ratio.max() > 1:
        i, j = np.unravel_index(np.argmax(ratio), ratio.shape)
        raise AssertionError(f"{where}: error above bound at ({i}, {j}): {out[i, j]} vs "
                             f"{ref[i, j]} (|err| = {abs(out[i, j] - ref[i, j]):.3g}, bound "
                             f"{bound[i, j]:.3g}); {int((ratio > 1).sum())} elements over")
