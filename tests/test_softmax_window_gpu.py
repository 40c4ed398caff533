"""Softmax rungs 07..09 and auto's new paths on the GPU, against float64
numpy (tests/test_softmax_gpu.py's ``check``: elementwise bound, row sums,
NaN where the reference has NaN): any rows x columns >= 1, row starts at
every offset from a 16-byte boundary (offset views), row pitches above the
row (column slices), x and y of different alignment (element-wise stores),
-inf and large values, rows of one element, fp16/bf16 in and out, few very
long rows through the split rung (a sequence of plans sharing the
workspace, two streams at once) and more than 2^31 elements. Outputs and
the guard elements around and between rows are poisoned (0xFF: NaN in all
three types) and must come back untouched; x must not change.

Bounded: ~150 small launches and a handful of long-row ones (~30 s on an
H200 besides the > 2^31 case)."""
import dataclasses

import numpy as np
import pytest

import drvgemm
from drvgemm.ladders.softmax import dispatch as sm
from drvgemm.ladders.softmax import registry as smr
from drvgemm.runtime import driver

from test_softmax_gpu import check, make_input

pytestmark = pytest.mark.gpu

GUARD = 64   # poisoned elements before and after every buffer


class PitchedView:
    """rows x cols elements at row pitch ``ld``, ``off`` elements past a
    16-byte boundary, inside a buffer poisoned with 0xFF and guarded by
    GUARD elements on each side; exposes __cuda_array_interface__ with
    strides, as a column slice of a wider array would."""

    def __init__(self, rows, cols, ld, off, dtype):
        self.rows, self.cols, self.ld, self.off = rows, cols, ld, off
        self.dtype = np.dtype(dtype)
        self.span = (rows - 1) * ld + cols
        self.n = GUARD + off + self.span + GUARD
        self.buf = drvgemm.empty((self.n * self.dtype.itemsize,), np.uint8).fill_bytes(0xFF)
        self.ptr = self.buf.ptr + (GUARD + off) * self.dtype.itemsize
        size = self.dtype.itemsize
        self.__cuda_array_interface__ = {"shape": (rows, cols), "typestr": "|V%d" % size,
                                         "data": (self.ptr, False),
                                         "strides": (ld * size, size), "version": 3}

    def _index(self):
        return np.arange(self.rows)[:, None] * self.ld + np.arange(self.cols)[None, :]

    def upload(self, x):
        raw = np.full(self.n * self.dtype.itemsize, 0xFF, np.uint8)
        body = raw.view(self.dtype)[GUARD + self.off:GUARD + self.off + self.span]
        body[self._index()] = x
        self.buf.copy_from_host(raw)

    def download(self):
        """(the rows, the number of elements outside the rows that changed)."""
        h = self.buf.to_host()
        vals = h.view(self.dtype)
        idx = GUARD + self.off + self._index()
        y = vals[idx]
        outside = np.ones(self.n, bool)
        outside[idx.ravel()] = False
        words = h.reshape(self.n, self.dtype.itemsize)
        changed = int(np.count_nonzero((words[outside] != 0xFF).any(axis=1)))
        return y, changed

    def free(self):
        self.buf.free()


def run_case(x, kernel="auto", *, xoff=0, yoff=0, xpad=0, ypad=0, stream=None):
    rows, cols = x.shape
    vx = PitchedView(rows, cols, cols + xpad, xoff, x.dtype)
    vy = PitchedView(rows, cols, cols + ypad, yoff, x.dtype)
    try:
        vx.upload(x)
        got = sm.softmax(vx, kernel=kernel, out=vy, stream=stream)
        assert got is vy
        (stream.synchronize() if stream is not None else drvgemm.synchronize())
        y, outside = vy.download()
        x_after, _ = vx.download()
    finally:
        vx.free()
        vy.free()
    assert outside == 0, f"{outside} elements written outside the output rows"
    assert np.array_equal(x_after.view(np.uint8), x.view(np.uint8)), "x was modified"
    return y


WINDOW_KERNELS = ["auto", "softmax_07_any_row", "softmax_08_any_row_cluster",
                  "softmax_09_split_row", "softmax_11_any_row_pipelined"]
# (x offset, y offset, x pad, y pad) in elements: aligned; same phase off by one;
# same phase with odd pitches; different phases (element-wise stores)
LAYOUTS = [(0, 0, 0, 0), (1, 1, 0, 0), (3, 3, 5, 5), (2, 1, 1, 3)]
COLS = [1, 2, 3, 5, 7, 8, 9, 31, 33, 127, 129, 1000, 1025, 4097, 12345, 16381, 50257]


def _supported(gpu, kernel, cols, prec):
    return kernel == "auto" or smr.rung(kernel).supports(cols, gpu.cc, prec)


@pytest.mark.parametrize("kernel", WINDOW_KERNELS)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "x%d-y%d-px%d-py%d" % l)
@pytest.mark.parametrize("cols", COLS)
def test_any_row_length_offset_and_pitch(gpu, kernel, layout, cols):
    prec = ("fp32", "bf16", "fp16")[(cols + sum(layout)) % 3]
    if not _supported(gpu, kernel, cols, prec):
        pytest.skip(f"{kernel} does not take {cols} columns")
    rows = max(3, min(97, 400_000 // cols)) | 1          # odd: partial lane groups and blocks
    x = make_input(rows, cols, prec, seed=cols * 7 + sum(layout))
    xoff, yoff, xpad, ypad = layout
    y = run_case(x, kernel, xoff=xoff, yoff=yoff, xpad=xpad, ypad=ypad)
    assert y.dtype == x.dtype
    check(y, x, f"{kernel} layout {layout}")
    if cols == 1:
        assert np.all(y.astype(np.float64) == 1.0), "a row of one element is exactly 1"


def special_input(cols, prec, seed):
    """7 rows of large values and -inf: row 3 all -inf, row 5 one survivor,
    row 6 values near the type's top, row 4 with a NaN (fp16 stays finite:
    it tops out at 65504)."""
    rng = np.random.default_rng(seed)
    rows = 7
    big = 6.0e4 if prec == "fp16" else 3.0e38
    x = rng.uniform(-big, big, (rows, cols)).astype(np.float32)
    x[0, 0] = big
    x[rng.random((rows, cols)) < 0.3] = -np.inf
    x[3] = -np.inf                                      # all -inf: NaN, like torch
    x[4, cols // 3] = np.nan                            # a NaN: the whole row NaN
    x[5, :] = -np.inf
    x[5, cols // 2] = -1e4 if prec != "fp16" else -6.0e4   # a single survivor: exactly 1
    x[6] = np.float32(1e4 if prec != "fp16" else 6.0e4) - rng.uniform(0, 20, cols).astype(np.float32)
    return x.astype(smr.numpy_dtype(prec))


def check_special(y, x, what):
    cols = x.shape[1]
    y64 = y.astype(np.float64)
    x32 = x.astype(np.float32)
    assert np.all(np.isnan(y64[3])), f"{what}: an all -inf row is NaN"
    assert np.all(np.isnan(y64[4])), f"{what}: a row with a NaN is NaN"
    assert y64[5, cols // 2] == 1.0 and np.count_nonzero(y64[5]) == 1, what
    finite_rows = np.isfinite(x32).any(axis=1) & ~np.isnan(x32).any(axis=1)
    assert not np.isnan(y64[finite_rows]).any(), f"{what}: large finite values must not give NaN"
    neg = np.isneginf(x32) & finite_rows[:, None]
    assert np.all(y64[neg] == 0.0), f"{what}: -inf entries are 0"
    check(y, x, f"{what} large")


@pytest.mark.parametrize("kernel", WINDOW_KERNELS)
@pytest.mark.parametrize("prec", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("cols", [1, 3, 100, 5000, 50257])
def test_masks_and_large_values(gpu, kernel, prec, cols):
    if not _supported(gpu, kernel, cols, prec):
        pytest.skip(f"{kernel} does not take {cols} columns")
    x = special_input(cols, prec, cols)
    y = run_case(x, kernel, xoff=1, yoff=1)
    check_special(y, x, kernel)


# few very long rows, in this order: the plans share one workspace, and a
# plan that found another plan's counters would fold stale pairs (the
# prototype's first layout failed at 3 x 777777 fp16 after 3 x 1048576)
SPLIT_SEQUENCE = [(3, 1048576, "fp32", 0), (3, 1048575, "fp32", 1), (3, 1048576, "bf16", 5),
                  (3, 777_777, "fp16", 3), (2, 4_500_000, "fp32", 1), (2, 20_000_001, "bf16", 0),
                  (40, 300_000, "fp32", 1), (1, 1048576, "fp32", 0), (16, 1048576, "fp32", 0),
                  (64, 262144, "fp32", 0), (4, 1048576, "bf16", 0)]


def test_split_rows_in_a_sequence_of_plans(gpu):
    seen = set()
    for rows, cols, prec, off in SPLIT_SEQUENCE:
        x = make_input(rows, cols, prec, seed=cols + off)
        x[rows // 2, ::7] = -np.inf
        p = sm.plan(rows, cols, prec, aligned=off == 0, cc=gpu.cc, sm_count=gpu.sm_count)
        assert p.rung == "softmax_09_split_row", p.describe()
        seen.add(p.entry)
        for _ in range(2):                               # twice: the counters must be back at 0
            y = run_case(x, xoff=off, yoff=off)
            check(y, x, f"split {rows}x{cols} {prec} off {off} ({p.describe()})")
    assert seen == {"softmax_09_split_row", "softmax_09_split_row_stream"}


@pytest.mark.parametrize("rows,cols,prec,off", [(40, 1048576, "bf16", 0), (20, 1048576, "fp16", 1),
                                                (30, 777_777, "bf16", 3), (16, 1048576, "fp32", 0),
                                                (9, 1048575, "fp32", 1), (12, 777_777, "fp32", 3)])
def test_split_rows_held_packed_or_in_shared_memory_over_passes(gpu, rows, cols, prec, off):
    """Split rows whose chunks are held packed (16-bit: two elements a
    register, and a part in shared memory) or partly in shared memory
    (fp32): more rows than the resident
    slots, so the slots take a second row and the pairs' row parity turns;
    at an offset the chunks' first and last vectors are element-wise (in
    registers or in the shared slots). Special rows (-inf runs, a lone
    survivor, values near the type's top) in the middle; run twice (the
    counters must be back at 0)."""
    p = sm.plan(rows, cols, prec, aligned=off == 0, cc=gpu.cc, sm_count=gpu.sm_count)
    if not (p.rung == "softmax_09_split_row" and (p.config.packed or p.config.shared_items)):
        pytest.skip(f"this GPU's plan is {p.describe()}")
    assert p.slots < rows and p.split > 1, p.describe()
    x = make_input(rows, cols, prec, seed=rows + off)
    x[rows // 2, ::7] = -np.inf
    x[rows // 2 + 1, :] = -np.inf
    x[rows // 2 + 1, cols // 3] = 0.0
    x[rows - 1, ::5] = smr.numpy_dtype(prec).type(60000.0 if prec == "fp16" else 3e38)
    for _ in range(2):
        y = run_case(x, xoff=off, yoff=off)
        check(y, x, f"packed split {rows}x{cols} {prec} off {off} ({p.describe()})")


def test_split_rows_on_two_streams_at_once(gpu):
    a, b = drvgemm.Stream(), drvgemm.Stream()
    xs = [make_input(4, 1048576, "fp32", seed=s) for s in (1, 2)]
    dx = [drvgemm.to_device(x) for x in xs]
    outs = [drvgemm.empty(x.shape, x.dtype).fill_bytes(0xFF) for x in xs]
    drvgemm.synchronize()
    for _ in range(3):
        sm.softmax(dx[0], out=outs[0], stream=a)
        sm.softmax(dx[1], out=outs[1], stream=b)
    a.synchronize()
    b.synchronize()
    for x, o in zip(xs, outs):
        check(o.to_host(), x, "split on two streams")


def test_auto_on_16_bit_returns_16_bit(gpu):
    for prec, shape in (("bf16", (100000, 128)), ("fp16", (777, 12345)), ("bf16", (64, 50257))):
        x = make_input(*shape, prec, seed=3)
        y = run_case(x, xoff=2, yoff=2)
        assert y.dtype == x.dtype
        check(y, x, f"auto {prec}")


def test_host_input_of_odd_rows(gpu):
    x = make_input(333, 50257, seed=5)
    y = sm.softmax(x)
    assert isinstance(y, np.ndarray)
    check(y, x, "auto host 333x50257")


@pytest.mark.parametrize("kernel, rung", [("auto", "softmax_11_any_row_pipelined"),
                                          ("softmax_08_any_row_cluster", None)])
def test_more_than_2_31_elements_through_a_window_cluster(gpu, kernel, rung):
    """32769 x 65537 bf16: 2^31 + 98306 elements, odd rows (the cluster rungs
    with their peel and tail: auto's rung 11 slices of 2 x 512 and rung 08 asked
    for), sampled rows around the 2^31 boundary."""
    if gpu.cc < (9, 0):
        pytest.skip("needs sm_90")
    rows, cols = 32769, 65537
    dt = smr.numpy_dtype("bf16")
    need = 2 * rows * cols * 2 + (1 << 30)
    free, _ = driver.memory_info()
    if free < need:
        pytest.skip(f"needs {need / 2**30:.0f} GiB of device memory, {free / 2**30:.0f} free")
    x = drvgemm.empty((rows, cols), dt)
    y = drvgemm.empty((rows, cols), dt).fill_bytes(0xFF)
    try:
        pattern = make_input(7, cols, "bf16", seed=11)
        driver.DeviceArray((7, cols), dt, ptr=x.ptr, owner=False).copy_from_host(pattern)
        done, row_bytes = 7, cols * 2
        while done < rows:
            n = min(done, rows - done)
            driver.memcpy_dtod(x.ptr + done * row_bytes, x.ptr, n * row_bytes)
            done += n
        p = sm.plan(rows, cols, "bf16", kernel=kernel, cc=gpu.cc, sm_count=gpu.sm_count)
        assert p.rung == (rung or kernel), p.describe()
        sm.softmax(x, out=y, kernel=kernel)
        drvgemm.synchronize()
        edge = 2**31 // cols
        for r in sorted({0, edge - 1, edge, edge + 1, rows - 1}):
            got = driver.DeviceArray((1, cols), dt, ptr=y.ptr + r * row_bytes, owner=False).to_host()
            check(got, pattern[r % 7][None, :], f"{p.describe()} row {r}")
    finally:
        x.free()
        y.free()


def run_config(c, x, prec, layout=(1, 1, 0, 0), resident=None):
    """x through config c as an explicit plan, rows laid out as ``layout``
    (x offset, y offset, x pad, y pad in elements; default: an offset of one
    element) in guarded, poisoned buffers; y, after checking that nothing
    outside it was written. ``resident``: a persistent config's clusters
    (default: as many as fit)."""
    rows, cols = x.shape
    xoff, yoff, xpad, ypad = layout
    vx = PitchedView(rows, cols, cols + xpad, xoff, x.dtype)
    vy = PitchedView(rows, cols, cols + ypad, yoff, x.dtype)
    try:
        vx.upload(x)
        aligned = xoff * x.dtype.itemsize % 16 == 0 and (cols + xpad) * x.dtype.itemsize % 16 == 0
        same = (yoff - xoff) * x.dtype.itemsize % 16 == 0 and (ypad - xpad) * x.dtype.itemsize % 16 == 0
        p = sm.config_plan(c, rows, cols, prec, aligned=aligned, same_phase=same)
        k, p = sm.prepare(p, rows)
        if resident is not None:
            p = dataclasses.replace(p, grid=c.grid(rows, resident))
        sm.run_plan(k, p, vx.ptr, vy.ptr, rows, cols, cols + xpad, cols + ypad)
        driver.synchronize()
        y, touched = vy.download()
    finally:
        vx.free()
        vy.free()
    assert touched == 0, f"{c.describe()}: wrote outside y"
    return y


@pytest.mark.parametrize("prec", ["fp32", "bf16", "fp16"])
def test_every_block_per_row_config(gpu, prec):
    """Each registered block-per-row window config (plan._pick_block's
    candidates: auto takes any of them by row length) run as an explicit
    plan on rows that fill its window but for one vector, at an offset of one
    element: the result against float64, the guards around y untouched."""
    cfgs = [c for c in smr.window_configs(prec)
            if c.kind == "rows" and c.row_threads == c.threads]
    assert cfgs
    vec = smr.vec_of(prec)
    for i, c in enumerate(cfgs):
        cols = max(1, (c.window - 1) * vec - 1)
        x = make_input(5, cols, prec, seed=i)
        check(run_config(c, x, prec), x, c.describe())


@pytest.mark.parametrize("prec", ["fp32", "bf16", "fp16"])
def test_every_cluster_and_packed_config(gpu, prec):
    """Each registered cluster config and each packed 16-bit config (auto
    takes them by row length and row count, so small tests through auto reach
    only some) as an explicit plan on the special rows (-inf, NaN, a single
    survivor, values near the type's top), each row filling the window but
    for one vector, at an offset of one element: against float64, the guards
    around y untouched."""
    if gpu.cc < (9, 0):
        pytest.skip("clusters need sm_90")
    cfgs = [c for c in smr.window_configs(prec) if c.kind == "cluster" or c.packed]
    assert cfgs
    vec = smr.vec_of(prec)
    for i, c in enumerate(cfgs):
        cols = max(1, (c.window - 1) * vec - 1)
        x = special_input(cols, prec, seed=i)
        check_special(run_config(c, x, prec), x, c.describe())


@pytest.mark.parametrize("prec", ["fp32", "bf16", "fp16"])
def test_every_pipelined_config_walks_many_rows(gpu, prec):
    """Each registered rung-11 config (persistent clusters, bulk-copied
    windows) on more rows than its clusters, so every block walks rows
    through its whole ring of landing buffers several times and the row
    parity of its pair exchange wraps: rows that fill its window but for
    one vector, at every layout (aligned; an offset of one element, so x's
    first vector and the last row's last vector lie outside the array and
    are read element-wise; odd pitches, whose gaps the copies bring and the
    reads mask; y at another phase than x), the special rows among them;
    then the same on 3 resident clusters (more rows a cluster) and on one."""
    if gpu.cc < (9, 0):
        pytest.skip("clusters need sm_90")
    cfgs = [c for c in smr.window_configs(prec) if c.kind == "pipelined"]
    assert cfgs
    vec = smr.vec_of(prec)
    for i, c in enumerate(cfgs):
        cols = (c.window - 1) * vec - 1
        for j, layout in enumerate(LAYOUTS):
            rows = 37 + 2 * j
            x = make_input(rows, cols, prec, seed=100 * i + j)
            x[:7] = special_input(cols, prec, seed=i)
            y = run_config(c, x, prec, layout)
            check_special(y[:7], x[:7], f"{c.describe()} {layout}")
            check(y, x, f"{c.describe()} {layout}")
        for resident in (3, 1):
            x = make_input(23, cols, prec, seed=7 * i + resident)
            check(run_config(c, x, prec, (1, 3, 5, 1), resident=resident), x,
                  f"{c.describe()} on {resident} clusters")


def test_auto_takes_the_pipelined_rung_for_vocabulary_rows(gpu):
    """auto's rung 11 on the vocabulary rows it is planned for (fp32 and bf16,
    odd and aligned lengths, contiguous and offset by one element)."""
    if gpu.cc < (9, 0):
        pytest.skip("clusters need sm_90")
    for prec, rows, cols, off in (("fp32", 300, 50257, 0), ("bf16", 530, 50257, 1),
                                  ("bf16", 150, 128256, 0), ("fp32", 130, 151936, 1),
                                  ("bf16", 150, 200019, 1), ("bf16", 600, 36001, 1),
                                  ("fp32", 300, 72001, 1)):
        p = sm.plan(rows, cols, prec, cc=gpu.cc, sm_count=gpu.sm_count, aligned=off == 0)
        assert p.rung == "softmax_11_any_row_pipelined", (prec, rows, cols, p.describe())
        x = make_input(rows, cols, prec, seed=cols + off)
        y = run_case(x, xoff=off, yoff=off)
        check(y, x, f"auto {prec} {rows}x{cols}")
