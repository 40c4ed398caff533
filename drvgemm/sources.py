"""Where the kernel sources live: cu/ and ptx/ at the root of a checkout (and
of an editable install), or drvgemm/_kernels/ inside an installed wheel.
Both trees are split into folders by ladder (cu/gemm, cu/softmax, ...); a
bare file name is found in whichever folder holds it (names are unique)."""
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


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
    to the kernel root ('cu/gemm/01_naive.cu'), to cu/ or ptx/ ('gemm/01_naive.cu'),
    or a bare file name ('01_naive.cu') found in any folder under cu/ or ptx/."""
    p = Path(name)
    if p.is_file():
        return p.resolve()
    root = kernel_root()
    for cand in (root / p, root / "cu" / p, root / "ptx" / p):
        if cand.is_file():
            return cand
    if len(p.parts) == 1:
        found = sorted(q for top in ("cu", "ptx") for q in (root / top).rglob(p.name)
                       if q.is_file())
        if len(found) == 1:
            return found[0]
        if found:
            raise FileNotFoundError(
                f"kernel source {str(name)!r} is ambiguous: "
                + ", ".join(str(q.relative_to(root)) for q in found))
    raise FileNotFoundError(
        f"kernel source {str(name)!r} not found (looked in the working directory, "
        f"{root / 'cu'} and {root / 'ptx'} and their subfolders)")


def include_dirs():
    """Header search path: the instruction wrappers first, then the tree roots."""
    root = kernel_root()
    return [root / "cu" / "include", root / "cu", root / "ptx"]
