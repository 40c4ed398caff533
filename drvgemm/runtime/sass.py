"""Disassemble a cubin with nvdisasm (from the nvidia-cuda-nvdisasm wheel or
the PATH), so SASS can be read and checked with no GPU: HMMA, HGMMA,
LDGSTS, LDSM, UTMALDG present where a rung means them, no LDL/STL.

Disassemblies are cached, in the process and in the compile cache
directory (``<sha256>.sass``), keyed by the cubin's bytes and nvdisasm's
version: the same cubin disassembled twice costs one nvdisasm run."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from .compiler import cache_dir


def nvdisasm_path() -> str | None:
    try:
        import nvidia
        for base in nvidia.__path__:
            for cand in Path(base).glob("cu*/bin/nvdisasm"):
                if os.access(cand, os.X_OK):
                    return str(cand)
    except ImportError:
        pass
    found = shutil.which("nvdisasm")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "nvdisasm"), os.X_OK):
            return os.path.join(home, "bin", "nvdisasm")
    return None


_SASS_MAGIC = "// drvgemm-sass-1 "
_memo: dict[str, str] = {}
_versions: dict[str, str] = {}


def nvdisasm_version(tool: str) -> str:
    """The ``nvdisasm --version`` text of ``tool`` (once per process)."""
    v = _versions.get(tool)
    if v is None:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True)
        v = _versions[tool] = (out.stdout + out.stderr).strip() or f"unknown ({tool})"
    return v


def _cache_path(key: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / f"{key}.sass"


def _cache_read(path: Path) -> str | None:
    """An entry's text, or None when missing or corrupt (the first line holds
    the SHA-256 of the rest)."""
    try:
        data = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    head, sep, body = data.partition("\n")
    if not sep or not head.startswith(_SASS_MAGIC):
        return None
    if hashlib.sha256(body.encode()).hexdigest() != head[len(_SASS_MAGIC):]:
        return None
    return body


def _cache_write(path: Path, text: str) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(_SASS_MAGIC + hashlib.sha256(text.encode()).hexdigest() + "\n" + text)
        os.replace(tmp, path)  # atomic: a reader sees no entry or the whole one
        tmp = None
    except OSError:
        pass  # a read-only or full cache only costs another nvdisasm run
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _run_nvdisasm(tool: str, cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        name = f.name
    try:
        out = subprocess.run([tool, "-c", name], capture_output=True, text=True)
    finally:
        os.unlink(name)
    if out.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {out.stderr.strip()}")
    return out.stdout


def disassemble(cubin: bytes) -> str:
    tool = nvdisasm_path()
    if tool is None:
        raise FileNotFoundError("nvdisasm not found: pip install nvidia-cuda-nvdisasm "
                                "(or put the CUDA toolkit's bin/ on PATH)")
    h = hashlib.sha256(nvdisasm_version(tool).encode() + b"\0-c\0")
    h.update(bytes(cubin))
    key = h.hexdigest()
    text = _memo.get(key)
    if text is not None:
        return text
    path = _cache_path(key)
    text = _cache_read(path) if path is not None else None
    if text is None:
        text = _run_nvdisasm(tool, bytes(cubin))
        if path is not None:
            _cache_write(path, text)
    _memo[key] = text
    return text


# One instruction of nvdisasm's output: its address comment, an optional
# predicate, the base opcode (group 1) and its modifiers (group 2, ".E.128").
OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")
_BRANCH_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")


def opcodes(sass: str, modifiers: bool = True) -> list[str]:
    """Every instruction's opcode in order: 'LDG.E.128.CONSTANT' (with its
    modifiers) or 'LDG' (``modifiers=False``)."""
    return [m.group(1) + (m.group(2) if modifiers else "") for m in OPCODE.finditer(sass)]


def opcode_counts(sass: str) -> Counter:
    """Count base opcodes (HMMA, FFMA, LDGSTS, ...) in a disassembly."""
    return Counter(opcodes(sass, modifiers=False))


def loops(sass: str) -> list[list[tuple[str, str]]]:
    """(base opcode, modifiers) of the instructions of every loop, in code
    order: from a label to a backward branch to it, the branch included (a
    loop nested in another is listed on its own and inside the outer one)."""
    labels, ins = {}, []
    for line in sass.splitlines():
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = OPCODE.search(line)
        if m:
            t = _BRANCH_TARGET.search(line, m.end())
            ins.append((m.group(1), m.group(2), t.group(1) if t else None))
    return [[(op, mods) for op, mods, _ in ins[labels[target]:i + 1]]
            for i, (op, _, target) in enumerate(ins)
            if op == "BRA" and target in labels and labels[target] <= i]


def hottest_loop(sass: str) -> list[tuple[str, str]]:
    """The longest of ``loops(sass)`` (for a GEMM, the k-tile main loop);
    empty when the code has no loop."""
    return max(loops(sass), key=len, default=[])


# An instruction line of nvdisasm: "/*0040*/   IADD3 R0, R2, 0x7f, RZ ;" -- the
# address and the section/symbol lines (which carry the entry's name) are left out.
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;")
_SECTION = re.compile(r"^//-+ (\S+)\s+-+$")


def entry_instructions(sass_text: str, entry: str | None = None) -> list[str]:
    """The instruction texts of one entry's .text section (all of them when
    ``entry`` is None), addresses left out: a cubin of a multi-kernel file
    holds every kernel."""
    body, section = [], None
    for line in sass_text.splitlines():
        s = _SECTION.match(line)
        if s:
            section = s.group(1)
            continue
        m = _INSTR.match(line)
        if m and (entry is None or section == f".text.{entry}"):
            body.append(m.group(1))
    if not body:
        raise ValueError(f"no instructions for entry {entry!r}")
    return body


def sass_digest(sass_text: str, entry: str | None = None) -> str:
    """Digest of one entry's instructions (see entry_instructions). The SASS
    manifest (tests/sass_manifest.py) and the bench records' ``sass_hash``
    are this digest."""
    body = entry_instructions(sass_text, entry)
    return hashlib.sha256("\n".join(body).encode()).hexdigest()[:16]


def elf_section(cubin: bytes, name: str) -> bytes | None:
    """The bytes of section ``name`` of an ELF64 cubin (None when absent):
    read from the section headers, no tool needed."""
    data = bytes(cubin)
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not an ELF64 image")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i):   # (name offset, file offset, size) of section i
        base = shoff + i * shentsize
        nm, = struct.unpack_from("<I", data, base)
        off, size = struct.unpack_from("<QQ", data, base + 0x18)
        return nm, off, size

    _, stroff, strsize = header(shstrndx)
    names = data[stroff:stroff + strsize]
    want = name.encode()
    for i in range(shnum):
        nm, off, size = header(i)
        end = names.index(b"\0", nm)
        if names[nm:end] == want:
            return data[off:off + size]
    return None


def code_digest(cubin: bytes, entry: str) -> str:
    """Digest of the machine-code bytes of ``entry`` (its .text section), no
    disassembler needed: equal bytes are equal SASS, so the SASS manifest
    test disassembles only the instantiations whose bytes moved."""
    text = elf_section(cubin, f".text.{entry}")
    if text is None:
        raise ValueError(f"no .text.{entry} section in the cubin")
    return hashlib.sha256(text).hexdigest()[:16]


_kernel_digests: dict = {}


def kernel_sass_hash(kernel) -> str:
    """sass_digest of a compiled Kernel's own entry (cached per cubin)."""
    key = (hash(kernel.cubin), kernel.entry)
    d = _kernel_digests.get(key)
    if d is None:
        d = _kernel_digests[key] = sass_digest(disassemble(kernel.cubin), kernel.entry)
    return d
