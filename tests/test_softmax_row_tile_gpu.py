"""Softmax rung 10 (cu/softmax/softmax_10_row_tile.cu) on the GPU: what its
design could get wrong, drawn on purpose.

The rung copies a block's run of rows as the aligned 16-byte vectors that
cover it and writes back only the run's bytes, so the cases place x and y
at every element offset inside a larger buffer (a run that starts and ends
mid-vector, x and y at different 16-byte phases: the element-wise store
path), make the array's first and last vectors partial (element-wise loads
at both ends), draw row counts that leave the last block short, and hold the
output to the float64 reference of tests/test_softmax_gpu.py's ``check``.
The buffer around y is filled with a sentinel and checked after each launch
(a store past the run, before y or after it, shows up), and y itself is
poisoned with NaN (an element never written shows up). Inputs carry -inf
masks, all -inf rows, rows of one element and large magnitudes."""
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

RUNG = "softmax_10_row_tile"
def _top(prec):
    """The longest row of ``prec`` the rung takes (fp32 1024, 16-bit 1025:
    registry.SoftmaxConfig.row_capacity)."""
    return max(c.row_capacity(smr.numpy_dtype(prec).itemsize) for c in smr.rung(RUNG).configs)


def _pick(cols, prec):
    return smr.rung(RUNG).pick(cols, (9, 0), smr.numpy_dtype(prec).itemsize)
SENTINEL = 0x5A           # guard bytes around y
GUARD = 64                # bytes of guard before and after y


def _placed(host, offset):
    """host on the device ``offset`` elements into a buffer with one spare
    vector each side: (buffer, view)."""
    item = host.dtype.itemsize
    pad = 16 // item
    buf = drvgemm.to_device(np.zeros(host.size + 2 * pad + offset, host.dtype))
    view = DeviceArray(host.shape, host.dtype, ptr=buf.ptr + (pad + offset) * item, owner=False)
    view.copy_from_host(np.ascontiguousarray(host))
    return buf, view


def _run(x, x_off, y_off):
    rows, cols = x.shape
    item = x.dtype.itemsize
    xbuf, dx = _placed(x, x_off)
    nbytes = rows * cols * item
    ybuf = drvgemm.to_device(np.full(GUARD + y_off * item + nbytes + GUARD, SENTINEL, np.uint8))
    base = GUARD + y_off * item
    dy = DeviceArray((rows, cols), x.dtype, ptr=ybuf.ptr + base, owner=False)
    dy.fill_bytes(0xFF)                                  # NaN in fp32, bf16 and fp16
    out = sm.softmax(dx, kernel=RUNG, out=dy)
    assert out is dy
    drvgemm.synchronize()
    raw = ybuf.to_host()
    xbuf.free()
    ybuf.free()
    where = f"{rows}x{cols} {x.dtype} x+{x_off} y+{y_off}"
    assert np.all(raw[:base] == SENTINEL), f"{where}: a store before y"
    assert np.all(raw[base + nbytes:] == SENTINEL), f"{where}: a store after y"
    return raw[base:base + nbytes].view(x.dtype).reshape(rows, cols)


@st.composite
def tile_case(draw):
    prec = draw(st.sampled_from(["fp32", "fp32", "bf16", "fp16"]))
    # 16-bit rows one past a config's slots (17, 33, 65, ..., 1025) take that config;
    # crowded 16-bit rows on lane groups (66, 96, 97, 106, 127..131: 16-byte vectors)
    top = _top(prec)
    cols = draw(st.one_of(st.integers(1, top),
                          st.sampled_from([c for c in (1, 2, 3, 7, 9, 15, 16, 17, 31, 32, 33, 63,
                                                       64, 65, 66, 96, 97, 106, 127, 128, 129, 131,
                                                       255, 256, 257, 511, 512, 513, 1000, 1023,
                                                       1024) if c <= top] + [top])))
    cfg = _pick(cols, prec)
    per_block = cfg.rows_per_block
    rows = draw(st.one_of(st.integers(1, 3 * per_block + 1),
                          st.integers(1, max(1, 400_000 // cols))))
    vec = 16 // smr.numpy_dtype(prec).itemsize
    x_off = draw(st.integers(0, vec - 1))
    y_off = draw(st.one_of(st.just(x_off), st.integers(0, vec - 1)))
    scale = draw(st.sampled_from([1.0, 3.0, 1e4]))
    masked = draw(st.sampled_from([0.0, 0.0, 0.3]))
    dead_row = draw(st.booleans()) and rows > 1
    seed = draw(st.integers(0, 2**31 - 1))
    return rows, cols, prec, x_off, y_off, scale, masked, dead_row, seed


@given(case=tile_case())
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
def test_row_tile_matches_reference_at_any_offset(gpu, case):
    rows, cols, prec, x_off, y_off, scale, masked, dead_row, seed = case
    x = masked_input(rows, cols, prec, scale, seed, masked, dead_row)
    y = _run(x, x_off, y_off)
    check(y, x, RUNG)
    if cols == 1:
        live = ~np.isneginf(x[:, 0])
        assert np.all(y[live, 0] == 1.0), "a row of one element is exactly 1"


@pytest.mark.parametrize("cols", [17, 31, 32, 33, 37, 40, 41, 63, 64, 65, 96, 106, 127, 129, 1000,
                                  1025])
@pytest.mark.parametrize("prec", ["fp32", "bf16"])
def test_row_tile_many_blocks(gpu, cols, prec):
    """Enough rows for thousands of blocks, the last one short, at an odd
    offset: every block's run starts at another phase (32, 64: 16-bit rows on
    one lane whose plain slots crowd a warp onto a few banks, so they rotate;
    96, 106, 127, 129: crowded 16-bit rows on four lanes, read as 16-byte
    vectors (fp32: 96, 127);
    17, 33, 65, 129, 1025: 16-bit rows one past a config's slots, whose
    tiles are a row longer; 37, 40: the one lane of 40 slots in 128-thread
    blocks, 41, 63, 64: of 64)."""
    if cols > _top(prec):
        pytest.skip(f"{prec} rows of rung 10 end at {_top(prec)}")
    rows = 3 * 4096 * _pick(cols, prec).rows_per_block // 4 + 3
    x = make_input(rows, cols, prec, 3.0, cols)
    y = _run(x, 1, 1)
    check(y, x, RUNG)



@pytest.mark.parametrize("blocks", [1, 3, None])
@pytest.mark.parametrize("cols,prec", [(31, "bf16"), (127, "fp32"), (9, "fp32"), (129, "bf16"),
                                       (33, "bf16"), (65, "fp16"), (37, "fp32"), (41, "bf16"),
                                       (63, "fp32"), (65, "bf16")])
def test_row_tile_grid_walks_every_tile(gpu, blocks, cols, prec):
    """Fewer blocks than tiles (1 and 3: each block walks many tiles, through
    both buffers where the build has two), and one block a tile (None: the
    plan before prepare sizes the grid): the same bits every way."""
    rows = 37 * _pick(cols, prec).rows_per_block + 5
    x = make_input(rows, cols, prec, 3.0, cols + 1)
    p = sm.plan(rows, cols, prec, kernel=RUNG)
    k = sm.compiled_kernel(p)
    if blocks is not None:
        p = dataclasses.replace(p, grid=(blocks, 1, 1))
    assert p.grid[0] == (blocks or -(-rows // p.config.rows_per_block))
    dx = drvgemm.to_device(x)
    dy = drvgemm.empty(x.shape, x.dtype).fill_bytes(0xFF)
    sm.run_plan(k, p, dx, dy, rows, cols)
    y = dy.to_host()
    check(y, x, RUNG)
    assert np.array_equal(y, sm.softmax(dx, kernel=RUNG).to_host()), "the prepared grid differs"
