"""Softmax rung 10 (cu/softmax/softmax_10_row_tile.cu) without a GPU: its
plan, its build, and the index arithmetic of its copies.

The kernel's loads and stores are a few lines of address arithmetic that a
mistake would turn into a read outside x or a write into a neighbour's rows.
``tile_accesses`` below follows that arithmetic for one tile (which 16-byte
vectors its block loads whole, which elements one by one, which bytes of y it
stores; the blocks walk the tiles, each tile the same way), and the tests hold
it to what the kernel must do for any rows, cols, element size and offsets of
x and y: every load inside the array, every byte of the tile's run loaded, the
stores of all tiles together exactly y's bytes, each once. Bytes are held as
[start, stop) ranges, so a row suite of 700 x 1024 is a few thousand ranges."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from drvgemm.ladders.softmax import dispatch as sm
from drvgemm.ladders.softmax import plan as smplan
from drvgemm.ladders.softmax import registry as smr
from drvgemm.runtime import sass, sources
from drvgemm.runtime.compiler import compile_binary, parse_resources

RUNG = smr.rung("softmax_10_row_tile")


def tile_accesses(tile, rows, cols, size, xb, yb, per_block):
    """(whole vectors loaded, elements loaded one by one, [start, stop) byte
    ranges of y stored, (the run's first byte, its length)) of one tile, as
    byte addresses: the kernel's three loops, in its own terms (byte offsets
    from x and y and their phases mod 16)."""
    row0 = tile * per_block
    nrows = min(per_block, rows - row0)
    e0 = row0 * cols
    run = nrows * cols * size
    xbytes = rows * cols * size
    a0 = e0 * size
    xphase = xb & 15
    v0 = ((a0 + xphase) & ~15) - xphase
    shift = a0 - v0
    nvec = (a0 + run - v0 + 15) >> 4
    whole, single, stored = [], [], []
    # load_run: vectors first .. last - 1 whole, vector 0 (when it starts before
    # x) and vector last (when it ends past x, and is not vector 0) partial
    first = 1 if v0 < 0 else 0
    last = nvec - 1 if v0 + 16 * nvec > xbytes else nvec
    whole += [xb + v0 + 16 * v for v in range(first, last)]
    partial = ([0] if first else []) + ([last] if last < nvec and last >= first else [])
    for v in partial:
        g = v0 + 16 * v
        single += [xb + g + k * size for k in range(16 // size) if 0 <= g + k * size < xbytes]
    yphase = yb & 15
    b0 = e0 * size
    w0 = ((b0 + yphase) & ~15) - yphase
    if b0 - w0 == shift:
        # store_run, the same split against the run's bytes [b0, b1)
        b1 = b0 + run
        first = 1 if w0 < b0 else 0
        last = nvec - 1 if w0 + 16 * nvec > b1 else nvec
        stored += [(yb + w0 + 16 * w, yb + w0 + 16 * w + 16) for w in range(first, last)]
        for w in ([0] if first else []) + ([last] if last < nvec and last >= first else []):
            gy = w0 + 16 * w
            stored += [(yb + gy + k * size, yb + gy + (k + 1) * size) for k in range(16 // size)
                       if b0 <= gy + k * size < b1]
    else:
        # element by element: y[e0 + i] for i < nrows * cols, one contiguous range
        stored.append((yb + b0, yb + b0 + nrows * cols * size))
    return whole, single, stored, (xb + a0, run)


def _covers(ranges, lo, hi) -> bool:
    """The union of [start, stop) ``ranges`` contains [lo, hi)."""
    reach = lo
    for a, b in sorted(ranges):
        if a > reach:
            break
        reach = max(reach, b)
    return reach >= hi or lo >= hi


def _tiles_exactly(ranges, lo, hi) -> bool:
    """``ranges`` cover [lo, hi) with no byte outside it and none twice."""
    at = lo
    for a, b in sorted(ranges):
        if a != at or b <= a:
            return False
        at = b
    return at == hi


@settings(max_examples=300, deadline=None)
@given(cols=st.integers(1, RUNG.configs[-1].capacity + 1), rows=st.integers(1, 700),
       size=st.sampled_from([4, 2]), x_off=st.integers(0, 7), y_off=st.integers(0, 7))
def test_loads_stay_in_x_and_stores_cover_y_once(cols, rows, size, x_off, y_off):
    if cols > RUNG.configs[-1].row_capacity(size):
        with pytest.raises(ValueError, match=f"at most {RUNG.configs[-1].row_capacity(size)} "):
            RUNG.pick(cols, (9, 0), size)
        return
    per_block = RUNG.pick(cols, (9, 0), size).rows_per_block
    xb, yb = 4096 + size * x_off, 1 << 20 | size * y_off     # element-aligned, any 16-byte phase
    xend, nbytes = xb + rows * cols * size, rows * cols * size
    blocks = -(-rows // per_block)
    assert RUNG.pick(cols, (9, 0), size).grid(rows) == (blocks, 1, 1)
    y_ranges = []
    for b in range(blocks):
        whole, single, stored, (a0, run) = tile_accesses(b, rows, cols, size, xb, yb, per_block)
        assert all(g % 16 == 0 and xb <= g and g + 16 <= xend for g in whole)
        assert all(xb <= e < xend and e % size == xb % size for e in single)
        loaded = [(g, g + 16) for g in whole] + [(e, e + size) for e in single]
        assert _covers(loaded, a0, a0 + run), f"tile {b}: a byte of its run not loaded"
        # the run lands in the tile at its offset inside the first vector, and the
        # vectors it spans fit the tile (32 bytes of slack past the rows' values)
        cfg = RUNG.pick(cols, (9, 0), size)
        assert (a0 % 16) + run <= cfg.rows_per_block * cfg.row_capacity(size) * size + 32
        y_ranges += stored
    assert _tiles_exactly(y_ranges, yb, yb + nbytes), \
        "a store outside y, a byte of y unwritten, or one stored twice"


def test_load_and_store_model_is_the_kernel_s():
    _kernel_has("const int first = r.v0 < 0 ? 1 : 0;",
                "const int last = r.v0 + 16ll * r.nvec > xbytes ? r.nvec - 1 : r.nvec;",
                "for (int v = first + static_cast<int>(threadIdx.x); v < last; v += THREADS)",
                "if (last < r.nvec && last >= first && threadIdx.x == THREADS - 1) {",
                "const int first = w0 < b0 ? 1 : 0;",
                "const int last = w0 + 16ll * r.nvec > b1 ? r.nvec - 1 : r.nvec;",
                "for (int w = first + static_cast<int>(threadIdx.x); w < last; w += THREADS)",
                "const int ka = static_cast<int>(max(min((lo - off + SZ - 1) / SZ, static_cast<long long>(VEC)), 0ll));",
                "const int kb = static_cast<int>(max(min((hi - off + SZ - 1) / SZ, static_cast<long long>(VEC)), 0ll));",
                "if (k >= ka && k < kb) dst[k] = src[k];")


def _c_div(a, b):
    """C's integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@pytest.mark.parametrize("size", [2, 4])
def test_partial_vector_bounds_are_the_elements_inside(size):
    """partial_vector's [ka, kb), in C's arithmetic, holds exactly the
    elements k whose byte offset off + k * size lies in [lo, hi), for every
    vector position around both ends (offsets differ by whole elements)."""
    vec = 16 // size
    for off in range(-16, 48, size):
        for lo in range(-16, 48, size):
            for hi in range(lo, 64, size):
                ka = max(min(_c_div(lo - off + size - 1, size), vec), 0)
                kb = max(min(_c_div(hi - off + size - 1, size), vec), 0)
                want = [k for k in range(vec) if lo <= off + k * size < hi]
                assert [k for k in range(vec) if ka <= k < kb] == want, (off, lo, hi)


def test_range_checks_see_a_gap_an_overlap_and_a_stray_byte():
    assert _tiles_exactly([(0, 4), (4, 16)], 0, 16) and _covers([(0, 9), (8, 16)], 2, 16)
    assert not _tiles_exactly([(0, 4), (5, 16)], 0, 16)       # a byte unwritten
    assert not _tiles_exactly([(0, 5), (4, 16)], 0, 16)       # a byte twice
    assert not _tiles_exactly([(0, 16), (16, 17)], 0, 16)     # a byte outside
    assert not _covers([(0, 4), (5, 16)], 0, 16) and _covers([], 3, 3)


def test_configs_take_rows_up_to_1024_with_the_fewest_lanes():
    caps = [c.capacity for c in RUNG.configs]
    assert caps == sorted(caps) and caps[-1] == 1024
    for cols in (1, 16, 17, 31, 33, 40, 41, 64, 65, 127, 129, 1000, 1024):
        c = RUNG.pick(cols)
        assert c.capacity >= cols and c.threads == (128 if 33 <= cols <= 64 else 256)
        fewer = [d for d in RUNG.configs if d.capacity >= cols and d.row_threads < c.row_threads]
        assert not fewer, (cols, c.describe(), [d.describe() for d in fewer])
    with pytest.raises(ValueError, match="at most 1024"):
        RUNG.pick(1025)


def test_16_bit_rows_one_past_the_slots_take_the_same_lanes():
    """A 16-bit lane group holds its whole words and, beside them, the row's
    lone first and last elements: a row of row_threads * elems + 1 fits (a
    bf16 row of 33 on one lane of 32 slots, not two lanes half empty); fp32
    rows do not, and the next 16-bit length takes the next config. A crowded
    row on a lane group is held as 16-byte vectors (row_vectors below), up
    to 7 elements short of them."""
    for c in RUNG.configs:
        cap = c.capacity
        assert c.row_capacity(4) == cap and c.row_capacity(2) == cap + 1
        for size, vec in ((2, 8), (4, 4)):
            want = ((c.row_threads * (c.elems // vec - 1) + 2) * vec - (vec - 1) if c.row_threads > 1
                    else cap + (size == 2))
            assert c.row_capacity(size, crowded=True) == want
        if cap < 1024 and not smplan.row_tile_crowded(cap + 1, c.row_threads):
            # that config, or the one before it of the same slots and fewer lanes
            assert RUNG.pick(cap + 1, (9, 0), 2).capacity == cap
            assert RUNG.pick(cap + 1, (9, 0), 4).capacity > cap
            assert RUNG.pick(cap + 2, (9, 0), 2).capacity > cap
    # 16-bit rows of 65..137 on four lanes: the 32 slots, or the 40 where a crowded
    # row's vectors need them (crowded on four lanes: 66, 67, 85, 86, 95..97, 106,
    # 107, 125..131)
    four = [c.describe() for c in RUNG.configs if c.row_threads == 4]
    for cols, elems in ((66, 32), (97, 32), (100, 32), (105, 32), (106, 40), (112, 32),
                        (127, 40), (128, 40), (129, 40), (131, 40)):
        c = RUNG.pick(cols, (9, 0), 2)
        assert c.row_threads == 4 and c.elems == elems, (cols, c.describe(), four)
    p = sm.plan(262144, 33, "bf16")
    assert p.entry == "softmax_10_row_tile" and p.config.row_threads == 1, p.config.describe()
    # rows of 33..64 on one lane where a warp's rows spread over the banks (fp32: at
    # most two lanes a bank, gcd(cols, 32) <= 2; 16-bit: at most four), else rung 07
    for prec, cols, entry, elems in (("fp32", 33, "softmax_10_row_tile", 40),
                                     ("fp32", 34, "softmax_10_row_tile", 40),
                                     ("fp32", 39, "softmax_10_row_tile", 40),
                                     ("fp32", 36, "softmax_07_any_row", 0),
                                     ("fp32", 40, "softmax_07_any_row", 0),
                                     ("fp32", 41, "softmax_10_row_tile", 64),
                                     ("fp32", 48, "softmax_07_any_row", 0),
                                     ("fp32", 63, "softmax_10_row_tile", 64),
                                     ("bf16", 37, "softmax_10_row_tile", 40),
                                     ("bf16", 40, "softmax_10_row_tile", 40),
                                     ("bf16", 65, "softmax_10_row_tile", 64),
                                     ("fp16", 48, "softmax_07_any_row", 0),
                                     ("bf16", 64, "softmax_07_any_row", 0)):
        p = sm.plan(262144, cols, prec)
        assert p.entry == entry, (prec, cols, p.describe())
        if entry == "softmax_10_row_tile":
            assert p.config.elems == elems, (prec, cols, p.describe())
            assert (p.config.row_threads == 1) == smplan.one_lane_spreads(
                cols, smr.numpy_dtype(prec).itemsize)
    # bf16 x 33 on the 32 slots of 256-thread blocks; fp32 x 33 needs the 40 slots
    assert sm.plan(262144, 33, "bf16", kernel="softmax_10_row_tile").config.elems == 32
    assert sm.plan(262144, 33, "fp32", kernel="softmax_10_row_tile").config.elems == 40


def test_plan_takes_contiguous_rows_only():
    p = sm.plan(524288, 31, "fp32", kernel="softmax_10_row_tile")
    assert p.entry == "softmax_10_row_tile" and p.grid == (524288 // 256, 1, 1)
    assert p.args("x", "y", 524288, 31) == ("x", "y", 524288, 31)
    with pytest.raises(ValueError, match="contiguous"):
        sm.plan(4, 31, "fp32", kernel="softmax_10_row_tile", ldx=32)
    # two tile buffers: the blocks walk the tiles (prepare sizes the grid to
    # what fits); one buffer: a block a tile
    for prec, cols, walks in (("bf16", 127, True), ("fp32", 9, True), ("fp32", 127, False)):
        p = sm.plan(524288, cols, prec, kernel="softmax_10_row_tile")
        assert p.config.persistent == walks == (dict(p.defines)["BUFFERS"] == 2), (prec, cols)
        assert p.config.grid(524288, 528)[0] == (528 if walks else 524288 // p.config.rows_per_block)


BUILDS = [(cfg, prec, crowded) for cfg in RUNG.configs
          for prec, crowded in (("fp32", 0), ("bf16", 0), ("fp16", 0), ("fp32", 1), ("bf16", 1),
                                ("fp16", 1))
          if not (prec == "fp32" and crowded and cfg.row_threads == 1)]   # no fp32 remedy on one lane


@pytest.mark.parametrize("cfg,prec,crowded", BUILDS,
                         ids=[f"{c.describe()}-{p}{'-crowded' * r}" for c, p, r in BUILDS])
def test_build_copies_in_16_byte_vectors_and_fits_four_blocks(cfg, prec, crowded):
    """16-byte cp.async in, 16-byte stores out (the point of the rung), no
    spills at a block's share of the registers at min_blocks (64 for four
    256-thread or eight 128-thread blocks an SM, 128 for the one lane of 64
    slots), tile buffers
    that four blocks fit in shared memory: two where two fit the 48 KB of
    static shared memory (then the next tile's copies stay in flight while
    this one is reduced: the wait leaves one group outstanding), else one."""
    b = compile_binary(RUNG.source, cfg.entry, defines={**cfg.defines(prec, 1), "CROWDED": crowded},
                       arch="sm_90")
    res = parse_resources(b.log)[b.entry]
    # a block's share of the SM's 64K registers at its min_blocks (its launch bound)
    assert (res.spill_stores, res.spill_loads, res.stack) == (0, 0, 0)
    assert res.registers <= 65536 // (cfg.threads * cfg.min_blocks)
    size = smr.numpy_dtype(prec).itemsize
    tile = cfg.rows_per_block * (cfg.capacity + (size == 2)) * size + 32
    stride = -(-tile // 128) * 128      # both buffers at one bank phase
    buffers = 2 if 2 * stride <= 48 * 1024 else 1
    assert cfg.tile_buffers(size) == buffers == dict(cfg.defines(prec, 1))["BUFFERS"]
    assert cfg.tile_stride(size) == stride
    assert res.static_smem == buffers * stride
    assert 4 * res.static_smem <= 227 * 1024
    text = sass.disassemble(b.cubin)
    assert ("DEPBAR.LE SB0, 0x1" in text) == (buffers == 2)
    assert (prec == "fp32" and cfg.threads * cfg.elems >= 8192) == (buffers == 1)   # 32-40 KiB tiles
    ops = sass.opcodes(text)
    assert any(op.startswith("LDGSTS") and op.endswith(".128") for op in ops), "16-byte cp.async"
    assert any(op.startswith("STG") and op.endswith(".128") for op in ops), "16-byte stores"
    # crowded rows on lane groups reduce the tile in 16-byte vectors
    vectors = bool(crowded) and cfg.row_threads > 1
    assert ("LDS.128" in ops and "STS.128" in ops) == vectors, "16-byte shared accesses"


def row_words(s, cols, lane, row_threads, elems):
    """The elements of a row that lane ``lane`` of its group reduces in the
    16-bit build's word path (reduce_run_words), as (element indices, byte
    ranges in the tile buffer it reads and writes): the row starts at byte s
    of the buffer (even), its whole words are read and written as 32-bit
    words, lane 0 takes the lead and tail elements alone."""
    o = (s >> 1) & 1
    base = (s & ~3) + 4 * o                  # word o of the row, 4-byte aligned
    nfull = (cols - o) >> 1
    held = (nfull - lane + row_threads - 1) // row_threads
    assert held <= elems // 2, "a lane holds more whole words than the build has slots"
    elements, spans = [], []
    for j in range(max(0, held)):
        t = lane + j * row_threads           # whole word t: elements 2t + o, 2t + 1 + o
        elements += [2 * t + o, 2 * t + 1 + o]
        spans.append((base + 4 * t, base + 4 * t + 4))
    if lane == 0 and o == 1:
        elements.append(0)
        spans.append((s, s + 2))
    if lane == 0 and (cols - o) & 1:
        elements.append(cols - 1)
        spans.append((s + 2 * (cols - 1), s + 2 * cols))
    return elements, spans


@settings(max_examples=300, deadline=None)
@given(cfg=st.sampled_from([c for c in smr.ROW_TILE_CONFIGS]), data=st.data())
def test_16_bit_word_path_takes_each_element_of_a_row_once(cfg, data):
    """Every element of the row by exactly one lane, each 32-bit access on a
    word boundary and inside the row's own bytes (a word that holds a
    neighbour's element is never written whole), for any row start."""
    rt, elems = cfg.row_threads, cfg.elems
    cols = data.draw(st.integers(1, rt * elems + 1), label="cols")   # the 16-bit capacity
    s = 2 * data.draw(st.integers(0, 64), label="start (elements)")
    seen = []
    for lane in range(rt):
        elements, spans = row_words(s, cols, lane, rt, elems)
        seen += elements
        for lo, hi in spans:
            assert s <= lo and hi <= s + 2 * cols, (lane, lo, hi)
            assert hi - lo == 2 or lo % 4 == 0
    assert sorted(seen) == list(range(cols))


def test_16_bit_word_path_bound_is_tight():
    """One element more than the 16-bit capacity, on a row that starts on a
    whole word, needs a whole word more than a lane has slots."""
    for cfg in smr.ROW_TILE_CONFIGS:
        rt, elems = cfg.row_threads, cfg.elems
        row_words(0, rt * elems + 1, 0, rt, elems)
        with pytest.raises(AssertionError, match="more whole words"):
            row_words(0, rt * elems + 2, 0, rt, elems)


def row_vectors(s, cols, lane, row_threads, elems, size=2):
    """What lane ``lane`` of a lane group takes of its crowded row in the
    vector path (reduce_run_vectors), for elements of ``size`` bytes, the row
    starting at byte s of the tile buffer (a multiple of size): (element
    indices, whole 16-byte vectors read, of them those written whole,
    elements written one by one), accesses as byte ranges of the buffer. The
    row is window elements [lo, hi) of the 16-byte vectors from s & ~15;
    vectors 1 .. nv - 2 go to the lanes in turn; the first min(row_threads,
    4) lanes share vector 0 (the first half of them) and vector nv - 1 (the
    second half, when nv > 1), 2 * vec / that many elements a lane, reading
    and writing only their elements inside the row."""
    vec = 16 // size
    win, lo = s & ~15, (s & 15) // size
    hi = lo + cols
    nv = -(-hi // vec)
    inner = elems // vec - 1
    assert nv - 2 <= row_threads * inner, "more inner vectors than a group has slots"
    elements, read, written, single = [], [], [], []
    for j in range(inner):
        q = 1 + lane + j * row_threads
        if q < nv - 1:
            elements += [vec * q + k - lo for k in range(vec)]
            read.append((win + 16 * q, win + 16 * q + 16))
            written.append(read[-1])
    edge_lanes = min(row_threads, 4)
    slots, half = 2 * vec // edge_lanes, edge_lanes // 2
    if lane < edge_lanes and (lane < half or nv > 1):
        ev = 0 if lane < half else nv - 1
        e0 = (lane if lane < half else lane - half) * slots
        ea, eb = max(lo - vec * ev, 0), min(hi - vec * ev, vec)
        mine = [k for k in range(e0, e0 + slots) if ea <= k < eb]
        elements += [vec * ev + k - lo for k in mine]
        single += [(win + 16 * ev + size * k, win + 16 * ev + size * (k + 1)) for k in mine]
        read += single[len(single) - len(mine):]
    return elements, read, written, single


LANE_GROUPS = [c for c in smr.ROW_TILE_CONFIGS if c.row_threads > 1]


@settings(max_examples=400, deadline=None)
@given(cfg=st.sampled_from(LANE_GROUPS), size=st.sampled_from([2, 4]), data=st.data())
def test_vector_path_takes_each_element_of_a_row_once(cfg, size, data):
    """Every element of the row by exactly one lane, for any row length the
    config takes crowded and any row start; every access lies inside the
    row's own bytes but the inner vectors' reads, which lie inside the
    vectors that cover the row (those the tile buffer holds)."""
    rt, elems = cfg.row_threads, cfg.elems
    cols = data.draw(st.integers(1, cfg.row_capacity(size, crowded=True)), label="cols")
    s = size * data.draw(st.integers(0, 64), label="start (elements)")
    seen = []
    for lane in range(rt):
        elements, read, written, single = row_vectors(s, cols, lane, rt, elems, size)
        seen += elements
        for a, b in written + single:
            assert s <= a and b <= s + size * cols, (lane, a, b)
        for a, b in read:
            assert (s & ~15) <= a and b <= -(-(s + size * cols) // 16) * 16
    assert sorted(seen) == list(range(cols))


def test_vector_path_bound_is_tight():
    """One element past the crowded capacity, on a row starting at the last
    element of a vector, needs an inner vector more than the group has slots."""
    for cfg in LANE_GROUPS:
        for size in (2, 4):
            rt, elems, cap = cfg.row_threads, cfg.elems, cfg.row_capacity(size, crowded=True)
            for lo in range(16 // size):
                row_vectors(size * lo, cap, 0, rt, elems, size)
            with pytest.raises(AssertionError, match="more inner vectors"):
                row_vectors(16 - size, cap + 1, 0, rt, elems, size)


def test_vector_path_model_is_the_kernel_s():
    _kernel_has("const int lo = (s & 15) / SZ, hi = lo + cols;   // the row: window elements [lo, hi)",
                "const int nv = (hi + VEC - 1) / VEC;            // window vectors",
                "constexpr int EDGE_LANES = ROW_THREADS < 4 ? ROW_THREADS : 4;",
                "constexpr int ESLOTS = 2 * VEC / EDGE_LANES;",
                "constexpr int HALF = EDGE_LANES / 2;",
                "const bool edge = live && lane < EDGE_LANES && (lane < HALF || nv > 1);",
                "const int ev = lane < HALF ? 0 : nv - 1;",
                "const int e0 = (lane < HALF ? lane : lane - HALF) * ESLOTS;",
                "const int ea = max(lo - ev * VEC, 0), eb = min(hi - ev * VEC, VEC);",
                "const int q = 1 + lane + j * ROW_THREADS;",
                "if (live && q < nv - 1)",
                "f[RVECS * VEC + k] = (edge && e0 + k >= ea && e0 + k < eb) ? to_f32(e[k]) : NEG_INF;",
                "if (e0 + k >= ea && e0 + k < eb) we[k] = from_f32(f[RVECS * VEC + k]);",
                "constexpr int RVECS = ELEMS / VEC - 1;",
                "constexpr bool kVectors = CROWDED != 0 && ROW_THREADS > 1;")


def _kernel_has(*lines):
    """The models here are written from these lines of the kernel: if they
    change, the model must be read again."""
    src = open(sources.find_source("softmax_10_row_tile.cu")).read()
    for line in lines:
        assert line in src, line


def test_16_bit_word_path_model_is_the_kernel_s():
    _kernel_has("const int o = (s >> 1) & 1;",
                "unsigned* whole = reinterpret_cast<unsigned*>(buf + (s & ~3)) + o;",
                "const int nfull = (cols - o) >> 1;",
                "const bool lead = live && lane == 0 && o == 1;",
                "const bool tail = live && lane == 0 && ((cols - o) & 1) != 0;",
                "const int held = live ? (nfull - lane + ROW_THREADS - 1) / ROW_THREADS : 0;",
                "constexpr int WORDS = ELEMS / 2;")


def slot_values(n, held, lane, group, word0, rt, rotate):
    """The kernel's Slots (softmax_10_row_tile.cu): the value index that lane
    ``lane`` of group ``group`` reads and writes in each slot j < elems, None
    where the slot is empty. ``word0``: the bank word of the row's value 0."""
    span = -(-n // rt)
    rot = 0
    if rotate:
        target = rt * (group % (32 // rt))
        rot = ((target - word0) & 31) // rt
        rot = rot % span if span > 0 else 0
    span_bits = (1 << span) - 1
    held_bits = (1 << max(0, held)) - 1
    live = held_bits if rot == 0 else ((held_bits >> rot) | (held_bits << (span - rot))) & span_bits
    wrap = span_bits & ~((1 << (span - rot)) - 1)
    first = lane + rot * rt
    late = first - span * rt
    out = []
    for j in range(32):
        if not (live >> j) & 1:
            out.append(None)
        else:
            out.append((late if (wrap >> j) & 1 else first) + j * rt)
    return out


@settings(max_examples=400, deadline=None)
@given(rt=st.sampled_from([1, 2, 4, 8, 16, 32]), data=st.data())
def test_rotated_slots_take_each_value_of_a_lane_once(rt, data):
    """Rotated or not, a lane's slots hold exactly its values lane, lane + rt,
    ... below n, each once, for any bank phase and group."""
    n = data.draw(st.integers(1, rt * 16), label="n")
    lane = data.draw(st.integers(0, rt - 1), label="lane")
    group = data.draw(st.integers(0, 255 // rt), label="group")
    word0 = data.draw(st.integers(0, 4096), label="word0")
    dead = data.draw(st.booleans(), label="dead group")
    held = 0 if dead else -(-(n - lane) // rt)
    want = sorted(range(lane, n, rt)) if not dead else []
    for rotate in (False, True):
        got = [v for v in slot_values(n, held, lane, group, word0, rt, rotate) if v is not None]
        assert sorted(got) == want, (rotate, got, want)


def _worst_bank_load(cols, rt, rotate, shift, slot):
    """The most lanes of one warp on one bank in a 16-bit row's word slot
    ``slot`` (the kernel's reduce_run_words layout: row g at byte shift + 2 g cols)."""
    per_bank = {}
    for g in range(32 // rt):
        s = shift + 2 * g * cols
        o = (s >> 1) & 1
        word0 = ((s & ~3) >> 2) + o
        nfull = (cols - o) >> 1
        for lane in range(rt):
            held = -(-(nfull - lane) // rt)
            v = slot_values(nfull, held, lane, g, word0, rt, rotate)[slot]
            if v is not None:
                per_bank.setdefault((word0 + v) & 31, set()).add(word0 + v)
    return max((len(a) for a in per_bank.values()), default=0)


@pytest.mark.parametrize("cols,rt", [(32, 1), (16, 1), (64, 1)])
def test_rotation_spreads_the_crowded_16_bit_rows(cols, rt):
    """The rows the planner rotates (their plain slots put 3+ lanes of a warp
    on a bank, plan.row_tile_crowded, as the model here finds too): rotated,
    no bank takes more than 2 lanes in the slots before any group wraps where
    a row has a slot for each of the warp's groups (the ncu figure plain: 6.5
    conflicts a load at bf16 131072 x 127); shorter rows (16 on one lane: 8
    slots for 32 groups) at most half the plain crowding."""
    assert smplan.row_tile_crowded(cols, rt)
    span = -(-(cols // 2) // rt)
    for shift in range(0, 16, 2):
        plain = _worst_bank_load(cols, rt, False, shift, 0)
        bound = 2 if span >= 32 // rt else max(2, plain // 2)
        for slot in range(4):
            assert _worst_bank_load(cols, rt, True, shift, slot) <= bound, (shift, slot, plain)


@pytest.mark.parametrize("cols", [9, 17, 31, 33])
def test_rows_the_plain_slots_spread_stay_plain(cols):
    rt = RUNG.pick(cols, (9, 0), 2).row_threads
    assert not smplan.row_tile_crowded(cols, rt)
    assert max(_worst_bank_load(cols, rt, False, shift, 0) for shift in range(0, 16, 2)) <= 2


def test_fp32_bank_model_is_the_element_slots():
    """fp32 rows: lane l of group g reads word shift / 4 + g * cols + l first
    (reduce_run), so four lanes a row put the warp's eight rows cols words
    apart: x 127 (-1 mod 32) crowds four lanes on a bank, x 96 eight, x 100
    one (the words 100 g + l, g < 8, l < 4, fall on distinct banks)."""
    for cols, lanes_a_bank in ((127, 4), (96, 8), (100, 1)):
        assert smplan.row_tile_bank_load(cols, 4, 4) == lanes_a_bank
        per_bank = {}
        for g in range(8):
            for lane in range(4):
                per_bank.setdefault((g * cols + lane) % 32, set()).add(g * cols + lane)
        assert max(len(w) for w in per_bank.values()) == lanes_a_bank   # at shift 0
    assert smplan.row_tile_crowded(127, 4, 4) and not smplan.row_tile_crowded(100, 4, 4)


def test_plan_marks_crowded_rows_only():
    """CROWDED: one 16-bit lane a row rotates its slots (64, 32), a lane group
    reads 16-byte vectors (127 on four lanes, 16-bit or fp32); rows whose
    slots spread (31, 33, 100) and fp32 rows on one lane keep the plain slots."""
    for prec, cols, crowded in (("bf16", 64, 1), ("fp16", 127, 1), ("bf16", 32, 1), ("bf16", 31, 0),
                                ("bf16", 33, 0), ("bf16", 100, 0), ("fp32", 64, 0), ("fp32", 127, 1),
                                ("fp32", 100, 0), ("fp32", 33, 0), ("fp32", 32, 0)):
        p = sm.plan(262144, cols, prec, kernel="softmax_10_row_tile")
        assert dict(p.defines)["CROWDED"] == crowded, (prec, cols)


def test_slot_model_is_the_kernel_s():
    _kernel_has("int rot = static_cast<int>((static_cast<unsigned>(target) - word0) & 31u) / ROW_THREADS;",
                "const int target = ROW_THREADS * (group % GROUPS_PER_WARP);",
                "live = rot == 0 ? held_bits : ((held_bits >> rot) | (held_bits << (span - rot))) & span_bits;",
                "wrap = span_bits & ~((1u << (span - rot)) - 1u);",
                "first = lane + rot * ROW_THREADS;",
                "late = first - span * ROW_THREADS;",
                "if constexpr (kRotate) return row + (((wrap >> j) & 1u) ? late : first) + j * ROW_THREADS;",
                "constexpr bool kRotateBuild = CROWDED != 0 && SZ == 2 && ROW_THREADS == 1;")


def test_one_lane_spreads_is_the_fp32_bank_count():
    """fp32 on one lane a row: lane l of a warp reads word cols * l + j of the
    tile, so the lanes a bank take are 32 over the distinct banks of cols * l;
    the planner's rule (gcd(cols, 32) <= 2) is that count at most two."""
    for cols in range(9, 130):
        lanes_a_bank = 32 // len({(cols * lane) % 32 for lane in range(32)})
        assert smplan.one_lane_spreads(cols, 4) == (lanes_a_bank <= 2), cols
    assert smplan.one_lane_spreads(33, 4) and not smplan.one_lane_spreads(48, 4)
    # 16-bit: the word path's bank model, at most four lanes a bank
    assert [c for c in range(34, 66) if not smplan.one_lane_spreads(c, 2)] == [48, 64]
    assert smplan.row_tile_bank_load(40, 1) == 4 and smplan.row_tile_bank_load(64, 1) == 32
