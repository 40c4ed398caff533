"""The only module that calls NVRTC and nvJitLink.

CUDA C++ goes through NVRTC straight to a cubin for the target architecture
(the PTX is kept for inspection and for the parameter list); hand-written PTX
is assembled to a cubin by nvJitLink. Both run without a GPU, so every kernel
is compiled and resource-checked on any machine.

Why cubin and not PTX: the driver JIT only accepts PTX up to its own ISA
version, so PTX from a newer NVRTC fails to load on an older driver
(CUDA_ERROR_UNSUPPORTED_PTX_VERSION), while a cubin for the device's
architecture loads on any driver that knows that architecture.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
from dataclasses import dataclass, asdict
from pathlib import Path

from cuda.bindings import nvjitlink, nvrtc

from .. import _version
from . import driver, sources
from .errors import CompileError

__all__ = ["compile", "Resources", "CompiledBinary", "parse_resources",
           "nvrtc_version", "cache_dir", "DEFAULT_ARCH"]

DEFAULT_ARCH = "sm_90"
_ARCH_RE = re.compile(r"^sm_(\d+)([a-z]?)$")


# --------------------------------------------------------------------------
# ptxas resource report
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one entry: the numbers that set occupancy and
    tell whether an array fell out of registers into local memory."""
    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    static_smem: int
    barriers: int = 0

    def __str__(self):
        return (f"{self.registers} registers, {self.spill_stores} B spill stores, "
                f"{self.spill_loads} B spill loads, {self.stack} B stack, "
                f"{self.static_smem} B static smem")


_FN_PROPS = re.compile(r"Function properties for '?([\w$.]+)'?:?")
_COMPILING = re.compile(r"Compiling entry function '([\w$.]+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
# nvJitLink's own summary, which (unlike ptxas's line for hand-written PTX with
# module-scope .shared variables) always carries the static shared memory.
_JITLINK_PROPS = re.compile(r"^info\s+: Function properties for '([\w$.]+)':")
_JITLINK_SMEM = re.compile(r"^info\s+: used \d+ registers.*?(\d+) bytes smem")


def parse_resources(log: str) -> dict[str, Resources]:
    """Parse a ptxas ``--verbose`` report (as NVRTC or nvJitLink return it)
    into {entry name: Resources}. Lines of nvJitLink's own summary
    ('info    : used N registers, ...') are ignored: they repeat ptxas."""
    found: dict[str, dict] = {}
    jit_smem: dict[str, int] = {}
    current = None
    jit_current = None
    for line in log.splitlines():
        m = _JITLINK_PROPS.match(line)
        if m:
            jit_current = m.group(1)
            continue
        m = _JITLINK_SMEM.match(line)
        if m and jit_current:
            jit_smem[jit_current] = int(m.group(1))
            continue
        if not line.startswith("ptxas"):
            continue
        m = _COMPILING.search(line)
        if m:
            current = m.group(1)
            found.setdefault(current, {})
            continue
        m = _FN_PROPS.search(line)
        if m:
            current = m.group(1)
            found.setdefault(current, {})
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            found[current].update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                                  spill_loads=int(m.group(3)))
            continue
        m = _USED.search(line)
        if m:
            found[current].update(registers=int(m.group(1)),
                                  barriers=int(m.group(2) or 0),
                                  static_smem=int(m.group(3) or 0))
    out = {}
    for name, d in found.items():
        if "registers" not in d:
            continue  # a non-entry function (only its frame is listed)
        if not d.get("static_smem") and jit_smem.get(name):
            # nvJitLink counts the 1 KiB the system reserves per block on
            # sm_80+ into its figure; ptxas does not. Report it the ptxas way.
            d["static_smem"] = max(0, jit_smem[name] - 1024)
        out[name] = Resources(registers=d["registers"], spill_stores=d.get("spill_stores", 0),
                              spill_loads=d.get("spill_loads", 0), stack=d.get("stack", 0),
                              static_smem=d.get("static_smem", 0), barriers=d.get("barriers", 0))
    return out


# --------------------------------------------------------------------------
# toolchain versions
# --------------------------------------------------------------------------
_nvrtc_version = None


def nvrtc_version() -> tuple[int, int]:
    global _nvrtc_version
    if _nvrtc_version is None:
        err, major, minor = nvrtc.nvrtcVersion()
        _check_nvrtc(err, "nvrtcVersion")
        _nvrtc_version = (major, minor)
    return _nvrtc_version


def nvjitlink_version() -> tuple[int, int]:
    return tuple(nvjitlink.version())


def _drvgemm_version() -> str:
    return _version.__version__


def _check_nvrtc(err, call, program=None, source=None):
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _nvrtc_log(program) if program is not None else ""
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"{call} failed: {msg.decode()}", log=log, source=source)


def _nvrtc_log(program) -> str:
    err, n = nvrtc.nvrtcGetProgramLogSize(program)
    buf = b" " * n
    nvrtc.nvrtcGetProgramLog(program, buf)
    return buf.rstrip(b"\0 ").decode(errors="replace")


# --------------------------------------------------------------------------
# architecture
# --------------------------------------------------------------------------
def normalize_arch(arch) -> str:
    """'sm_90', 'sm_90a', '90', 90, (9, 0) -> 'sm_90' / 'sm_90a'."""
    if arch is None:
        return driver.default_arch()
    if isinstance(arch, tuple):
        arch = f"sm_{arch[0]}{arch[1]}"
    arch = str(arch).strip()
    if arch.isdigit():
        arch = "sm_" + arch
    if arch.startswith("compute_"):
        arch = "sm_" + arch[len("compute_"):]
    if not _ARCH_RE.match(arch):
        raise ValueError(f"arch {arch!r} is not an architecture: write it as 'sm_90' or 'sm_90a'")
    return arch


def arch_number(arch: str) -> int:
    return int(_ARCH_RE.match(arch).group(1))


# --------------------------------------------------------------------------
# the compiled artefact and its disk cache
# --------------------------------------------------------------------------
@dataclass
class CompiledBinary:
    cubin: bytes
    ptx: str            # NVRTC's PTX, or the hand-written PTX itself
    log: str            # compiler log, including the ptxas report
    entry: str          # the (lowered) symbol of the kernel in the cubin
    arch: str
    kind: str           # "cu" or "ptx"
    source_name: str


_MAGIC = b"DRVGEMM-CACHE-1\n"


def cache_dir() -> Path | None:
    """$DRVGEMM_CACHE_DIR, else $XDG_CACHE_HOME/drvgemm or ~/.cache/drvgemm.
    None when DRVGEMM_NO_CACHE is set to anything but '' or '0'."""
    if os.environ.get("DRVGEMM_NO_CACHE", "") not in ("", "0"):
        return None
    d = os.environ.get("DRVGEMM_CACHE_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "drvgemm"


def _cache_read(path: Path) -> CompiledBinary | None:
    """Load an entry, or None when it is missing, truncated or corrupt: the
    whole payload is covered by a SHA-256 stored in the header."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 32 + 8
    if len(data) < head or not data.startswith(_MAGIC):
        return None
    digest = data[len(_MAGIC):len(_MAGIC) + 32]
    (meta_len,) = struct.unpack("<Q", data[len(_MAGIC) + 32:head])
    payload = data[head:]
    if hashlib.sha256(payload).digest() != digest or meta_len > len(payload):
        return None
    try:
        meta = json.loads(payload[:meta_len])
        return CompiledBinary(cubin=payload[meta_len:], **meta)
    except (ValueError, TypeError):
        return None


def _cache_write(path: Path, b: CompiledBinary) -> None:
    meta = asdict(b)
    meta.pop("cubin")
    meta_bytes = json.dumps(meta).encode()
    payload = meta_bytes + b.cubin
    blob = _MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(meta_bytes)) + payload
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)  # atomic: a reader sees the old entry or the new one
    except OSError:
        pass  # a read-only cache only costs a recompile


_INCLUDE_RE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)


def _included_files(text: bytes, here: Path | None, seen: set) -> list[tuple[str, bytes]]:
    """Local headers a source pulls in (#include "..."), recursively, so that
    editing a header changes the cache key."""
    out = []
    search = ([here] if here else []) + sources.include_dirs()
    for m in _INCLUDE_RE.finditer(text):
        name = m.group(1).decode()
        for d in search:
            p = d / name
            if p.is_file():
                rp = p.resolve()
                if rp not in seen:
                    seen.add(rp)
                    body = rp.read_bytes()
                    out.append((name, body))
                    out.extend(_included_files(body, rp.parent, seen))
                break
    return out


def _is_ptx_text(text: str) -> bool:
    return bool(re.search(r"^\s*\.version\s+\d", text, re.M)) and ".entry" in text


# --------------------------------------------------------------------------
# compile
# --------------------------------------------------------------------------
def compile_binary(path_or_source, name, *, defines=None, arch=None, options=(),
                   lineinfo=True) -> CompiledBinary:
    """Compile (or fetch from the cache) and return the binary; see
    ``drvgemm.compile`` for the user-facing description."""
    arch = normalize_arch(arch)
    src_path, text = _read_source(path_or_source)
    kind = "ptx" if (src_path and src_path.suffix == ".ptx") or (not src_path and _is_ptx_text(text)) \
        else "cu"
    source_name = src_path.name if src_path else f"<source:{name}>"
    defines = _normalize_defines(defines)
    options = tuple(str(o) for o in options)
    if kind == "ptx" and defines:
        raise ValueError("defines apply to CUDA C++ only; a .ptx file is assembled as written")

    raw = text.encode()
    headers = _included_files(raw, src_path.parent if src_path else None, set()) if kind == "cu" else []
    key_parts = {
        "drvgemm": _drvgemm_version(), "kind": kind, "name": name, "arch": arch,
        "options": options, "defines": defines, "lineinfo": lineinfo,
        "toolchain": list(nvrtc_version() if kind == "cu" else nvjitlink_version()),
        "source": hashlib.sha256(raw).hexdigest(),
        "headers": [(n, hashlib.sha256(b).hexdigest()) for n, b in headers],
    }
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()

    cdir = cache_dir()
    entry_path = cdir / f"{key}.bin" if cdir else None
    if entry_path is not None:
        hit = _cache_read(entry_path)
        if hit is not None:
            return hit

    if kind == "cu":
        built = _nvrtc_compile(text, source_name, name, defines, arch, options, lineinfo,
                               src_path)
    else:
        built = _nvjitlink_assemble(text, source_name, name, arch, options, lineinfo)
    if entry_path is not None:
        _cache_write(entry_path, built)
    return built


def _read_source(path_or_source) -> tuple[Path | None, str]:
    if isinstance(path_or_source, Path):
        p = sources.find_source(path_or_source)
        return p, p.read_text()
    s = str(path_or_source)
    looks_like_code = "\n" in s or "__global__" in s or ".entry" in s
    if not looks_like_code:
        p = sources.find_source(s)
        return p, p.read_text()
    return None, s


def _normalize_defines(defines) -> tuple:
    if not defines:
        return ()
    items = defines.items() if isinstance(defines, dict) else defines
    out = []
    for k, v in items:
        if not re.match(r"^[A-Za-z_]\w*$", str(k)):
            raise ValueError(f"define name {k!r} is not a C identifier")
        if isinstance(v, bool):
            v = int(v)
        out.append((str(k), None if v is None else str(v)))
    return tuple(sorted(out))


def _nvrtc_compile(text, source_name, name, defines, arch, options, lineinfo, src_path):
    err, prog = nvrtc.nvrtcCreateProgram(text.encode(), source_name.encode(), 0, [], [])
    _check_nvrtc(err, "nvrtcCreateProgram", source=source_name)
    try:
        templated = "<" in name
        if templated:
            err, = nvrtc.nvrtcAddNameExpression(prog, name.encode())
            _check_nvrtc(err, "nvrtcAddNameExpression", prog, source_name)
        # -default-device: everything here runs on the GPU; without it NVRTC
        # 13.0 rejects unannotated helpers such as a lambda inside a kernel.
        opts = [f"-arch={arch}", "-std=c++17", "--ptxas-options=--verbose", "-default-device"]
        if lineinfo:
            opts.append("-lineinfo")
        inc = [src_path.parent] if src_path else []
        inc += [d for d in sources.include_dirs() if d not in inc]
        opts += [f"-I{d}" for d in inc]
        opts += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines]
        opts += list(options)
        bopts = [o.encode() for o in opts]
        err, = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        log = _nvrtc_log(prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"NVRTC could not compile {source_name} for {arch} "
                               f"(options: {' '.join(opts[4:]) or 'none'})",
                               log=log, source=source_name)
        err, n = nvrtc.nvrtcGetCUBINSize(prog)
        _check_nvrtc(err, "nvrtcGetCUBINSize", prog, source_name)
        cubin = b" " * n
        err, = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check_nvrtc(err, "nvrtcGetCUBIN", prog, source_name)
        err, n = nvrtc.nvrtcGetPTXSize(prog)
        _check_nvrtc(err, "nvrtcGetPTXSize", prog, source_name)
        ptx = b" " * n
        err, = nvrtc.nvrtcGetPTX(prog, ptx)
        _check_nvrtc(err, "nvrtcGetPTX", prog, source_name)
        entry = name
        if templated:
            err, lowered = nvrtc.nvrtcGetLoweredName(prog, name.encode())
            _check_nvrtc(err, "nvrtcGetLoweredName", prog, source_name)
            entry = lowered.decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    ptx_text = ptx.rstrip(b"\0").decode()
    if not re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(", ptx_text):
        raise CompileError(f"{source_name} compiled, but it has no kernel named {name!r}; "
                           f"entries found: {', '.join(_entries(ptx_text)) or 'none'} "
                           "(a C++ kernel needs extern \"C\", or pass a template name "
                           "expression such as 'kern<128>')", source=source_name)
    return CompiledBinary(cubin=bytes(cubin), ptx=ptx_text, log=log, entry=entry, arch=arch,
                          kind="cu", source_name=source_name)


def _entries(ptx_text):
    return re.findall(r"\.entry\s+([\w$]+)\s*\(", ptx_text)


def _nvjitlink_assemble(text, source_name, name, arch, options, lineinfo):
    entries = _entries(text)
    if name not in entries:
        raise CompileError(f"{source_name} has no .entry named {name!r}; entries: "
                           f"{', '.join(entries) or 'none'}", source=source_name)
    opts = [f"-arch={arch}", "-verbose"]
    if lineinfo:
        opts.append("-lineinfo")
    opts += list(options)
    handle = nvjitlink.create(len(opts), opts)
    try:
        data = text.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), source_name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            n = nvjitlink.get_error_log_size(handle)
            buf = bytearray(n)
            nvjitlink.get_error_log(handle, buf)
            log = buf.rstrip(b"\0").decode(errors="replace")
            log = log.replace("application ptx input, line", f"{source_name}, line")
            raise CompileError(f"nvJitLink could not assemble {source_name} for {arch}: {e}",
                               log=log, source=source_name) from None
        n = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(n)
        nvjitlink.get_linked_cubin(handle, cubin)
        n = nvjitlink.get_info_log_size(handle)
        buf = bytearray(n)
        nvjitlink.get_info_log(handle, buf)
        log = buf.rstrip(b"\0").decode(errors="replace")
    finally:
        nvjitlink.destroy(handle)
    return CompiledBinary(cubin=bytes(cubin), ptx=text, log=log, entry=name, arch=arch,
                          kind="ptx", source_name=source_name)
