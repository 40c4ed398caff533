"""Every registered instantiation's SASS matches tests/data/sass_manifest.json.

A failure here means a kernel's machine code changed. If that was meant,
regenerate the manifest (python3 tests/sass_manifest.py) and say in the
commit which instantiations changed and why; if not, the change is a bug.
The few rungs NVRTC does not reproduce are listed, with the evidence, in
tests/data/sass_manifest_nondeterministic.json (see sass_manifest.py)."""
import json
import os

import pytest

import sass_manifest


def test_manifest_lists_every_instantiation():
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    keys = [key for key, *_ in sass_manifest.instantiations()]
    assert len(keys) == len(set(keys)), "two instantiations share a manifest key"
    assert sorted(keys) == sorted(recorded), (
        f"added: {sorted(set(keys) - set(recorded))}; "
        f"gone: {sorted(set(recorded) - set(keys))}")


# The instantiations are checked in this many shards (every SHARDS-th one each),
# so that pytest -n spreads the suite's largest piece of compiling over cores.
SHARDS = 8


# DRVGEMM_SASS_RECOMPILE=1 compiles every instantiation even where its inputs
# are the recorded ones (to check a new toolchain or a suspected cache).
RECOMPILE = os.environ.get("DRVGEMM_SASS_RECOMPILE", "") not in ("", "0")


@pytest.mark.parametrize("shard", range(SHARDS))
def test_sass_unchanged(shard):
    other = sass_manifest.other_toolchain()
    if other:
        pytest.skip(other)
    changed = sass_manifest.changes(shard=(shard, SHARDS), recompile=RECOMPILE)
    assert not changed, "SASS changed for: " + "; ".join(
        f"{k} ({old} -> {new})" for k, (old, new) in sorted(changed.items()))


def test_code_digests_name_the_manifest_keys():
    """The shortcut's table covers only manifest keys (a key it lacks is
    disassembled, never skipped)."""
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    codes = json.loads(sass_manifest.CODES.read_text())
    assert codes and set(codes) <= set(recorded)


def test_nondeterministic_rungs_have_profiles():
    """Every instantiation of a listed rung has a recorded profile, and the
    list names only real rungs."""
    from drvgemm.ladders.gemm.registry import RUNGS
    nd = json.loads(sass_manifest.NONDETERMINISTIC.read_text())
    assert nd["about"] and set(nd["rungs"]) <= {r.name for r in RUNGS}
    keys = [key for key, *_ in sass_manifest.instantiations() if sass_manifest.nondeterministic(key)]
    assert keys and sorted(keys) == sorted(nd["profiles"])


def test_profile_sees_a_moved_offset_and_not_a_reordering():
    """The tolerance separates what it should: two instructions swapped and
    registers renamed give distance 0; one shared-memory offset changed, 2."""
    body = ["LDS.128 R4, [R2+0x200]", "FFMA R8, R4, R5, R8", "@P0 BRA 0x80", "NOP"]
    def text(lines):
        return "\n".join(f"        /*{16 * i:04x}*/  {ins} ;" for i, ins in enumerate(lines))
    base = sass_manifest.opcode_profile(text(body), None)
    swapped = ["FFMA R9, R6, R7, R9", "LDS.128 R6, [R3+0x200]", "@!P1 BRA 0x80"]
    assert sass_manifest.profile_distance(sass_manifest.opcode_profile(text(swapped), None), base) == 0
    moved = ["LDS.128 R4, [R2+0x210]"] + body[1:]
    assert sass_manifest.profile_distance(sass_manifest.opcode_profile(text(moved), None), base) == 2


def test_input_digests_name_every_manifest_key():
    """Every instantiation has a recorded input digest (none left to chance:
    an #include that cannot be followed would give None and no shortcut)."""
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    inputs = json.loads(sass_manifest.INPUTS.read_text())
    assert set(inputs) == set(recorded)
    assert all(isinstance(v, str) and len(v) == 64 for v in inputs.values())


def _kernel_pair(tmp_path, header_body, define=1):
    """The same kernel in two folders, each with its own copy of a header."""
    from drvgemm.runtime.compiler import input_digest
    out = []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        (d / "k.cuh").write_text(header_body[name])
        (d / "k.cu").write_text('#include "k.cuh"\nextern "C" __global__ void k(float* x)'
                                ' { x[0] = VALUE + X; }\n')
        out.append(input_digest(str(d / "k.cu"), ["k"], defines={"X": define}, arch="sm_90"))
    return out


def test_input_digest_is_where_independent_and_sees_every_input(tmp_path):
    """A clone elsewhere has the digest of the original; an included file's
    bytes and a define each change it."""
    from drvgemm.runtime.compiler import input_digest
    same = _kernel_pair(tmp_path, {"a": "#define VALUE 2.0f\n", "b": "#define VALUE 2.0f\n"})
    assert same[0] == same[1]
    header = _kernel_pair(tmp_path, {"a": "#define VALUE 2.0f\n", "b": "#define VALUE 3.0f\n"})
    assert header[0] != header[1]
    assert _kernel_pair(tmp_path, {"a": "#define VALUE 2.0f\n", "b": "#define VALUE 2.0f\n"},
                        define=2)[0] != same[0]
    path = str(tmp_path / "a" / "k.cu")
    assert input_digest(path, ["k"], defines={"X": 1}, arch="sm_80") != \
        input_digest(path, ["k"], defines={"X": 1}, arch="sm_90")


def test_a_changed_source_is_compiled_and_caught(tmp_path, monkeypatch):
    """The shortcut past NVRTC trusts only unchanged inputs: a mutated copy of
    rung 01 under its own manifest key is compiled and reported, and with the
    original source the same key passes without a compile (under the
    manifest's compilers: under others the inputs differ, and so the SASS)."""
    import drvgemm
    from drvgemm.runtime.sources import find_source
    if sass_manifest.other_toolchain():
        pytest.skip(sass_manifest.other_toolchain())
    key, source, entry, defines, arch = sass_manifest.instantiations()[0]
    text = find_source(source).read_text()
    mutated = tmp_path / source
    mutated.write_text(text.replace("acc += ", "acc -= ", 1))
    # its quoted include, found next to the copy as next to the original
    header = find_source(source).parent / "simt_common.cuh"
    (tmp_path / header.name).write_text(header.read_text())
    assert mutated.read_text() != text
    monkeypatch.setattr(sass_manifest, "instantiations",
                        lambda: [(key, str(mutated), entry, defines, arch)])
    assert key in sass_manifest.changes()
    monkeypatch.setattr(sass_manifest, "instantiations",
                        lambda: [(key, source, entry, defines, arch)])
    compiled = []
    monkeypatch.setattr(drvgemm, "compile", lambda *a, **k: compiled.append(a))
    assert sass_manifest.changes() == {} and compiled == []


@pytest.mark.parametrize("script", ["sass_manifest.py", "resource_records.py"])
def test_the_record_scripts_refuse_an_argument_they_do_not_take(script):
    """A --help, or a typo of --inputs, had both scripts rewrite every record
    (minutes of compiles); now --help prints their forms and anything else
    they do not take is refused, before any compile."""
    import subprocess
    import sys
    from pathlib import Path
    here = Path(__file__).resolve().parent
    data = sorted((here / "data").glob("*.json"))
    before = [(p, p.stat().st_mtime_ns) for p in data]
    for arg, rc in (("--help", 0), ("--inptus", 2)):
        r = subprocess.run([sys.executable, str(here / script), arg], capture_output=True,
                           text=True, timeout=120, cwd=here.parent)
        assert r.returncode == rc and f"python3 tests/{script}" in r.stderr, (arg, r)
    assert [(p, p.stat().st_mtime_ns) for p in data] == before


def test_the_manifest_names_its_compilers_and_the_test_extra_pins_them():
    """The manifest is one release's SASS: its compilers are recorded with it,
    and the test extra installs exactly those, so a clean clone's CI checks it
    rather than skipping it."""
    import re
    recorded = json.loads(sass_manifest.TOOLCHAIN.read_text())
    assert set(recorded) == set(sass_manifest.COMPILERS) and all(recorded.values())
    pyproject = (sass_manifest.MANIFEST.parents[2] / "pyproject.toml").read_text()
    test_extra = re.search(r"^test = \[(.*)\]$", pyproject, re.M).group(1)
    for dist, version in recorded.items():
        assert f'"{dist}=={version}"' in test_extra, (dist, version, test_extra)
