"""Softmax rung 12 (cu/softmax/softmax_12_flat_rows.cu) on the GPU: what its
design could get wrong, drawn on purpose.

The rung loads a block's run of rows as the aligned 16-byte vectors that
cover it, splits each vector between the two rows it may touch, and writes
back only the run's elements; each row's pairs are folded in an order that
depends on the row alone. So the cases place x and y at every element
offset inside a larger buffer (runs that start and end mid-vector, x and y
at different 16-byte phases: the element-wise store path; the array's first
and last vectors partial: element-wise loads), draw rows from one vector
long (a vector then spans two rows at every boundary) to the longest a
block holds, row counts that leave the last block short, and hold the output
to the float64 reference of tests/test_softmax_gpu.py's ``check``. The bytes
around y are a sentinel checked after each launch (a store outside the
array), y itself is poisoned with NaN (an element never written). Inputs
carry -inf masks, all -inf rows and large magnitudes. A run of fewer rows
(more blocks) must give the same bits."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import drvgemm
from drvgemm.ladders.softmax import dispatch as sm
from drvgemm.ladders.softmax import registry as smr
from drvgemm.runtime.driver import DeviceArray

from test_softmax_gpu import check, make_input, masked_input

pytestmark = pytest.mark.gpu

RUNG = "softmax_12_flat_rows"
SENTINEL = 0x5A           # guard bytes around y
GUARD = 64                # bytes of guard before and after y


def _config():
    return smr.rung(RUNG).configs[0]


def _top(prec):
    return _config().row_capacity(smr.numpy_dtype(prec).itemsize)


def _placed(host, offset):
    """host on the device ``offset`` elements into a buffer with one spare
    vector each side: (buffer, view)."""
    item = host.dtype.itemsize
    pad = 16 // item
    buf = drvgemm.to_device(np.zeros(host.size + 2 * pad + offset, host.dtype))
    view = DeviceArray(host.shape, host.dtype, ptr=buf.ptr + (pad + offset) * item, owner=False)
    view.copy_from_host(np.ascontiguousarray(host))
    return buf, view


def _run(x, x_off, y_off, tile_rows=None):
    """Rung 12 on x placed ``x_off`` elements into its buffer, into y placed
    ``y_off`` into a sentinel-guarded one (``tile_rows``: rows a run other
    than the plan's)."""
    rows, cols = x.shape
    item = x.dtype.itemsize
    xbuf, dx = _placed(x, x_off)
    nbytes = rows * cols * item
    ybuf = drvgemm.to_device(np.full(GUARD + y_off * item + nbytes + GUARD, SENTINEL, np.uint8))
    base = GUARD + y_off * item
    dy = DeviceArray((rows, cols), x.dtype, ptr=ybuf.ptr + base, owner=False)
    dy.fill_bytes(0xFF)                                  # NaN in fp32, bf16 and fp16
    if tile_rows is None:
        assert sm.softmax(dx, kernel=RUNG, out=dy) is dy
    else:
        p = sm.plan(rows, cols, smr.dtype_name(x.dtype), kernel=RUNG)
        p = dataclasses.replace(p, tile_rows=tile_rows, grid=(-(-rows // tile_rows), 1, 1))
        k, p = sm.prepare(p, rows)
        sm.run_plan(k, p, dx, dy, rows, cols)
    drvgemm.synchronize()
    raw = ybuf.to_host()
    xbuf.free()
    ybuf.free()
    where = f"{rows}x{cols} {x.dtype} x+{x_off} y+{y_off}"
    assert np.all(raw[:base] == SENTINEL), f"{where}: a store before y"
    assert np.all(raw[base + nbytes:] == SENTINEL), f"{where}: a store after y"
    return raw[base:base + nbytes].view(x.dtype).reshape(rows, cols)


@st.composite
def flat_case(draw):
    prec = draw(st.sampled_from(["fp32", "bf16", "bf16", "fp16"]))
    vec = 16 // smr.numpy_dtype(prec).itemsize
    top = _top(prec)
    cols = draw(st.one_of(st.integers(vec, 300), st.integers(vec, top),
                          st.sampled_from([vec, vec + 1, 2 * vec - 1, 31, 33, 66, 96, 127, 128,
                                           129, 255, 257, 1000, top])))
    per_block = _config().tile_rows(cols, smr.numpy_dtype(prec).itemsize)
    rows = draw(st.one_of(st.integers(1, 3 * per_block + 1),
                          st.integers(1, max(1, 300_000 // cols))))
    x_off = draw(st.integers(0, vec - 1))
    y_off = draw(st.one_of(st.just(x_off), st.integers(0, vec - 1)))
    scale = draw(st.sampled_from([1.0, 3.0, 1e4]))
    masked = draw(st.sampled_from([0.0, 0.0, 0.3]))
    dead_row = draw(st.booleans()) and rows > 1
    seed = draw(st.integers(0, 2**31 - 1))
    return rows, cols, prec, x_off, y_off, scale, masked, dead_row, seed


@given(case=flat_case())
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
def test_flat_rows_match_reference_at_any_offset(gpu, case):
    rows, cols, prec, x_off, y_off, scale, masked, dead_row, seed = case
    x = masked_input(rows, cols, prec, scale, seed, masked, dead_row)
    check(_run(x, x_off, y_off), x, RUNG)


@pytest.mark.parametrize("cols", [8, 9, 15, 31, 33, 66, 96, 127, 129, 255, 1000])
@pytest.mark.parametrize("prec", ["fp32", "bf16"])
def test_flat_rows_bits_do_not_depend_on_the_run(gpu, cols, prec):
    """Thousands of blocks, the last one short, at an odd offset; then runs
    of one row, and of half the plan's rows: the same bits (each row's pairs
    are folded in an order set by the row alone)."""
    if cols < 16 // smr.numpy_dtype(prec).itemsize:
        pytest.skip(f"{prec} rows of rung 12 start at a vector")
    tile = _config().tile_rows(cols, smr.numpy_dtype(prec).itemsize)
    rows = 2000 * tile + 3
    x = make_input(rows, cols, prec, 3.0, cols)
    y = _run(x, 3, 3)
    check(y, x, RUNG)
    for other in (1, max(1, tile // 2)):
        assert np.array_equal(y.view(np.uint8), _run(x, 3, 3, other).view(np.uint8)), \
            f"{prec} x {cols}: runs of {other} rows give other bits than runs of {tile}"


def test_flat_rows_more_blocks_than_runs(gpu):
    """A grid past the last run: the extra blocks return without a store."""
    rows, cols = 1000, 127
    x = make_input(rows, cols, "bf16", 3.0, 5)
    p = sm.plan(rows, cols, "bf16", kernel=RUNG)
    k, p = sm.prepare(p, rows)
    p = dataclasses.replace(p, grid=(p.grid[0] + 7, 1, 1))
    dx = drvgemm.to_device(x)
    dy = drvgemm.empty(x.shape, x.dtype).fill_bytes(0xFF)
    sm.run_plan(k, p, dx, dy, rows, cols)
    check(dy.to_host(), x, RUNG)
