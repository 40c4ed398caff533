"""The kernel sources travel inside the wheel."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# One worker runs every test of the module, so the suite builds the wheel (the
# module's fixture) once, not once per worker.
pytestmark = pytest.mark.xdist_group("wheel")

# What a build leaves in the tree it builds (build/, drvgemm.egg-info/, the
# in-place extension) and what is not source (git, virtual environments,
# caches): not part of the copy the wheel is built from.
NOT_SOURCE = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__", "*.so")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built from a copy of the source tree: pip builds in the
    tree it is given (build/lib, build/bdist.*, the egg-info), and a second
    build of the checkout at the same time (another test run, setup.py
    build_ext --inplace, workers without --dist loadgroup) removes files from
    under it: '[Errno 2] No such file or directory' copying build/lib."""
    src = tmp_path_factory.mktemp("wheel-source") / "drvgemm"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out), str(src)], capture_output=True, text=True)
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("pip is not available")
    assert r.returncode == 0, r.stderr
    (whl,) = out.glob("drvgemm-*.whl")
    return whl


def test_wheel_carries_every_kernel_source(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("cu", "ptx"):
        sources = [s for s in (ROOT / folder).rglob("*") if s.suffix in (".cu", ".cuh", ".ptx")]
        assert any(s.parent != ROOT / folder for s in sources), "the kernels live in subfolders"
        for src in sources:
            assert f"drvgemm/_kernels/{src.relative_to(ROOT).as_posix()}" in names


def test_wheel_carries_every_header_stand_in(wheel):
    """runtime/shims/ and its folders (the standard headers, sys/, the
    runtime's builtin headers): package data by glob, a new folder needs its
    own."""
    names = set(zipfile.ZipFile(wheel).namelist())
    shims = ROOT / "drvgemm" / "runtime" / "shims"
    files = [f for f in shims.rglob("*") if f.is_file()]
    assert any(f.parent.name == "builtin" for f in files)
    missing = [f.relative_to(ROOT).as_posix() for f in files
               if f.relative_to(ROOT).as_posix() not in names]
    assert not missing, missing


def test_wheel_is_tagged_abi3(wheel):
    """The extension is built against the limited API (Py_LIMITED_API in
    _fastlaunch.c, py_limited_api in setup.py): the wheel must say so, or pip
    refuses it on every other CPython."""
    names = zipfile.ZipFile(wheel).namelist()
    exts = [n for n in names if n.startswith("drvgemm/runtime/_fastlaunch") and n.endswith(".so")]
    if not exts:
        pytest.skip("the optional extension was not built here (no C compiler)")
    assert exts == ["drvgemm/runtime/_fastlaunch.abi3.so"], exts
    _, _, python_tag, abi_tag, _platform = wheel.stem.split("-")
    assert (python_tag, abi_tag) == ("cp310", "abi3"), wheel.name
    meta = zipfile.ZipFile(wheel).read("drvgemm-0.1.0.dist-info/WHEEL".replace(
        "0.1.0", wheel.stem.split("-")[1])).decode()
    assert "Tag: cp310-abi3-" in meta and "Root-Is-Purelib: false" in meta


def test_installed_wheel_compiles_from_its_own_sources(wheel, tmp_path):
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = ("import drvgemm, drvgemm.runtime.sources as s; "
            "print(s.kernel_root()); "
            "k = drvgemm.compile('saxpy.cu', 'saxpy', arch='sm_90'); print(k.resources.registers)")
    env = dict(os.environ, PYTHONPATH=str(target), DRVGEMM_NO_CACHE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    root, regs = r.stdout.split()
    assert Path(root) == target / "drvgemm" / "_kernels"
    assert int(regs) > 0
