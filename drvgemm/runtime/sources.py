"""Where the kernel sources live: cu/ and ptx/ at the root of a checkout (and
of an editable install), or drvgemm/_kernels/ inside an installed wheel.

Inside cu/ and ptx/ kernels may sit in subfolders (cu/gemm/, cu/softmax/,
ptx/probes/, ...): a kernel is named by its file name, which is unique across
both trees, or by a path relative to cu/ or ptx/."""
from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent   # drvgemm/
_TREES = ("cu", "ptx")


def kernel_root() -> Path:
    """The folder that holds cu/ and ptx/."""
    packaged = _PACKAGE / "_kernels"
    if (packaged / "cu").is_dir():
        return packaged
    checkout = _PACKAGE.parent
    if (checkout / "cu").is_dir():
        return checkout
    raise FileNotFoundError(
        f"kernel sources not found: looked for {packaged}/cu and {checkout}/cu; "
        "reinstall drvgemm (pip install .) so the wheel carries them")


def find_source(name) -> Path:
    """Resolve a kernel file: an existing path as given, else a path relative
    to the kernel root, cu/ or ptx/ ('cu/01_naive.cu', 'gemm/01_naive.cu'),
    else a file name found once anywhere under cu/ or ptx/ ('01_naive.cu').
    A relative path whose folders do not exist in this layout is looked up by
    its file name too, so 'gemm/01_naive.cu' also finds cu/01_naive.cu."""
    p = Path(name)
    if p.is_file():
        return p.resolve()
    root = kernel_root()
    for cand in (root / p, *(root / t / p for t in _TREES)):
        if cand.is_file():
            return cand
    found = sorted({f.resolve() for t in _TREES for f in (root / t).rglob(p.name) if f.is_file()})
    if len(found) > 1 and len(p.parts) > 1:
        # a relative path picks among files of the same name by its folders
        tail = [f for f in found if f.parts[-len(p.parts):] == p.parts]
        found = tail or found
    if len(found) == 1:
        return found[0]
    if found:
        raise FileNotFoundError(
            f"kernel source {str(name)!r} is ambiguous: "
            + ", ".join(str(f.relative_to(root)) for f in found)
            + "; name it by its path relative to cu/ or ptx/")
    raise FileNotFoundError(
        f"kernel source {str(name)!r} not found (looked in the working directory, "
        f"{root / 'cu'} and {root / 'ptx'} and their subfolders)")


def include_dirs() -> list[Path]:
    """Folders searched for #include "...": cu/include/ (the instruction
    wrappers, where the tree has one), cu/ and ptx/."""
    root = kernel_root()
    dirs = [root / "cu" / "include", root / "cu", root / "ptx"]
    return [d for d in dirs if d.is_dir()]
