"""Every script in benchmarks/ answers --help, on any machine: it parses its
arguments before it compiles, allocates or touches a device, so a reader
without a GPU can see what it does and what it takes. And h200.sh, the one
script of a device call, refuses a phase it has no code for before it runs
anything."""
import contextlib
import io
import runpy
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py"))


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 20, [s.name for s in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_answers_help(script, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    # as `python3 benchmarks/X.py` has it; what a script adds to the path goes with the test
    monkeypatch.setattr(sys, "path", [str(script.parent)] + sys.path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        runpy.run_path(str(script), run_name="__main__")
    assert done.value.code in (0, None), out.getvalue()
    assert out.getvalue().startswith("usage:"), out.getvalue()[:300]


H200_SH = SCRIPTS[0].parent / "h200.sh"


def _phase_lists(text):
    import re
    lists = {}
    for name in ("DEFAULT_PHASES", "EXTRA_PHASES"):
        m = re.search(rf'^{name}="([^"]*)"', text, re.M)
        assert m, f"{name} not found in h200.sh"
        lists[name] = m.group(1).split()
    return lists


def test_h200_sh_knows_exactly_the_phases_it_runs():
    """The phases h200.sh accepts are the ones it has code for: a phase in its
    lists with no code would be accepted and do nothing, one with code but not
    listed would be refused."""
    import re
    text = H200_SH.read_text()
    lists = _phase_lists(text)
    handled = set(re.findall(r"\bhave (\w+) &&", text)) | set(
        re.findall(r"^script_phase (\w+) ", text, re.M))
    listed = lists["DEFAULT_PHASES"] + lists["EXTRA_PHASES"]
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == handled, (set(listed) ^ handled)


def test_h200_sh_refuses_an_unknown_phase_before_it_runs_anything(tmp_path):
    import subprocess
    out, logs = tmp_path / "out", tmp_path / "logs"
    r = subprocess.run(["bash", str(H200_SH), "install", "routegap"], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "OUT": str(out), "LOG_DIR": str(logs)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "unknown phase 'routegap'" in r.stderr and "routegaps" in r.stderr
    assert not out.exists() and not logs.exists()   # nothing ran, not even install


@pytest.mark.parametrize("gpu, ran", [("NVIDIA H100 80GB HBM3", False), ("NVIDIA H200", True)])
def test_h200_sh_runs_nothing_on_another_gpu_than_require_gpu_names(tmp_path, gpu, ran):
    """REQUIRE_GPU=H200: on an H100 the script ends before its first phase
    (exit 3, no output folder); on an H200 it goes on (here LIMIT=0 skips the
    phase itself, so nothing is installed)."""
    import subprocess
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\necho '{gpu}'\n")
    (fake / "nvidia-smi").chmod(0o755)
    out, logs = tmp_path / "out", tmp_path / "logs"
    r = subprocess.run(["bash", str(H200_SH), "install"], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env={"PATH": f"{fake}:/usr/bin:/bin", "OUT": str(out),
                                          "LOG_DIR": str(logs), "REQUIRE_GPU": "H200", "LIMIT": "0"})
    if ran:
        assert r.returncode == 0 and out.exists() and "install skipped" in r.stdout, (r.stdout, r.stderr)
    else:
        assert r.returncode == 3 and "nothing run" in r.stderr, (r.stdout, r.stderr)
        assert not out.exists() and not logs.exists()


def test_the_notes_device_commands_name_phases_and_settings_h200_sh_has():
    """Every `... bash benchmarks/h200.sh PHASES` of the notes (the next device
    run's plan is pasted from them) names only phases h200.sh runs and sets
    only variables it reads: a misspelt setting is silently ignored there."""
    import re
    import shlex
    root = H200_SH.parent.parent
    text = H200_SH.read_text()
    lists = _phase_lists(text)
    known = set(lists["DEFAULT_PHASES"] + lists["EXTRA_PHASES"])
    docs = [root / "README.md", root / "benchmarks" / "NOTES.md",
            *sorted((root / "benchmarks" / "notes").glob("*.md"))]
    seen = 0
    for doc in docs:
        for span in re.findall(r"`([^`]*bash benchmarks/h200\.sh[^`]*)`", doc.read_text()):
            words = shlex.split(span)
            at = words.index("bash")
            assert words[at + 1] == "benchmarks/h200.sh", (doc.name, span)
            for word in words[:at]:
                name = word.split("=", 1)[0]
                assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) and "=" in word, (doc.name, word)
                assert re.search(rf"\$\{{?{name}\b", text), f"{doc.name}: h200.sh never reads {name}"
            phases = words[at + 2:]
            assert set(phases) <= known, f"{doc.name}: unknown phases {set(phases) - known}"
            seen += 1
    assert seen >= 1


def test_results_match_code_sorts_records_by_what_today_builds(monkeypatch):
    """benchmarks/results_match_code.py: a record whose kernel builds to its
    hash today is equal, to another hash differs, unless its rung is one NVRTC
    builds differently from run to run; a record it cannot rebuild is
    counted apart, one without a hash not at all."""
    monkeypatch.setattr(sys, "path", [str(SCRIPTS[0].parent)] + sys.path)
    rmc = runpy.run_path(str(SCRIPTS[0].parent / "results_match_code.py"), run_name="rmc")
    today = {"gemm/01_naive/aligned=1/c=fp32/sm_90": "aaaa",
             "gemm/08_warp_tiled/aligned=0/c=fp32/sm_90": "bbbb"}
    check = rmc["check"]
    monkeypatch.setitem(check.__globals__, "digest_of",
                        lambda r, builds, memo: today.get(r.get("instantiation")))
    records = [{"instantiation": "gemm/01_naive/aligned=1/c=fp32/sm_90", "sass_hash": "aaaa"},
               {"instantiation": "gemm/01_naive/aligned=1/c=fp32/sm_90", "sass_hash": "cccc"},
               {"instantiation": "gemm/08_warp_tiled/aligned=0/c=fp32/sm_90", "sass_hash": "dddd"},
               {"kernel": "copy", "sass_hash": "eeee"},
               {"kernel": "torch_softmax"}]
    res = check(records, {})
    assert (res["equal"], res["varies"], res["not_rebuilt"]) == (1, 1, 1)
    assert [(r["sass_hash"], d) for r, d in res["differ"]] == [("cccc", "aaaa")]
