"""Softmax rung 11 (cu/softmax/softmax_11_any_row_pipelined.cu) without a GPU:
the address arithmetic of its bulk copies and of the patches that make a
row's peel and tail whole.

``row_accesses`` follows the kernel for one row and one block of its cluster,
in bytes: which 16-byte vectors the block's bulk copy brings into its landing
buffer (``copied_vectors`` and the fill), which vectors the reader then
patches (``row_span`` / ``patch_vector``: the peel and the tail) and which
elements of those it reads from global memory. The tests hold it to what the
kernel relies on, for any rows, cols, row pitch, element size and offset of x:
every copy inside the array and 16-byte aligned; every vector the copy does
not bring is one the patch handles (a whole vector left out would be read as
stale shared memory); every element of the row reaches exactly one slot of
one block; nothing is read from global memory outside the row. Three mutants
of the arithmetic fail them."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from drvgemm.ladders.softmax import registry as smr


def row_accesses(row, rows, cols, ld, size, xb, rank, slice_vectors, *, mutant=None):
    """(copy, patched, global_elems, slots, span) of one row for block
    ``rank``: copy = (src byte, bytes) or None; patched = window vectors
    patched; global_elems = byte addresses read one by one; slots = (first
    buffer slot, last + 1, first element of the row, last + 1) that the
    block's registers get out of its buffer, or None; span = (copied begin,
    end, window vectors, whole begin, whole end)."""
    w = 16 // size
    xr = xb + row * ld * size
    lo = (xr & 15) // size
    xw = xr - lo * size
    hi = lo + cols
    nv = (hi + w - 1) // w
    x_end = xb + ((rows - 1) * ld + cols) * size
    # copied_vectors
    begin = 0 if xw >= xb else 1
    end = nv if xw + nv * 16 <= x_end else nv - 1
    if mutant == "copy_every_vector":
        begin, end = 0, nv
    # the fill
    first = rank * slice_vectors
    v0, v1 = max(begin, first), min(end, first + slice_vectors)
    copy = (xw + v0 * 16, (v1 - v0) * 16) if v1 > v0 else None
    # row_span and the two patches
    whole_begin, whole_end = (1 if lo > 0 else 0), hi // w
    if mutant == "no_tail_patch":
        targets = [0] if whole_begin > 0 else []
    else:
        targets = ([0] if whole_begin > 0 else []) + \
            ([whole_end] if whole_begin <= whole_end < nv else [])
    patched, global_elems = [], []
    for v in targets:
        if not first <= v < first + slice_vectors:
            continue
        patched.append(v)
        if not begin <= v < end:     # not copied: the row's elements from global memory
            global_elems += [xw + (v * w + k) * size for k in range(w) if lo <= v * w + k < hi]
    # the read: every vector of the slice below nv out of its slot, as ranges:
    # (first slot, last slot + 1, first element of the row, last + 1)
    va, vb = first, min(nv, first + slice_vectors)
    base = v0 if mutant == "read_from_copy_start" else first
    slots = None
    if vb > va:
        slots = (va - base, vb - base, max(lo, va * w) - lo, min(hi, vb * w) - lo)
    return copy, patched, global_elems, slots, (begin, end, nv, whole_begin, whole_end)


def check_row(row, rows, cols, ld, size, xb, cluster, slice_vectors, mutant=None):
    x_end = xb + ((rows - 1) * ld + cols) * size
    xr = xb + row * ld * size
    covered = []
    for rank in range(cluster):
        copy, patched, global_elems, slots, (begin, end, nv, wb, we) = row_accesses(
            row, rows, cols, ld, size, xb, rank, slice_vectors, mutant=mutant)
        assert nv <= cluster * slice_vectors, "the window must fit the cluster"
        if copy is not None:
            src, n = copy
            assert src % 16 == 0 and n % 16 == 0 and n > 0, copy
            assert xb <= src and src + n <= x_end, f"copy {copy} outside [{xb}, {x_end})"
        first = rank * slice_vectors
        partial = ({0} if wb > 0 else set()) | ({we} if we < nv else set())
        for v in range(first, min(nv, first + slice_vectors)):
            if v in partial:
                assert v in patched, f"partial vector {v} read with its neighbours' bytes"
            if not begin <= v < end:
                assert v in patched, f"vector {v} neither copied nor patched"
        for a in global_elems:
            assert xr <= a < xr + cols * size, f"global read {a} outside the row"
        if slots is not None:
            s0, s1, e0, e1 = slots
            assert 0 <= s0 < s1 <= slice_vectors, f"slots {slots} outside the buffer"
            if e1 > e0:
                covered.append((e0, e1))
    covered.sort()
    assert covered and covered[0][0] == 0 and covered[-1][1] == cols, covered
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:])), \
        f"elements of the row in no block or in two: {covered}"


CONFIGS = [c for c in smr.WINDOW_CONFIGS if c.kind == "pipelined"]


def _cases():
    out = []
    for c in CONFIGS:
        size = 4 if c.vec == 4 else 2
        w = c.vec
        longest = c.window * w - (w - 1)
        for cols in (1, 2, w - 1, w + 1, 1000, longest - 1, longest):
            for off in sorted({0, 1, w - 1}):
                for pad in (0, 3):
                    out.append(pytest.param(c, size, cols, off, pad,
                                            id=f"{c.threads}x{c.items}x{c.cluster}-v{w}-"
                                               f"{cols}-off{off}-pad{pad}"))
    return out


@pytest.mark.parametrize("cfg,size,cols,off,pad", _cases())
def test_every_registered_config_at_its_edges(cfg, size, cols, off, pad):
    rows = 5
    ld = cols + pad
    xb = 4096 + off * size           # the array starts `off` elements past 16 bytes
    slice_vectors = cfg.threads * cfg.items
    for row in range(rows):
        check_row(row, rows, cols, ld, size, xb, cfg.cluster, slice_vectors)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(rows=st.integers(1, 6), cols=st.integers(1, 3000), pad=st.integers(0, 40),
       off=st.integers(0, 7), size=st.sampled_from([2, 4]), cluster=st.integers(2, 8),
       slice_vectors=st.sampled_from([1, 2, 7, 32, 256]))
def test_any_shape_pitch_and_offset(rows, cols, pad, off, size, cluster, slice_vectors):
    w = 16 // size
    off %= w
    if (cols + w - 1 + w - 1) // w > cluster * slice_vectors:
        return                           # the planner never gives this config such a row
    xb = 1 << 20 | off * size
    for row in range(rows):
        check_row(row, rows, cols, cols + pad, size, xb, cluster, slice_vectors)


@pytest.mark.parametrize("mutant", ["copy_every_vector", "no_tail_patch", "read_from_copy_start"])
def test_mutants_of_the_arithmetic_fail(mutant):
    """Copying the vectors that reach outside the array, forgetting the tail's
    patch, or reading slots from the copy's start instead of the slice's:
    each is caught on some shape."""
    caught = False
    for size in (2, 4):
        w = 16 // size
        for cols in (1, 5, 13, 100, 1001):
            for off in range(w):
                for pad in (0, 3):
                    try:
                        for row in range(3):
                            check_row(row, 3, cols, cols + pad, size, 4096 + off * size, 2, 64,
                                      mutant=mutant)
                    except AssertionError:
                        caught = True
    assert caught, mutant
