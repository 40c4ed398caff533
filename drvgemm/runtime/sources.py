"""Where the kernel sources live: cu/ and ptx/ at the root of a checkout (and
of an editable install), or drvgemm/_kernels/ inside an installed wheel.

Inside cu/ and ptx/ kernels may sit in subfolders (cu/gemm/, cu/softmax/,
ptx/probes/, ...): a kernel is named by its file name, which is unique across
both trees, or by a path relative to cu/ or ptx/."""
from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass, field
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


_name_index: dict = {}   # kernel root -> ({folder: mtime_ns}, {file name: [paths]})
_MTIME_GRANULARITY_NS = 50_000_000   # coarser than any file system's mtime tick here


def _files_named(root: Path) -> dict:
    """{file name: [resolved paths]} of every file under root's cu/ and ptx/,
    walked again whenever a folder of the trees changed (a file or a folder
    added, removed or renamed changes its parent's mtime), so a lookup sees the
    tree as it is; a warm lookup only stats the folders (the whole kernel set's
    warm start looked 249 names up by rglob: 0.35 of its 1.06 CPU seconds)."""
    cached = _name_index.get(root)
    if cached is not None:
        try:
            if all(os.stat(d).st_mtime_ns == m for d, m in cached[0].items()):
                return cached[1]
        except OSError:
            pass
    # A folder changed within the clock's granularity of the walk may change
    # again without its mtime moving: an index holding such a folder is not
    # kept (the next lookup walks again), as git treats a "racily clean" entry.
    started = time.time_ns()
    folders, names = {}, {}
    for t in _TREES:
        for d, _, files in os.walk(root / t):
            folders[d] = os.stat(d).st_mtime_ns
            for f in files:
                path = Path(d, f)
                if path.is_file():
                    names.setdefault(f, []).append(path.resolve())
    if all(m < started - _MTIME_GRANULARITY_NS for m in folders.values()):
        _name_index[root] = (folders, names)
    else:
        _name_index.pop(root, None)
    return names


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
    found = sorted(_files_named(root).get(p.name, ()))
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
    """drvgemm's own folders on the include path, after the user's and the
    source's: cu/include/ (the instruction wrappers, where the tree has
    one), cu/ and ptx/."""
    root = kernel_root()
    dirs = [root / "cu" / "include", root / "cu", root / "ptx"]
    return [d for d in dirs if d.is_dir()]


def shim_dir() -> Path:
    """drvgemm's stand-ins for the C/C++ standard headers (see shims/README)."""
    return Path(__file__).resolve().parent / "shims"


# --------------------------------------------------------------------------
# the files a compile reads
# --------------------------------------------------------------------------
# An #include of either form (or __has_include, whose answer depends on the
# same search): group 1 quoted, group 2 angle, group 3 anything else (a macro).
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include(?:_next)?[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>|([^\s/][^\n]*))'
                      rb'|__has_include(?:_next)?\s*\(\s*(?:"([^"\n]+)"|<([^>\n]+)>)', re.M)


@dataclass
class Dependencies:
    """What one compile reads, as NVRTC looks for it: every file found (path ->
    SHA-256 of its bytes), every path looked at before it and found missing (a
    file appearing there would be the one included instead), and whether each
    #include could be followed (``#include MACRO`` cannot). Files in the
    toolkit folders are not listed: the toolkit's identity is in the key."""
    files: dict = field(default_factory=dict)
    absent: list = field(default_factory=list)
    exact: bool = True

    def still_valid(self) -> bool:
        for path, digest in self.files.items():
            try:
                if read_file(path)[1] != digest:
                    return False
            except OSError:
                return False
        return not any(os.path.exists(p) for p in self.absent)


# A file's bytes and digest, kept while its stat is unchanged: a compile reads
# the same headers as the compiles before it (the whole kernel set's warm start
# read and hashed 890 files, 126 of them distinct). A file changed within the
# clock's granularity of being read may change again without its stat moving,
# so such a file is not kept (git's "racily clean" rule).
_file_memo: dict = {}   # path -> (stat key, bytes, SHA-256 hex)
_MEMO_ENTRIES = 2048    # a bound for a long process compiling many files of its own
_memo_lock = threading.Lock()


def _memo_put(memo: dict, key, value) -> None:
    """Insert, dropping the oldest entries beyond the bound (compiles may run
    on several threads)."""
    with _memo_lock:
        memo.pop(key, None)
        while len(memo) >= _MEMO_ENTRIES:
            memo.pop(next(iter(memo)))
        memo[key] = value


def read_file(path) -> tuple[bytes, str]:
    """(bytes, SHA-256 hex digest) of a file; OSError where it cannot be read."""
    path = os.fspath(path)
    st = os.stat(path)
    key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)
    hit = _file_memo.get(path)
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    with open(path, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    if max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - _MTIME_GRANULARITY_NS \
            and len(data) == st.st_size:
        _memo_put(_file_memo, path, (key, data, digest))
    else:
        with _memo_lock:
            _file_memo.pop(path, None)
    return data, digest


_includes_memo: dict = {}   # SHA-256 of a text -> its #include lines, parsed


def _includes(data: bytes, digest: str | None = None) -> tuple:
    """(quoted name, angle name, other) of each #include or __has_include of a
    text, in order; kept by the text's digest (a pure function of its bytes)."""
    digest = digest or hashlib.sha256(data).hexdigest()
    found = _includes_memo.get(digest)
    if found is None:
        found = tuple((m.group(1) or m.group(4), m.group(2) or m.group(5), m.group(3))
                      for m in _INCLUDE.finditer(data))
        _memo_put(_includes_memo, digest, found)
    return found


def scan_dependencies(text: bytes, main_dir: Path, search: list[Path],
                      toolkit: list[Path]) -> Dependencies:
    """Follow the #include graph of ``text`` the way NVRTC resolves it
    (checked against NVRTC 13): "quoted" names in the including file's own
    folder first (for the main file: ``main_dir``, the folder of its program
    name), then the -I folders in order; <angle> names in the -I folders
    only; the toolkit folders last, where the walk stops. Every #include line
    is followed, also those under an #if that is false, so the list is a
    superset of what the compiler opened: an edit to any of them recompiles."""
    deps = Dependencies()
    absent: dict = {}
    stop = [str(d) for d in toolkit]
    todo = [(_includes(text), main_dir)]
    seen: set = set()
    while todo:
        includes, here = todo.pop()
        for quoted, angle, other in includes:
            if other is not None:
                deps.exact = False
                continue
            name = (quoted or angle).decode(errors="replace").strip()
            dirs = ([here] if quoted else []) + list(search) + list(toolkit)
            for d in dirs:
                cand = os.path.normpath(os.path.join(str(d), name))
                if not os.path.isfile(cand):
                    if str(d) not in stop:
                        absent[cand] = None
                    continue
                if str(d) in stop:
                    break  # a toolkit header: covered by the toolkit's identity
                if cand not in seen:
                    seen.add(cand)
                    data, digest = read_file(cand)
                    deps.files[cand] = digest
                    todo.append((_includes(data, digest), os.path.dirname(cand)))
                break
    deps.absent = sorted(absent)
    return deps
