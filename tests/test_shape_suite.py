"""The shape suite of `drvgemm bench --shapes` (no GPU): its coverage, the
repetition policy and its time model, the records it writes, the summary
math, the plot, the plan/SASS-hash plumbing and the no-GPU exit."""
import json
import math
import statistics

import numpy as np
import pytest

from drvgemm.tools import shape_bench, shape_suite
from drvgemm.tools.shape_suite import SUITE, Shape

MODEL_DIMS = {4096, 5120, 8192, 11008, 14336, 28672, 128256}


def _is_prime(x):
    return x > 1 and all(x % d for d in range(2, int(math.isqrt(x)) + 1))


# ---------------------------------------------------------------------------
# coverage
# ---------------------------------------------------------------------------
def test_suite_has_at_least_40_distinct_shapes_in_every_class():
    assert len(SUITE) >= 40
    assert len({(s.m, s.n, s.k) for s in SUITE}) == len(SUITE), "a shape is listed twice"
    classes = {s.shape_class for s in SUITE}
    assert classes == set(shape_suite.CLASSES)
    for s in SUITE:
        assert s.shape_class in shape_suite.CLASSES
        assert min(s.m, s.n, s.k) >= 1


def test_decode_shapes_are_small_m_against_model_weights():
    decode = [s for s in SUITE if s.shape_class == "decode"]
    assert len(decode) >= 8
    for s in decode:
        assert 1 <= s.m <= 128 and s.n in MODEL_DIMS and s.k in MODEL_DIMS, s
    ms = {s.m for s in decode}
    assert 1 in ms and 128 in ms and any(m <= 16 for m in ms - {1})
    assert {s.n for s in decode} | {s.k for s in decode} == MODEL_DIMS, \
        "every weight dimension of the list appears"


def test_prefill_squares_long_k_tall_wide_odd():
    by = {c: [s for s in SUITE if s.shape_class == c] for c in shape_suite.CLASSES}
    assert all(512 <= s.m <= 16384 for s in by["prefill"])
    assert {min(s.m for s in by["prefill"]), max(s.m for s in by["prefill"])} == {512, 16384}
    sq = sorted(s.m for s in by["square"])
    assert all(s.m == s.n == s.k for s in by["square"])
    assert sq[0] == 128 and sq[-1] == 16384
    assert any(x & (x - 1) for x in sq), "a square that is not a power of two"
    for s in by["long_k"]:
        assert s.k >= 32768 and s.m * s.n <= 1024 * 1024
    assert all(s.m >= 8 * s.n for s in by["tall"]) and all(s.n >= 8 * s.m for s in by["wide"])
    assert all(s.k <= 128 for s in by["short_k"])
    odd = by["odd"]
    assert any(_is_prime(s.m) and _is_prime(s.n) and _is_prime(s.k) for s in odd)
    assert any(s.k % 8 or s.n % 8 for s in odd), "a shape no 16-byte vector path takes"


def test_quick_suite_is_a_subset_that_keeps_every_class():
    quick = shape_suite.suite(quick=True)
    assert set(quick) < set(SUITE) and len(quick) >= 12
    assert {s.shape_class for s in quick} == set(shape_suite.CLASSES)
    assert shape_suite.suite() == list(SUITE)


def test_every_precision_is_in_the_suite():
    assert set(shape_suite.PRECISIONS) == {"bf16", "fp16", "tf32", "fp32"}
    assert set(shape_bench.PRIMARY_OUT) == set(shape_suite.PRECISIONS)
    assert set(shape_bench.TOLERANCE) == set(shape_suite.PRECISIONS)


# ---------------------------------------------------------------------------
# repetitions and the time model
# ---------------------------------------------------------------------------
def test_whole_suite_fits_its_budget_by_the_model():
    full = shape_suite.estimate_seconds(SUITE)
    quick = shape_suite.estimate_seconds(shape_suite.suite(True), policy=shape_suite.QUICK_POLICY)
    assert full < 240, f"the full suite is modelled at {full:.0f} s (budget about 4 minutes)"
    assert quick < 60 and quick < full / 3
    # the model charges more for a bigger problem and for a slower precision
    big, small = Shape(8192, 8192, 8192, "square"), Shape(256, 256, 256, "square")
    assert shape_suite.call_seconds(big, "fp32") > shape_suite.call_seconds(big, "bf16") \
        > shape_suite.call_seconds(small, "bf16")
    assert shape_suite.call_seconds(Shape(1, 128256, 4096, "decode"), "bf16") >= \
        128256 * 4096 * 2 / 3.0e12, "decode is bounded by reading B"


def test_repetitions_scale_with_the_call():
    p = shape_suite.POLICY
    one, rounds, batch = shape_suite.repetitions(0.01, p)
    assert (one, rounds, batch) == (p.one_call, p.rounds, p.max_batch)
    one, rounds, batch = shape_suite.repetitions(1.0, p)
    assert batch == int(p.b2b_target_ms / (p.rounds * 1.0))
    one, rounds, batch = shape_suite.repetitions(200.0, p)
    assert (one, rounds, batch) == (p.one_call_long, p.rounds_long, p.min_batch)
    assert shape_suite.repetitions(0.0, p)[2] == p.max_batch   # never divides by zero


def test_rotation_sets_keep_operands_out_of_l2():
    l2 = 60 << 20
    for per_set in (64 << 10, 4 << 20, 50 << 20):
        sets = shape_suite.rotation_sets(per_set, l2, batch=10_000)
        assert (sets - 1) * per_set >= 2 * l2      # traffic between two uses of a set
    assert shape_suite.rotation_sets(1 << 30, l2, batch=100) == 2
    assert shape_suite.rotation_sets(64 << 10, l2, batch=7) == 7   # at most one per call
    assert shape_suite.rotation_sets(0, l2, batch=7) == 1


# ---------------------------------------------------------------------------
# records and the summary (fake entries: no GPU)
# ---------------------------------------------------------------------------
class FakeEntry(shape_bench._Entry):
    def __init__(self, kernel, out, baseline, rounds, one, meta=None, error=None):
        super().__init__(kernel, out, baseline, [lambda: None], None,
                         dict(meta or {}, out=out), None)
        self.rounds, self.one_call, self.error, self.err = list(rounds), list(one), error, 1e-3
        self.batch = 10


def _shape_records():
    shape = Shape(1000, 700, 900, "odd")
    entries = [
        FakeEntry("20_tma_wgmma_bf16", "bf16", False, [2.0, 2.2, 2.1], [3.0, 3.2, 3.1],
                  {"instantiation": "gemm/20/aligned=1/c=bf16", "sass_hash": "abcd"}),
        FakeEntry("cublas", "bf16", True, [1.0, 1.2, 1.1], [1.5, 1.6, 1.4],
                  {"via": "torch.matmul(out=)"}),
        FakeEntry("cublas_gemmex", "bf16", True, [1.1, 1.0, 1.2], [1.2, 1.3, 1.25],
                  {"via": "cupy cublasGemmEx"}),
        FakeEntry("20_tma_wgmma_bf16", "fp32", False, [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]),
        FakeEntry("cublas_gemmex_f32out", "fp32", True, [0.5, 0.5, 0.5], [0.4, 0.4, 0.4],
                  {"via": "cupy cublasGemmEx"}),
    ]
    return shape, entries, shape_bench._records(shape, "bf16", entries, sets=3)


def test_records_carry_the_contract_fields():
    _, _, recs = _shape_records()
    drv = recs[0]
    for key in ("kernel", "precision", "m", "n", "k", "median_ms", "tflops", "rel_rmse",
                "baseline", "shape_class", "one_call_ms", "instantiation", "sass_hash"):
        assert key in drv, key
    assert drv["median_ms"] == 2.1 and drv["one_call_ms"] == 3.1
    assert drv["tflops"] == pytest.approx(2 * 1000 * 700 * 900 / 2.1e-3 / 1e12, rel=1e-3)
    assert drv["shape_class"] == "odd" and drv["baseline"] is False
    assert all(r["baseline"] for r in recs[1:3] + recs[4:])
    json.dumps(recs)   # JSON as written


def test_records_compare_like_with_like():
    _, entries, recs = _shape_records()
    drv16, drv32 = recs[0], recs[3]
    # 16-bit C: best back to back is torch's (median 1.1) vs gemmEx's (1.1): either,
    # the best one call is gemmEx's 1.25; never the fp32-C call.
    assert drv16["vs_cublas"] == pytest.approx(1.1 / 2.1, abs=1e-4)
    assert drv16["vs_cublas_one_call"] == pytest.approx(1.25 / 3.1, abs=1e-4)
    assert "gemmex" in drv16["best_cublas_one_call"]
    assert drv32["vs_cublas"] == 0.5 and drv32["vs_cublas_one_call"] == 0.2
    assert drv32["best_cublas"].startswith("cublas_gemmex_f32out")
    # paired: per round, the same baseline's round time over this entry's
    best = entries[1] if recs[1]["median_ms"] <= recs[2]["median_ms"] else entries[2]
    want = statistics.median(b / x for b, x in zip(best.rounds, entries[0].rounds))
    assert drv16["vs_cublas_paired"] == pytest.approx(want, abs=1e-4)


def test_failed_entries_keep_a_record_with_the_error():
    shape = Shape(17, 19, 23, "odd")
    entries = [FakeEntry("auto", "fp32", False, [], [], error="TypeError: boom"),
               FakeEntry("cublas", "fp32", True, [0.01], [0.02])]
    recs = shape_bench._records(shape, "tf32", entries, sets=1)
    assert recs[0]["median_ms"] is None and recs[0]["error"] == "TypeError: boom"
    assert "vs_cublas" not in recs[0]
    s = shape_bench.summarize(recs)
    assert s["tf32"]["failed"] == 1 and s["tf32"]["compared"] == 0
    assert s["tf32"]["geomean_b2b"] is None


def test_summary_geomean_minimum_and_keys():
    def rec(prec, out, m, ratio, one, cls="square", paired=None):
        return {"kernel": "x", "precision": prec, "out": out, "m": m, "n": m, "k": m,
                "median_ms": 1.0, "baseline": False, "shape_class": cls,
                "vs_cublas": ratio, "vs_cublas_one_call": one,
                **({"vs_cublas_paired": paired} if paired is not None else {})}
    recs = [rec("bf16", "bf16", 128, 0.5, 0.25, "decode", 0.8),
            rec("bf16", "bf16", 256, 2.0, 1.0, paired=1.25),
            rec("bf16", "bf16", 512, 1.0, 1.0, paired=1.0), rec("bf16", "fp32", 128, 0.9, 0.8),
            rec("fp32", "fp32", 128, 1.2, 1.1),
            {"kernel": "cublas", "precision": "bf16", "out": "bf16", "m": 1, "n": 1, "k": 1,
             "median_ms": 0.1, "baseline": True, "shape_class": "square"}]
    s = shape_bench.summarize(recs)
    assert set(s) == {"bf16", "bf16/c=fp32", "fp32"}
    b = s["bf16"]
    assert b["geomean_b2b"] == pytest.approx(1.0) and b["min_b2b"] == 0.5
    assert b["min_b2b_shape"] == "decode 128x128x128"
    assert b["geomean_one_call"] == pytest.approx((0.25 * 1.0 * 1.0) ** (1 / 3), abs=1e-4)
    # paired by round: its own geometric mean and minimum; none where no record has it
    assert b["geomean_paired"] == pytest.approx(1.0, abs=1e-4) and b["min_paired"] == 0.8
    assert s["fp32"]["geomean_paired"] is None and s["fp32"]["min_paired"] is None
    assert b["below_0.60_b2b"] == ["128x128x128"]
    assert b["geomean_b2b_by_class"] == {"decode": 0.5, "square": pytest.approx(2 ** 0.5, 1e-3)}
    assert s["bf16/c=fp32"]["shapes"] == 1 and s["bf16/c=fp32"]["out"] == "fp32"
    text = shape_bench.format_summary({"summary": s})
    assert "bf16/c=fp32" in text and "1.000" in text


def test_plot_of_the_ratios(tmp_path):
    pytest.importorskip("matplotlib")
    from drvgemm.tools.plots import plot_shape_ratios, shape_ratio_series
    _, _, recs = _shape_records()
    results = {"device": {"name": "NVIDIA H200"}, "records": recs}
    labels, series = shape_ratio_series(results)
    assert labels == ["1000x700x900 odd"]
    assert set(series) == {"bf16", "bf16, C fp32"}
    path = tmp_path / "shapes.png"
    plot_shape_ratios(results, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        plot_shape_ratios({"records": recs[1:3]}, tmp_path / "none.png")


# ---------------------------------------------------------------------------
# the plan and the SASS hash
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saxpy():
    import drvgemm
    return drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90")


def test_plan_info_reads_a_plan_and_hashes_its_kernel(monkeypatch, saxpy):
    import drvgemm
    from drvgemm.runtime import driver, sass
    if sass.nvdisasm_path() is None:
        pytest.skip("no nvdisasm")

    class Plan:
        kernel = "21_wgmma_split"
        instantiation = "BM=128,BN=192,split=2"
        split = 2
        predicted_s = 1.5e-4
        alternatives = [1, 2, 3]

        def compiled(self):
            return saxpy
    seen = {}

    def plan(a, b, c=None, **kw):
        seen.update(kw)
        return Plan()
    monkeypatch.setattr(drvgemm, "plan", plan, raising=False)
    A = driver.DeviceArray((4, 8), np.float32, ptr=0x10000, owner=False)
    B = driver.DeviceArray((8, 4), np.float32, ptr=0x20000, owner=False)
    C = driver.DeviceArray((4, 4), np.float32, ptr=0x30000, owner=False)
    info = shape_bench.plan_info(A, B, C, "tf32")
    assert seen == {"kernel": "auto", "precision": "tf32"}
    assert info["kernel"] == "21_wgmma_split" and info["split"] == 2
    assert info["instantiation"] == "BM=128,BN=192,split=2"
    assert info["predicted_ms"] == 0.15 and info["alternatives"] == 3
    assert info["sass_hash"] == sass.sass_digest(sass.disassemble(saxpy.cubin), saxpy.entry)


def test_one_sass_digest_for_manifest_and_bench():
    import sass_manifest
    from drvgemm.runtime import sass
    assert sass_manifest.sass_digest is sass.sass_digest
    text = ("//--------------------- .text.one --------------------------\n"
            "        /*0000*/                   MOV R1, c[0x0][0x28] ;\n"
            "        /*0010*/                   EXIT ;\n"
            "//--------------------- .text.two --------------------------\n"
            "        /*0000*/                   EXIT ;\n")
    one, two, both = sass.sass_digest(text, "one"), sass.sass_digest(text, "two"), \
        sass.sass_digest(text)
    assert len({one, two, both}) == 3 and len(one) == 16
    assert sass.sass_digest(text.replace("/*0010*/", "/*0020*/"), "one") == one  # addresses out
    with pytest.raises(ValueError):
        sass.sass_digest(text, "three")


# ---------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------
def test_shapes_without_a_gpu_fails_with_a_message(monkeypatch, capsys):
    from drvgemm import cli
    from drvgemm.runtime import driver
    monkeypatch.setattr(driver, "no_gpu_reason", lambda: "no CUDA driver (test)")
    rc = cli.main(["bench", "--shapes", "--quick", "--json", "never.json"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "needs a GPU" in err and "no CUDA driver (test)" in err
    assert "Traceback" not in err


def test_shapes_rejects_unknown_precisions(capsys):
    from drvgemm import cli
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--shapes", "--precisions", "bf16,int8"])
    assert e.value.code == 2
    assert "precisions must be among" in capsys.readouterr().err


def test_run_shape_bench_rejects_unknown_precision_before_the_gpu():
    with pytest.raises(ValueError, match="unknown precision"):
        shape_bench.run_shape_bench(["bf8"])


# ---------------------------------------------------------------------------
# one shape end to end on a fake device (numpy products, wall-clock events)
# ---------------------------------------------------------------------------
class _FakeArray:
    def __init__(self, data):
        self.data = data
        self.dtype = data.dtype

    def fill_bytes(self, byte, stream=None):
        self.data[...] = np.nan


class _FakeOps:
    def __init__(self, precision, m, n, k, sets, seed):
        rng = np.random.default_rng(seed)
        self.precision, self.m, self.n, self.k = precision, m, n, k
        self.torch = None
        self.a = [_FakeArray(rng.uniform(-1, 1, (m, k))) for _ in range(sets)]
        self.b = [_FakeArray(rng.uniform(-1, 1, (k, n))) for _ in range(sets)]
        self.rows = np.arange(min(m, 4))
        self.ref = self.a[0].data[self.rows] @ self.b[0].data
        self.freed = False

    def output(self, out):
        return _FakeArray(np.zeros((self.m, self.n))), None

    def read_rows(self, c):
        return c.data[self.rows].astype(np.float64)

    def free(self):
        self.freed = True


class _FakeEvent:
    def record(self, stream=None):
        import time
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_ms(self, end):
        return (end.t - self.t) * 1e3


def _fake_device(monkeypatch, wrong=False):
    import types

    import drvgemm
    made = []

    def ops(*a, **k):
        made.append(_FakeOps(*a, **k))
        return made[-1]
    monkeypatch.setattr(shape_bench, "_Operands", ops)
    monkeypatch.setattr(shape_bench, "driver", types.SimpleNamespace(
        synchronize=lambda: None, Event=_FakeEvent))
    monkeypatch.setattr(shape_bench, "timing", types.SimpleNamespace(flush_l2=lambda: None))
    monkeypatch.setattr(shape_bench, "plan_info", lambda A, B, C, p, kernel="auto": {
        "kernel": "99_fake", "instantiation": "fake/aligned=1", "sass_hash": "0123456789abcdef",
        "plan": "drvgemm.plan"})

    def gemm(a, b, c, kernel="auto", precision=None):
        c.data[...] = a.data @ b.data + (1.0 if wrong else 0.0)
        return c
    monkeypatch.setattr(drvgemm, "gemm", gemm)

    def baseline(ops, out):
        C, _ = ops.output(out)

        def make(A, B):
            def call():
                C.data[...] = A.data @ B.data
            return call
        return shape_bench._Entry("cublas_gemmex" if out == "fp32" else "cublas", out, True,
                                  [make(A, B) for A, B in zip(ops.a, ops.b)], C,
                                  {"via": "fake", "out": out}, ops.read_rows)
    monkeypatch.setattr(shape_bench, "_gemmex_entry", baseline)
    return made


def test_one_shape_end_to_end_on_a_fake_device(monkeypatch):
    made = _fake_device(monkeypatch)
    shape = Shape(64, 48, 40, "odd")
    recs = shape_bench.bench_shape(shape, "bf16", shape_suite.QUICK_POLICY, 1 << 20,
                                   progress=lambda m: None)
    assert made[0].freed
    drv = [r for r in recs if not r["baseline"]]
    base = [r for r in recs if r["baseline"]]
    assert sorted(r["out"] for r in drv) == ["bf16", "fp32"] and len(base) == 2
    for r in drv:
        assert r["kernel"] == "99_fake" and r["sass_hash"] == "0123456789abcdef"
        assert r["median_ms"] > 0 and r["one_call_ms"] > 0 and r["rel_rmse"] == 0
        assert r["vs_cublas"] > 0 and r["vs_cublas_one_call"] > 0 and "vs_cublas_paired" in r
        assert r["shape_class"] == "odd" and r["shape"] == "64x48x40"
        assert r["api"].startswith("drvgemm.gemm(") and r["first_call_ms"] >= 0
        assert len(r["round_ms"]) == shape_suite.QUICK_POLICY.rounds
        assert r["one_call_n"] == shape_suite.QUICK_POLICY.one_call
    sets = drv[0]["rotation_sets"]
    assert sets == shape_suite.rotation_sets((64 * 40 + 40 * 48) * 2, 1 << 20,
                                             shape_suite.QUICK_POLICY.max_batch)
    s = shape_bench.summarize(recs)
    assert set(s) == {"bf16", "bf16/c=fp32"} and s["bf16"]["compared"] == 1
    json.dumps(recs)


def test_a_wrong_result_is_recorded_not_timed(monkeypatch):
    _fake_device(monkeypatch, wrong=True)
    recs = shape_bench.bench_shape(Shape(16, 16, 16, "odd"), "fp32", shape_suite.QUICK_POLICY,
                                   1 << 20, progress=lambda m: None)
    drv = [r for r in recs if not r["baseline"]][0]
    assert drv["median_ms"] is None and drv["error"].startswith("wrong result")
    assert drv["rel_rmse"] > 0.1
    assert [r for r in recs if r["baseline"]][0]["median_ms"] > 0


def test_suite_budget_and_errors_are_records(monkeypatch):
    import types
    monkeypatch.setattr(shape_bench, "driver", types.SimpleNamespace(
        device=lambda: types.SimpleNamespace(l2_size=1 << 20)))
    monkeypatch.setattr(shape_bench, "device_json", lambda dev: {"name": "fake"})
    calls = []

    def bench_shape(shape, p, policy, l2, progress, seed=0):
        calls.append((shape.name, p))
        if p == "fp16":
            raise RuntimeError("no fp16 today")
        return [shape_bench._error_record(shape, p, "stub")]
    monkeypatch.setattr(shape_bench, "bench_shape", bench_shape)
    shapes = [Shape(8, 8, 8, "odd"), Shape(9, 9, 9, "odd")]
    res = shape_bench.run_shape_bench(["bf16", "fp16"], shapes=shapes, budget_s=1e9,
                                      progress=lambda m: None)
    assert len(calls) == 4 and len(res["records"]) == 4
    assert [r["error"] for r in res["records"] if r["precision"] == "fp16"] == \
        ["RuntimeError: no fp16 today"] * 2
    assert res["suite"]["shapes"] == 2 and res["summary"]["fp16"]["failed"] == 2
    calls.clear()
    res = shape_bench.run_shape_bench(["bf16"], shapes=shapes, budget_s=-1,
                                      progress=lambda m: None)
    assert calls == [] and all("time budget" in r["error"] for r in res["records"])


def test_results_name_the_toolchain_of_their_sass_hashes():
    """A record's sass_hash is the digest of the machine code the measuring
    machine's NVRTC produced: the results' device object says which NVRTC and
    nvJitLink that was, beside the device's own properties."""
    from drvgemm.runtime import compiler
    from drvgemm.runtime.driver import DeviceProperties
    from drvgemm.tools.records import device_json, results_json
    dev = DeviceProperties("NVIDIA H200", (9, 0), 132, 1 << 37, 233472, 49152, 232448, 1024,
                           65536, 65536, 2048, 1024, 32, 32, 60 << 20, 1980000, 3201000, 6016,
                           (1024, 1024, 64), (2**31 - 1, 65535, 65535), "13.0")
    d = device_json(dev)
    assert d["name"] == "NVIDIA H200" and d["cc"] == "9.0" and d["max_block_dims"] == [1024, 1024, 64]
    assert d["toolchain"] == {"nvrtc": "%d.%d" % compiler.nvrtc_version(),
                              "nvjitlink": "%d.%d" % compiler.nvjitlink_version()[:2]}
    assert results_json(dev, [])["device"] == d
