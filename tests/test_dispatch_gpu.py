"""gemm() with kernel="auto" on the H200, on shapes that take each route
the dispatcher has (small M 1..64 with and without split K, the SIMT and
wgmma tile entries, TF32 on request), against a float64 reference with the
bounds of tests/gemm_check.py; beta = 0 with NaN in C; split-K routes give
the same bits every run; a cached repeat call gives what the first gave.

Each case asks drvgemm.plan() for the route first and says which one it
took, so a change of choice reads in the test id's output, and every
auto entry of the registry is exercised on a shape the dispatcher sends it
(new entries included, with no edit here)."""
import numpy as np
import pytest

import drvgemm
from drvgemm.ladders.gemm import dispatch, plan as planning
from drvgemm.ladders.gemm.registry import RUNGS, by_name

from gemm_check import check, inputs

pytestmark = pytest.mark.gpu

DECODE = [(m, n, k) for m in (1, 2, 7, 16, 17, 32, 33, 64) for n, k in ((1000, 4096),
                                                                        (4104, 1031))]
# A pool to find, for every auto entry, a shape the dispatcher sends it.
POOL = DECODE + [
    (128, 4096, 4096), (1024, 1024, 1024), (1000, 700, 900), (257, 129, 2049),
    (2048, 2048, 2048), (4096, 4096, 128), (128, 128, 65536), (64, 64, 32768), (3, 5, 7),
    (1031, 977, 1500), (2048, 257, 4099), (4096, 1024, 1024), (1024, 4096, 1024),
    (96, 3072, 3072), (768, 768, 768), (1536, 1536, 1536), (3072, 3072, 3072),
    (17, 19, 23),   # host-bound: rung 30's 32-row entry (one launch) over a staged tile
]


def _run(prec, m, n, k, *, out=None, beta=0.0, mode="random", seed=0, precision=None,
         device=True):
    math = precision or prec
    a, b, c0 = inputs(prec if prec != "tf32" else "fp32", m, n, k, seed, mode)
    out_dt = np.float32 if out is None else a.dtype
    c_in = np.full((m, n), np.nan, np.float32) if beta == 0 else c0.copy()
    c_in = c_in.astype(out_dt)
    p = drvgemm.plan(a, b, c_in, beta=beta, precision=precision)
    if device:
        A, B, C = drvgemm.to_device(a), drvgemm.to_device(b), drvgemm.to_device(c_in)
        drvgemm.gemm(A, B, C, alpha=1.0, beta=beta, precision=precision)
        got = C.to_host()
    else:
        got = drvgemm.gemm(a, b, c_in, beta=beta, precision=precision)
    r = by_name()[p.kernel]
    if out is not None:
        # a 16-bit C: compare its rounding against the fp32 reference's own
        got = got.astype(np.float32)
    label = f"auto->{p.instantiation} split={p.split} seed={seed}"
    check(got, a, b, c0, 1.0, beta,
          precision=r.precision if math != "tf32" or r.precision == "tf32" else "fp32",
          mode=mode, label=label, u_in=(r.input_roundoff or None) if out is None else 2.0 ** -8)
    return p, got


@pytest.mark.parametrize("prec", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("shape", DECODE, ids=lambda s: "x".join(map(str, s)))
def test_auto_small_m(gpu, prec, shape):
    p, _ = _run(prec, *shape, seed=sum(shape))
    print(p.instantiation, p.split)
    m, n, k = shape
    # Decode goes to the small-M stream, except a 16-bit product whose rows
    # are not whole 16 bytes: rung 30 would read B element by element there,
    # and staging the operands for rung 20 is predicted faster.
    if m <= 16 and (prec == "fp32" or (n % 8 == 0 and k % 8 == 0)):
        assert p.kernel.startswith("30_small_m_"), p.describe()


@pytest.mark.parametrize("prec", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("shape", [(1, 1000, 4096), (16, 4104, 1031), (33, 72, 40),
                                   (5, 13, 129)], ids=lambda s: "x".join(map(str, s)))
def test_auto_exact_and_beta(gpu, prec, shape):
    _run(prec, *shape, mode="exact", seed=3)
    _run(prec, *shape, mode="exact", seed=4, beta=-0.5)
    _run(prec, *shape, mode="random", seed=5, beta=1.0, device=False)


@pytest.mark.parametrize("prec", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 1000, 4096), (64, 64, 32768)],
                         ids=lambda s: "x".join(map(str, s)))
def test_auto_16bit_c(gpu, prec, shape):
    p, _ = _run(prec, *shape, out=prec, seed=11)
    assert p.out == prec


def _auto_entries():
    return [r.name for r in RUNGS if r.auto]


@pytest.mark.parametrize("name", _auto_entries())
def test_every_auto_entry_on_a_shape_it_is_chosen_for(gpu, name):
    r = by_name()[name]
    if not planning.arch_ok(r, gpu.cc):
        pytest.skip(f"{name} needs {r.arch}")
    precs = ["tf32"] if r.precision == "tf32" else [r.precision]
    for prec in precs:
        for shape in POOL:
            math = prec
            p = dispatch.plan_shape(*shape, precision=math)
            if p.kernel == name:
                _run("fp32" if math == "tf32" else math, *shape, seed=7,
                     precision="tf32" if math == "tf32" else None)
                _run("fp32" if math == "tf32" else math, *shape, seed=8, mode="exact",
                     precision="tf32" if math == "tf32" else None)
                return
    pytest.skip(f"the dispatcher sends no shape of the pool to {name}")


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1000, 700, 900), (1, 4096, 4096),
                                   (257, 129, 2049)], ids=lambda s: "x".join(map(str, s)))
def test_tf32_on_request(gpu, shape):
    p, _ = _run("fp32", *shape, precision="tf32", seed=9)
    assert by_name()[p.kernel].precision in ("tf32", "fp32")
    q = drvgemm.plan(np.ones(shape[:1] + shape[2:], np.float32),
                     np.ones(shape[2:0:-1], np.float32))
    assert by_name()[q.kernel].precision == "fp32"   # no TF32 unless asked


def _split_shapes():
    """Up to six split-K routes per precision (the most K-heavy first)."""
    out = []
    for prec in ("bf16", "fp16", "fp32", "tf32"):
        hits = [s for s in POOL if dispatch.plan_shape(*s, precision=prec).split > 1]
        hits.sort(key=lambda s: -s[2])
        out += [(prec, s) for s in hits[:6]]
    return out


@pytest.mark.parametrize("prec,shape", _split_shapes(),
                         ids=lambda x: x if isinstance(x, str) else "x".join(map(str, x)))
def test_split_k_routes_are_deterministic(gpu, prec, shape):
    m, n, k = shape
    a, b, _ = inputs("fp32" if prec == "tf32" else prec, m, n, k, 21, "random")
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    precision = "tf32" if prec == "tf32" else None
    outs = []
    for _ in range(3):
        C = drvgemm.to_device(np.full((m, n), np.nan, np.float32))
        drvgemm.gemm(A, B, C, precision=precision)
        outs.append(C.to_host())
    assert drvgemm.plan(A, B, C, precision=precision).split > 1
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint32), outs[0].view(np.uint32))


def test_cached_repeat_calls_give_the_first_calls_result(gpu):
    dispatch.clear_plan_cache()
    a, b, _ = inputs("bf16", 8, 4096, 4096, 31, "random")
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C1 = drvgemm.to_device(np.full((8, 4096), np.nan, np.float32))
    C2 = drvgemm.to_device(np.full((8, 4096), np.nan, np.float32))
    drvgemm.gemm(A, B, C1)
    drvgemm.gemm(A, B, C2)
    drvgemm.gemm(A, B, C2)
    assert dispatch.plan_cache_info()["hits"] == 2
    assert np.array_equal(C1.to_host(), C2.to_host())
    s = drvgemm.Stream()
    C3 = drvgemm.to_device(np.full((8, 4096), np.nan, np.float32))
    drvgemm.gemm(A, B, C3, stream=s)
    s.synchronize()
    assert np.array_equal(C1.to_host(), C3.to_host())


def test_torch_operands_take_the_cached_path(gpu):
    torch = pytest.importorskip("torch")
    dispatch.clear_plan_cache()
    a = torch.randn(16, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
    c = torch.full((16, 1024), float("nan"), device="cuda")
    assert drvgemm.gemm(a, b, c) is c
    assert drvgemm.gemm(a, b, c) is c
    torch.cuda.synchronize()
    assert dispatch.plan_cache_info()["hits"] == 1
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match="contiguous"):
        drvgemm.gemm(a, b.t().contiguous().t(), c)


@pytest.mark.parametrize("shape", [(512, 512, 512), (1000, 700, 900), (128, 128, 8192),
                                   (127, 8191, 131)], ids=lambda s: "x".join(map(str, s)))
def test_rebound_calls_on_new_buffers_and_new_data(gpu, shape):
    """Rung 20's cached binding (hopper.TmaBinding): calls that bring other
    buffers of the same signature re-encode the maps over them, and an
    operand with rows that need padding is copied into the binding's own
    buffer on every call -- each call's result is its own operands'
    product, even when A's data changes between two calls on one buffer."""
    m, n, k = shape
    dispatch.clear_plan_cache()
    sets = []
    for seed in range(3):
        a, b, _ = inputs("bf16", m, n, k, 40 + seed, "exact")
        sets.append((a, b, drvgemm.to_device(a), drvgemm.to_device(b),
                     drvgemm.to_device(np.full((m, n), np.nan, np.float32))))
    assert drvgemm.plan(*sets[0][2:]).rung.host == "tma"
    for a, b, A, B, C in sets + sets[:1]:
        drvgemm.gemm(A, B, C)
    a2, _, _ = inputs("bf16", m, n, k, 99, "exact")
    A0 = sets[0][2]
    A0.copy_from_host(a2)
    C0b = drvgemm.to_device(np.full((m, n), np.nan, np.float32))
    drvgemm.gemm(A0, sets[0][3], C0b)
    assert dispatch.plan_cache_info()["hits"] == 4
    for a, b, A, B, C in sets:
        check(C.to_host(), a, b, None, 1.0, 0.0, precision="bf16", mode="exact",
              label=f"rebound {shape}")
    check(C0b.to_host(), a2, sets[0][1], None, 1.0, 0.0, precision="bf16", mode="exact",
          label=f"rebound {shape}, new data")


def test_tune_stores_a_winner_that_auto_then_runs(gpu, tmp_path, monkeypatch):
    """drvgemm tune on the GPU: the winner of the timed candidates lands in
    this device's file (in a temporary cache), auto's plan says "tuned" and
    names it, and gemm() through it gives the right product."""
    from drvgemm.tools import tune as tuning
    monkeypatch.setenv("DRVGEMM_CACHE_DIR", str(tmp_path))
    dispatch.clear_plan_cache()
    try:
        e = tuning.tune(512, 512, 512, precision="bf16", top=3, calls=5, rounds=2,
                        progress=lambda *a: None)
        assert len(e["candidates"]) >= 2 and e["file"].startswith(str(tmp_path))
        a, b, _ = inputs("bf16", 512, 512, 512, 5, "exact")
        A, B = drvgemm.to_device(a), drvgemm.to_device(b)
        C = drvgemm.to_device(np.full((512, 512), np.nan, np.float32))
        p = drvgemm.plan(A, B, C)
        assert (p.kernel, p.split, p.reason) == (e["kernel"], e["split"], "tuned")
        drvgemm.gemm(A, B, C)
        check(C.to_host(), a, b, None, 1.0, 0.0, precision="bf16", mode="exact",
              label=f"tuned {p.instantiation} split={p.split}")
    finally:
        dispatch.clear_plan_cache()
