"""Roofline and Little's law arithmetic against every figure of seed 000's
worked example (RTX 4000 Ada, n = 3072), the CLI that prints it, and the
roofline plot."""
from __future__ import annotations

import argparse
import math
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from drvgemm.analysis import roofline as rf
from drvgemm.cli import roofline as rf_cli
from drvgemm.tools import plots

ADA = rf.SPECS["rtx4000ada"]
N = 3072


# --------------------------------------------------------------------------
# seed 000, figure by figure
# --------------------------------------------------------------------------
def test_ridge_point_and_first_compute_bound_size():
    assert f"{rf.ridge_point(ADA):.2f}" == "74.17"
    assert rf.min_compute_bound_n(ADA) == 445


@pytest.mark.parametrize("tflops, gbs, n0", [(26.7, 360, 445), (17.1, 360, 285),
                                            (68.4, 360, 1140), (132.3, 360, 2205)])
def test_threshold_is_exact_at_the_boundary(tflops, gbs, n0):
    # Figures as a datasheet writes them, whose ridge is exactly n0 / 6 FLOP/B:
    # n0 itself is compute-bound (its ideal intensity n/6 equals the ridge);
    # float rounding of peak / bandwidth must not push the answer to n0 + 1
    # (in floats, 17.1e12 / 360e9 * 6 is above 285). A higher peak must.
    spec = rf.RooflineSpec("x", {"fp32": float(f"{tflops}e12")}, dram_bw=float(f"{gbs}e9"))
    assert rf.min_compute_bound_n(spec) == n0
    up = rf.RooflineSpec("x", {"fp32": float(f"{tflops}01e12")}, dram_bw=float(f"{gbs}e9"))
    assert rf.min_compute_bound_n(up) == n0 + 1


def test_operational_intensities():
    assert rf.naive_oi() == 0.25
    assert rf.ideal_oi(N) == pytest.approx(N / 6, rel=1e-12)
    assert rf.ideal_oi(600) == pytest.approx(100.0, rel=1e-12)
    # T x T tile: 2T^2 flops per 2T four-byte elements -> T/4 FLOP/B.
    for t in (8, 16, 32, 128):
        assert rf.tile_oi(t) == pytest.approx(t / 4)
        assert rf.tile_oi(t, in_bytes=2) == pytest.approx(t / 2)
    assert rf.tile_oi(128, 64) == pytest.approx(2 * 128 * 64 / (192 * 4))
    # The seed: a 16 x 16 tile cuts global traffic by about 93 %.
    assert f"{rf.tile_traffic_reduction(16):.2%}" == "93.75%"
    assert math.floor(100 * rf.tile_traffic_reduction(16)) == 93


def test_work_and_traffic_at_3072():
    tb = rf.time_bounds(ADA, N)
    assert tb.flops == 2 * N**3
    assert f"{tb.flops:.3e}" == "5.798e+10"
    assert f"{tb.flops / 1e9:.2f}" == "57.98"
    # The seed's "MB" is decimal: 3 * 3072^2 * 4 B = 113,246,208 B.
    assert tb.ideal_bytes == 113_246_208
    assert rf.format_bytes(tb.ideal_bytes) == "113.25 MB"
    assert f"{tb.ideal_bytes / 1e9:.5f}" == "0.11325"
    assert tb.naive_bytes == 8 * N**3


def test_time_bounds_at_3072():
    tb = rf.time_bounds(ADA, N)
    assert rf.format_time(tb.compute) == "2.17 ms"
    assert rf.format_time(tb.ideal_dram) == "0.31 ms"
    assert tb.compute > tb.ideal_dram          # the seed's point (3): compute dominates


def test_no_reuse_figures():
    """8 * 3072^3 B is 231,928,233,984 B = 231.93 GB; the seed prints 231.87 GB,
    0.03 % low, and derives 644.08 ms and 92.75 ms from that printed value.
    Both chains are checked: the exact one, and that the same bandwidth
    division applied to the seed's 231.87 GB gives the seed's two times."""
    tb = rf.time_bounds(ADA, N)
    assert rf.format_bytes(tb.naive_bytes) == "231.93 GB"
    assert abs(231.87e9 - tb.naive_bytes) / tb.naive_bytes < 3e-4
    assert rf.format_time(tb.naive_dram) == "644.25 ms"
    assert rf.format_time(tb.naive_l2) == "92.77 ms"
    assert rf.format_time(231.87e9 / ADA.dram_bw) == "644.08 ms"
    assert rf.format_time(231.87e9 / ADA.l2_bw) == "92.75 ms"


def test_summary_table():
    rows = rf.summary_rows(ADA, N)
    assert [r.limiter for r in rows] == ["compute", "DRAM bandwidth", "L2 bandwidth"]
    assert [rf.format_time(r.time) for r in rows] == ["2.17 ms", "644.25 ms", "92.77 ms"]
    assert [rf.format_ratio(r.ratio) for r in rows] == ["1.0x", "~296x", "~42x"]
    # The seed's ratios from its own rounded times come out the same.
    assert rf.format_ratio(644.08 / 2.17) == "~296x"
    assert rf.format_ratio(92.75 / 2.17) == "~42x"


def test_small_gemm_is_memory_bound_even_with_ideal_reuse():
    rows = rf.summary_rows(ADA, 256)      # 256 < 445
    assert rows[0].limiter == "DRAM bandwidth"
    assert rows[0].ratio > 1


def test_littles_law():
    bpc = rf.bytes_per_cycle(ADA.dram_bw, ADA.clock_hz)
    assert f"{bpc:.2f}" == "165.52"
    inflight = rf.bytes_in_flight(ADA.dram_latency_cycles, ADA.dram_bw, ADA.clock_hz)
    assert f"{inflight:,.0f}" == "132,414"
    assert f"{inflight / 1e3:.1f}" == "132.4"       # the seed's "132.4 KB"


# --------------------------------------------------------------------------
# general forms
# --------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(peak_t=st.integers(1, 2000), bw_g=st.integers(50, 10_000),
       prec=st.sampled_from(["fp32", "bf16"]))
def test_min_compute_bound_n_is_the_smallest(peak_t, bw_g, prec):
    spec = rf.RooflineSpec("x", {prec: peak_t * 1e12}, dram_bw=bw_g * 1e9)
    n = rf.min_compute_bound_n(spec, prec)
    in_b = rf.PRECISION_BYTES[prec]
    ridge = Fraction(peak_t * 1000, bw_g)

    def oi(size):   # square ideal intensity, exact
        return Fraction(2 * size**3, size * size * 3 * in_b)

    assert oi(n) >= ridge
    assert n == 1 or oi(n - 1) < ridge


@settings(max_examples=60, deadline=None)
@given(t=st.sampled_from([16, 32, 64, 128]), mult=st.integers(1, 6), k=st.integers(1, 300))
def test_tiled_traffic_is_naive_over_tile(t, mult, k):
    m = n = t * mult
    c_write = m * n * 4
    assert rf.tiled_bytes(m, n, k, t) - c_write == rf.naive_bytes(m, n, k) // t
    assert rf.tiled_bytes(m, n, k, t, read_c=True) - rf.tiled_bytes(m, n, k, t) == c_write


def test_tiled_traffic_counts_edge_blocks():
    # 130 columns with 128-wide tiles: A is streamed by two block columns.
    assert rf.tiled_bytes(128, 130, 64, 128) == (128 * 64 * 2 + 64 * 130 * 1) * 4 + 128 * 130 * 4


def test_ideal_bytes_mixed_precision():
    # bf16 inputs, fp32 C: (mk + kn) * 2 + mn * 4
    assert rf.ideal_bytes(100, 200, 300, in_bytes=2, out_bytes=4) == (100 * 300 + 300 * 200) * 2 + 100 * 200 * 4


def test_attainable_and_fraction():
    assert rf.attainable(10, ADA.peak(), ADA.dram_bw) == pytest.approx(3.6e12)
    assert rf.attainable(1000, ADA.peak(), ADA.dram_bw) == ADA.peak()
    # The seed's register-tiled kernel: 8.82 TFLOP/s; with T = 128 tiles OI = 32.
    assert rf.roofline_fraction(8.82e12, 32, ADA) == pytest.approx(8.82 / 11.52)
    assert rf.roofline_fraction(8.82e12, 512, ADA) == pytest.approx(8.82 / 26.7)


def test_datasheet_specs():
    h200 = rf.get_spec("H200")
    assert h200.peak("bf16") == pytest.approx(989.4e12)
    assert h200.peak("tf32") == pytest.approx(494.7e12)
    assert h200.dram_bw == pytest.approx(4.8e12)
    assert rf.get_spec("h100").dram_bw == pytest.approx(3.35e12)
    a100 = rf.get_spec("A100")
    assert (a100.peak("fp32"), a100.peak("tf32"), a100.peak("fp16")) == pytest.approx((19.5e12, 156e12, 312e12))
    assert a100.dram_bw == pytest.approx(2.039e12)
    assert rf.ridge_point(h200) == pytest.approx(67 / 4.8)
    with pytest.raises(ValueError, match="no bf16 peak"):
        ADA.peak("bf16")


@pytest.mark.parametrize("alias", ["RTX 4000 Ada", "rtx4000-ada", "rtx4000ada", "NVIDIA RTX 4000 Ada"])
def test_get_spec_aliases(alias):
    assert rf.get_spec(alias) is ADA


def test_get_spec_unknown():
    with pytest.raises(ValueError, match="no built-in roofline figures"):
        rf.get_spec("GTX 480")


@pytest.mark.parametrize("name,key", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA RTX 4000 Ada Generation", "rtx4000ada"),
    ("NVIDIA H100 PCIe", None), ("NVIDIA H200 NVL", None), ("NVIDIA A100-SXM4-40GB", None),
    ("NVIDIA RTX 4000 SFF Ada Generation", None), ("NVIDIA GeForce RTX 4090", None)])
def test_device_name_mapping(name, key):
    got = rf.spec_for_device_name(name)
    assert got is (None if key is None else rf.SPECS[key])


def test_with_measured():
    h200 = rf.SPECS["h200"]
    m = h200.with_measured({"fp32": 60.2e12, "dram_bw": 4.27e12, "l2_bw": None})
    assert m.peak("fp32") == 60.2e12 and m.dram_bw == 4.27e12
    assert m.peak("bf16") == h200.peak("bf16")
    assert m.measured == ("dram_bw", "fp32")
    assert h200.peak("fp32") == 67e12 and h200.measured == ()      # original untouched
    assert rf.ridge_point(m) == pytest.approx(60.2 / 4.27)
    assert h200.with_measured(None) is h200
    with pytest.raises(ValueError, match="unknown measured figure"):
        h200.with_measured({"fp64": 1e12})
    with pytest.raises(ValueError, match="positive"):
        h200.with_measured({"fp32": -1.0})


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------
def _run(argv, monkeypatch, live=(None, None)):
    monkeypatch.setattr(rf_cli, "live_spec", lambda measured=None: live)
    parser = argparse.ArgumentParser(prog="drvgemm")
    rf_cli.add(parser.add_subparsers())
    args = parser.parse_args(["roofline"] + argv)
    return args.func(args)


SEED_STRINGS = ["74.17 FLOP/B", "n >= 445", "0.25 FLOP/B", "512.00 FLOP/B", "T=16: 4.00",
                "5.798e+10", "57.98 GFLOP", "2.17 ms", "113.25 MB", "0.11325 GB", "0.31 ms",
                "231.93 GB", "644.25 ms", "92.77 ms", "~296x", "~42x", "1.0x",
                "165.52 B/cycle", "132,414 B"]


def test_cli_reproduces_the_seed(monkeypatch, capsys):
    assert _run(["--gpu", "RTX 4000 Ada"], monkeypatch) == 0
    out = capsys.readouterr().out
    assert "RTX 4000 Ada" in out
    for s in SEED_STRINGS:
        assert s in out, s
    table = out[out.index("Summary"):]
    assert "ideal tiling" in table and "DRAM bandwidth" in table and "L2 bandwidth" in table


def test_cli_live_gpu_without_figures_falls_back(monkeypatch, capsys):
    assert _run([], monkeypatch, live=(None, "NVIDIA GeForce GTX 480")) == 0
    captured = capsys.readouterr()
    assert "no built-in figures for NVIDIA GeForce GTX 480; showing H200" in captured.err
    assert "Roofline of H200" in captured.out


def test_cli_live_gpu_uses_its_spec(monkeypatch, capsys):
    live = rf.SPECS["h200"].with_measured({"fp32": 60.2e12})
    assert _run([], monkeypatch, live=(live, "NVIDIA H200")) == 0
    out = capsys.readouterr().out
    assert "Roofline of H200" in out and "measured: fp32" in out and "60.2 TFLOP/s" in out


def test_cli_other_device_and_precision(monkeypatch, capsys):
    assert _run(["--gpu", "H200", "--precision", "bf16", "--n", "4096"], monkeypatch) == 0
    out = capsys.readouterr().out
    assert "989.4 TFLOP/s" in out and "4.8 TB/s" in out
    assert f"{989.4e12 / 4.8e12:.2f} FLOP/B" in out
    # bf16 inputs with an fp32 C: ideal intensity 2n / (2*2 + 4) = n/4.
    assert "ideal reuse (n/4)" in out and "1024.00 FLOP/B" in out
    assert "(assumed)" in out                     # no datasheet DRAM latency


@pytest.mark.parametrize("argv,msg", [
    (["--gpu", "GTX 480"], "not in the device catalogue"),
    (["--gpu", "seed"], "seed has no roofline figures"),
    (["--gpu", "RTX 4000 Ada", "--precision", "bf16"], "no bf16 peak"),
    (["--latency", "-100"], "--latency must be a positive number"),
    (["--latency", "0"], "--latency must be a positive number"),
    (["--n", "0"], "--n must be"),
])
def test_cli_errors_are_one_line(monkeypatch, capsys, argv, msg):
    assert _run(argv, monkeypatch) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err and err.count("\n") == 1


# --------------------------------------------------------------------------
# plot
# --------------------------------------------------------------------------
FAKE_POINTS = [("01_naive", 0.25, 0.9e12), ("02_smem_tiled", 8, 5.9e12), ("04_reg_tiled", 32, 17.1e12),
               ("05_reg_2d", 32, 22e12), ("06_vectorized", 32, 24e12), ("07_warp_tiled", 64, 36e12),
               ("08_double_buf", 64, 38e12), ("cublas fp32", 64, 51e12), ("10_mma_tf32", 64, 180e12),
               ("12_wgmma_bf16", 128, 700e12), ("cublas bf16", 128, 720e12)]


def test_plot_writes_png_with_clear_labels(tmp_path):
    pytest.importorskip("matplotlib")
    spec = rf.SPECS["h200"].with_measured({"fp32": 60.2e12, "tf32": 321.9e12, "bf16": 643e12})
    path = tmp_path / "roof.png"
    layout = plots.plot_roofline(spec, FAKE_POINTS, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [lab for lab, _ in sorted(layout.labels)] == sorted(p[0] for p in FAKE_POINTS)
    boxes = [b for _, b in layout.labels]
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[2] <= layout.width and 0 <= a[1] and a[3] <= layout.height
        for b in boxes[i + 1:]:
            assert plots._overlap(a, b) == 0, (a, b)
        for label, x, y in layout.points:     # no label hides a marker centre
            assert not (a[0] <= x <= a[2] and a[1] <= y <= a[3]), label


def test_plot_with_l2_slope_and_one_point(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "ada.png"
    layout = plots.plot_roofline(ADA, [("matmul_l1_reg", 32, 8.82e12)], path)
    assert path.stat().st_size > 10_000
    assert len(layout.points) == 1 and len(layout.labels) == 1


def test_plot_rejects_bad_points(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match="positive"):
        plots.plot_roofline(ADA, [("bad", 0, 1e12)], tmp_path / "x.png")


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"drvgemm\[plot\]"):
        plots.plot_roofline(ADA, FAKE_POINTS[:2], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


# --------------------------------------------------------------------------
# bench results on the roofline
# --------------------------------------------------------------------------
def _fake_rungs(monkeypatch):
    from drvgemm.ladders.gemm import registry as rungs
    from drvgemm.ladders.gemm.registry import Rung
    table = {
        "02_smem_tiled": Rung("02_smem_tiled", "x.cu", "k2", "fp32", (32, 32, 1), 32, 32),
        "04_reg_tiled": Rung("04_reg_tiled", "x.cu", "k4", "fp32", (256, 1, 1), 128, 128),
        "11_mma_bf16": Rung("11_mma_bf16", "x.cu", "k11", "bf16", (128, 1, 1), 128, 256),
    }
    monkeypatch.setattr(rungs, "by_name", lambda: table)
    return table


def _rec(kernel, precision, size, tflops, baseline=False):
    return {"kernel": kernel, "precision": precision, "m": size, "n": size, "k": size,
            "median_ms": 2 * size**3 / (tflops * 1e12) * 1e3, "tflops": tflops,
            "rel_rmse": 1e-6, "baseline": baseline}


BENCH = {"device": {"name": "NVIDIA H200", "sm_count": 132}, "records": [
    _rec("02_smem_tiled", "fp32", 256, 1.5), _rec("02_smem_tiled", "fp32", 4096, 5.7),
    _rec("04_reg_tiled", "fp32", 4096, 17.1), _rec("11_mma_bf16", "bf16", 4096, 420.0),
    _rec("cublas", "fp32", 4096, 51.2, True), _rec("cublas_gemmex", "fp32", 4096, 50.1, True),
    _rec("cublas", "bf16", 4096, 720.5, True),
    {"kernel": "softmax_04", "precision": "fp32", "m": 4096, "n": 4096, "k": 0,
     "median_ms": 0.1, "gbps": 3000.0, "baseline": False},
]}


def test_record_intensity_counts_the_tiling(monkeypatch):
    table = _fake_rungs(monkeypatch)
    rec = _rec("04_reg_tiled", "fp32", 4096, 17.1)
    # 128 x 128 tiles: A and B each streamed 32 times, C written once.
    moved = (4096 * 4096 * 32 * 2) * 4 + 4096 * 4096 * 4
    assert rf.record_intensity(rec, table["04_reg_tiled"]) == pytest.approx(2 * 4096**3 / moved)
    # ~T/4, a little under it for the write of C
    assert 31 < rf.record_intensity(rec, table["04_reg_tiled"]) < 32
    # A library: ideal reuse, 2n/12 for fp32.
    assert rf.record_intensity(_rec("cublas", "fp32", 4096, 51.2, True)) == pytest.approx(4096 / 6)


def test_bench_points(monkeypatch):
    _fake_rungs(monkeypatch)
    pts = {label: (oi, fl, prec) for label, oi, fl, prec in plots.bench_points(BENCH)}
    assert set(pts) == {"02_smem_tiled", "04_reg_tiled", "11_mma_bf16", "cuBLAS fp32", "cuBLAS bf16"}
    assert pts["02_smem_tiled"][1] == pytest.approx(5.7e12)          # the largest size, not 256
    assert pts["cuBLAS fp32"][1] == pytest.approx(51.2e12)           # the faster baseline
    assert pts["11_mma_bf16"][2] == "bf16"
    assert pts["11_mma_bf16"][0] == pytest.approx(
        2 * 4096**3 / ((4096 * 4096 * 16 + 4096 * 4096 * 32) * 2 + 4096 * 4096 * 4))


def test_plot_bench(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    _fake_rungs(monkeypatch)
    path = tmp_path / "h200-roofline.png"
    layout = plots.plot_bench(BENCH, path, measured={"fp32": 60.2e12, "bf16": 643e12, "dram_bw": 4.27e12})
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert sorted(lab for lab, _ in layout.labels) == sorted(
        ["02_smem_tiled", "04_reg_tiled", "11_mma_bf16", "cuBLAS fp32", "cuBLAS bf16"])
    with pytest.raises(ValueError, match="no built-in roofline figures"):
        plots.plot_bench({"device": {"name": "GTX 480"}, "records": BENCH["records"]}, path)
    with pytest.raises(ValueError, match="no GEMM records"):
        plots.plot_bench({"device": {"name": "NVIDIA H200"}, "records": []}, path)
