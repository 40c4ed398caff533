"""Every registered instantiation's SASS matches tests/data/sass_manifest.json.

A failure here means a kernel's machine code changed. If that was meant,
regenerate the manifest (python3 tests/sass_manifest.py) and say in the
commit which instantiations changed and why; if not, the change is a bug.
The few instantiations NVRTC does not reproduce are listed, with the
evidence, in tests/data/sass_manifest_variants.json (see sass_manifest.py)."""
import json

import sass_manifest


def test_manifest_lists_every_instantiation():
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    keys = [key for key, *_ in sass_manifest.instantiations()]
    assert len(keys) == len(set(keys)), "two instantiations share a manifest key"
    assert sorted(keys) == sorted(recorded), (
        f"added: {sorted(set(keys) - set(recorded))}; "
        f"gone: {sorted(set(recorded) - set(keys))}")


# Fresh compiles of a nondeterministic instantiation before its digest is
# called a change: each gives a known digest with probability > 1/2.
RESAMPLES = 4


def test_sass_unchanged():
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    now = sass_manifest.compute()
    changed = {}
    for k, v in now.items():
        known = sass_manifest.known_digests(k, recorded)
        if v in known:
            continue
        if sass_manifest.nondeterministic(k) and any(
                sass_manifest.sample(k) in known for _ in range(RESAMPLES)):
            continue     # the source still gives a known digest: NVRTC's variation
        changed[k] = (recorded.get(k), v)
    assert not changed, "SASS changed for: " + "; ".join(
        f"{k} ({old} -> {new})" for k, (old, new) in sorted(changed.items()))


def test_variants_are_only_for_listed_reasons():
    """The variant list names real instantiations, starts each list with
    the manifest's digest, and says what was seen."""
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    v = json.loads(sass_manifest.VARIANTS.read_text())
    assert v["about"] and v["nvrtc"]
    for key, entry in v["keys"].items():
        assert key in recorded, key
        assert entry["digests"][0] == recorded[key], key
        assert len(set(entry["digests"])) == len(entry["digests"]) >= 2, key
        assert entry.get("seen"), key
