"""Softmax ladder and memory-lesson kernels on the GPU.

Every rung is held to the float64 reference of drvgemm.softmax.reference
(whose semantics the CPU tests pin down: -inf entries give 0, an all -inf row
gives NaN, like torch.softmax). Outputs are poisoned with NaN (0xFF bytes is
NaN in fp32, bf16 and fp16) before every launch, so an entry a kernel forgets
to write cannot pass.

Error bound for fp32 output, elementwise:
    |y - ref| <= u * (|x - max| + 32 + 2 * sqrt(cols)) * ref + tiny,  u = 2^-24
|x - max| * u is what rounding x - max to fp32 costs before the exp (the
reference subtracts exactly); 32 u covers exp, the rescale and the division;
2 sqrt(cols) u covers the fp32 sum of up to cols terms. For standard-normal
rows that is ~1e-6 relative; the median error is asserted below 2e-6 (the
naive rungs' long per-thread sums set that figure; the register-resident ones
sit near 2e-7).
16-bit outputs add one rounding of the output type (2^-9 bf16, 2^-11 fp16,
doubled) and, for fp16, its subnormal spacing as an absolute floor.
"""
import io
import math
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import drvgemm
from drvgemm.ladders.memory import registry as mem_registry
from drvgemm.tools import memory_bench as membench, softmax_sweep
from drvgemm.runtime import driver
from drvgemm.runtime.driver import DeviceArray
from drvgemm.runtime.launch import launch
from drvgemm.runtime.sass import kernel_sass_hash

from drvgemm.ladders.softmax import dispatch as sm  # noqa: E402
from drvgemm.ladders.softmax import registry as smr  # noqa: E402

pytestmark = pytest.mark.gpu

U = 2.0 ** -24
TINY = float(np.finfo(np.float32).tiny)
OUT_ROUNDING = {"fp32": 0.0, "bf16": 2.0 ** -8, "fp16": 2.0 ** -10}
ABS_FLOOR = {"fp32": TINY, "bf16": TINY, "fp16": 2.0 ** -24}
KERNELS = ["auto"] + smr.kernels()


def _skip_unsupported(gpu, kernel, cols, prec="fp32"):
    if kernel != "auto" and not smr.rung(kernel).supports(cols, gpu.cc, prec):
        pytest.skip(f"{kernel} does not take {cols} columns on sm_{gpu.cc[0]}{gpu.cc[1]}")


def make_input(rows, cols, prec="fp32", scale=3.0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(scale)
    if prec == "fp16":
        np.clip(x, -6.0e4, 6.0e4, out=x)  # keep +-inf out: fp16 tops out at 65504
    return x.astype(smr.numpy_dtype(prec))


def masked_input(rows, cols, prec, scale, seed, masked, dead_row):
    """make_input with a fraction ``masked`` of -inf entries and, with
    ``dead_row``, its middle row all -inf (a row softmax must leave NaN)."""
    x = make_input(rows, cols, prec, scale, seed)
    if masked:
        rng = np.random.default_rng(seed + 1)
        x[rng.random((rows, cols)) < masked] = -np.inf
    if dead_row:
        x[rows // 2] = -np.inf
    return x


def run(x, kernel="auto", stream=None):
    """softmax of x through a NaN-poisoned device output; returns numpy."""
    dx = drvgemm.to_device(x)
    out = drvgemm.empty(x.shape, x.dtype).fill_bytes(0xFF)
    y = sm.softmax(dx, kernel=kernel, out=out, stream=stream)
    assert y is out
    drvgemm.synchronize()
    return out.to_host()


def check(y, x, kernel, *, median_bound=None):
    prec = smr.dtype_name(x.dtype)
    rows, cols = x.shape
    ref = sm.reference(x)
    y64 = np.asarray(y).astype(np.float64)
    where = f"{kernel} {rows}x{cols} {prec}"

    nan_ref = np.isnan(ref)
    nan_mismatch = np.isnan(y64) != nan_ref
    if nan_mismatch.any():
        r, c = np.argwhere(nan_mismatch)[0]
        pytest.fail(f"{where}: y[{r},{c}] = {y64[r, c]!r}, reference {ref[r, c]!r} "
                    f"({int(nan_mismatch.sum())} NaN mismatches; x[{r},{c}] = {x[r, c]!r})")

    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        gap = np.max(x64, axis=1, keepdims=True) - x64
    gap = np.where(np.isfinite(gap), gap, 0.0)
    rtol = U * (gap + 32.0 + 2.0 * math.sqrt(cols)) + OUT_ROUNDING[prec]
    ok = ~nan_ref
    err = np.abs(y64 - ref)
    allowed = rtol * ref + ABS_FLOOR[prec]
    bad = ok & (err > allowed)
    if bad.any():
        r, c = np.argwhere(bad)[np.argmax((err / np.maximum(allowed, 1e-300))[bad])]
        pytest.fail(f"{where}: worst y[{r},{c}] = {y64[r, c]!r}, reference {ref[r, c]!r}, "
                    f"relative error {err[r, c] / max(ref[r, c], 1e-300):.3g} > "
                    f"{rtol[r, c]:.3g} ({int(bad.sum())} entries out of bound; x = {x[r, c]!r})")

    full = ~nan_ref.any(axis=1)
    if full.any():
        sums = y64[full].sum(axis=1)
        worst = float(np.max(np.abs(sums - 1.0)))
        # 16-bit: the output rounding, plus half the subnormal spacing an
        # element below the normal range (fp16 under 6.1e-5: rows past ~16K
        # elements round to 2^-24 absolute)
        bound = 2e-5 if prec == "fp32" else 4 * OUT_ROUNDING[prec] + cols * ABS_FLOOR[prec] / 2
        assert worst <= bound, f"{where}: a row sums to 1 +- {worst:.3g} (bound {bound:.1g})"

    if median_bound is not None:
        big = ok & (ref > 1e-30)
        med = float(np.median(err[big] / ref[big]))
        assert med <= median_bound, f"{where}: median relative error {med:.3g}"


# ---------------------------------------------------------------------------
# property tests: every rung, any shape, three dtypes, masks and magnitudes
# ---------------------------------------------------------------------------
COLS = [1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
        511, 512, 513, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192,
        8193, 16383, 16384, 16385, 32767, 32768, 32769, 65536, 65537, 100003, 131071, 131072,
        131073, 200003]


@st.composite
def softmax_case(draw):
    cols = draw(st.one_of(st.sampled_from(COLS), st.integers(1, 140000)))
    rows = draw(st.integers(1, max(1, min(257, 1_500_000 // cols))))
    prec = draw(st.sampled_from(["fp32", "fp32", "bf16", "fp16"]))
    scale = draw(st.sampled_from([1.0, 3.0, 30.0, 1e4]))
    masked = draw(st.floats(0.0, 0.5)) if draw(st.booleans()) else 0.0
    dead_row = draw(st.booleans()) and rows > 1
    seed = draw(st.integers(0, 2**32 - 1))
    return rows, cols, prec, scale, masked, dead_row, seed


@pytest.mark.parametrize("kernel", KERNELS)
@given(case=softmax_case())
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
def test_matches_float64_reference(gpu, kernel, case):
    rows, cols, prec, scale, masked, dead_row, seed = case
    if kernel in ("softmax_05_cluster", "softmax_06_pipelined",
                  "softmax_08_any_row_cluster") and gpu.cc < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    assume(kernel == "auto" or smr.rung(kernel).supports(cols, gpu.cc, prec))
    x = masked_input(rows, cols, prec, scale, seed, masked, dead_row)
    check(run(x, kernel), x, kernel)


# ---------------------------------------------------------------------------
# the shapes and values the issue names
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", [(1, 1), (1, 100003), (100003, 1), (4097, 4097), (3, 16384),
                                   (5, 131072), (2, 131073)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_odd_shapes(gpu, kernel, shape):
    _skip_unsupported(gpu, kernel, shape[1])
    x = make_input(*shape, seed=sum(shape))
    y = run(x, kernel)
    check(y, x, kernel, median_bound=2e-6)
    if shape[1] == 1:
        assert np.all(y == 1.0), "a row of one element is exactly 1"


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("cols", [100, 5000, 50000])
def test_magnitudes_of_ten_thousand(gpu, kernel, cols):
    _skip_unsupported(gpu, kernel, cols)
    rng = np.random.default_rng(cols)
    x = rng.uniform(-1e4, 1e4, size=(8, cols)).astype(np.float32)
    # rows whose entries are all large and close together: only differences matter
    x[4:] = np.float32(1e4) - rng.uniform(0, 20, size=(4, cols)).astype(np.float32)
    x[7] = -x[7]
    y = run(x, kernel)
    assert np.all(np.isfinite(y))
    check(y, x, kernel)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("cols", [1, 7, 300, 4096, 20000, 131072])
def test_masked_entries_and_all_masked_rows(gpu, kernel, cols):
    _skip_unsupported(gpu, kernel, cols)
    rows = 6
    x = make_input(rows, cols, seed=cols)
    rng = np.random.default_rng(cols)
    x[0, rng.random(cols) < 0.7] = -np.inf        # mostly masked
    x[0, 0] = 0.5                                  # ... but not entirely
    x[1] = -np.inf                                 # all masked: NaN, like torch
    x[2] = -np.inf
    x[2, cols // 2] = 5.0                          # one survivor: exactly 1
    x[4, :] = -np.inf
    x[4, -1] = -1e4                                # a survivor at a large negative value
    y = run(x, kernel)
    assert np.all(np.isnan(y[1])), "an all -inf row is NaN"
    assert y[2, cols // 2] == 1.0 and np.count_nonzero(y[2]) == 1
    assert y[4, -1] == 1.0
    assert np.all(y[0][np.isneginf(x[0])] == 0.0)
    check(y, x, kernel)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("prec", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", [(7, 1), (333, 8), (33, 100), (4, 1024), (3, 4097), (2, 16384),
                                   (2, 65536)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_16_bit_inputs(gpu, kernel, prec, shape):
    _skip_unsupported(gpu, kernel, shape[1], prec)
    x = make_input(*shape, prec=prec, seed=shape[1])
    y = run(x, kernel)
    assert y.dtype == x.dtype
    check(y, x, kernel)


# Row offsets either side of the 16-bit builds' FMA exp limit
# (FMA_EXP_REF_LIMIT = 256 in softmax_common.cuh: a thread whose max is within
# it takes exp by one FFMA, past it the subtract-first form): rows of a warp,
# and the lanes of one row (an offset of 254, unit-normal values), take both.
FMA_LIMIT_OFFSETS = (0.0, 254.0, 256.0, 258.0, -256.0, -300.0, 1000.0, -4000.0, 30000.0)


@pytest.mark.parametrize("prec", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", [(8192, 127), (8192, 129), (16384, 33), (4096, 127), (256, 4097),
                                   (64, 8192), (32, 50257), (9, 262144), (128, 128256),
                                   (3, 777777)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
def test_16_bit_exps_either_side_of_the_fma_limit(gpu, prec, shape):
    """auto's rung for each shape (row tiles crowded and not, windows packed
    and not, clusters, split rows) on rows whose maxima straddle the FMA exp
    limit, row by row and within a row: the reference's bound either way."""
    rows, cols = shape
    x = make_input(rows, cols, prec="fp32", scale=1.0, seed=rows + cols)
    x += np.resize(np.asarray(FMA_LIMIT_OFFSETS, np.float32), rows)[:, None]
    x = x.astype(smr.numpy_dtype(prec))
    y = run(x, "auto")
    p = sm.plan(rows, cols, prec, cc=gpu.cc, sm_count=gpu.sm_count)
    check(y, x, f"auto ({p.describe()})")


@pytest.mark.parametrize("prec", ["bf16", "fp16"])
def test_16_bit_rows_of_8_on_one_lane(gpu, prec):
    """Aligned 16-bit rows of 8: auto's one lane and one 16-byte vector a row
    (rung 04), over a partial last block, with a row of -inf, a lone
    survivor and the type's top values among the rows."""
    rows = 1000
    p = sm.plan(rows, 8, prec, cc=gpu.cc, sm_count=gpu.sm_count)
    assert p.rung == "softmax_04_vectorized" and p.config.row_threads == 1 and p.vec == 8, \
        p.describe()
    x = make_input(rows, 8, prec=prec, seed=8)
    x[1] = -np.inf
    x[2] = -np.inf
    x[2, 5] = 1.0
    x[3] = smr.numpy_dtype(prec).type(60000.0 if prec == "fp16" else 3e38)
    y = run(x, "auto")
    assert np.all(np.isnan(y[1].astype(np.float32))), "an all -inf row is NaN"
    assert y[2, 5] == 1.0 and np.count_nonzero(y[2].astype(np.float32)) == 1
    check(y, x, "auto")


PACKED_CASES = [(prec, c.packed_cols) for prec in ("fp32", "bf16", "fp16")
                for c in smr.PACKED_CONFIGS if c.packed_cols < smr.vec_of(prec)]


@pytest.mark.parametrize("prec,cols", PACKED_CASES)
@pytest.mark.parametrize("rows", [1, 3, 4095, 4097, 100003])
def test_rows_packed_in_vectors(gpu, prec, cols, rows):
    """Aligned rows of fewer elements than a 16-byte vector holds: auto's
    packed entry (rung 04, whole rows a vector, a thread a run of vectors)
    over row counts that end in a partial vector and a partial block, with
    an all -inf row, a NaN, a lone survivor and the type's top values; the
    same bits as a lane a row (the rows entry, the same arithmetic), and the
    reference's bound. A misaligned view of the same rows takes a lane a row."""
    p = sm.plan(rows, cols, prec, cc=gpu.cc, sm_count=gpu.sm_count)
    assert p.entry == "softmax_04_vectorized_packed" and p.vec == smr.vec_of(prec), p.describe()
    x = make_input(rows, cols, prec=prec, seed=rows + cols)
    top = smr.numpy_dtype(prec).type(60000.0 if prec == "fp16" else 3e38)
    for r, row in ((0, -np.inf), (rows // 2, top), (rows - 1, np.nan)):
        x[r] = row
    if cols > 1 and rows > 2:
        x[1] = -np.inf
        x[1, cols - 1] = 2.0
    y = run(x, "auto")
    lane_a_row = run(x, "softmax_04_vectorized")
    assert np.array_equal(y.view(np.uint8), lane_a_row.view(np.uint8))
    assert np.all(np.isnan(y[0].astype(np.float32))) and np.all(np.isnan(y[-1].astype(np.float32)))
    if cols > 1 and rows > 2:
        assert y[1, cols - 1] == 1.0 and np.count_nonzero(y[1].astype(np.float32)) == 1
    check(y, x, "auto")
    n = rows * cols
    base = drvgemm.empty((n + 8,), x.dtype)
    view = DeviceArray((rows, cols), x.dtype, ptr=base.ptr + x.dtype.itemsize, owner=False)
    view.copy_from_host(x)
    q = sm.plan(rows, cols, prec, aligned=False, cc=gpu.cc)
    assert q.entry == "softmax_04_vectorized_rows", q.describe()
    out = drvgemm.empty((rows, cols), x.dtype).fill_bytes(0xFF)
    sm.softmax(view, out=out)
    drvgemm.synchronize()
    assert np.array_equal(out.to_host().view(np.uint8), y.view(np.uint8))


def test_nan_poisons_its_row_only(gpu):
    x = make_input(3, 5000)
    x[1, 17] = np.nan
    y = sm.softmax(x)
    assert np.all(np.isnan(y[1]))
    assert not np.isnan(y[0]).any() and not np.isnan(y[2]).any()


# ---------------------------------------------------------------------------
# the API: host and device arrays, alignment fallback, streams, > 2^31 elements
# ---------------------------------------------------------------------------
def test_numpy_in_numpy_out(gpu):
    x = make_input(5, 300)
    y = sm.softmax(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (5, 300)
    check(y, x, "auto")
    x16 = x.astype(ml_dtypes.bfloat16)
    assert sm.softmax(x16).dtype == x16.dtype


def test_device_in_device_out(gpu):
    x = make_input(5, 300)
    y = sm.softmax(drvgemm.to_device(x))
    assert isinstance(y, DeviceArray) and y.shape == (5, 300) and y.dtype == np.float32
    drvgemm.synchronize()
    check(y.to_host(), x, "auto")


def test_torch_tensor_in(gpu):
    from drvgemm.tools.optional import torch_cuda, why_not
    torch = torch_cuda()
    if torch is None:
        pytest.skip(why_not("torch"))
    x = make_input(64, 2000)
    t = torch.from_numpy(x).cuda()
    y = sm.softmax(t)
    assert isinstance(y, torch.Tensor) and y.device == t.device   # torch in -> torch out
    drvgemm.synchronize()
    check(y.cpu().numpy(), x, "auto")
    np.testing.assert_allclose(y.cpu().numpy(), torch.softmax(t, dim=-1).cpu().numpy(),
                               rtol=1e-5, atol=1e-30)


def test_more_axes_are_rows_and_keep_their_shape(gpu):
    """(batch, heads, rows, cols) logits, a 1-D row, numpy and device in:
    softmax over the last axis, the shape kept; the second call of the same
    device shape takes the per-call cache, which must keep it too."""
    x = make_input(2 * 3 * 5, 300).reshape(2, 3, 5, 300)
    y = sm.softmax(x)
    assert isinstance(y, np.ndarray) and y.shape == (2, 3, 5, 300)
    check(y.reshape(30, 300), x.reshape(30, 300), "auto")
    row = make_input(1, 1000)[0]
    y1 = sm.softmax(row)
    assert y1.shape == (1000,)
    check(y1.reshape(1, 1000), row.reshape(1, 1000), "auto")
    dx = drvgemm.to_device(x)
    for _ in range(2):
        out = sm.softmax(dx)
        assert isinstance(out, DeviceArray) and out.shape == (2, 3, 5, 300)
        drvgemm.synchronize()
        check(out.to_host().reshape(30, 300), x.reshape(30, 300), "auto")


def test_torch_batch_of_column_slices(gpu):
    """A 3-D tensor whose rows are a column slice of a wider one (one pitch
    through the batch axis), with out=; a transposed batch is refused."""
    from drvgemm.tools.optional import torch_cuda, why_not
    torch = torch_cuda()
    if torch is None:
        pytest.skip(why_not("torch"))
    wide = make_input(4 * 7, 520).reshape(4, 7, 520)
    t = torch.from_numpy(wide).cuda()[:, :, 3:503]          # pitch 520, offset 3 elements
    out = torch.full((4, 7, 500), float("nan"), device=t.device)
    assert sm.softmax(t, out=out) is out
    drvgemm.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), torch.softmax(t, dim=-1).cpu().numpy(),
                               rtol=1e-5, atol=1e-30)
    with pytest.raises(ValueError, match="one row pitch"):
        sm.softmax(torch.from_numpy(wide).cuda().transpose(0, 1))


def test_torch_bfloat16_tensor_in_and_out(gpu):
    """torch's CUDA array interface has no bfloat16 ('<V2'): the tensor's own
    dtype says what it is, in and out=."""
    from drvgemm.tools.optional import torch_cuda, why_not
    torch = torch_cuda()
    if torch is None:
        pytest.skip(why_not("torch"))
    x = make_input(64, 2000).astype(ml_dtypes.bfloat16)
    t = torch.from_numpy(x.astype(np.float32)).cuda().to(torch.bfloat16)
    out = torch.full_like(t, float("nan"))
    y = sm.softmax(t, out=out)
    assert y is out
    drvgemm.synchronize()
    check(y.float().cpu().numpy().astype(ml_dtypes.bfloat16), x, "auto")


@pytest.mark.parametrize("kernel", ["auto", "softmax_04_vectorized", "softmax_05_cluster",
                                    "softmax_06_pipelined"])
@pytest.mark.parametrize("cols", [64, 4096, 30000])
def test_misaligned_rows_take_the_scalar_path(gpu, kernel, cols):
    """A row start 4 bytes past a 16-byte boundary: float4 loads would fault
    or read the wrong elements; the dispatcher must fall back to VEC = 1."""
    _skip_unsupported(gpu, kernel, cols)
    rows = 9
    x = make_input(rows, cols, seed=cols)
    base = drvgemm.empty((rows * cols + 4,), np.float32)
    view = DeviceArray((rows, cols), np.float32, ptr=base.ptr + 4, owner=False)
    view.copy_from_host(x)
    p = sm.plan(rows, cols, kernel=kernel, aligned=False, cc=gpu.cc)
    if kernel == "auto":
        assert p.pitched, "auto keeps 128-bit accesses on misaligned rows (the window rungs)"
    else:
        assert p.vec == 1
    out = drvgemm.empty((rows, cols), np.float32).fill_bytes(0xFF)
    sm.softmax(view, kernel=kernel, out=out)
    drvgemm.synchronize()
    check(out.to_host(), x, kernel)


def test_runs_on_a_stream(gpu):
    x = make_input(300, 3000)
    s = drvgemm.Stream()
    dx = drvgemm.to_device(x)
    out = drvgemm.empty(x.shape, x.dtype).fill_bytes(0xFF)
    drvgemm.synchronize()  # a non-blocking stream does not wait for the legacy stream's copies
    sm.softmax(dx, out=out, stream=s)
    s.synchronize()
    check(out.to_host(), x, "auto")


# ---------------------------------------------------------------------------
# rung 06: persistent clusters walking many rows through a ring of buffers
# ---------------------------------------------------------------------------
def _pipelined_case(cfg, rows, cols, prec, resident, seed):
    x = make_input(rows, cols, prec, seed=seed)
    x[rows // 3] = -np.inf                                  # an all-masked row: NaN
    x[rows // 2, ::3] = -np.inf
    dx = drvgemm.to_device(x)
    out = drvgemm.empty(x.shape, x.dtype).fill_bytes(0xFF)
    p = sm.config_plan(cfg, rows, cols, prec, resident=resident)
    assert p.grid[0] == min(rows, resident) * cfg.cluster
    k = sm.compiled_kernel(p)
    sm.resident_clusters(k, cfg, p.smem)                    # attributes (smem, cluster size)
    launch(k, p.grid, p.block, (dx, out, rows, cols), smem=p.smem, cluster=p.cluster)
    drvgemm.synchronize()
    return x, out.to_host(), p


@pytest.mark.parametrize("cfg", smr.rung("softmax_06_pipelined").configs, ids=lambda c: c.describe())
@pytest.mark.parametrize("resident", [1, 2, 5])
@pytest.mark.parametrize("prec", ["fp32", "bf16"])
def test_pipelined_any_number_of_clusters_walks_every_row(gpu, cfg, resident, prec):
    """Few clusters, many rows: each block cycles its landing buffers and
    both exchange sets many times (mbarrier phases wrap), and the last rows
    of a cluster land in any buffer. Full rows and a ragged last slice."""
    if gpu.cc < (9, 0):
        pytest.skip("needs sm_90")
    rows = 4 * cfg.stages + 3
    for cols in (cfg.capacity, cfg.capacity - 8 * 37):
        x, y, p = _pipelined_case(cfg, rows, cols, prec, resident, seed=cols + resident)
        assert p.vec * x.dtype.itemsize == 16 and p.smem > 0, "this test is about the bulk path"
        assert np.all(np.isnan(y[rows // 3]))
        check(y, x, f"{p.describe()} resident={resident}")


@pytest.mark.parametrize("cols", [131071, 65535, 3])
def test_pipelined_without_bulk_copies_is_still_persistent(gpu, cols):
    if gpu.cc < (9, 0):
        pytest.skip("needs sm_90")
    cfg = smr.rung("softmax_06_pipelined").pick(cols)
    x, y, p = _pipelined_case(cfg, 11, cols, "fp32", 2, seed=cols)
    assert p.vec == 1 and p.smem == 0
    check(y, x, p.describe())


def test_resident_clusters_fill_the_gpu_without_oversubscribing(gpu):
    if gpu.cc < (9, 0):
        pytest.skip("needs sm_90")
    dev = drvgemm.device()
    for cfg in smr.rung("softmax_06_pipelined").configs:
        p = sm.config_plan(cfg, 4096, cfg.capacity)
        k = sm.compiled_kernel(p)
        n = sm.resident_clusters(k, cfg, p.smem)
        per_sm = driver.occupancy_max_active_blocks(k.function, cfg.threads, p.smem)
        assert per_sm >= 1, cfg.describe()
        if cfg.cluster > 1:
            # at most every block slot of every SM; a cluster must sit inside one
            # GPC, so up to half of them may idle
            assert per_sm * dev.sm_count // 2 <= n * cfg.cluster <= per_sm * dev.sm_count, \
                cfg.describe()
        else:
            assert n == per_sm * dev.sm_count, cfg.describe()


def test_sweep_runs_candidates_and_checks_them(gpu):
    if gpu.cc < (9, 0):
        pytest.skip("needs sm_90")
    cfgs = (smr.pipelined(512, 16, 8, 6), smr.pipelined(512, 8, 16, 8),
            smr.SoftmaxConfig("softmax_04_vectorized_stream", 512, 512, unroll=4, vector=True))
    recs = softmax_sweep.sweep_softmax(shapes=[(40, 65536)], configs=cfgs, reps=3)
    timed = [r for r in recs if r["kernel"] != "copy" and "gbps" in r]
    assert any(r["config"].startswith("softmax_06_pipelined threads=512 elems=16 cluster=8")
               for r in timed)
    for r in timed:
        assert r["correct"], r
    for r in recs:
        if "error" in r:   # only the non-portable cluster of 16 may not fit a GPC
            assert "cluster=16" in r["config"], r
    buf = io.StringIO()
    softmax_sweep.print_sweep_report(recs, file=buf)
    assert "best correct:" in buf.getvalue()


@pytest.fixture(scope="module")
def huge(gpu):
    """65540 x 32768 fp32: 2^31 + 131072 elements, so row offsets past 2^31
    need 64-bit arithmetic. Rows repeat with period 7 (filled on the device by
    doubling copies), which keeps the host side small."""
    rows, cols = 65540, 32768
    need = 2 * rows * cols * 4 + (1 << 30)
    free, _ = driver.memory_info()
    if free < need:
        pytest.skip(f"needs {need / 2**30:.0f} GiB of device memory, {free / 2**30:.0f} free")
    pattern = make_input(7, cols, seed=7)
    x = drvgemm.empty((rows, cols), np.float32)
    DeviceArray((7, cols), np.float32, ptr=x.ptr, owner=False).copy_from_host(pattern)
    done, row_bytes = 7, cols * 4
    while done < rows:
        n = min(done, rows - done)
        driver.memcpy_dtod(x.ptr + done * row_bytes, x.ptr, n * row_bytes)
        done += n
    out = drvgemm.empty((rows, cols), np.float32)
    yield x, out, pattern, rows, cols
    x.free()
    out.free()


@pytest.mark.parametrize("kernel", ["auto", "softmax_01_naive", "softmax_03_warp_shuffle",
                                    "softmax_04_vectorized", "softmax_05_cluster",
                                    "softmax_06_pipelined", "softmax_08_any_row_cluster",
                                    "softmax_09_split_row"])
def test_more_than_2_31_elements(gpu, huge, kernel):
    x, out, pattern, rows, cols = huge
    _skip_unsupported(gpu, kernel, cols)
    out.fill_bytes(0xFF)
    sm.softmax(x, kernel=kernel, out=out)
    drvgemm.synchronize()
    ref_rows = (0, 65535, 65536, rows - 2, rows - 1)   # 65536 * 32768 = 2^31
    for r in ref_rows:
        got = DeviceArray((1, cols), np.float32, ptr=out.ptr + r * cols * 4, owner=False).to_host()
        want = pattern[r % 7][None, :]
        check(got, want, f"{kernel} row {r}")


# ---------------------------------------------------------------------------
# memory-lesson kernels
# ---------------------------------------------------------------------------
GUARD = 64


def _guarded(n):
    """A NaN-poisoned buffer of n + 2*GUARD floats and a view of the middle n."""
    buf = drvgemm.empty((n + 2 * GUARD,), np.float32).fill_bytes(0xFF)
    return buf, DeviceArray((n,), np.float32, ptr=buf.ptr + 4 * GUARD, owner=False)


def _assert_guards_untouched(buf, n):
    h = buf.to_host()
    assert np.all(np.isnan(h[:GUARD])) and np.all(np.isnan(h[GUARD + n:])), "wrote outside"


@pytest.mark.parametrize("name", ["mem_copy_scalar", "mem_copy_float4"])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 1023, 4099, (1 << 20) + 7])
def test_copies(gpu, name, n):
    mk = mem_registry.mem_kernel(name)
    host = np.random.default_rng(n).standard_normal(n, dtype=np.float32)
    src = drvgemm.to_device(host)
    buf, dst = _guarded(n)
    launch(membench._mem_compiled(mk), mem_registry.copy_grid(mk, n), mk.block, (src, dst, n))
    drvgemm.synchronize()
    np.testing.assert_array_equal(dst.to_host(), host)
    _assert_guards_untouched(buf, n)


@pytest.mark.parametrize("stride", [1, 2, 3, 8, 32])
@pytest.mark.parametrize("count", [1, 1000, 70001])
def test_strided_copy(gpu, stride, count):
    mk = mem_registry.mem_kernel("mem_copy_strided")
    n = count * stride
    host = np.random.default_rng(count).standard_normal(n, dtype=np.float32)
    src = drvgemm.to_device(host)
    buf, dst = _guarded(n)
    launch(membench._mem_compiled(mk), mem_registry.copy_grid(mk, count), mk.block,
           (src, dst, count, stride))
    drvgemm.synchronize()
    got = dst.to_host()
    np.testing.assert_array_equal(got[::stride], host[::stride])
    if stride > 1:
        untouched = np.ones(n, bool)
        untouched[::stride] = False
        assert np.all(np.isnan(got[untouched])), "wrote between the strided elements"
    _assert_guards_untouched(buf, n)


@pytest.mark.parametrize("name", ["mem_transpose_naive", "mem_transpose_smem",
                                  "mem_transpose_padded", "mem_transpose_swizzled"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 33), (33, 1), (31, 65), (64, 64), (100, 1000),
                                   (1025, 777)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_transposes(gpu, name, shape):
    mk = mem_registry.mem_kernel(name)
    rows, cols = shape
    a = np.random.default_rng(rows * cols).standard_normal(shape, dtype=np.float32)
    da = drvgemm.to_device(a)
    buf, flat = _guarded(rows * cols)
    out = DeviceArray((cols, rows), np.float32, ptr=flat.ptr, owner=False)
    launch(membench._mem_compiled(mk), mem_registry.transpose_grid(rows, cols), mk.block,
           (da, out, rows, cols))
    drvgemm.synchronize()
    np.testing.assert_array_equal(out.to_host(), a.T)
    _assert_guards_untouched(buf, rows * cols)


def test_bench_functions_produce_complete_records(gpu):
    recs = membench.bench_mem_kernels(n=(1 << 20) + 3, strides=(1, 8),
                                      transpose_shape=(257, 320), reps=3)
    recs += membench.bench_softmax([(64, 1000), (8, 40000)], reps=3)
    names = [r["kernel"] for r in recs]
    assert names.count("copy") == 4
    assert {"mem_copy_scalar", "mem_copy_float4", "mem_copy_strided_8",
            "mem_transpose_padded"} <= set(names)
    assert set(smr.kernels()) - {"softmax_05_cluster", "softmax_06_pipelined"} <= set(names)
    for r in recs:
        assert {"kernel", "precision", "m", "n", "median_ms", "gbps", "bytes",
                "baseline"} <= set(r), r
        assert r["gbps"] > 0 and r["median_ms"] > 0
        if r["kernel"] != "copy":
            assert 0 < r["copy_fraction"] == pytest.approx(r["gbps"] / r["copy_gbps"], rel=1e-3)
        if r.get("correct") is not None:
            assert r["correct"], r
        if "max_rel_err" in r and not r["baseline"]:
            assert r["max_rel_err"] is not None and r["max_rel_err"] < 1e-5, r
    assert sum(1 for r in recs if r.get("auto")) == 2, "one auto pick per softmax shape"
    # every kernel's record names its machine code: the digest of the SASS
    # this machine's compiler gave (the manifest's digest where the toolchain
    # is the manifest's), so runs can be told apart by the code they timed
    for r in recs:
        if r["kernel"] not in ("copy", "torch_softmax"):
            assert re.fullmatch(r"[0-9a-f]{16}", r.get("sass_hash") or ""), r
    mk = mem_registry.mem_kernel("mem_copy_scalar")
    got = {r["sass_hash"] for r in recs if r["kernel"] == "mem_copy_scalar"}
    assert got == {kernel_sass_hash(membench._mem_compiled(mk))}
