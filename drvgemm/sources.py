"""Where the kernel sources live: cu/ and ptx/ at the root of a checkout (and
of an editable install), or drvgemm/_kernels/ inside an installed wheel."""
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
    """Resolve a kernel file: an existing path as given, else a file name (or
    a path relative to the kernel root) such as '01_naive.cu' or 'cu/01_naive.cu'."""
    p = Path(name)
    if p.is_file():
        return p.resolve()
    root = kernel_root()
    for cand in (root / p, root / "cu" / p, root / "ptx" / p):
        if cand.is_file():
            return cand
    raise FileNotFoundError(
        f"kernel source {str(name)!r} not found (looked in the working directory, "
        f"{root / 'cu'} and {root / 'ptx'})")


def include_dirs():
    root = kernel_root()
    return [root / "cu", root / "ptx"]
