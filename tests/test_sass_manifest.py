"""Every registered instantiation's SASS matches tests/data/sass_manifest.json.

A failure here means a kernel's machine code changed. If that was meant,
regenerate the manifest (python3 tests/sass_manifest.py) and say in the
commit which instantiations changed and why; if not, the change is a bug."""
import json

import sass_manifest


def test_manifest_lists_every_instantiation():
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    keys = [key for key, *_ in sass_manifest.instantiations()]
    assert len(keys) == len(set(keys)), "two instantiations share a manifest key"
    assert sorted(keys) == sorted(recorded), (
        f"added: {sorted(set(keys) - set(recorded))}; "
        f"gone: {sorted(set(recorded) - set(keys))}")


def test_sass_unchanged():
    recorded = json.loads(sass_manifest.MANIFEST.read_text())
    now = sass_manifest.compute()
    changed = {k: (recorded.get(k), v) for k, v in now.items() if recorded.get(k) != v}
    assert not changed, "SASS changed for: " + "; ".join(
        f"{k} ({old} -> {new})" for k, (old, new) in sorted(changed.items()))
