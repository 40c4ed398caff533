"""The TMA + wgmma rung on the GPU (sm_90): every M, N, K >= 1, exact-integer
and random inputs, C poisoned with NaN, beta = 0 and beta != 0, guard zones
around C, misaligned operands (staged copies), each build step of the rung
(tma only, warp-specialised, persistent, clusters) and each tuning knob
(dynamic scheduler, unit order, TMA-store epilogue, ...), with a grid small
enough that every block walks many tiles."""
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import drvgemm
from drvgemm.ladders.gemm import dispatch as ladder
from drvgemm.ladders.gemm import hopper as rung20  # 'hopper' is this file's device fixture
from drvgemm.ladders.gemm import registry
from drvgemm.runtime import tensormap
from drvgemm.runtime.driver import DeviceArray
from drvgemm.runtime.launch import launch

pytestmark = pytest.mark.gpu

NAMES = {"bf16": "20_tma_wgmma_bf16", "fp16": "20_tma_wgmma_fp16", "tf32": "20_tma_wgmma_tf32"}
# Unit roundoff of the inputs as the tensor cores see them. bf16/fp16 test
# inputs are exact in their type; for tf32, B is rounded to nearest in
# registers but A reaches the tensor cores unrounded and loses its low 13
# mantissa bits (truncation): 2^-10, not the 2^-11 of round-to-nearest.
U_IN = {"bf16": 2.0**-8, "fp16": 2.0**-11, "tf32": 2.0**-10}
GUARD = 64                      # floats of sentinel before and after C
SENTINEL = np.float32(-12345.5)

DIMS = st.one_of(st.sampled_from([1, 2, 7, 8, 15, 16, 17, 31, 63, 64, 65, 127, 128, 129, 255,
                                  256, 257, 383, 384, 385, 511, 513]),
                 st.integers(1, 700))
KS = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                                255, 257, 1000, 2048]),
               st.integers(1, 1200))
SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])


def _launch_config(r, *args, **kw):
    """The launch of rung ``r`` for the instantiation gemm() would launch."""
    kernel = registry.rung_kernel(r, True, narrow_output=kw.get("narrow_output", False))
    return rung20.wgmma_gemm_launch_config(r, *args, kernel=kernel, **kw)


@pytest.fixture(scope="module")
def hopper(gpu):
    if tuple(gpu.cc) != (9, 0):
        pytest.skip(f"sm_90a kernels need a compute capability 9.0 GPU, not {gpu.cc}")
    return gpu


def variant(prec, **defines):
    """The registered rung with some defines changed (its own name, so its
    compiled kernel is cached separately)."""
    base = ladder.rung(NAMES[prec])
    d = {**base.defines, **defines}
    block = (384 if d["WARP_SPECIALIZED"] else 256, 1, 1)
    tag = ",".join(f"{k}={v}" for k, v in sorted(defines.items()))
    return dataclasses.replace(base, name=f"{base.name}[{tag}]", defines=d, block=block,
                               smem=rung20.wgmma_smem_bytes(d["STAGES"], d.get("EPILOGUE", 0)))


# The build steps as first measured: static walk, direct stores.
_PLAIN = dict(SCHED=0, EPILOGUE=0, INFLIGHT=1, GROUP=16, RASTER=0, STAGES=4)
STEPS = {
    "tma_only": dict(_PLAIN, WARP_SPECIALIZED=0, PERSISTENT=0, CLUSTER=1),
    "warp_specialized": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=0, CLUSTER=1),
    "persistent": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1),
    "cluster2": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=2),
}
# The tuning knobs (tf32 ignores SCHED and EPILOGUE 1/2: it walks statically
# and stores directly, which these cases then check too).
KNOBS = {
    "dynamic": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1, SCHED=1),
    "dynamic_tma_store": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1, SCHED=1,
                              EPILOGUE=2),
    "dynamic_quads_by_columns": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1,
                                     SCHED=1, EPILOGUE=1, RASTER=1, GROUP=3),
    "static_inflight0_3_stages": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1,
                                      INFLIGHT=0, STAGES=3, GROUP=5),
    "cluster2_tma_store": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=2,
                               EPILOGUE=2),
    "tma_only_tma_store": dict(_PLAIN, WARP_SPECIALIZED=0, PERSISTENT=0, CLUSTER=1,
                               EPILOGUE=2),
}


def inputs(prec, m, n, k, seed, exact):
    rng = np.random.default_rng(seed)
    dt = ladder.input_dtype(prec)
    if exact:
        a = rng.integers(-8, 9, (m, k)).astype(dt)
        b = rng.integers(-8, 9, (k, n)).astype(dt)
        c = rng.integers(-8, 9, (m, n)).astype(np.float32)
    else:
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        c = rng.standard_normal((m, n)).astype(np.float32)
    return a, b, c


def guarded_c(c_init):
    """C inside a larger buffer whose first and last GUARD floats hold a
    sentinel: (buffer, view of C)."""
    m, n = c_init.shape
    host = np.full(m * n + 2 * GUARD, SENTINEL, np.float32)
    host[GUARD:GUARD + m * n] = c_init.ravel()
    buf = drvgemm.to_device(host)
    view = DeviceArray((m, n), np.float32, ptr=buf.ptr + 4 * GUARD, owner=False)
    return buf, view


def run(r, a, b, c_init, alpha, beta, *, blocks=None, a_offset=0):
    """Launch rung ``r`` directly; ``blocks`` overrides the grid (persistent
    walk over many tiles), ``a_offset`` places A that many elements past an
    aligned address (a misaligned operand)."""
    m, k = a.shape
    n = b.shape[1]
    if a_offset:
        padded = np.zeros(a.size + a_offset, a.dtype)
        padded[a_offset:] = a.ravel()
        a_buf = drvgemm.to_device(padded)
        A = DeviceArray((m, k), a.dtype, ptr=a_buf.ptr + a_offset * a.itemsize, owner=False)
    else:
        a_buf = A = drvgemm.to_device(a)
    B = drvgemm.to_device(b)
    buf, C = guarded_c(c_init)
    cfg = _launch_config(r, A, B, C, m, n, k, alpha, beta)
    grid = cfg["grid"]
    if blocks is not None:
        cl = cfg["cluster"][0] if cfg["cluster"] else 1
        grid = (max(cl, min(grid[0], blocks) // cl * cl), 1, 1)
    launch(registry.rung_kernel(r, True), grid, cfg["block"], cfg["args"], smem=cfg["smem"],
           cluster=cfg["cluster"])
    drvgemm.synchronize()
    del cfg
    out = buf.to_host()
    assert np.all(out[:GUARD].view(np.uint32) == SENTINEL.view(np.uint32)), \
        f"{r.name} wrote before C"
    assert np.all(out[-GUARD:].view(np.uint32) == SENTINEL.view(np.uint32)), \
        f"{r.name} wrote past C"
    del a_buf
    return out[GUARD:GUARD + m * n].reshape(m, n)


def reference(a, b, c, alpha, beta):
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if beta != 0:
        ref += beta * c.astype(np.float64)
    return ref


def check(out, a, b, c, alpha, beta, prec, exact, what):
    m, k = a.shape
    n = b.shape[1]
    ref = reference(a, b, c, alpha, beta)
    if exact:
        bad = out.astype(np.float64) != ref
    else:
        mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        bound = abs(alpha) * (2 * U_IN[prec] + (k + 2) * 2.0**-24) * mag
        if beta != 0:
            bound += 2.0**-22 * abs(beta) * np.abs(c.astype(np.float64))
        bad = ~(np.abs(out.astype(np.float64) - ref) <= bound)   # NaN counts as bad
    if bad.any():
        i, j = np.argwhere(bad)[0]
        err = np.abs(out.astype(np.float64) - ref)
        worst = np.unravel_index(np.nanargmax(np.where(np.isnan(err), np.inf, err)), err.shape)
        raise AssertionError(
            f"{what}: M={m} N={n} K={k} alpha={alpha} beta={beta}: {int(bad.sum())} bad "
            f"elements; first C[{i},{j}] = {out[i, j]!r}, expected {ref[i, j]!r}; worst "
            f"C[{worst[0]},{worst[1]}] = {out[worst]!r}, expected {ref[worst]!r}")


# ---------------------------------------------------------------------------
# The registered rungs, through drvgemm.gemm (the dispatcher's path)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("prec", ["bf16", "fp16", "tf32"])
@settings(SLOW, max_examples=25)
@given(m=DIMS, n=DIMS, k=KS, seed=st.integers(0, 2**32 - 1), exact=st.booleans(),
       beta=st.sampled_from([0.0, 0.0, 1.0, -0.5]))
def test_registered_rung(hopper, prec, m, n, k, seed, exact, beta):
    a, b, c = inputs(prec, m, n, k, seed, exact)
    alpha = 1.0 if exact else 0.75
    if exact and beta == -0.5:
        beta = -1.0
    # beta == 0: C holds NaN, which must not reach the output.
    c_init = np.full((m, n), np.nan, np.float32) if beta == 0 else c
    buf, C = guarded_c(c_init)
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    drvgemm.gemm(A, B, C, alpha=alpha, beta=beta, kernel=NAMES[prec])
    drvgemm.synchronize()
    out = buf.to_host()
    assert np.all(out[:GUARD] == SENTINEL) and np.all(out[-GUARD:] == SENTINEL), "wrote outside C"
    check(out[GUARD:GUARD + m * n].reshape(m, n), a, b, c, alpha, beta, prec, exact,
          f"{NAMES[prec]} seed={seed} exact={exact}")


# ---------------------------------------------------------------------------
# Each build step, with a 2-cluster grid so every block walks many tiles
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("prec", ["bf16", "tf32"])
@settings(SLOW, max_examples=12)
@given(m=DIMS, n=DIMS, k=KS, seed=st.integers(0, 2**32 - 1), few_blocks=st.booleans())
def test_build_steps_exact(hopper, prec, step, m, n, k, seed, few_blocks):
    r = variant(prec, **STEPS[step])
    a, b, c = inputs(prec, m, n, k, seed, exact=True)
    out = run(r, a, b, np.full((m, n), np.nan, np.float32), 1.0, 0.0,
              blocks=4 if few_blocks else None)
    check(out, a, b, c, 1.0, 0.0, prec, True, f"{r.name} seed={seed} few_blocks={few_blocks}")


@pytest.mark.parametrize("step", list(STEPS) + list(KNOBS))
def test_build_steps_random_beta(hopper, step):
    defines = {**STEPS, **KNOBS}[step]
    for prec in ("bf16", "fp16", "tf32"):
        r = variant(prec, **defines)
        for m, n, k in [(300, 520, 777), (129, 257, 65), (1, 1, 1)]:
            a, b, c = inputs(prec, m, n, k, 7, exact=False)
            out = run(r, a, b, c, -1.25, 0.5, blocks=2 * defines["CLUSTER"])
            check(out, a, b, c, -1.25, 0.5, prec, False, r.name)
            # beta = 0 with NaN in C: the TMA-store path where C allows it.
            out = run(r, a, b, np.full((m, n), np.nan, np.float32), 0.75, 0.0,
                      blocks=2 * defines["CLUSTER"])
            check(out, a, b, c, 0.75, 0.0, prec, False, r.name)


@pytest.mark.parametrize("knob", list(KNOBS))
@pytest.mark.parametrize("prec", ["bf16", "tf32"])
@settings(SLOW, max_examples=10)
@given(m=DIMS, n=DIMS, k=KS, seed=st.integers(0, 2**32 - 1), few_blocks=st.booleans())
def test_knobs_exact(hopper, prec, knob, m, n, k, seed, few_blocks):
    r = variant(prec, **KNOBS[knob])
    a, b, c = inputs(prec, m, n, k, seed, exact=True)
    out = run(r, a, b, np.full((m, n), np.nan, np.float32), 1.0, 0.0,
              blocks=4 if few_blocks else None)
    check(out, a, b, c, 1.0, 0.0, prec, True, f"{r.name} seed={seed} few_blocks={few_blocks}")


def test_tma_store_falls_back_where_c_does_not_allow_it(hopper):
    """EPILOGUE=2 stores through the copy engine only when N % 4 == 0 and C
    is 16-byte aligned; C one float past a 16-byte boundary, or N odd, takes
    the direct stores (and must still stay inside C)."""
    r = variant("bf16", **KNOBS["dynamic_tma_store"])
    for m, n, k, c_offset in [(300, 516, 100, 1), (300, 515, 100, 0), (257, 4, 64, 2)]:
        a, b, c = inputs("bf16", m, n, k, 5, exact=True)
        host = np.full(m * n + 2 * GUARD + 4, SENTINEL, np.float32)
        buf = drvgemm.to_device(host)
        C = DeviceArray((m, n), np.float32, ptr=buf.ptr + 4 * (GUARD + c_offset), owner=False)
        A, B = drvgemm.to_device(a), drvgemm.to_device(b)
        cfg = _launch_config(r, A, B, C, m, n, k, 1.0, 0.0)
        assert (cfg["args"][2] is tensormap.UNUSED_MAP) == (c_offset % 4 != 0 or n % 4 != 0)
        launch(registry.rung_kernel(r, True), cfg["grid"], cfg["block"], cfg["args"],
               smem=cfg["smem"], cluster=cfg["cluster"])
        drvgemm.synchronize()
        out = buf.to_host()
        lo, hi = GUARD + c_offset, GUARD + c_offset + m * n
        assert np.all(out[:lo] == SENTINEL) and np.all(out[hi:] == SENTINEL), "wrote outside C"
        check(out[lo:hi].reshape(m, n), a, b, c, 1.0, 0.0, "bf16", True, f"{r.name} {m}x{n}")


def test_dynamic_scheduler_counters_reset_between_launches(hopper):
    """SCHED=1 hands out units from two counters that the last block zeroes:
    many launches in a row on one stream, and on two streams at once (each
    stream has its own counters), must each compute every tile once."""
    r = variant("bf16", **KNOBS["dynamic_tma_store"])
    m, n, k = 1500, 1300, 96          # 12 x 6 = 72 tiles
    a, b, c = inputs("bf16", m, n, k, 9, exact=True)
    ref = reference(a, b, c, 1.0, 0.0)
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    kern = registry.rung_kernel(r, True)
    streams = [drvgemm.Stream(), drvgemm.Stream()]
    outs = [drvgemm.to_device(np.full((m, n), np.nan, np.float32)) for _ in range(12)]
    drvgemm.synchronize()             # the copies above, before the non-blocking streams
    for i, C in enumerate(outs):
        s = streams[i % 2]
        cfg = _launch_config(r, A, B, C, m, n, k, 1.0, 0.0, stream=s)
        grid = (5 + i, 1, 1)          # every block walks several tiles
        launch(kern, grid, cfg["block"], cfg["args"], smem=cfg["smem"], stream=s)
    for s in streams:
        s.synchronize()
    for i, C in enumerate(outs):
        got = C.to_host()
        assert np.array_equal(got.astype(np.float64), ref), f"launch {i}: wrong tiles"


# ---------------------------------------------------------------------------
# Edges of the copy engine
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("prec", ["bf16", "fp16", "tf32"])
@pytest.mark.parametrize("m,n,k,a_offset", [
    (200, 300, 515, 0),         # K not a multiple of 8 (4): A staged
    (129, 257, 130, 0),         # K, N not multiples of 8 (16-bit) / 4 (tf32)
    (64, 64, 64, 1),            # A one element past a 16-byte boundary
    (1, 333, 2048, 3),          # large K, exact, misaligned A
])
def test_staged_operands(hopper, prec, m, n, k, a_offset):
    r = ladder.rung(NAMES[prec])
    a, b, c = inputs(prec, m, n, k, 11, exact=True)
    out = run(r, a, b, c, 2.0, -1.0, a_offset=a_offset)
    check(out, a, b, c, 2.0, -1.0, prec, True, f"{r.name} a_offset={a_offset}")


def test_many_tiles_per_block(hopper):
    """Tiles >> blocks: the walk across tile boundaries keeps ring stages and
    phases in step (exact integers; K of 2.5 or 5 stages, so the ring wraps
    at a different place in every tile)."""
    for prec in ("bf16", "tf32"):
        for step in ("tma_only", "persistent", "cluster2", "dynamic", "dynamic_tma_store",
                     "static_inflight0_3_stages"):
            r = variant(prec, **{**STEPS, **KNOBS}[step])
            m, n, k = 2000, 1800, 160
            a, b, c = inputs(prec, m, n, k, 3, exact=True)
            out = run(r, a, b, np.full((m, n), np.nan, np.float32), 1.0, 0.0, blocks=6)
            check(out, a, b, c, 1.0, 0.0, prec, True, r.name)


# ---------------------------------------------------------------------------
# C in the inputs' own 16-bit type (OUT_16 builds of the bf16 / fp16 rungs)
# ---------------------------------------------------------------------------
U_OUT = {"bf16": 2.0**-8, "fp16": 2.0**-11}   # rounding of the result to C's type
# ... and half its spacing below the normal range, where rounding is absolute
# (fp16 subnormals are 2^-24 apart: a result of 4e-6 is off by up to 3e-8).
ETA_OUT = {"bf16": 2.0**-134, "fp16": 2.0**-25}
SENTINEL16 = np.uint16(0xBEEF)
NAN16 = {"bf16": 0x7FC0, "fp16": 0x7E00}


def guarded_c16(prec, c_init, offset=0):
    """A 16-bit C inside a buffer with GUARD sentinel elements on each side
    (``offset`` more before it: a C that is not 16-byte aligned)."""
    m, n = c_init.shape
    host = np.full(m * n + 2 * GUARD + offset, SENTINEL16, np.uint16)
    host[GUARD + offset:GUARD + offset + m * n] = c_init.view(np.uint16).ravel()
    buf = drvgemm.to_device(host)
    view = DeviceArray((m, n), ladder.input_dtype(prec), ptr=buf.ptr + 2 * (GUARD + offset),
                       owner=False)
    return buf, view


def read_guarded16(prec, buf, m, n, offset=0):
    out = buf.to_host()
    lo, hi = GUARD + offset, GUARD + offset + m * n
    assert np.all(out[:lo] == SENTINEL16) and np.all(out[hi:] == SENTINEL16), "wrote outside C"
    return out[lo:hi].view(ladder.input_dtype(prec)).reshape(m, n)


def check16(out, a, b, c16, alpha, beta, prec, exact, what):
    """The fp32 result rounded once to C's type: exact mode must equal the
    exact result rounded to nearest even; random mode adds that rounding
    (U_OUT) to the bound."""
    m, k = a.shape
    n = b.shape[1]
    ref = reference(a, b, c16.astype(np.float32), alpha, beta)
    got = out.astype(np.float64)
    if exact:
        want = ref.astype(np.float32).astype(out.dtype).astype(np.float64)
        bad = got != want
    else:
        mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        bound = abs(alpha) * (2 * U_IN[prec] + (k + 2) * 2.0**-24) * mag
        if beta != 0:
            bound += 2.0**-22 * abs(beta) * np.abs(c16.astype(np.float64))
        bound = bound * (1 + U_OUT[prec]) + U_OUT[prec] * np.abs(ref) + ETA_OUT[prec]
        bad = ~(np.abs(got - ref) <= bound)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise AssertionError(f"{what}: M={m} N={n} K={k} alpha={alpha} beta={beta}: "
                             f"{int(bad.sum())} bad elements; first C[{i},{j}] = {got[i, j]!r}, "
                             f"expected {ref[i, j]!r}")


@pytest.mark.parametrize("prec", ["bf16", "fp16"])
@settings(SLOW, max_examples=25)
@given(m=DIMS, n=DIMS, k=KS, seed=st.integers(0, 2**32 - 1), exact=st.booleans(),
       beta=st.sampled_from([0.0, 0.0, 1.0, -0.5]))
def test_registered_rung_16bit_c(hopper, prec, m, n, k, seed, exact, beta):
    """drvgemm.gemm with a C of the inputs' type: the OUT_16 build, through
    the TMA-store epilogue where N % 8 == 0, direct stores elsewhere."""
    a, b, c = inputs(prec, m, n, k, seed, exact)
    c16 = c.astype(ladder.input_dtype(prec))
    alpha = 1.0 if exact else 0.75
    if exact and beta == -0.5:
        beta = -1.0
    c_init = c16 if beta != 0 else np.full((m, n), NAN16[prec], np.uint16).view(c16.dtype)
    buf, C = guarded_c16(prec, c_init)
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    drvgemm.gemm(A, B, C, alpha=alpha, beta=beta, kernel=NAMES[prec])
    drvgemm.synchronize()
    check16(read_guarded16(prec, buf, m, n), a, b, c16, alpha, beta, prec, exact,
            f"{NAMES[prec]} 16-bit C seed={seed} exact={exact}")


@pytest.mark.parametrize("knob", ["direct", "tma_store", "cluster2_tma_store", "quads"])
def test_16bit_c_epilogues(hopper, knob):
    """Every epilogue with a 16-bit C, on edge shapes, beta 0 and not, C
    aligned and one element off (which turns the TMA store off), few blocks
    walking many tiles."""
    defines = {"direct": dict(EPILOGUE=0), "tma_store": dict(EPILOGUE=2),
               "cluster2_tma_store": dict(EPILOGUE=2, CLUSTER=2),
               "quads": dict(EPILOGUE=1)}[knob]  # quads are fp32-only: direct stores
    for prec in ("bf16", "fp16"):
        r = variant(prec, **defines)
        kern = registry.rung_kernel(r, True, narrow_output=True)
        for m, n, k, c_off, beta in [(300, 520, 777, 0, 0.0), (300, 520, 777, 1, 0.0),
                                     (129, 257, 65, 0, 0.5), (1000, 1024, 96, 0, 0.0),
                                     (1, 1, 1, 0, 0.0), (65, 8, 3, 0, -1.0)]:
            a, b, c = inputs(prec, m, n, k, 13, exact=False)
            c16 = c.astype(ladder.input_dtype(prec))
            c_init = c16 if beta else np.full((m, n), NAN16[prec], np.uint16).view(c16.dtype)
            buf, C = guarded_c16(prec, c_init, c_off)
            A, B = drvgemm.to_device(a), drvgemm.to_device(b)
            cfg = _launch_config(r, A, B, C, m, n, k, 0.75, beta,
                                               narrow_output=True)
            tma_store = cfg["args"][2] is not tensormap.UNUSED_MAP
            assert tma_store == (defines["EPILOGUE"] == 2 and c_off == 0 and n % 8 == 0)
            cl = cfg["cluster"][0] if cfg["cluster"] else 1
            launch(kern, (2 * cl, 1, 1), cfg["block"], cfg["args"], smem=cfg["smem"],
                   cluster=cfg["cluster"])
            drvgemm.synchronize()
            del cfg
            check16(read_guarded16(prec, buf, m, n, c_off), a, b, c16, 0.75, beta, prec, False,
                    f"{r.name} 16-bit C {m}x{n}x{k} c_off={c_off}")


def test_16bit_c_k_zero_and_errors(hopper):
    """K = 0 gives C = beta * C in C's type; a 16-bit C on a rung that writes
    float32 only, or of the other 16-bit type, is refused before any launch."""
    a = np.zeros((5, 0), ladder.input_dtype("bf16"))
    b = np.zeros((0, 7), ladder.input_dtype("bf16"))
    c = (np.arange(35, dtype=np.float32).reshape(5, 7) - 17).astype(ladder.input_dtype("bf16"))
    out = drvgemm.gemm(a, b, c.copy(), beta=-2.0, kernel=NAMES["bf16"])
    assert np.array_equal(out.astype(np.float32), (-2.0 * c.astype(np.float32)))
    a = np.ones((4, 4), ladder.input_dtype("bf16"))
    with pytest.raises(TypeError, match="writes a float32 C"):
        drvgemm.gemm(a, a, out_dtype="bf16", kernel="12_mma_bf16")
    with pytest.raises(TypeError, match="float32 or the inputs' own type"):
        drvgemm.gemm(a, a, out_dtype=np.float16)
    got = drvgemm.gemm(a, a, out_dtype="bf16")
    assert got.dtype == ladder.input_dtype("bf16") and np.all(got.astype(np.float32) == 4.0)
