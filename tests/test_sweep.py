"""The sweep harness (drvgemm/tools/sweep.py) on fake timings and fake child
processes, and the three sweep scripts built on it (no GPU)."""
import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from drvgemm.tools import sweep
from drvgemm.tools.sweep import Entry

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _script(name):
    key = f"_sweep_script_{name}"
    if key not in sys.modules:   # dataclasses look their module up there
        spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


# ---------------------------------------------------------------------------
# paired round-robin timing
# ---------------------------------------------------------------------------
def test_round_robin_rotates_the_order_each_round():
    order = []
    entries = [Entry(x, lambda: None) for x in "abc"]
    sweep.round_robin(entries, 4, lambda e: order.append(e.name) or 1.0)
    assert order == list("abc" "bca" "cab" "abc")
    assert all(e.rounds == [1.0] * 4 for e in entries)


def test_a_failing_entry_sits_out_and_a_lost_context_stops_the_sweep():
    class Sticky(Exception):
        name = "CUDA_ERROR_ILLEGAL_ADDRESS"
    calls = []

    def measure(e):
        calls.append(e.name)
        if e.name == "bad" and len(e.rounds) == 1:
            raise RuntimeError("boom")
        return 2.0
    entries = [Entry("ok", None), Entry("bad", None)]
    sweep.round_robin(entries, 3, measure)
    assert entries[0].rounds == [2.0] * 3 and entries[1].rounds == [2.0]
    assert "boom" in entries[1].error and calls.count("bad") == 2

    def lost(e):
        raise Sticky("gone")
    with pytest.raises(Sticky):
        sweep.round_robin([Entry("x", None), Entry("y", None)], 2, lost)


def test_ratios_paired_and_of_medians():
    base = Entry("cublas", None, baseline=True, meta={"via": "torch", "out": "bf16"})
    slow_base = Entry("cublas_gemmex", None, baseline=True, meta={"via": "cupy", "out": "bf16"})
    var = Entry("20_x", None, meta={"variant": "v1", "defines": {"A": 1}})
    broken = Entry("20_y", None, meta={"variant": "v2"})
    base.rounds = [1.0, 2.0, 1.0]          # a slow second round (the clocks dropped)
    slow_base.rounds = [3.0, 3.0, 3.0]
    var.rounds = [0.5, 1.0, 2.0]
    broken.error = "WRONG"
    for e in (base, slow_base, var):
        e.err = 1e-3
    recs = sweep.ratio_records([base, slow_base, var, broken], 4096, 4096, 4096, "bf16")
    r = {x["kernel"]: x for x in recs}
    v = r["20_x"]
    assert v["median_ms"] == 1.0 and v["vs_best_cublas"] == 1.0   # median 1.0 / median 1.0
    assert v["vs_best_cublas_paired"] == statistics.median([2.0, 2.0, 0.5])
    assert v["paired_range"] == [0.5, 2.0]
    assert v["best_cublas"] == "cublas (torch, out bf16)"
    assert v["variant"] == "v1" and v["defines"] == {"A": 1} and v["baseline"] is False
    assert v["spread"] == 1.5 and v["round_ms"] == [0.5, 1.0, 2.0]
    assert v["tflops"] == pytest.approx(2 * 4096 ** 3 / 1e-3 / 1e12, rel=1e-2)
    assert "vs_best_cublas" not in r["cublas"] and r["cublas"]["baseline"] is True
    assert r["20_y"]["median_ms"] is None and r["20_y"]["error"] == "WRONG"
    table = sweep.format_table(recs, "title")
    assert table.splitlines()[0] == "title" and "not timed: WRONG" in table


def test_paired_ratios_and_geomean():
    assert sweep.paired_ratios([2, 4], [1, 2]) == [2.0, 2.0]
    assert sweep.paired_ratios([2, 4, 6], [1, 0]) == [2.0]   # zip, zero skipped
    assert sweep.geomean([1, 4]) == pytest.approx(2.0)
    assert sweep.geomean([None, 0, float("nan")]) is None


# ---------------------------------------------------------------------------
# compile pool, resources, isolated checks
# ---------------------------------------------------------------------------
def _double(job):
    return {"key": job.key, "twice": 2 * job.key}


def test_compile_all_keeps_the_order_serially_and_in_processes():
    jobs = [sweep.CompileJob(i, "x.cu", "e", None, "sm_90") for i in range(5)]
    assert [r["twice"] for r in sweep.compile_all(jobs, worker=_double, processes=1)] == \
        [0, 2, 4, 6, 8]
    assert sweep.compile_all([], worker=_double) == []


def test_compile_job_reports_an_error_instead_of_raising():
    res = sweep.compile_job(sweep.CompileJob("k", "no_such_kernel.cu", "nope", None, "sm_90"))
    assert "error" in res
    ok, why = sweep.resources_ok(res)
    assert not ok and why


def test_resources_ok():
    good = {"registers": 168, "spills": 0, "stack": 0, "serialized": False}
    assert sweep.resources_ok(good, registers=168) == (True, "168 regs")
    assert not sweep.resources_ok(dict(good, spills=8))[0]
    assert sweep.resources_ok(dict(good, spills=8), allow_spill=True)[0]
    assert not sweep.resources_ok(dict(good, serialized=True))[0]
    assert "needs 168" in sweep.resources_ok(dict(good, registers=170), registers=168)[1]


class FakeRun:
    """subprocess.run for check_isolated: the child answers items until it
    meets one named 'crash', then exits 3 (a lost context)."""

    def __init__(self):
        self.inputs = []

    def __call__(self, argv, input, capture_output, text, timeout):
        items = json.loads(input)
        self.inputs.append([i["key"] for i in items])
        lines = [json.dumps({"ready": True})]
        for it in items:
            if it["key"][1] == "crash":
                return subprocess.CompletedProcess(argv, 3, "\n".join(lines), "lost context")
            lines.append(json.dumps({"key": it["key"], "ok": it["key"][1] != "wrong",
                                     "detail": "d"}))
        return subprocess.CompletedProcess(argv, 0, "\n".join(lines), "")


def test_check_isolated_restarts_without_the_item_that_crashed():
    items = [{"key": ["bf16", x]} for x in ("a", "crash", "wrong", "b")]
    run = FakeRun()
    res = sweep.check_isolated(["child"], items, run=run)
    assert res[("bf16", "a")] == (True, "d") and res[("bf16", "b")] == (True, "d")
    assert res[("bf16", "wrong")][0] is False
    assert res[("bf16", "crash")] == (False, "child exited 3: lost context")
    assert run.inputs == [[["bf16", x] for x in ("a", "crash", "wrong", "b")],
                          [["bf16", "wrong"], ["bf16", "b"]]]


def test_check_isolated_blames_nobody_when_the_child_never_starts():
    def run(argv, input, **kw):
        return subprocess.CompletedProcess(argv, 1, "", "ImportError: no drvgemm")
    res = sweep.check_isolated(["child"], [{"key": "a"}, {"key": "b"}], run=run)
    assert res == {"a": (False, "check not run: ImportError: no drvgemm"),
                   "b": (False, "check not run: ImportError: no drvgemm")}


def test_child_checks_prints_one_line_per_item(capsys):
    def check(item):
        if item["key"] == "boom":
            raise ValueError("bad defines")
        return item["key"] == "good", "detail"
    assert sweep.child_checks([{"key": "good"}, {"key": "boom"}, {"key": "bad"}], check) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"ready": True}
    assert lines[1] == {"key": "good", "ok": True, "detail": "detail"}
    assert lines[2]["ok"] is False and "bad defines" in lines[2]["detail"]
    assert lines[3]["ok"] is False


# ---------------------------------------------------------------------------
# the scripts: variant tables over the registered entries
# ---------------------------------------------------------------------------
def test_mma_sweep_variants_start_from_the_registry():
    from drvgemm.ladders.gemm.registry import by_name
    mod = _script("mma_sweep")
    reg = by_name()
    for name, v in mod.VARIANTS.items():
        r = mod.variant_rung(name)
        base = reg[v.rung]
        assert r.name == f"{base.name}[{name}]"
        if base.defines:
            assert r.defines == {**base.defines, **v.defines}
        assert r.block == base.block
        if v.defines == {k: base.defines.get(k) for k in v.defines}:
            assert r.smem == base.smem, f"{name}: the registered constants give the registered smem"
    # a variant of rung 12 with 4 stages of BK=32 tiles: 4 x (128x32 + 32x256) bf16
    assert mod.variant_rung("12_base").smem == 4 * (128 * 32 + 32 * 256) * 2


def test_autotune_variant_zero_is_the_registered_rung_8():
    from drvgemm.ladders.gemm.registry import by_name
    mod = _script("autotune_warp_tiled")
    reg = by_name()["08_warp_tiled"]
    r = mod.variant_rung(mod.VARIANTS[0])
    assert (r.defines, r.block, r.smem, r.tile_m, r.tile_n) == \
        (reg.defines, reg.block, reg.smem, reg.tile_m, reg.tile_n)
    assert len({json.dumps(v, sort_keys=True) for v in mod.VARIANTS}) == len(mod.VARIANTS)


def test_wgmma_sweep_lists_its_tables_and_needs_a_gpu(capsys):
    mod = _script("wgmma_sweep")
    assert mod.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in list(mod.VARIANTS) + list(mod.TF32_VARIANTS))
    r = mod.variant_rung("bf16", "static_g16", mod.VARIANTS["static_g16"].defines)
    assert r.defines["EPILOGUE"] == mod.BASE["EPILOGUE"]


def test_sweep_scripts_say_no_gpu(monkeypatch):
    from drvgemm.runtime import driver
    if driver.has_gpu():
        pytest.skip("a GPU is present")
    for name in ("mma_sweep", "wgmma_sweep"):
        assert _script(name).main(["--variants", next(iter(_script(name).VARIANTS))]) == 2


def test_side_by_side_refuses_a_shape_or_precision_it_has_no_candidates_for(capsys):
    """A shape asked for that the script does not list used to be skipped in
    silence (x 56 asked of the row-lanes script ran nothing for it); now the
    command stops before any GPU work and names the shapes it knows."""
    from drvgemm.ladders.softmax.registry import ROW_TILE_CONFIGS
    from drvgemm.tools.softmax_sweep import side_by_side
    cands = {"bf16": {(262144, 40): [ROW_TILE_CONFIGS[0]], (131072, 64): [ROW_TILE_CONFIGS[0]]}}
    with pytest.raises(SystemExit) as e:
        side_by_side(cands, ["--shapes", "262144x40,262144x56"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "262144x56" in err and "131072x64, 262144x40" in err
    with pytest.raises(SystemExit):
        side_by_side(cands, ["--precisions", "fp32"])
    assert "precision fp32" in capsys.readouterr().err


def test_sweep_report_shows_calls_back_to_back_where_measured(capsys):
    """side_by_side --b2b: each candidate's time a call back to back and its
    fraction of the copy's, beside the one-call-at-a-time columns; a report
    of records without them keeps its old columns."""
    from drvgemm.tools.softmax_sweep import print_sweep_report
    copy = {"kernel": "copy", "m": 4, "n": 1048576, "gbps": 2600.0, "median_ms": 0.0128,
            "b2b_ms": 0.0107}
    rec = {"kernel": "softmax_09_split_row", "m": 4, "n": 1048576, "gbps": 1950.0,
           "copy_fraction": 0.75, "median_ms": 0.0171, "b2b_ms": 0.0157,
           "copy_fraction_b2b": 0.6815, "correct": True, "registers": 64, "smem_bytes": 0,
           "config": "split", "auto": True}
    print_sweep_report([copy, rec])
    out = capsys.readouterr().out
    assert "b2b ms" in out and "b2b of copy" in out
    line = next(ln for ln in out.splitlines() if ln.rstrip().endswith("split  <- auto"))
    assert "0.0157" in line and "0.681" in line
    print_sweep_report([{k: v for k, v in r.items() if not k.startswith(("b2b", "copy_fraction_b"))}
                        for r in (copy, rec)])
    assert "b2b" not in capsys.readouterr().out


def test_kernel_times_counts_the_staging_copy_as_gemms():
    """benchmarks/kernel_times.py split ncu's kernels into drvgemm's and
    torch's by entry name; the padded copy of a misaligned operand
    (pad_rows_2) was missing from drvgemm's names and was counted as torch's
    (H200, 8191 x 8193 x 4096). The rows below are that run's kernels."""
    kt = _script("kernel_times")
    rows = []
    for i, (name, us) in enumerate([("pad_rows_2", "42240"), ("gemm_tma_wgmma_bf16", "1137540"),
                                    ("split_reduce_deep_bf16", "5380"), ("scale_c_bf16", "2000"),
                                    ("cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm>",
                                     "4784640")]):
        for metric, value in (("gpu__time_duration.sum", us), ("launch__grid_size", "132"),
                              ("launch__block_size", "384")):
            rows.append(f'"{i}","1","python3","127.0.0.1","void {name}(args)","0","(1,1,1)",'
                        f'"(1,1,1)","0","9.0","{metric}","ns","{value}"')
    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Block Size",'
            '"Grid Size","Stream","Device","Metric Name","Metric Unit","Metric Value"')
    recs = kt.attribute("\n".join([head] + rows), "8191x8193x4096", kt.drvgemm_kernels())
    path = {r["kernel"]: r["path"] for r in recs}
    assert path == {"pad_rows_2": "drvgemm", "gemm_tma_wgmma_bf16": "drvgemm",
                    "split_reduce_deep_bf16": "drvgemm", "scale_c_bf16": "drvgemm",
                    "cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm>": "torch"}
    assert {r["kernel"]: r["median_us"] for r in recs}["pad_rows_2"] == 42.24


# ---------------------------------------------------------------------------
# the softmax side-by-side scripts: every candidate they would time is a plan
# ---------------------------------------------------------------------------
SIDE_BY_SIDE_SCRIPTS = ["softmax_packed", "softmax_pipelined", "softmax_row_tile_lanes",
                        "softmax_rows_near_128", "softmax_split_held", "softmax_tiny_rows",
                        "softmax_route_gaps"]


def _candidates_handed_over(name, monkeypatch):
    """What a side-by-side script's main() hands side_by_side, one dict a call."""
    mod = _script(name)
    seen = []
    monkeypatch.setattr(mod, "side_by_side",
                        lambda cands, argv=None, desc="": seen.append(cands) or 0)
    assert mod.main([]) == 0 and seen
    return seen


@pytest.mark.parametrize("name", SIDE_BY_SIDE_SCRIPTS)
def test_side_by_side_candidates_are_plans_within_the_h200(name, monkeypatch):
    """Each script's candidates (what main() hands side_by_side) hold their
    rows and plan for them: a candidate that does not is skipped by the sweep
    in silence, and one that a registry change made invalid would surface only
    as a FAILED line on the GPU machine."""
    from drvgemm.ladders.softmax import dispatch as sm
    from drvgemm.tools.softmax_sweep import _fits
    n = 0
    for cands in _candidates_handed_over(name, monkeypatch):
        for prec, shapes in cands.items():
            for (rows, cols), cfgs in shapes.items():
                assert cfgs, f"{name}: no candidates for {prec} {rows}x{cols}"
                for cfg in cfgs:
                    # the sweep skips a candidate that does not hold the row: never timed
                    size = 4 if prec == "fp32" else 2
                    assert _fits(cfg, cols, (9, 0), size), \
                        f"{name}: {cfg.describe()} never runs at {prec} {rows}x{cols}"
                    p = sm.config_plan(cfg, rows, cols, prec)
                    assert p.smem * getattr(cfg, "min_blocks", 1) <= 227 * 1024, p.describe()
                    n += 1
    assert n > 0


def test_route_gaps_first_candidate_is_autos_choice_today(monkeypatch):
    """softmax_route_gaps.py times each shape's candidates against its first,
    which its docstring calls auto's choice today: a route moved since (the
    thirty-sixth round moved the fp32 rows past 155645) must move the list."""
    from drvgemm.ladders.softmax import plan as sp
    (cands,) = _candidates_handed_over("softmax_route_gaps", monkeypatch)
    for prec, shapes in cands.items():
        for (rows, cols), cfgs in shapes.items():
            auto = sp.plan(rows, cols, prec).config
            assert cfgs[0] == auto, (prec, rows, cols, cfgs[0].describe(), auto.describe())


def test_rung20_before_after_builds_the_old_source_with_the_trees_defines(tmp_path):
    """benchmarks/rung20_before_after.py: the tree's own source copied to
    OLD_DIR builds to the registered instantiation's machine code (same
    defines, its headers found in the tree), a header in OLD_DIR is read
    before the tree's, and a shape spec names precision, M x N x K, member
    and split."""
    from drvgemm.ladders.gemm.registry import by_name, rung_kernel
    from drvgemm.runtime import sass, sources
    from drvgemm.runtime.errors import CompileError
    mod = _script("rung20_before_after")
    assert mod.parse_spec("bf16:2048") == ("bf16", 2048, 2048, 2048, None, None)
    assert mod.parse_spec("fp16:16x4096x1024:20_tma_wgmma_fp16_16x64:4") == \
        ("fp16", 16, 4096, 1024, "20_tma_wgmma_fp16_16x64", 4)
    r = by_name()["20_tma_wgmma_bf16_64x128"]
    src = Path(sources.find_source(r.source))
    (tmp_path / src.name).write_text(src.read_text())
    for split_k in (False, True):
        old = mod.old_build(str(tmp_path), r, True, split_k)
        new = rung_kernel(r, True, narrow_output=True, split_k=split_k)
        assert old.split_k is split_k
        assert sass.kernel_sass_hash(old) == sass.kernel_sass_hash(new)
    (tmp_path / "20_tma_wgmma").mkdir()
    (tmp_path / "20_tma_wgmma" / "scheduler.cuh").write_text('#error "the old header"\n')
    with pytest.raises(CompileError, match="the old header"):
        mod.old_build(str(tmp_path), r, True, False)
