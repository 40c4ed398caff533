"""Every registered instantiation's SASS matches tests/data/sass_manifest.json.

A failure here means a kernel's machine code changed. If that was meant,
regenerate the manifest (python3 tests/sass_manifest.py) and say in the
commit which instantiations changed and why; if not, the change is a bug.
The few rungs NVRTC does not reproduce are listed, with the evidence, in
tests/data/sass_manifest_nondeterministic.json (see sass_manifest.py)."""
import json

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


@pytest.mark.parametrize("shard", range(SHARDS))
def test_sass_unchanged(shard):
    changed = sass_manifest.changes(shard=(shard, SHARDS))
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
