"""Every registered rung against a float64 reference, for hypothesis-drawn
cases (tests/gemm_cases.py: shapes from the rung's tile and alignment, each
alignment class on purpose, most cases small, a few with K up to 16384):
exact mode (small integers, must match exactly), random mode (the K-dependent
bound of gemm_check), C poisoned with NaN -- in host mode too -- and guarded
by sentinels before and after it, beta = 0 with NaN in C, beta != 0, host
and device operands, offset views for misaligned pointers.

Then what a property test does not reach: K = 0, streams, threads, device
memory over many calls, M*N >= 2^31, and repeated launches that must give
identical bits.

Under HYPOTHESIS_PROFILE=gpu every rung gets at least 200 cases (the profile's
max_examples; GEMM_EXAMPLES overrides). The run's seed is GEMM_SEED (random
when unset) and every failure says how to replay it."""
from __future__ import annotations

import contextlib
import os
import random
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

import drvgemm
from drvgemm.ladders.gemm import dispatch as ladder
from drvgemm.ladders.gemm.registry import RUNGS, SIMT_SPLITS
from drvgemm.runtime import driver
from drvgemm.runtime.driver import DeviceArray

from gemm_cases import Case, cases, expects_aligned
from gemm_check import check, inputs

pytestmark = pytest.mark.gpu

RUN_SEED = int(os.environ.get("GEMM_SEED") or random.SystemRandom().randrange(2**32))
SENTINEL = 0xA5           # guard bytes
POISON = 0xFF             # C before the kernel: NaN in fp32, bf16 and fp16
GUARD_BEFORE = 256        # elements: keeps C 16-byte aligned for every element type


def replay(name, case=None):
    what = f"; case: {case}" if case is not None else ""
    return (f"replay: GEMM_SEED={RUN_SEED} HYPOTHESIS_PROFILE=gpu python -m pytest "
            f"tests/test_gemm_gpu.py -k '{name}'{what}")


def runnable(r):
    return ladder.device_arch_ok(r)


def need(gpu, name):
    r = ladder.rung(name)
    if not runnable(r):
        pytest.skip(f"{name} needs {r.arch}, device is {gpu.arch}")
    return r


# ---------------------------------------------------------------------------
# guarded, poisoned device buffers
# ---------------------------------------------------------------------------
class Guarded:
    """An (m, n) array inside a larger allocation: ``before`` + ``shift``
    elements ahead of it and ``after`` behind it hold SENTINEL bytes, the
    array itself POISON bytes; ``check()`` says whether a kernel wrote
    outside it."""

    def __init__(self, shape, dtype, *, before=GUARD_BEFORE, after=None, shift=0, tile_rows=256):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        m, n = self.shape
        # a row past the end of C, plus a tile's overhang, lands in the guard
        self.after = min(tile_rows * max(n, 1) + 1024, 1 << 22) if after is None else after
        self.lead = before + shift
        total = self.lead + m * n + self.after
        self.base = driver.empty((total,), self.dtype)
        self.base.fill_bytes(SENTINEL)
        isz = self.dtype.itemsize
        self.view = DeviceArray(self.shape, self.dtype, ptr=self.base.ptr + self.lead * isz,
                                owner=False)
        if m * n:
            driver.memset_d8_async(self.view.ptr, POISON, m * n * isz)
        driver.synchronize()

    def fill(self, host):
        self.view.copy_from_host(np.ascontiguousarray(host, self.dtype))
        return self

    def check(self, label):
        raw = self.base.to_host().view(np.uint8)
        isz = self.dtype.itemsize
        head = raw[:self.lead * isz]
        tail = raw[(self.lead + int(np.prod(self.shape))) * isz:]
        for where, part, first in (("before", head, 0),
                                   ("after", tail, self.lead + int(np.prod(self.shape)))):
            bad = np.flatnonzero(part != SENTINEL)
            if bad.size:
                i = first + bad[0] // isz
                raise AssertionError(
                    f"{label}: {bad.size} byte(s) written {where} C (first at element "
                    f"{i - self.lead} relative to C's start, C is {self.shape[0]}x"
                    f"{self.shape[1]})")

    def free(self):
        self.base.free()


@contextlib.contextmanager
def poisoned_allocations(tile_rows=256):
    """Every driver.empty() inside the block (gemm()'s own C in host mode, and
    any scratch) comes back poisoned and guarded; on exit the guards of all of
    them are checked. Yields the list of Guarded buffers."""
    made = []
    real = driver.empty

    def empty(shape, dtype=np.float32):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if len(shape) != 2:
            return real(shape, dtype)
        g = Guarded(shape, dtype, tile_rows=tile_rows)
        made.append(g)
        return g.view

    driver.empty = empty
    try:
        yield made
    finally:
        driver.empty = real


def operand(host, shift=0):
    """A device copy of ``host``, ``shift`` elements into a larger buffer
    (an offset view: its address is not 16-byte aligned for shift 1-3)."""
    if not shift:
        return drvgemm.to_device(host), None
    base = driver.empty((host.size + shift + 16,), host.dtype)
    view = DeviceArray(host.shape, host.dtype, ptr=base.ptr + shift * host.dtype.itemsize,
                       owner=False)
    view.copy_from_host(host)
    return view, base


# ---------------------------------------------------------------------------
# one case
# ---------------------------------------------------------------------------
def run_case(r, case: Case, label):
    a, b, c0 = inputs(r.precision, case.m, case.n, case.k, case.seed, case.mode)
    alpha = 2.0 if case.mode == "exact" else 1.0
    beta = case.beta
    tile_rows = r.tile_m
    if case.on_device:
        A, a_base = operand(a, case.shift if case.shifted == "A" else 0)
        B, b_base = operand(b, case.shift if case.shifted == "B" else 0)
        C = Guarded((case.m, case.n), np.float32, tile_rows=tile_rows,
                    shift=case.shift if case.shifted == "C" else 0)
        if beta != 0:
            C.fill(c0)                  # beta = 0: C stays NaN and must never be read
        if r.host_side.unaligned:        # a host side with two instantiations
            picked = r.host_side.aligned(r, case.m, case.n, case.k, A.ptr, B.ptr, C.view.ptr)
            assert picked == expects_aligned(r, case), \
                f"{label}: the case does not reach the instantiation it means"
        drvgemm.gemm(A, B, C.view, alpha=alpha, beta=beta, kernel=r.name)
        driver.synchronize()
        out = C.view.to_host()
        C.check(label)
        for x in (C, a_base, b_base):
            if x is not None:
                x.free()
    else:
        c_in = c0.copy() if beta != 0 else np.full((case.m, case.n), np.nan, np.float32)
        with poisoned_allocations(tile_rows) as made:
            out = drvgemm.gemm(a, b, c_in, alpha=alpha, beta=beta, kernel=r.name)
        for g in made:
            g.check(label)
            g.free()
    check(out, a, b, c0, alpha, beta, precision=r.precision, mode=case.mode, label=label,
          u_in=r.input_roundoff or None)


# ---------------------------------------------------------------------------
# the property
# ---------------------------------------------------------------------------
def _examples():
    n = os.environ.get("GEMM_EXAMPLES")
    return {} if n is None else {"max_examples": int(n)}


@pytest.mark.parametrize("name", [r.name for r in RUNGS])
def test_rung_property(gpu, name):
    r = need(gpu, name)
    started = time.monotonic()
    count = [0]

    @seed(RUN_SEED)
    @settings(deadline=None, suppress_health_check=list(HealthCheck), **_examples())
    @given(case=cases(r))
    def prop(case):
        count[0] += 1
        label = f"{r.name} [{case}]"
        try:
            run_case(r, case, label)
        except Exception as e:
            e.add_note(replay(f"test_rung_property and {name}", case))
            raise

    prop()
    print(f"{name}: {count[0]} cases in {time.monotonic() - started:.1f} s (seed {RUN_SEED})")


@pytest.mark.parametrize("name", [r.name for r in RUNGS])
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (2048, 257, 4099),
                                   (128, 264, 16384)])
def test_rung_large_shapes(gpu, name, shape):
    r = need(gpu, name)
    m, n, k = shape
    case = Case(m, n, k, "any", "", 0, "random", 0.0, True, m + n + k)
    run_case(r, case, f"{name} [{case}]")


# ---------------------------------------------------------------------------
# rung 30's fp32 unaligned stream copies the aligned 16-byte blocks around
# each B row's columns and reads them back at the row's shift: B 1-3
# elements into its buffer, N % 4 of 1, 2, 3 (and 0), K % 4 != 0 (the last
# step's rows past K), a warp's 128 columns past N, split K on the long ones.
# The buffer around B is NaN: a copy that was not clipped at B's end (rows
# past K meet A's zeros, and 0 * NaN reaches C), or a shift that read the
# elements before B, shows in C.
# ---------------------------------------------------------------------------
SHIFTED_FP32 = [(1, 1, 1), (3, 5, 7), (2, 130, 9), (1, 4097, 4099), (16, 131, 1031),
                (17, 129, 2050), (31, 4097, 4099), (64, 257, 2051), (5, 4096, 4098)]


@pytest.mark.parametrize("shift", [1, 2, 3])
@pytest.mark.parametrize("shape", SHIFTED_FP32, ids=lambda s: "x".join(map(str, s)))
def test_small_m_fp32_shifted_stream(gpu, shape, shift):
    r = need(gpu, "30_small_m_fp32")
    m, n, k = shape
    for mode, beta, seed_ in (("exact", 0.0, 1), ("random", -0.5, 2)):
        a, b, c0 = inputs("fp32", m, n, k, seed_ + shift, mode)
        base = drvgemm.to_device(np.full(b.size + shift + 16, np.nan, np.float32))
        B = DeviceArray(b.shape, b.dtype, ptr=base.ptr + 4 * shift, owner=False)
        B.copy_from_host(b)
        A = drvgemm.to_device(a)
        C = Guarded((m, n), np.float32, tile_rows=r.tile_m)
        if beta != 0:
            C.fill(c0)
        assert not r.host_side.aligned(r, m, n, k, A.ptr, B.ptr, C.view.ptr)
        label = f"{r.name} {m}x{n}x{k} B+{shift} {mode}"
        drvgemm.gemm(A, B, C.view, alpha=2.0, beta=beta, kernel=r.name)
        driver.synchronize()
        out = C.view.to_host()
        C.check(label)
        check(out, a, b, c0, 2.0, beta, precision="fp32", mode=mode, label=label)
        C.free()
        base.free()


# ---------------------------------------------------------------------------
# K = 0: C = beta * C, and with beta = 0 the NaN in C is not read
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", [r.name for r in RUNGS])
def test_k_zero_gives_beta_c(gpu, name):
    r = need(gpu, name)
    dt = ladder.input_dtype(r.precision)
    m, n = 37, 61
    a, b = np.zeros((m, 0), dt), np.zeros((0, n), dt)
    c0 = np.arange(m * n, dtype=np.float32).reshape(m, n)
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    # device C holding NaN, beta = 0: zeros, and nothing outside C written
    C = Guarded((m, n), np.float32, tile_rows=r.tile_m)
    drvgemm.gemm(A, B, C.view, beta=0.0, kernel=name)
    driver.synchronize()
    np.testing.assert_array_equal(C.view.to_host(), np.zeros((m, n), np.float32))
    C.check(f"{name} K=0 beta=0")
    # device C, beta = 3
    C = Guarded((m, n), np.float32, tile_rows=r.tile_m).fill(c0)
    drvgemm.gemm(A, B, C.view, beta=3.0, kernel=name)
    driver.synchronize()
    np.testing.assert_array_equal(C.view.to_host(), 3.0 * c0)
    C.check(f"{name} K=0 beta=3")
    # host operands, beta = 0: gemm()'s own C starts poisoned
    with poisoned_allocations(r.tile_m) as made:
        out = drvgemm.gemm(a, b, np.full((m, n), np.nan, np.float32), beta=0.0, kernel=name)
    np.testing.assert_array_equal(out, np.zeros((m, n), np.float32))
    assert any(g.shape == (m, n) for g in made), "host mode allocated no C on the device"
    for g in made:
        g.check(f"{name} K=0 host")
    # empty M or N
    assert drvgemm.gemm(np.ones((0, 3), dt), np.ones((3, 4), dt), kernel=name).shape == (0, 4)


def test_host_mode_poisons_the_fresh_c(gpu, monkeypatch):
    """The poisoning of host mode is real: a C that gemm() did not write
    comes back NaN (the launch replaced by nothing)."""
    import drvgemm.ladders.gemm.dispatch as d
    if not hasattr(d, "launch_config"):
        pytest.skip("the dispatcher launches through another name")
    r = next(x for x in RUNGS if runnable(x) and x.precision == "fp32")
    monkeypatch.setattr(d, "launch_config", lambda *args, **kw: None)
    with poisoned_allocations():
        out = drvgemm.gemm(np.ones((8, 4), np.float32), np.ones((4, 8), np.float32),
                           kernel=r.name)
    assert np.isnan(out).all()


# ---------------------------------------------------------------------------
# streams, threads, memory
# ---------------------------------------------------------------------------
def test_gemm_on_a_busy_stream_is_ordered(gpu):
    """Two products on one non-blocking stream, the second reading the
    first's output: the second must see it complete (the stream orders
    them), with device and with host operands."""
    fp32 = "08_warp_tiled"   # the SIMT flagship: the 2048^2 products are a few ms of work
    rng = np.random.default_rng(11)
    big = 2048        # entries in {-1, 0, 1}: every sum below is exact in fp32
    a = rng.integers(-1, 2, (big, big)).astype(np.float32)
    b = rng.integers(-1, 2, (big, big)).astype(np.float32)
    b2 = rng.integers(-1, 2, (big, 8)).astype(np.float32)
    s = drvgemm.Stream()
    try:
        A, B, B2 = drvgemm.to_device(a), drvgemm.to_device(b), drvgemm.to_device(b2)
        C1 = driver.empty((big, big))
        C1.fill_bytes(POISON)
        driver.synchronize()
        C2 = driver.empty((big, 8))
        drvgemm.gemm(A, B, C1, kernel=fp32, stream=s)     # a few ms of work
        drvgemm.gemm(C1, B2, C2, kernel=fp32, stream=s)   # reads C1
        s.synchronize()
        c1 = a.astype(np.float64) @ b
        np.testing.assert_array_equal(C2.to_host(), (c1 @ b2).astype(np.float32))
        # host operands on the busy stream
        drvgemm.gemm(A, B, C1, kernel=fp32, stream=s)
        a_s, b_s = np.ascontiguousarray(a[:300, :200]), np.ascontiguousarray(b[:200, :100])
        out = drvgemm.gemm(a_s, b_s, kernel=fp32, stream=s)
        np.testing.assert_array_equal(out, (a_s.astype(np.float64) @ b_s).astype(np.float32))
        s.synchronize()
    finally:
        s.close()


def test_gemm_from_several_threads(gpu):
    rungs = [r for r in RUNGS if runnable(r)]
    errors = []

    def work(t):
        try:
            rng = np.random.default_rng(t)
            for i in range(12):
                r = rungs[(t + i) % len(rungs)]
                m, n, k = (int(x) for x in rng.integers(1, 300, 3))
                a, b, c0 = inputs(r.precision, m, n, k, t * 100 + i, "exact")
                out = drvgemm.gemm(a, b, kernel=r.name)
                check(out, a, b, c0, 1.0, 0.0, precision=r.precision, mode="exact",
                      label=f"{r.name} thread {t} call {i}")
        except Exception as e:          # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads), "a gemm() thread hung"
    assert not errors, errors[0]


@pytest.mark.parametrize("name", [r.name for r in RUNGS])
def test_repeated_calls_do_not_grow_device_memory(gpu, name, monkeypatch):
    """200 calls, half of them on a stream of their own: device memory in
    use afterwards is what it was before (per-call or per-stream buffers
    are given back). Counted twice: what this process's cuMemAlloc calls of
    the 200 calls still hold, and, when no other pytest-xdist worker shares
    the GPU, the device's free memory (which also sees what the driver
    keeps for a stream; under xdist the other workers' allocations move it)."""
    from cuda.bindings import driver as cu
    held, real_alloc, real_free = {}, cu.cuMemAlloc, cu.cuMemFree

    def counting_alloc(nbytes):
        err, ptr = real_alloc(nbytes)
        held[int(ptr)] = int(nbytes)
        return err, ptr

    def counting_free(ptr):
        held.pop(int(ptr), None)
        return real_free(ptr)

    r = need(gpu, name)
    a, b, _ = inputs(r.precision, 129, 136, 72, 3, "exact")
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C = driver.empty((129, 136))
    for _ in range(3):                   # compile, load, first-launch set-up
        drvgemm.gemm(A, B, C, kernel=name)
        drvgemm.gemm(a, b, kernel=name)
    driver.synchronize()
    free_before = driver.memory_info()[0]
    monkeypatch.setattr(cu, "cuMemAlloc", counting_alloc)
    monkeypatch.setattr(cu, "cuMemFree", counting_free)
    for i in range(200):
        if i % 2:
            s = drvgemm.Stream()
            drvgemm.gemm(A, B, C, kernel=name, stream=s)
            s.synchronize()
            s.close()
        else:
            drvgemm.gemm(a, b, kernel=name)
    driver.synchronize()
    monkeypatch.undo()
    # a buffer made once on first need (a workspace grown to this shape) may
    # stay; one a call or a stream would leave ~100 or 200
    kept = sum(held.values())
    assert len(held) <= 4 and kept < 8 << 20, \
        f"{name}: 200 calls kept {len(held)} cuMemAlloc blocks, {kept / 2**20:.1f} MiB"
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        grown = free_before - driver.memory_info()[0]
        assert grown < 8 << 20, f"{name}: 200 calls kept {grown / 2**20:.1f} MiB of device memory"


# ---------------------------------------------------------------------------
# M * N >= 2^31
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["01_naive", "08_warp_tiled", "12_mma_bf16",
                                  "20_tma_wgmma_bf16"])
def test_c_of_more_than_2_to_the_31_elements(gpu, name):
    """M = 2^16 + 1, N = 2^15, K = 1: C has 2^31 + 2^15 elements (8 GiB of
    fp32); its last row starts exactly at element 2^31. Rows on both sides
    of that boundary, and the guard after C, are checked."""
    if name not in ladder.kernels():
        pytest.skip(f"{name} is not registered")
    r = need(gpu, name)
    m, n = (1 << 16) + 1, 1 << 15
    if driver.memory_info()[0] < (m * n * 4 + (2 << 30)):
        pytest.skip("not enough free device memory for an 8 GiB C")
    dt = ladder.input_dtype(r.precision)
    a = ((np.arange(m) % 7) - 3).astype(np.float32).reshape(m, 1)
    b = ((np.arange(n) % 5) - 2).astype(np.float32).reshape(1, n)
    A, B = drvgemm.to_device(a.astype(dt)), drvgemm.to_device(b.astype(dt))
    C = Guarded((m, n), np.float32, after=1 << 20)
    try:
        drvgemm.gemm(A, B, C.view, kernel=name)
        driver.synchronize()
        for row in (0, 1, (1 << 16) - 1, 1 << 16):
            got = DeviceArray((1, n), np.float32, ptr=C.view.ptr + row * n * 4,
                              owner=False).to_host()
            np.testing.assert_array_equal(got[0], a[row, 0] * b[0], err_msg=f"{name} row {row}")
        tail = DeviceArray((1 << 20,), np.uint8, ptr=C.view.ptr + m * n * 4,
                           owner=False).to_host()
        assert (tail == SENTINEL).all(), f"{name}: written past the end of an 8 GiB C"
    finally:
        C.free()


# ---------------------------------------------------------------------------
# races: the same launch many times, identical bits
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", [r.name for r in RUNGS])
@pytest.mark.parametrize("shape", [(131, 67, 251), (257, 264, 520)])
def test_fifty_launches_give_identical_bits(gpu, name, shape):
    """A race (a missing barrier, a stage reused too early) shows as results
    that differ from launch to launch; compute-sanitizer's racecheck runs
    outside pytest."""
    r = need(gpu, name)
    m, n, k = shape
    a, b, c0 = inputs(r.precision, m, n, k, 5, "random")
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C = driver.empty((m, n))
    first = None
    for i in range(50):
        C.fill_bytes(POISON)
        drvgemm.gemm(A, B, C, kernel=name)
        out = C.to_host()
        if first is None:
            check(out, a, b, c0, 1.0, 0.0, precision=r.precision, mode="random",
                  label=f"{name} {shape}", u_in=r.input_roundoff or None)
            first = out.view(np.uint32).copy()
        else:
            diff = np.flatnonzero(out.view(np.uint32) != first)
            assert diff.size == 0, (f"{name} {shape}: launch {i} differs from the first in "
                                    f"{diff.size} elements (first at {divmod(diff[0], n)})")


# ---------------------------------------------------------------------------
# split-K of the plain (SIMT) rungs: every split count through the rung's own
# launches, the workspace poisoned with NaN (a slice left unwritten reaches C)
# and guarded, C guarded; aligned and unaligned instantiations
# ---------------------------------------------------------------------------
SPLIT_PLAIN = [r.name for r in RUNGS if r.host == "" and r.has_split_k_build]
WS_GUARD = 1024


def split_operands(r, a, b, c_init, beta):
    """(m, n, k, A, B, C) of a split-K launch: A and B on the device, C guarded
    (and holding c_init where beta reads it)."""
    m, k = a.shape
    n = b.shape[1]
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C = Guarded((m, n), np.float32, tile_rows=r.tile_m)
    if beta != 0:
        C.fill(c_init)
    return m, n, k, A, B, C


def run_plain_split(r, a, b, c_init, alpha, beta, split, label):
    from drvgemm.ladders.gemm.registry import rung_kernel
    from drvgemm.runtime.launch import launch
    m, n, k, A, B, C = split_operands(r, a, b, c_init, beta)
    floats = r.workspace_bytes(m, n, split) // 4
    ws_host = np.full(floats + WS_GUARD, np.nan, np.float32)
    ws_host.view(np.uint32)[floats:] = 0xA5A5A5A5
    ws_buf = drvgemm.to_device(ws_host)
    aligned = r.host_side.aligned(r, m, n, k, A.ptr, B.ptr, C.view.ptr)
    pieces = min(split, -(-k // int(r.defines["BK"])))
    assert r.host_side.split_k_build(r, k, split) == (pieces > 1)
    kernel = rung_kernel(r, aligned, split_k=pieces > 1)
    steps = r.launches(kernel, A, B, C.view, m, n, k, alpha, beta, split=split,
                       workspace=ws_buf.ptr)
    assert len(steps) == (2 if pieces > 1 else 1) and (pieces == 1 or steps[0][1].grid[2] == pieces)
    for kern, cfg in steps:
        launch(kern, cfg.grid, cfg.block, cfg.args, smem=cfg.smem)
    driver.synchronize()
    tail = ws_buf.to_host().view(np.uint32)[floats:]
    assert np.all(tail == 0xA5A5A5A5), f"{label}: wrote past the workspace"
    C.check(label)
    return C.view.to_host()


@pytest.mark.parametrize("name", SPLIT_PLAIN)
def test_plain_split_k_every_split_count(gpu, name):
    """Each split count of registry.SIMT_SPLITS: edge tiles on both sides, K not a multiple
    of BK (pieces of unequal length, the partial k-tile in piece 0), both
    instantiations (K and N multiples of 4 or not); beta = 0 with NaN in C
    and beta != 0; exact integers, then random data against the bound."""
    r = need(gpu, name)
    for m, n, k in ((r.tile_m + 1, 2 * r.tile_n - 1, 1001), (r.tile_m - 3, r.tile_n + 4, 2052)):
        for split in SIMT_SPLITS[1:]:
            for beta, mode in ((0.0, "exact"), (0.5, "random")):
                a, b, c0 = inputs(r.precision, m, n, k, split + m, mode)
                alpha = 2.0 if mode == "exact" else -0.75
                label = f"{name} {m}x{n}x{k} split={split} beta={beta} {mode}"
                out = run_plain_split(r, a, b, c0, alpha, beta, split, label)
                check(out, a, b, c0, alpha, beta, precision=r.precision, mode=mode, label=label)


@pytest.mark.parametrize("name", SPLIT_PLAIN)
def test_plain_split_k_few_k_tiles_and_determinism(gpu, name):
    """K of fewer k-tiles than the split asked (clamped to one piece per
    k-tile), K = 1; and two runs of one split give the same bits."""
    r = need(gpu, name)
    for k in (1, 7, 9, 24):
        a, b, c0 = inputs(r.precision, 70, 90, k, k, "exact")
        out = run_plain_split(r, a, b, c0, 1.0, 0.0, 64, f"{name} K={k} split=64")
        check(out, a, b, c0, 1.0, 0.0, precision=r.precision, mode="exact", label=f"K={k}")
    a, b, c0 = inputs(r.precision, 300, 260, 5000, 3, "random")
    first = run_plain_split(r, a, b, c0, 0.75, 0.5, 12, f"{name} split=12 (1)")
    second = run_plain_split(r, a, b, c0, 0.75, 0.5, 12, f"{name} split=12 (2)")
    assert np.array_equal(first.view(np.uint32), second.view(np.uint32)), f"{name}: runs differ"
    check(first, a, b, c0, 0.75, 0.5, precision=r.precision, mode="random", label=f"{name} split=12")


# ---------------------------------------------------------------------------
# split-K of rung 30 (small M): split counts on both sides of the two-level
# reduction (ONE_LEVEL_MAX_SPLITS), up to MAX_SPLITS, through the host side's
# own launch; the workspace guarded and left all zero, C guarded, the same
# bits on a second run
# ---------------------------------------------------------------------------
SPLIT_SMALL_M = ["30_small_m_bf16", "30_small_m_fp16_r32", "30_small_m_bf16_r64",
                 "30_small_m_fp32"]


def run_small_m_split(r, a, b, c_init, alpha, beta, split, label):
    from drvgemm.ladders.gemm import small_m
    from drvgemm.ladders.gemm.registry import rung_kernel
    from drvgemm.runtime.launch import launch
    m, n, k, A, B, C = split_operands(r, a, b, c_init, beta)
    host = small_m.SMALL_M
    assert split in host.split_counts(r, m, n, k), f"{label}: {split} is not offered"
    nbytes = host.workspace_bytes(r, m, n, split)
    ws_host = np.zeros(nbytes + 4 * WS_GUARD, np.uint8)
    ws_host[nbytes:] = 0xA5
    ws_buf = drvgemm.to_device(ws_host)
    aligned = host.aligned(r, m, n, k, A.ptr, B.ptr, C.view.ptr)
    kernel = rung_kernel(r, aligned)
    [(kern, cfg)] = host.launches(r, kernel, A, B, C.view, m, n, k, alpha, beta, split=split,
                                  workspace=ws_buf.ptr)
    launch(kern, cfg.grid, cfg.block, cfg.args, smem=cfg.smem)
    driver.synchronize()
    after = ws_buf.to_host()
    assert np.all(after[nbytes:] == 0xA5), f"{label}: wrote past the workspace"
    assert not after[:nbytes].any(), f"{label}: the workspace is not left all zero"
    C.check(label)
    return C.view.to_host()


@pytest.mark.parametrize("name", SPLIT_SMALL_M)
def test_small_m_split_k_one_and_two_levels(gpu, name):
    """Split counts from 2 to 512 (one reduction level up to 32, groups of
    8 .. 32 beyond, a short last group included), N narrower than a strip
    and across strips, K not a multiple of the k step; beta = 0 with NaN in
    C and beta != 0; exact integers where the K allows, random data against
    the bound; a second run gives the same bits."""
    r = need(gpu, name)
    rows = int(r.defines["ROWS"])
    kstep = 4 if r.precision == "fp32" else 16
    per_split = 4 * 4 * kstep          # the fewest rows of K a split may hold
    for split in (2, 31, 33, 40, 64, 96, 128, 192, 256, 512):
        for m, n in ((min(rows, 5), 40), (rows, 3 * r.tile_n + 7)):
            k = split * per_split - 3      # the last split 3 rows short
            mode = "exact" if r.precision == "fp32" or k <= 4096 else "random"
            for beta in (0.0, 0.5):
                a, b, c0 = inputs(r.precision, m, n, k, split + m + int(beta), mode)
                label = f"{name} {m}x{n}x{k} split={split} beta={beta} {mode}"
                out = run_small_m_split(r, a, b, c0, 1.5, beta, split, label)
                check(out, a, b, c0, 1.5, beta, precision=r.precision, mode=mode, label=label)
                if beta == 0.0:
                    again = run_small_m_split(r, a, b, c0, 1.5, beta, split, label + " (2)")
                    assert np.array_equal(out.view(np.uint32), again.view(np.uint32)), \
                        f"{label}: a second run differs"


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
