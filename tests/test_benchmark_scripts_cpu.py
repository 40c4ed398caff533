"""Every script in benchmarks/ answers --help, on any machine: it parses its
arguments before it compiles, allocates or touches a device, so a reader
without a GPU can see what it does and what it takes."""
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
