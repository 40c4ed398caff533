"""drvgemm tune's winners file with no GPU: the store round trip, a corrupt
file ignored, kernel="auto" preferring a stored winner for exactly its
signature (the Plan says "tuned"), and the CLI's answers without a GPU."""
from __future__ import annotations

import json

import pytest

from drvgemm.cli import main as cli_main
from drvgemm.ladders.gemm import dispatch, tuned
from drvgemm.tools import tune as tuning


@pytest.fixture
def winners(tmp_path, monkeypatch):
    path = tmp_path / "tuned-nvidia-h200-sm90.json"
    monkeypatch.setattr(dispatch, "tuned_file", lambda: path)
    dispatch.clear_plan_cache()
    yield path
    dispatch.clear_plan_cache()


def test_store_round_trip_and_replace(winners):
    sig = tuned.signature(4096, 4096, 128, "bf16", "fp32", False)
    assert sig == "bf16 fp32 beta0 4096x4096x128"
    assert tuned.lookup(winners, sig) is None
    tuned.record(winners, "NVIDIA H200", sig, {"kernel": "20_tma_wgmma_bf16", "split": 1})
    assert tuned.lookup(winners, sig) == {"20_tma_wgmma_bf16": 1}
    tuned.record(winners, "NVIDIA H200", sig, {"kernel": "20_tma_wgmma_bf16_128x128",
                                               "split": 2})
    assert tuned.lookup(winners, sig) == {"20_tma_wgmma_bf16_128x128": 2}
    data = json.loads(winners.read_text())
    assert data["format"] == tuned.FORMAT and data["device"] == "NVIDIA H200"
    assert list(data["entries"]) == [sig]
    assert not list(winners.parent.glob(".tmp-*"))


@pytest.mark.parametrize("text", ["", "{not json", '{"format": 99, "entries": {}}',
                                  '{"format": 1, "entries": []}', '[1, 2]'])
def test_a_bad_file_is_not_used(winners, text):
    winners.write_text(text)
    assert tuned.load(winners) == {}
    p = dispatch.plan_shape(4096, 4096, 128, precision="bf16")
    assert p.reason == "auto"


def test_auto_prefers_the_stored_winner_for_its_signature_only(winners):
    model = dispatch.plan_shape(4096, 4096, 128, precision="bf16")
    other = next(name for name, _ in model.alternatives
                 if tuning.parse_option(name)[0] != model.kernel)
    name, split = tuning.parse_option(other)
    tuned.record(winners, "NVIDIA H200", tuned.signature(4096, 4096, 128, "bf16", "fp32", False),
                 {"kernel": name, "split": split})
    dispatch.clear_plan_cache()
    p = dispatch.plan_shape(4096, 4096, 128, precision="bf16")
    assert (p.kernel, p.split, p.reason) == (name, split, "tuned")
    assert (model.kernel, model.split) in [tuning.parse_option(n) for n, _ in p.alternatives]
    # another C type, beta, shape or an explicit kernel: the model's choice
    assert dispatch.plan_shape(4096, 4096, 128, precision="bf16", out_dtype="bf16").reason == "auto"
    assert dispatch.plan_shape(4096, 4096, 128, precision="bf16", beta=1.0).reason == "auto"
    assert dispatch.plan_shape(4096, 4096, 256, precision="bf16").reason == "auto"
    assert dispatch.plan_shape(4096, 4096, 128, precision="bf16",
                               kernel=model.kernel).reason.startswith("kernel=")
    # a winner that no longer ranks (an entry removed from the registry) is ignored
    tuned.record(winners, "NVIDIA H200", tuned.signature(64, 64, 64, "bf16", "fp32", False),
                 {"kernel": "no_such_rung", "split": 1})
    dispatch.clear_plan_cache()
    assert dispatch.plan_shape(64, 64, 64, precision="bf16").reason == "auto"


def test_parse_option():
    assert tuning.parse_option("20_tma_wgmma_bf16_128x128/split=3") == \
        ("20_tma_wgmma_bf16_128x128", 3)
    assert tuning.parse_option("08_warp_tiled") == ("08_warp_tiled", 1)


def test_cli_without_a_gpu(capsys, tmp_path, monkeypatch):
    from drvgemm.runtime import driver
    if driver.has_gpu():
        pytest.skip("a GPU is present: the no-GPU answers do not apply")
    assert cli_main(["tune", "64", "64", "64"]) == 2
    assert "measures on this GPU, and there is none" in capsys.readouterr().err
    monkeypatch.setenv("DRVGEMM_CACHE_DIR", str(tmp_path))
    assert cli_main(["tune", "--show"]) == 0
    assert "no tuned winners stored" in capsys.readouterr().out
    f = tmp_path / "tuned-nvidia-h200-sm90.json"
    tuned.record(f, "NVIDIA H200", "bf16 fp32 beta0 8x8x8",
                 {"kernel": "30_small_m_bf16", "split": 1, "ms": 0.004,
                  "model_choice": "30_small_m_bf16/split=1", "model_choice_ms": 0.004})
    assert cli_main(["tune", "--show"]) == 0
    out = capsys.readouterr().out
    assert "bf16 fp32 beta0 8x8x8" in out and "30_small_m_bf16 split 1" in out
