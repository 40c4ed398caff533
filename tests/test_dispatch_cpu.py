"""The dispatcher's choice, with no GPU: a committed table of shapes x
precisions (tests/data/dispatch_choices.json) holds what kernel="auto"
picks on the H200, so that any change of choice -- a new registry entry, a
new figure in analysis/gemm_model.py -- shows up as a diff to review;
the Plan's fields; the model's own invariants; the CLI.

    python tests/test_dispatch_cpu.py      # rewrite the table after a deliberate change
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

import drvgemm
from drvgemm.analysis import gemm_model as gm
from drvgemm.cli import main as cli_main
from drvgemm.ladders.gemm import dispatch, plan as planning
from drvgemm.ladders.gemm.registry import by_name

TABLE = Path(__file__).resolve().parent / "data" / "dispatch_choices.json"
RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"

SHAPES = [
    # decode: M small against model weights
    (1, 4096, 4096), (2, 4096, 4096), (4, 4096, 4096), (8, 4096, 4096), (16, 4096, 4096),
    (17, 4096, 4096), (32, 4096, 4096), (33, 4096, 4096), (64, 4096, 4096),
    (128, 4096, 4096), (1, 11008, 4096), (16, 14336, 4096), (1, 128256, 4096), (8, 128256, 4096),
    (1, 28672, 8192),
    # prefill
    (512, 4096, 11008), (2048, 4096, 4096), (16384, 4096, 4096),
    # squares, including non-powers of two
    (128, 128, 128), (256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048),
    (3072, 3072, 3072), (4096, 4096, 4096), (8192, 8192, 8192), (6144, 6144, 6144),
    # long K, short K, tall and wide
    (128, 128, 65536), (64, 64, 32768), (4096, 4096, 128), (16384, 1024, 1024),
    (1024, 16384, 1024),
    # odd and prime
    (1000, 700, 900), (257, 129, 2049), (1, 1, 1), (3, 5, 7), (127, 251, 509),
    (4099, 4097, 131), (17, 19, 23),
]
PRECISIONS = ["bf16", "fp16", "fp32", "tf32"]


def _key(prec, out, shape):
    return f"{prec} c={out} {shape[0]}x{shape[1]}x{shape[2]}"


def _cases():
    cases = [(p, "fp32", s) for p in PRECISIONS for s in SHAPES]
    cases += [(p, p, s) for p in ("bf16", "fp16") for s in SHAPES[::3]]
    return cases


def _choice(prec, out, shape) -> str:
    p = planning.choose(*shape, prec, out=out, t=planning.target("H200"))
    return f"{p.kernel}/split={p.split}/aligned={int(p.aligned)}"


def compute_table() -> dict:
    return {_key(*c): _choice(*c) for c in _cases()}


def test_table_covers_enough_shapes():
    table = json.loads(TABLE.read_text())
    assert len(SHAPES) >= 30 and len(table) == len(_cases()) >= 120


@pytest.mark.parametrize("case", _cases(), ids=lambda c: _key(*c))
def test_choice_is_the_committed_one(case):
    table = json.loads(TABLE.read_text())
    assert _choice(*case) == table[_key(*case)], \
        planning.choose(*case[2], case[0], out=case[1]).describe()


def test_choice_follows_the_measured_rules():
    """What the H200 runs said (benchmarks/notes/small-m.md, h200.json,
    results/h200-wgmma-swapped.json)."""
    t = planning.target("H200")
    for m in (1, 8, 16):
        # a stream of B: rung 30, or the swapped 16-row wgmma member
        # (13.4-13.6 us against rung 30's 13.5-14.2 at M = 1 and 8)
        k = planning.choose(m, 4096, 4096, "bf16", t=t).kernel
        assert k.startswith("30_small_m_bf16") or k == "20_tma_wgmma_bf16_16x64", (m, k)
        assert planning.choose(m, 4096, 4096, "fp32", t=t).kernel == "30_small_m_fp32"
    assert planning.choose(4096, 4096, 4096, "bf16", t=t).kernel.startswith("20_tma_wgmma_bf16")
    assert planning.choose(4096, 4096, 4096, "fp32", t=t).kernel.startswith("08_warp_tiled")
    assert planning.choose(4096, 4096, 4096, "tf32", t=t).kernel.startswith("20_tma_wgmma_tf32")
    # fp32 semantics: no TF32 rung is a candidate unless asked for
    for shape in SHAPES:
        assert by_name()[planning.choose(*shape, "fp32", t=t).kernel].precision == "fp32"
    # 16-bit small-M only with all of M in one block
    p = planning.choose(128, 4096, 4096, "bf16", t=t)
    assert not p.kernel.startswith("30_")


def test_plain_splits_compete_only_for_a_gain_beyond_the_models_error():
    """plan.PLAIN_SPLIT_MIN_GAIN: an fp32 SIMT split of K is ranked only
    where the model expects it at least 10 % faster than the same rung
    unsplit. 8192^3 (split 3 predicted 0.3 % faster) stays in one piece;
    3072^3 (a last wave a fifth full) and 1024^3 (64 tiles) split."""
    t = planning.target("H200")
    big = planning.choose(8192, 8192, 8192, "fp32", t=t)
    assert big.split == 1
    assert not any(n.startswith("08_warp_tiled/") for n, _ in big.alternatives)
    for shape in [(3072, 3072, 3072), (1024, 1024, 1024)]:
        p = planning.choose(*shape, "fp32", t=t)
        assert p.kernel.startswith("08_warp_tiled") and p.split > 1, shape
        whole = dict(p.alternatives)[p.kernel]
        assert p.predicted_s <= (1 - planning.PLAIN_SPLIT_MIN_GAIN) * whole
    # every ranked split of a plain rung clears the bar against its own rung
    for shape in SHAPES:
        p = planning.choose(*shape, "fp32", t=t)
        opts = dict(p.alternatives)
        opts[p.kernel + (f"/split={p.split}" if p.split > 1 else "")] = p.predicted_s
        for name, sec in opts.items():
            rung, _, split = name.partition("/split=")
            if split and by_name()[rung].host == "" and rung in opts:
                assert sec <= (1 - planning.PLAIN_SPLIT_MIN_GAIN) * opts[rung], name


def test_choice_is_deterministic_and_ties_go_to_the_registry_order():
    a = planning.choose(1, 4096, 4096, "bf16")
    b = planning.choose(1, 4096, 4096, "bf16")
    assert (a.kernel, a.split, a.alternatives) == (b.kernel, b.split, b.alternatives)
    # r16 and r32 predict the same time at M = 1: the earlier entry ranks first
    ranked = [(a.kernel + (f"/split={a.split}" if a.split > 1 else ""), a.predicted_s)]
    ranked += list(a.alternatives)
    names = [n for n, _ in ranked]
    r16, r32 = "30_small_m_bf16/split=2", "30_small_m_bf16_r32/split=2"
    assert dict(ranked)[r16] == dict(ranked)[r32] and names.index(r16) < names.index(r32)


def test_plan_fields():
    p = drvgemm.plan(__import__("numpy").ones((16, 4096), "float32"),
                     __import__("numpy").ones((4096, 4096), "float32"))
    assert p.kernel == "30_small_m_fp32" and p.split >= 1
    assert p.instantiation == f"gemm/{p.kernel}/aligned=1/c=fp32/sm_90"
    assert p.predicted_s > 0 and p.alternatives
    names = [n for n, _ in p.alternatives]
    assert all(isinstance(s, float) and s >= p.predicted_s for _, s in p.alternatives)
    chosen = p.kernel + (f"/split={p.split}" if p.split > 1 else "")
    assert len(names) == len(set(names)) and chosen not in names
    assert len(p.grid) == 3 and p.block == (128, 1, 1) and p.smem > 0
    assert p.workspace_bytes == (0 if p.split == 1 else
                                 by_name()[p.kernel].workspace_bytes(16, 4096, p.split))
    text = p.describe()
    assert p.kernel in text and "alternatives" in text and p.instantiation in text
    k = p.compiled()
    assert k.resources is not None and k.resources.spill_stores == 0


def test_plan_instantiation_names_a_manifest_key():
    manifest = json.loads((TABLE.parent / "sass_manifest.json").read_text())
    for prec, out in (("bf16", "fp32"), ("bf16", "bf16"), ("fp32", "fp32"), ("tf32", "fp32")):
        for shape in SHAPES[::4]:
            p = planning.choose(*shape, prec, out=out)
            assert p.instantiation in manifest, p.instantiation


def test_plan_checks_arguments_like_gemm():
    import numpy as np
    f32 = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="applies to float32"):
        drvgemm.plan(f32.astype(np.float16), f32.astype(np.float16), precision="tf32")
    with pytest.raises(ValueError, match="does not match"):
        drvgemm.plan(f32, f32, precision="bf16")
    with pytest.raises(ValueError, match="computes in tf32"):
        drvgemm.plan(f32, f32, precision="fp32", kernel="20_tma_wgmma_tf32")
    with pytest.raises(ValueError, match="precision must be"):
        drvgemm.plan(f32, f32, precision="int8")
    # precision="tf32" permits TF32 rungs; None keeps float32 on fp32 rungs
    assert by_name()[drvgemm.plan(np.ones((4096, 4096), np.float32),
                                  np.ones((4096, 4096), np.float32),
                                  precision="tf32").kernel].precision == "tf32"
    assert by_name()[drvgemm.plan(np.ones((4096, 4096), np.float32),
                                  np.ones((4096, 4096), np.float32)).kernel].precision == "fp32"


def test_named_kernel_ranks_only_its_splits():
    p = dispatch.plan_shape(1, 4096, 4096, precision="bf16", kernel="30_small_m_bf16_r32")
    assert p.kernel == "30_small_m_bf16_r32" and p.reason == "kernel=30_small_m_bf16_r32"
    assert all(n.startswith("30_small_m_bf16_r32") for n, _ in p.alternatives)
    # a named rung outside auto's domain still plans (every rung takes every shape)
    p = dispatch.plan_shape(1000, 64, 64, precision="bf16", kernel="30_small_m_bf16")
    assert p.grid[0] >= math.ceil(1000 / 16)


def test_unaligned_pointers_change_the_instantiation():
    a = dispatch.plan_shape(8, 4096, 4096, precision="fp32")
    b = dispatch.plan_shape(8, 4096, 4096, precision="fp32", residues=(4, 4, 0))
    assert a.kernel == b.kernel == "30_small_m_fp32"
    assert a.aligned and not b.aligned and b.predicted_s > a.predicted_s
    assert "aligned=0" in b.instantiation
    # 16-bit rung 30 reads a misaligned B element by element (gemm_model:
    # StreamFigures.unaligned_extra_16): staging B for rung 20 wins there
    a = dispatch.plan_shape(8, 4096, 4096, precision="bf16", kernel="30_small_m_bf16")
    b = dispatch.plan_shape(8, 4096, 4096, precision="bf16", residues=(2, 2, 0))
    c = dispatch.plan_shape(8, 4096, 4096, precision="bf16", residues=(2, 2, 0),
                            kernel="30_small_m_bf16")
    assert a.aligned and not c.aligned and c.predicted_s > b.predicted_s
    assert b.rung.host == "tma" and "staged" in b.prediction.note


def test_the_plan_says_how_a_split_is_added_up():
    """A folded split (rung 20: a few pieces in one wave of 16-bit tiles) is
    one launch and says so; a long K over a small C keeps the second launch."""
    folded = dispatch.plan_shape(512, 4096, 11008, precision="bf16")
    assert folded.split in (2, 3) and folded.rung.host == "tma"
    assert folded.prediction.launches == 1
    assert "added in the kernel" in folded.prediction.note and "in the kernel" in folded.describe()
    reduced = dispatch.plan_shape(256, 256, 32768, precision="bf16")
    assert reduced.split > 3 and reduced.prediction.launches == 2
    assert "second launch" in reduced.prediction.note


def test_model_waves_and_splits():
    f = gm.FAMILIES["wgmma_16"]
    dev = gm.H200_CEILINGS
    full = gm.predict(gm.Candidate(f, 128, 256), 128 * 12, 256 * 11, 4096, in_bytes=2,
                      out_bytes=4, dev=dev)     # 132 tiles: one full wave
    one_more = gm.predict(gm.Candidate(f, 128, 256), 128 * 12 + 1, 256 * 11, 4096,
                          in_bytes=2, out_bytes=4, dev=dev)
    assert full.waves == 1 and full.wave_fill == 1.0
    assert one_more.waves == 2 and one_more.seconds > 1.9 * full.compute_s
    # a split fills the machine for few tiles, at the price of a reduction
    few = gm.predict(gm.Candidate(f, 128, 256), 128, 256, 65536, in_bytes=2, out_bytes=4,
                     dev=dev)
    split = gm.predict(gm.Candidate(f, 128, 256, split=64), 128, 256, 65536, in_bytes=2,
                       out_bytes=4, dev=dev)
    assert split.seconds < few.seconds / 10 and split.reduce_s > 0
    # the figures reproduce the measurement they were fitted to (within 2%)
    t = gm.predict(gm.Candidate(gm.FAMILIES["simt_fp32"], 128, 128, blocks_per_sm=2),
                   4096, 4096, 4096, in_bytes=4, out_bytes=4, dev=dev)
    assert abs(t.seconds / 2.71043e-3 - 1) < 0.02


def test_unkept_staging_is_priced_from_its_measurement():
    """An operand staged afresh every call (too large to keep) costs what
    the 67 MB case measured; the dispatcher then keeps tf32 31 x 4097 x 4099
    (B's rows 16396 bytes) away from the TMA rung it measured 235 us on."""
    f = gm.FAMILIES["wgmma_tf32_128"]
    dev = gm.H200_CEILINGS
    a, b = 31 * 4099 * 4, 4099 * 4097 * 4     # both staged, B too large to keep
    kept = gm.predict(gm.Candidate(f, 128, 128, split=4, staged_bytes=a + b), 31, 4097, 4099,
                      in_bytes=4, out_bytes=4, dev=dev)
    unkept = gm.predict(gm.Candidate(f, 128, 128, split=4, staged_bytes=a + b,
                                     staged_unkept_bytes=b),
                        31, 4097, 4099, in_bytes=4, out_bytes=4, dev=dev)
    assert abs(unkept.seconds / 235e-6 - 1) < 0.05 and kept.seconds < unkept.seconds / 3
    p = planning.choose(31, 4097, 4099, "tf32", t=planning.target("H200"))
    assert p.rung.host != "tma", p.describe()
    # one row short of the threshold: kept, and the TMA rung stays
    from drvgemm.ladders.gemm import hopper
    from drvgemm.runtime.tensormap import padded_pitch
    assert padded_pitch(4097 * 4) * 4099 > hopper.KEEP_STAGING_BYTES


def test_other_devices_scale_the_h200_figures():
    h100 = gm.ceilings("NVIDIA H100 80GB HBM3")
    assert h100.name == "H100" and h100.copy_bw < gm.H200_CEILINGS.copy_bw
    a100 = gm.ceilings("A100")
    assert a100.sm_count == 108 and a100.rate("ffma") < gm.H200_CEILINGS.rate("ffma")
    assert "wgmma_16" in a100.units   # the unit exists; sm_90a rungs are excluded by arch
    t = planning.target("A100")
    assert all(not r.arch.endswith("a") for r in planning.candidates("bf16", False, t, 4096))


def test_cli_plan(capsys):
    assert cli_main(["plan", "16", "4096", "4096", "--precision", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "30_small_m_bf16" in out and "alternatives" in out and "predicted" in out
    assert cli_main(["plan", "4096", "4096", "4096", "--precision", "bf16", "--out-dtype",
                     "bf16", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kernel"].startswith("20_tma_wgmma_bf16")
    assert "c=bf16" in d["instantiation"] and isinstance(d["alternatives"], list)
    assert cli_main(["plan", "64", "64", "64", "--precision", "fp32", "--gpu", "A100"]) == 0
    assert "A100" in capsys.readouterr().out
    assert cli_main(["plan", "4", "4", "4", "--precision", "fp32", "--out-dtype", "bf16"]) == 2


def test_an_empty_c_has_no_plan_and_says_so(capsys):
    """M or N = 0 divided by zero blocks in the model (a ZeroDivisionError
    out of ``drvgemm plan 0 5 5`` and drvgemm.plan): gemm() launches nothing
    for an empty C, and plan says that; K = 0 keeps its plan (C = beta * C)."""
    for m, n in ((0, 5), (5, 0), (0, 0)):
        with pytest.raises(ValueError, match="launches nothing"):
            dispatch.plan_shape(m, n, 7, precision="bf16", device="H200")
        assert cli_main(["plan", str(m), str(n), "7"]) == 2
        assert "launches nothing" in capsys.readouterr().err
    assert dispatch.plan_shape(5, 5, 0, precision="bf16", device="H200").k == 0


def test_plan_for_a_device_the_catalogue_lacks_is_an_error(capsys):
    """``drvgemm plan --gpu nosuch`` planned for the H200 in silence."""
    with pytest.raises(ValueError, match="H200"):
        dispatch.plan_shape(5, 5, 5, device="nosuch")
    assert cli_main(["plan", "5", "5", "5", "--gpu", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
    assert dispatch.plan_shape(5, 5, 5, device="h100").device == "H100"


def test_plan_shape_takes_integers_only():
    """1.5 rows used to be planned as 1; numpy integers are integers."""
    with pytest.raises(TypeError, match="must be integers"):
        dispatch.plan_shape(1.5, 8, 8, device="H200")
    import numpy as np
    p = dispatch.plan_shape(np.int64(16), np.int32(4096), 4096, device="H200")
    assert (p.m, p.n, p.k) == (16, 4096, 4096)


if __name__ == "__main__":
    TABLE.write_text(json.dumps(compute_table(), indent=1) + "\n")
    print(f"{len(compute_table())} choices -> {TABLE}", file=sys.stderr)


def test_swapped_members_take_the_rows_their_tile_holds_and_the_smaller_does_not():
    """plan.swapped_domain: 16 x 64 for M <= 16, 32 x 64 for 17-32, neither beyond."""
    t = planning.target("H200")
    for prec in ("bf16", "fp16"):
        r16, r32 = by_name()[f"20_tma_wgmma_{prec}_16x64"], by_name()[f"20_tma_wgmma_{prec}_32x64"]
        assert planning.swapped(r16) and planning.swapped(r32)
        assert [planning.swapped_domain(r16, m) for m in (1, 16, 17)] == [True, True, False]
        assert [planning.swapped_domain(r32, m) for m in (1, 16, 17, 32, 33)] == \
            [False, False, True, True, False]
        for m, want in ((1, r16), (16, r16), (17, r32), (32, r32), (33, None), (64, None)):
            names = {r.name for r in planning.candidates(prec, False, t, m) if planning.swapped(r)}
            assert names == ({want.name} if want else set()), (prec, m, names)
    # the plain 16-bit members and tf32 (swapped by nature) are not "swapped members"
    assert not planning.swapped(by_name()["20_tma_wgmma_bf16_64x128"])
    assert not planning.swapped(by_name()["20_tma_wgmma_tf32"])


def test_a_swapped_grid_on_few_sms_streams_at_its_share():
    """Family.stream_sms: strips on fewer than 0.75 of the SMs read at their
    share of the bandwidth; the wave cost adds per wave past the first."""
    f = gm.FAMILIES["wgmma_16_swap"]
    dev = gm.H200_CEILINGS

    def memory_s(n, split=1):
        c = gm.Candidate(f, 16, 64, split)
        return gm.predict(c, 1, n, 8192, in_bytes=2, out_bytes=2, dev=dev)

    def stream_s(n, share):
        return (8192 + 8192 * n) * 2 / (dev.copy_bw * f.stream_eff * share) + n * 2 / dev.copy_bw

    # 128 strips on 132 SMs: past 0.75 of them, the full bandwidth; 64: 64 / 132 / 0.75 of it
    assert memory_s(8192).memory_s == pytest.approx(stream_s(8192, 1.0), rel=1e-9)
    assert memory_s(4096).memory_s == pytest.approx(stream_s(4096, 64 / 132 / 0.75), rel=1e-9)
    wide = memory_s(128256)                            # 2004 strips: 16 waves
    assert wide.waves == 16
    assert wide.gpu_s - wide.memory_s - gm.LAUNCH_S - f.fixed_s == \
        pytest.approx(15 * f.wave_s, rel=1e-6)


def test_a_host_bound_call_takes_the_candidate_of_fewer_launches():
    """gemm_model.host_s: a call back to back runs at the slower of the GPU
    and the host, whose cost grows with the launches. fp16 17 x 19 x 23: the
    swapped rung-20 tile (its operands staged first: two launches) and rung 30
    (one) are both under the host's time of a call, so rung 30 is the faster
    call; at a size where the GPU's time is above the host's, the launches
    count for nothing."""
    t = planning.target("H200")
    p = planning.choose(17, 19, 23, "fp16", t=t)
    assert p.kernel == "30_small_m_fp16_r32" and p.prediction.launches == 1
    assert p.predicted_s == gm.host_s(1) > p.prediction.gpu_s
    staged = dict(p.alternatives)["20_tma_wgmma_fp16_32x64"]
    assert staged == pytest.approx(gm.host_s(2))
    assert "host-bound: 1 launch" in p.describe()
    big = planning.choose(4096, 4096, 4096, "bf16", t=t)
    assert big.predicted_s == big.prediction.gpu_s > big.prediction.host_s


def test_64_row_members_split_k_only_where_no_128_row_tile_holds_m():
    """Between 65 and 128 rows auto takes no split of the 64-row members (two
    64-row tiles read each strip of B: 7-9 % slower than a 128-row tile split 3
    on the H200); in one piece they stay candidates there, and at <= 64 rows
    (one tile) their splits too. An explicit kernel keeps every split."""
    t = planning.target("H200")
    for m in (65, 100, 128):
        for shape in ((m, 4096, 14336), (m, 128, 65536), (m, 5120, 5120)):
            p = planning.choose(*shape, "bf16", out="bf16", t=t)
            names = [p.kernel + (f"/split={p.split}" if p.split > 1 else "")] + \
                [a for a, _ in p.alternatives]
            assert not any(a.startswith("20_tma_wgmma_bf16_64x128/split=") for a in names), shape
            assert "20_tma_wgmma_bf16_64x128" in names, shape
    p = planning.choose(64, 4096, 14336, "bf16", out="bf16", t=t)
    alts = [a for a, _ in p.alternatives] + [f"{p.kernel}/split={p.split}"]
    assert any(a.startswith("20_tma_wgmma_bf16_64x128/split=") for a in alts)
    p = planning.choose(128, 4096, 14336, "bf16", out="bf16", t=t,
                        kernel="20_tma_wgmma_bf16_64x128")
    assert p.split > 1 or any("/split=" in a for a, _ in p.alternatives)


# The choice loss of the tree's figures on the committed family sweeps (the sum
# over shapes of log(measured time of the model's pick / the fastest
# measured); benchmarks/notes/dispatch.md quotes these): a model change that
# picks worse on measured shapes shows here first. The fold sweep timed rung
# 20's splits both folded in the kernel and through the reduction launch.
FAMILY_SWEEP_LOSS = {"h200-wgmma-family-16.json": 0.296, "h200-wgmma-family-tf32-64.json": 0.126,
                     "h200-wgmma-family-64.json": 0.414, "h200-wgmma-family-fold.json": 0.065}


@pytest.mark.parametrize("sweep", sorted(FAMILY_SWEEP_LOSS))
def test_the_model_picks_on_the_family_sweeps_as_the_notes_say(sweep):
    from drvgemm.tools import family_fit
    err, loss = family_fit.tree_scores(RESULTS / sweep)
    assert err and all(e > 0 for e in err.values())          # every member scored
    assert loss == pytest.approx(FAMILY_SWEEP_LOSS[sweep], abs=0.001), (
        f"{sweep}: choice loss {loss:.3f}; benchmarks/fit_wgmma_family.py lists the picks")
