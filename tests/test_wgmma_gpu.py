"""The TMA + wgmma rung on the GPU (sm_90): every M, N, K >= 1, exact-integer
and random inputs, C poisoned with NaN, beta = 0 and beta != 0, guard zones
around C, misaligned operands (staged copies), each build step of the rung
(tma only, warp-specialised, persistent, clusters) and each tuning knob
(unit order, stages, TMA-store epilogue), with a grid small enough that every
block walks many tiles; every member of the family (tile shapes) and split-K
(every registered split count, empty pieces, long K, determinism)."""
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


def variant(prec, base_name=None, **defines):
    """The registered rung (the flagship of ``prec``, or ``base_name``) with
    some defines changed (its own name, so its compiled kernel is cached
    separately)."""
    base = ladder.rung(base_name or NAMES[prec])
    d = {**base.defines, **defines}
    block = (384 if d["WARP_SPECIALIZED"] else 256, 1, 1)
    tag = ",".join(f"{k}={v}" for k, v in sorted(defines.items()))
    stage = rung20.geometry(base).stage_bytes
    return dataclasses.replace(base, name=f"{base.name}[{tag}]", defines=d, block=block,
                               smem=rung20.wgmma_smem_bytes(d["STAGES"], d.get("EPILOGUE", 0),
                                                            stage))


# The build steps as first measured: static walk, direct stores.
_PLAIN = dict(EPILOGUE=0, GROUP=16, STAGES=4)
STEPS = {
    "tma_only": dict(_PLAIN, WARP_SPECIALIZED=0, PERSISTENT=0, CLUSTER=1),
    "warp_specialized": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=0, CLUSTER=1),
    "persistent": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1),
    "cluster2": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=2),
}
# The tuning knobs (tf32 ignores EPILOGUE 2: its transposed tile stores
# directly, which these cases then check too).
KNOBS = {
    "tma_store": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1, EPILOGUE=2),
    "tma_store_group3": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1,
                             EPILOGUE=2, GROUP=3),
    "3_stages_group5": dict(_PLAIN, WARP_SPECIALIZED=1, PERSISTENT=1, CLUSTER=1,
                            STAGES=3, GROUP=5),
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
    r = variant("bf16", **KNOBS["tma_store"])
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


def test_back_to_back_launches_on_two_streams(hopper):
    """Many launches in a row on one stream, and on two streams at once, with
    grids of every size: each computes every tile once (no state survives a
    launch: the walk is static)."""
    r = variant("bf16", **KNOBS["tma_store"])
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


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(elem=st.sampled_from([2, 4]), rows=st.integers(1, 300), cols=st.integers(1, 700),
       offset=st.integers(0, 7), both=st.booleans())
def test_pad_rows_copies_each_row_and_zeroes_the_padding(hopper, elem, rows, cols, offset, both):
    """staging.py's copy (cu/gemm/pad_rows.cu) on its own: rows of any length
    from a source only element-aligned (``offset`` elements past a 16-byte
    boundary) into rows of the padded pitch, the padding zero, the bytes after
    the destination untouched; with ``both``, a second copy (other rows and
    columns) in the same launch, as A and B are staged."""
    from drvgemm.ladders.gemm import staging
    dt = np.uint16 if elem == 2 else np.uint32
    rng = np.random.default_rng(rows * 1000 + cols)
    shapes = [(rows, cols)] + ([(cols % 97 + 1, rows + 3)] if both else [])
    keep, copies, wants = [], [], []
    for r, c in shapes:
        src = rng.integers(1, 2 ** (8 * elem) - 1, size=r * c + offset, dtype=np.uint64).astype(dt)
        d_src = drvgemm.to_device(src)
        pitch = tensormap.padded_pitch(c * elem)
        guard = 64
        d_dst = drvgemm.to_device(np.full(r * pitch // elem + guard, 0xA5A5A5A5 % 2 ** (8 * elem), dt))
        keep += [d_src, d_dst]
        copies.append((d_src.ptr + offset * elem, d_dst.ptr, r, c * elem, pitch))
        want = np.zeros((r, pitch // elem), dt)
        want[:, :c] = src[offset:].reshape(r, c)
        wants.append((d_dst, want, guard))
    cfg = staging.pad_launch_config(copies)
    launch(staging.pad_kernel(elem), cfg.grid, cfg.block, cfg.args)
    drvgemm.synchronize()
    for d_dst, want, guard in wants:
        got = d_dst.to_host()
        assert np.array_equal(got[:want.size].reshape(want.shape), want)
        assert np.all(got[want.size:] == 0xA5A5A5A5 % 2 ** (8 * elem)), "wrote past the copy"


def test_many_tiles_per_block(hopper):
    """Tiles >> blocks: the walk across tile boundaries keeps ring stages and
    phases in step (exact integers; K of 2.5 or 5 stages, so the ring wraps
    at a different place in every tile)."""
    for prec in ("bf16", "tf32"):
        for step in ("tma_only", "persistent", "cluster2", "tma_store", "tma_store_group3",
                     "3_stages_group5"):
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


@pytest.mark.parametrize("knob", ["direct", "tma_store", "cluster2_tma_store"])
def test_16bit_c_epilogues(hopper, knob):
    """Every epilogue with a 16-bit C, on edge shapes, beta 0 and not, C
    aligned and one element off (which turns the TMA store off), few blocks
    walking many tiles."""
    defines = {"direct": dict(EPILOGUE=0), "tma_store": dict(EPILOGUE=2),
               "cluster2_tma_store": dict(EPILOGUE=2, CLUSTER=2)}[knob]
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


# ---------------------------------------------------------------------------
# The family: every member (tile shape) and split-K
# ---------------------------------------------------------------------------
FAMILY = [r.name for r in registry.RUNGS if r.host == "tma"]
WS_GUARD = 64                   # floats of sentinel after the split-K workspace


def member_dims(name):
    """Sizes that push a member's own tile where it breaks: 1, primes, and
    each tile side +- 1 (edge tiles), plus anything up to 700."""
    r = ladder.rung(name)
    edges = sorted({1, 2, 7, 17, 63, 127, 129} | {t + d for t in (r.tile_m, r.tile_n)
                                                  for d in (-1, 0, 1)}
                   | {2 * r.tile_n + 1, 3 * r.tile_m - 1})
    return st.one_of(st.sampled_from(edges), st.integers(1, 700))


@pytest.mark.parametrize("name", FAMILY)
@settings(SLOW, max_examples=20)
@given(data=st.data(), k=KS, seed=st.integers(0, 2**32 - 1), exact=st.booleans(),
       beta=st.sampled_from([0.0, 0.0, 1.0, -0.5]), narrow=st.booleans())
def test_family_member(hopper, name, data, k, seed, exact, beta, narrow):
    """Every member through drvgemm.gemm, fp32 C and (16-bit members) a C of
    the inputs' type; beta == 0 with NaN in C."""
    r = ladder.rung(name)
    m, n = data.draw(member_dims(name), "m"), data.draw(member_dims(name), "n")
    narrow = narrow and r.narrow_output
    prec = r.precision
    a, b, c = inputs(prec, m, n, k, seed, exact)
    alpha = 1.0 if exact else 0.75
    if exact and beta == -0.5:
        beta = -1.0
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    what = f"{name} seed={seed} exact={exact} narrow={narrow}"
    if narrow:
        c16 = c.astype(ladder.input_dtype(prec))
        c_init = c16 if beta != 0 else np.full((m, n), NAN16[prec], np.uint16).view(c16.dtype)
        buf, C = guarded_c16(prec, c_init)
        drvgemm.gemm(A, B, C, alpha=alpha, beta=beta, kernel=name)
        drvgemm.synchronize()
        check16(read_guarded16(prec, buf, m, n), a, b, c16, alpha, beta, prec, exact, what)
    else:
        c_init = np.full((m, n), np.nan, np.float32) if beta == 0 else c
        buf, C = guarded_c(c_init)
        drvgemm.gemm(A, B, C, alpha=alpha, beta=beta, kernel=name)
        drvgemm.synchronize()
        out = buf.to_host()
        assert np.all(out[:GUARD] == SENTINEL) and np.all(out[-GUARD:] == SENTINEL), \
            f"{what}: wrote outside C"
        check(out[GUARD:GUARD + m * n].reshape(m, n), a, b, c, alpha, beta, prec, exact, what)


def run_split(r, a, b, c_init, alpha, beta, split, *, narrow=False, clamp=True,
              fold="auto"):
    """One product through rung ``r``'s split-K launches (the host interface
    the dispatcher uses): the workspace's slices poisoned with NaN (a partial
    left unwritten reaches C) and guarded by a sentinel after its end, its
    counters' head zero (and held to be left zero); C guarded on both sides.
    ``fold``: the pieces added in the kernel (True), by the reduction launch
    (False), or as gemm() would ("auto"). Returns (C as computed, the number
    of pieces used)."""
    m, k = a.shape
    n = b.shape[1]
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    prec = r.precision
    buf, C = guarded_c16(prec, c_init) if narrow else guarded_c(c_init)
    ws_floats = r.workspace_bytes(m, n, split) // 4
    head = rung20.FOLD_COUNTER_BYTES // 4 if split > 1 else 0
    ws_host = np.full(ws_floats + WS_GUARD, np.nan, np.float32)
    ws_host[:head] = 0.0
    ws_host[ws_floats:] = SENTINEL
    ws_buf = drvgemm.to_device(ws_host)
    ws = DeviceArray((max(ws_floats, 1),), np.float32, ptr=ws_buf.ptr, owner=False)
    kernel = registry.rung_kernel(r, True, narrow_output=narrow)
    if clamp and fold == "auto":
        steps = r.launches(kernel, A, B, C, m, n, k, alpha, beta, narrow_output=narrow,
                           split=split, workspace=ws if split > 1 else 0)
    else:
        steps = rung20.split_launches(r, kernel, A, B, C, m, n, k, alpha, beta,
                                      narrow_output=narrow, split=split, workspace=ws,
                                      clamp=clamp, fold=fold)
    used = steps[0][1].args[11]
    folded = steps[0][1].args[12] != 0
    geo = rung20.geometry(r)
    assert folded == (used > 1 and (rung20.folds(geo, m, n, used, drvgemm.device().sm_count)
                                    if fold == "auto" else fold))
    assert len(steps) == (1 if used == 1 or folded else 2)
    for step_kernel, cfg in steps:
        launch(step_kernel, cfg.grid, cfg.block, cfg.args, smem=cfg.smem, cluster=cfg.cluster)
    drvgemm.synchronize()
    del steps
    after = ws_buf.to_host()
    tail = after[ws_floats:]
    assert np.all(tail.view(np.uint32) == SENTINEL.view(np.uint32)), \
        f"{r.name}: wrote past the workspace (split {split})"
    assert not after[:head].view(np.uint32).any(), \
        f"{r.name}: the fold's counters are not left zero (split {split})"
    if narrow:
        return read_guarded16(prec, buf, m, n), used
    out = buf.to_host()
    assert np.all(out[:GUARD] == SENTINEL) and np.all(out[-GUARD:] == SENTINEL), \
        f"{r.name}: wrote outside C (split {split})"
    return out[GUARD:GUARD + m * n].reshape(m, n), used


def split_case(r, m, n, k, split, *, seed, exact, beta, narrow=False, alpha=None, clamp=True,
               fold="auto"):
    prec = r.precision
    a, b, c = inputs(prec, m, n, k, seed, exact)
    alpha = alpha if alpha is not None else (1.0 if exact else -0.75)
    what = f"{r.name} split={split} clamp={clamp} seed={seed} exact={exact} narrow={narrow}"
    if narrow:
        c16 = c.astype(ladder.input_dtype(prec))
        c_init = c16 if beta != 0 else np.full((m, n), NAN16[prec], np.uint16).view(c16.dtype)
        out, used = run_split(r, a, b, c_init, alpha, beta, split, narrow=True, clamp=clamp,
                              fold=fold)
        check16(out, a, b, c16, alpha, beta, prec, exact, what)
    else:
        c_init = np.full((m, n), np.nan, np.float32) if beta == 0 else c
        out, used = run_split(r, a, b, c_init, alpha, beta, split, clamp=clamp,
                              fold=fold)
        check(out, a, b, c, alpha, beta, prec, exact, what)
    return used


@pytest.mark.parametrize("name", FAMILY)
def test_split_k_every_split_count(hopper, name):
    """Each registered split count on one member: edge tiles on both sides,
    K not a multiple of the k-tile (1000 = 15.6 k-tiles of 64, 31.25 of
    32), so pieces of unequal length; beta = 0 with NaN in C and beta != 0.
    Every count both ways besides: folded in the kernel and through the
    reduction launch."""
    r = ladder.rung(name)
    m, n = r.tile_m + 1, 2 * r.tile_n - 1
    geo = rung20.geometry(r)
    for split in r.splits:
        for beta, exact in ((0.0, True), (0.5, False)):
            used = split_case(r, m, n, 1000, split, seed=split, exact=exact, beta=beta)
            assert used == min(split, rung20.k_tiles(geo, 1000))
            if split > 1:
                for fold in (True, False):
                    split_case(r, m, n, 1000, split, seed=split, exact=exact, beta=beta,
                               fold=fold)


@pytest.mark.parametrize("name", ["20_tma_wgmma_bf16_128x128", "20_tma_wgmma_fp16_64x128",
                                  "20_tma_wgmma_bf16_16x64", "20_tma_wgmma_tf32_128x64"])
def test_split_k_fold_many_rounds(hopper, name):
    """Folded pieces over more units than the persistent grid has blocks
    (every block walks several units, and a tile's last piece may wait for
    pieces a later round of another block computes): the counters and the
    order of the walk must neither deadlock nor add a piece twice. Split
    counts 2 to 8; a 16-bit C too."""
    r = ladder.rung(name)
    geo = rung20.geometry(r)
    y_ext, x_ext = 2100, 1900
    m, n = (x_ext, y_ext) if geo.swapped else (y_ext, x_ext)
    for split in (2, 3, 8):
        assert rung20.wgmma_work_units(geo, m, n, 1, split) > 3 * drvgemm.device().sm_count
        split_case(r, m, n, 777, split, seed=split, exact=True, beta=0.0, fold=True)
        if r.narrow_output:
            split_case(r, m, n, 777, split, seed=split, exact=False, beta=0.5, narrow=True,
                       fold=True)


@pytest.mark.parametrize("name", FAMILY)
@settings(SLOW, max_examples=15)
@given(data=st.data(), k=st.one_of(KS, st.integers(1, 9000)),
       split=st.sampled_from(rung20.SPLITS[1:]), seed=st.integers(0, 2**32 - 1),
       exact=st.booleans(), beta=st.sampled_from([0.0, 1.0, -0.5]), narrow=st.booleans())
def test_split_k_property(hopper, name, data, k, split, seed, exact, beta, narrow):
    r = ladder.rung(name)
    m, n = data.draw(member_dims(name), "m"), data.draw(member_dims(name), "n")
    if exact and beta == -0.5:
        beta = -1.0
    split_case(r, m, n, k, split, seed=seed, exact=exact, beta=beta,
               narrow=narrow and r.narrow_output)


@pytest.mark.parametrize("name", ["20_tma_wgmma_bf16", "20_tma_wgmma_fp16_128x128",
                                  "20_tma_wgmma_tf32_192x128"])
def test_split_k_empty_pieces(hopper, name):
    """K shorter than S k-tiles. Clamped (what launches() does): S becomes
    the k-tile count. Unclamped: the empty pieces still write their zero
    partials (the workspace starts as NaN), and the sum is right."""
    r = ladder.rung(name)
    geo = rung20.geometry(r)
    for k in (1, geo.k_tile - 1, geo.k_tile + 1, 3 * geo.k_tile):
        kt = rung20.k_tiles(geo, k)
        for split in (2, 8, 16):
            used = split_case(r, 200, 300, k, split, seed=k + split, exact=True, beta=0.0)
            assert used == min(split, kt)
            used = split_case(r, 200, 300, k, split, seed=k + split, exact=True, beta=-1.0,
                              clamp=False)
            assert used == split


@pytest.mark.parametrize("name", FAMILY)
def test_split_k_16bit_c(hopper, name):
    r = ladder.rung(name)
    if not r.narrow_output:
        pytest.skip(f"{name} writes a float32 C")
    for m, n, k, split, beta in [(300, 520, 777, 4, 0.0), (129, 257, 65, 2, 0.5),
                                 (1, 1, 4096, 64, 0.0), (65, 8, 3000, 6, -1.0)]:
        for exact in (True, False):
            split_case(r, m, n, k, split, seed=m + k, exact=exact, beta=beta, narrow=True)


@pytest.mark.parametrize("name", ["20_tma_wgmma_bf16_128x128", "20_tma_wgmma_tf32_128x128",
                                  "20_tma_wgmma_fp16"])
def test_split_k_long_k(hopper, name):
    """One or two tiles, a very long K: where split-K matters most (128 x 128
    x 65536 is one 128 x 128 tile and 1024 k-tiles). Exact integers: every
    partial and their sum stay below 2^24."""
    r = ladder.rung(name)
    for m, n, split in [(128, 128, 128), (100, 200, 96), (128, 128, 7)]:
        split = split if split in r.splits else 8
        split_case(r, m, n, 65536 + 3, split, seed=split, exact=True, beta=1.0)
    split_case(r, 128, 128, 65536, 128, seed=5, exact=False, beta=0.0)


@pytest.mark.parametrize("name", ["20_tma_wgmma_bf16", "20_tma_wgmma_bf16_128x192",
                                  "20_tma_wgmma_tf32_128x128"])
def test_split_k_is_deterministic(hopper, name):
    """Random inputs, K in 16, 8 and 3 pieces, folded in the kernel and
    through the reduction launch: two runs give the same bits (the partials
    are added in split order; no atomics)."""
    r = ladder.rung(name)
    m, n, k = 700, 900, 5000
    a, b, c = inputs(r.precision, m, n, k, 21, exact=False)
    for split, fold in ((16, True), (16, False), (8, True), (8, False), (3, True), (3, False)):
        first, _ = run_split(r, a, b, c, 0.75, 0.5, split, fold=fold)
        second, _ = run_split(r, a, b, c, 0.75, 0.5, split, fold=fold)
        what = f"{name} split={split} fold={fold}"
        assert np.array_equal(first.view(np.uint32), second.view(np.uint32)), \
            f"{what}: two runs differ"
        check(first, a, b, c, 0.75, 0.5, r.precision, False, what)


@pytest.mark.parametrize("out", ["fp32", "bf16", "fp16"])
def test_deep_and_plain_reductions_give_the_same_bits(hopper, out):
    """split_reduce.cu's deep entry (16 slices' loads in flight a thread)
    and its plain entry add the same partials in the same split order: the
    same bits of C for every split count and C size, the partial last group
    of four and beta != 0 included, with signed zeros, infinities and NaNs
    among the partials; nothing past C is written."""
    from drvgemm.ladders.gemm import split_k
    from drvgemm.runtime import dtypes
    rng = np.random.default_rng(7)
    np_out = {"fp32": np.float32, "bf16": dtypes.bf16(), "fp16": np.float16}[out]
    for count, splits, beta in [(1024, 128, 0.0), (1021, 17, 0.5), (4, 5, 0.0), (3, 33, -1.0),
                                (12345, 64, 0.0), (256 * 132 * 4, 6, 1.0)]:
        stride = split_k.split_stride(1, count)
        parts = rng.standard_normal(splits * stride).astype(np.float32) * 100
        special = rng.integers(0, splits * stride, 64)
        parts[special[:16]] = -0.0
        parts[special[16:24]] = np.inf
        parts[special[24:28]] = -np.inf
        parts[special[28:32]] = np.nan
        P = drvgemm.to_device(parts)
        c0 = rng.standard_normal(count + 2 * GUARD).astype(np.float32).astype(np_out)
        results = []
        for deep in (False, True):
            C = drvgemm.to_device(c0)
            kern = split_k.reduce_kernel(out, deep)
            cfg = split_k.reduce_launch_config(P, C.ptr + GUARD * c0.itemsize, 1, count,
                                               splits, 1.5, beta)
            launch(kern, cfg.grid, cfg.block, cfg.args, smem=cfg.smem)
            got = C.to_host()
            assert np.array_equal(got[:GUARD].view(np.uint8), c0[:GUARD].view(np.uint8)) and \
                np.array_equal(got[-GUARD:].view(np.uint8), c0[-GUARD:].view(np.uint8)), \
                f"{kern.entry}: a store outside C (count {count}, splits {splits})"
            results.append(got[GUARD:-GUARD])
        plain, deep = results
        assert np.array_equal(plain.view(np.uint8), deep.view(np.uint8)), \
            f"{out} count {count} splits {splits} beta {beta}: the entries differ at " \
            f"{np.flatnonzero(plain.view(np.uint8) != deep.view(np.uint8))[:8]}"
