"""ptxas's resource figures of the instantiations the CPU suite checks for
registers and spills, recorded by the digest of everything their compile
reads (drvgemm.runtime.compiler.input_digest: the source, the bytes of every
included file, the names, defines, options, arch, the toolchain and the
compiler module's own code), so that a clean clone checks them without
running NVRTC -- as tests/sass_manifest.py does for the machine code.

    python3 tests/resource_records.py     # compile what the tests ask for and
                                          # rewrite tests/data/resource_records.json

A test asks ``resources(source, entry, defines=..., arch=...)``. Where the
record holds that digest, the recorded figures are the compile's (two compiles
with one digest are the same compile); anywhere else (a kernel edited, another
toolchain, a config the record never saw) the instantiation is compiled and
its own figures returned. A stale record therefore never hides a change: it is
only not used. tests/test_resource_records.py compiles a sample of the records
on every run and holds them to what the compiler says today.

DRVGEMM_RESOURCES_RECOMPILE=1 compiles every one (the record unused)."""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# The drvgemm of this tree, whatever else is installed (an editable install of
# another checkout would describe that checkout's kernels).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drvgemm.runtime import compiler
from drvgemm.runtime.compiler import Resources

RECORDS = Path(__file__).resolve().parent / "data" / "resource_records.json"
# ptxas's figures: the fields Resources compares (its notes are the report's, not figures)
FIELDS = tuple(f.name for f in dataclasses.fields(Resources) if f.compare)
# The tests whose resource checks go through resources() (the recorder runs them;
# tests/test_resource_records.py holds the record complete for each).
RECORDED_TESTS = [
    "tests/test_softmax_window_cpu.py::test_every_window_instantiation_compiles_without_spills",
    "tests/test_softmax_cpu.py::test_register_resident_configs_fit_their_launch_bounds",
    "tests/test_small_m_cpu.py::test_compiles_without_spills",
]

_records: dict | None = None


def toolchain() -> list:
    """NVRTC's version and its wheel's: part of every digest, so a record written
    with another toolchain matches nothing here (its instantiations compile)."""
    return [list(compiler.nvrtc_version()), importlib.metadata.version("nvidia-cuda-nvrtc")]


def recorded_toolchain():
    return json.loads(RECORDS.read_text()).get("toolchain") if RECORDS.exists() else None


def records() -> dict:
    """{input digest: {"source", "entry", "defines", "arch", "options", "resources"}};
    the source by its file name, which the compiler finds under cu/ or ptx/."""
    global _records
    if _records is None:
        _records = json.loads(RECORDS.read_text())["records"] if RECORDS.exists() else {}
    return _records


def compiled(source, entry, *, defines, arch, options=()) -> Resources:
    """The figures of a fresh compile (the compile cache may serve it)."""
    b = compiler.compile_binary(source, entry, defines=defines, arch=arch, options=list(options))
    return compiler.parse_resources(b.log)[entry]


def resources(source, entry, defines, arch, options=()) -> Resources:
    """ptxas's figures for this compile: the record's where it holds the compile's
    input digest, else compiled now (and written to $DRVGEMM_RESOURCES_RECORD, as
    the recorder asks)."""
    digest = compiler.input_digest(source, [entry], defines=defines, arch=arch,
                                   options=list(options))
    rec = None if os.environ.get("DRVGEMM_RESOURCES_RECOMPILE") else records().get(digest)
    if rec is not None:
        return Resources(**rec["resources"])
    res = compiled(source, entry, defines=defines, arch=arch, options=options)
    out = os.environ.get("DRVGEMM_RESOURCES_RECORD")
    if out and digest:
        line = json.dumps({"digest": digest, "source": Path(str(source)).name, "entry": entry,
                           "defines": {k: v for k, v in sorted(dict(defines).items())},
                           "arch": arch, "options": list(options),
                           "resources": {f: getattr(res, f) for f in FIELDS}})
        with open(out, "a") as f:      # one short line per write: whole lines from each worker
            f.write(line + "\n")
    return res


def write(lines_path: Path) -> int:
    recs = {}
    for line in lines_path.read_text().splitlines():
        r = json.loads(line)
        recs[r.pop("digest")] = r
    RECORDS.write_text(json.dumps({"about": "tests/resource_records.py", "toolchain": toolchain(),
                                   "records": dict(sorted(recs.items()))},
                                  indent=1, sort_keys=True) + "\n")
    return len(recs)


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        lines = Path(tmp) / "records.jsonl"
        lines.touch()
        env = dict(os.environ, DRVGEMM_RESOURCES_RECORD=str(lines), DRVGEMM_RESOURCES_RECOMPILE="1")
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-n", "auto", "-p",
                              "no:cacheprovider", *RECORDED_TESTS], cwd=root, env=env)
        if rc != 0:
            print(f"the recorded tests failed (exit {rc}): the record is left as it was")
            return rc
        n = write(lines)
    print(f"wrote {n} records to {RECORDS.relative_to(root)}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:]:    # a --help or a typo is not a request to recompile every record
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(0 if sys.argv[1:] in (["--help"], ["-h"]) else 2)
    sys.exit(main())
