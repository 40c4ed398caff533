"""The only module that calls NVRTC and nvJitLink.

CUDA C++ goes through NVRTC straight to a cubin for the target architecture
(the PTX is kept for inspection and for the parameter list); hand-written PTX
is assembled to a cubin by nvJitLink. Both run without a GPU, so every kernel
is compiled and resource-checked on any machine.

Why cubin and not PTX: the driver JIT only accepts PTX up to its own ISA
version, so PTX from a newer NVRTC fails to load on an older driver
(CUDA_ERROR_UNSUPPORTED_PTX_VERSION), while a cubin for the device's
architecture loads on any driver that knows that architecture.

One compile makes one module (a cubin holding every kernel of the source);
names are NVRTC name expressions ('kern', 'ns::kern', 'kern<128, float>'),
looked up as lowered names afterwards.

The include path, in order: the user's include_paths (and -I options), the
source's folder, drvgemm's kernel folders, drvgemm's stand-ins for the
standard headers (runtime/shims/), the CUDA headers (see toolkit_headers;
with NVRTC's bundled ones, runtime/shims/builtin/ after them).

The disk cache: an entry is found by a key over everything that is not a
file (source text, names, arch, every option, include path and define, the
toolchain's versions, the CUDA headers' identity); the entry lists every file
the compile read, with its hash, and every path looked at and found missing
on the way; a hit counts only while each still reads the same.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import struct
import tempfile
import threading
import warnings
from dataclasses import dataclass, asdict, field
from pathlib import Path

from cuda.bindings import nvjitlink, nvrtc

try:  # finds the CUDA headers for an NVRTC older than 13.3 (see toolkit_headers)
    from cuda import pathfinder
except ImportError:
    pathfinder = None

from .. import _version
from . import compile_hints, driver, sources, symbols
from .errors import CompileError

__all__ = ["compile_binary", "compile_module_binary", "Resources", "CompiledBinary",
           "ModuleBinary", "parse_resources", "nvrtc_version", "supported_archs", "cache_dir",
           "cache_info", "cache_clear", "toolkit_headers", "compile_listener", "DEFAULT_ARCH"]

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
    # What the compile report should say besides the numbers (a register cap
    # that did not apply, ...); not part of the figures' equality.
    notes: tuple = field(default=(), compare=False)

    def __str__(self):
        text = (f"{self.registers} registers, {self.spill_stores} B spill stores, "
                f"{self.spill_loads} B spill loads, {self.stack} B stack, "
                f"{self.static_smem} B static smem")
        return text + "".join(f"; {n}" for n in self.notes)


_FN_PROPS = re.compile(r"Function properties for '?([\w$.]+)'?:?")
_COMPILING = re.compile(r"Compiling entry function '([\w$.]+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
# A function with a call stack has its cumulative stack between the barriers and the smem.
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?"
                   r"(?:, \d+ bytes cumulative stack size)?(?:, (\d+) bytes smem)?")
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


_dist_versions: dict = {}


def _dist_version(dist: str) -> str:
    """The installed wheel's full version ('13.0.88'): nvrtcVersion() says
    only 13.0, and two patch releases may generate different code."""
    if dist not in _dist_versions:
        try:
            _dist_versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            _dist_versions[dist] = ""
    return _dist_versions[dist]


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
_supported = None


def supported_archs() -> tuple[int, ...]:
    """The SM numbers this NVRTC compiles for (75, 80, ..., 90, 100, ...)."""
    global _supported
    if _supported is None:
        err, archs = nvrtc.nvrtcGetSupportedArchs()
        _check_nvrtc(err, "nvrtcGetSupportedArchs")
        _supported = tuple(int(a) for a in archs)
    return _supported


def normalize_arch(arch) -> str:
    """'sm_90', 'sm_90a', '90', 90, (9, 0) -> 'sm_90' / 'sm_90a', checked
    against the toolchain's list before any tool sees it (nvJitLink ends the
    process on an architecture it does not know)."""
    if arch is None:
        return driver.default_arch()
    if isinstance(arch, bool) or not isinstance(arch, (str, int, tuple)):
        raise TypeError(f"arch must be a string such as 'sm_90', got {type(arch).__name__}")
    if isinstance(arch, tuple):
        arch = f"sm_{arch[0]}{arch[1]}"
    arch = str(arch).strip()
    if arch.isdigit():
        arch = "sm_" + arch
    if arch.startswith("compute_"):
        arch = "sm_" + arch[len("compute_"):]
    m = _ARCH_RE.match(arch)
    if not m:
        raise ValueError(f"arch {arch!r} is not an architecture: write it as 'sm_90' or 'sm_90a'")
    number, suffix = int(m.group(1)), m.group(2)
    known = supported_archs()
    if number not in known or (suffix == "a" and number < 90) or (suffix == "f" and number < 100) \
            or suffix not in ("", "a", "f"):
        v = ".".join(map(str, nvrtc_version()))
        raise ValueError(f"arch {arch!r} is not one this toolchain (NVRTC {v}) compiles for; "
                         "it knows " + ", ".join(f"sm_{a}" for a in known)
                         + " ('a' variants from sm_90, 'f' from sm_100)")
    return arch


def arch_number(arch: str) -> int:
    return int(_ARCH_RE.match(arch).group(1))


# --------------------------------------------------------------------------
# the CUDA headers
# --------------------------------------------------------------------------
# Which CUDA headers (cuda_fp16.h, cuda_bf16.h, mma.h, cooperative_groups.h,
# cuda/std/*, cuda/barrier, ...) a compile sees, with no option given:
#  - NVRTC 13.3 and later carry them inside libnvrtc-builtins and extract
#    them on request (--use-bundled-headers=DIR). These are chosen first:
#    they are the compiler's own release (no version skew between headers
#    and front end), and they come with the nvidia-cuda-nvrtc wheel drvgemm
#    already depends on, so a fresh install (CI) has them with nothing added.
#  - Older NVRTC (13.0 on the H200) has none. Then cuda.pathfinder (a
#    dependency of cuda-bindings) finds the toolkit's: the nvidia-cuda-runtime,
#    nvidia-cuda-cccl and nvidia-cuda-crt wheels (the `headers` extra), a
#    conda environment, $CUDA_HOME or /usr/local/cuda. They are not required
#    dependencies: pip would pick their newest release, whose headers need
#    a front end as new as they are, and such a machine may have no index.
#  - $DRVGEMM_CUDA_INCLUDE (folders, os.pathsep-separated) overrides both.
_BUNDLED_SINCE = (13, 3)
_toolkit_lock = threading.Lock()
_toolkit_memo: dict = {}


def _headers_root() -> Path:
    d = cache_dir()
    if d is None:
        d = Path(tempfile.gettempdir()) / f"drvgemm-{os.getuid() if hasattr(os, 'getuid') else 0}"
    return d / "nvrtc-headers"


def _tree_identity(d: Path) -> str:
    """A cheap fingerprint of an installed header folder: its entries'
    names, sizes and modification times (a reinstall rewrites them)."""
    h = hashlib.sha256(str(d).encode())
    try:
        for e in sorted(os.scandir(d), key=lambda e: e.name):
            st = e.stat()
            h.update(f"{e.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    except OSError:
        pass
    return h.hexdigest()[:16]


def _library_headers(lib: str) -> str | None:
    """The folder of a CUDA library's headers (a wheel's or a toolkit's), if
    cuda.pathfinder finds one."""
    try:
        loc = pathfinder.locate_nvidia_header_directory(lib)
        return loc.abs_path if loc is not None else None
    except Exception:  # an old or missing cuda.pathfinder, an unknown library
        return None


def toolkit_headers() -> tuple[list[str], list[Path], str]:
    """(NVRTC options, folders, identity) of the CUDA headers; ([], [], 'none')
    when none are found (a compile that includes one then says what to do)."""
    override = os.environ.get("DRVGEMM_CUDA_INCLUDE")
    version = nvrtc_version()
    memo_key = (override, version, str(_headers_root()) if version >= _BUNDLED_SINCE else "")
    with _toolkit_lock:
        if memo_key in _toolkit_memo:
            return _toolkit_memo[memo_key]
        if override:
            dirs = [Path(os.path.expanduser(p)).resolve() for p in override.split(os.pathsep) if p]
            found = ([f"-I{d}" for d in dirs], dirs,
                     "override:" + ",".join(_tree_identity(d) for d in dirs))
        elif version >= _BUNDLED_SINCE:
            d = _headers_root() / f"nvrtc-{version[0]}.{version[1]}"
            with contextlib.suppress(OSError):
                d.mkdir(parents=True, exist_ok=True)
            # The bundle lacks the runtime's own device headers, whose content
            # NVRTC declares itself: empty stand-ins (shims/builtin/README).
            builtin = sources.shim_dir() / "builtin"
            found = ([f"--use-bundled-headers={d}", f"-I{builtin}"], [d, d / "cccl", builtin],
                     f"bundled:{version[0]}.{version[1]}:{_dist_version('nvidia-cuda-nvrtc')}")
        else:
            dirs = [Path(d) for d in map(_library_headers, ("cudart", "cccl")) if d]
            found = ([f"-I{d}" for d in dirs], dirs,
                     "found:" + ",".join(_tree_identity(d) for d in dirs) if dirs else "none")
        _toolkit_memo[memo_key] = found
        return found


# --------------------------------------------------------------------------
# the compiled artefact and its disk cache
# --------------------------------------------------------------------------
@dataclass
class CompiledBinary:
    """One kernel of a compiled module (what compile_binary returns)."""
    cubin: bytes
    ptx: str            # NVRTC's PTX, or the hand-written PTX itself
    log: str            # compiler log, including the ptxas report
    entry: str          # the (lowered) symbol of the kernel in the cubin
    arch: str
    kind: str           # "cu" or "ptx"
    source_name: str
    notes: tuple = ()   # what the compile report should say (see Resources.notes)


@dataclass
class ModuleBinary:
    """One compile: a cubin with every kernel of the source."""
    cubin: bytes
    ptx: str
    log: str
    arch: str
    kind: str
    source_name: str
    lowered: dict       # each name asked for -> its symbol in the cubin
    entries: list       # every .entry of the module
    notes: dict         # symbol -> notes
    files: list         # the source and every header it read (outside the toolkit)

    def binary(self, name: str) -> CompiledBinary:
        entry = self.lowered.get(name, name)
        if entry not in self.entries:
            raise KeyError(f"{self.source_name} has no kernel {name!r}; entries: "
                           f"{', '.join(self.entries) or 'none'}")
        return CompiledBinary(cubin=self.cubin, ptx=self.ptx, log=self.log, entry=entry,
                              arch=self.arch, kind=self.kind, source_name=self.source_name,
                              notes=tuple(self.notes.get(entry, ())))


_MAGIC = b"DRVGEMM-CACHE-3\n"
_FALSE_WORDS = ("", "0", "false", "no", "off")
DEFAULT_CACHE_MB = 2048


def cache_dir() -> Path | None:
    """$DRVGEMM_CACHE_DIR (~ and $VARS expanded), else $XDG_CACHE_HOME/drvgemm
    or ~/.cache/drvgemm. None when DRVGEMM_NO_CACHE is set to anything but
    '', '0', 'false', 'no' or 'off'."""
    if os.environ.get("DRVGEMM_NO_CACHE", "").strip().lower() not in _FALSE_WORDS:
        return None
    d = os.environ.get("DRVGEMM_CACHE_DIR")
    if d:
        return Path(os.path.expanduser(os.path.expandvars(d)))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "drvgemm"


def cache_limit_bytes() -> int:
    """The size bound of the cubin cache: $DRVGEMM_CACHE_MAX_MB (default 2048)."""
    raw = os.environ.get("DRVGEMM_CACHE_MAX_MB", "")
    try:
        mb = float(raw) if raw.strip() else DEFAULT_CACHE_MB
    except ValueError:
        raise ValueError(f"DRVGEMM_CACHE_MAX_MB={raw!r} is not a number of megabytes") from None
    return int(mb * 1024 * 1024)


def _entries_of(d: Path) -> list:
    out = []
    with contextlib.suppress(OSError):
        for e in os.scandir(d):
            if e.name.endswith(".bin") and e.is_file():
                with contextlib.suppress(OSError):
                    st = e.stat()
                    out.append((max(st.st_atime, st.st_mtime), st.st_size, Path(e.path)))
    return out


def cache_info() -> dict:
    d = cache_dir()
    if d is None:
        return {"dir": None, "entries": 0, "bytes": 0, "limit_bytes": cache_limit_bytes(),
                "headers_bytes": 0}
    entries = _entries_of(d)
    headers = 0
    for root, _, files in os.walk(d / "nvrtc-headers"):
        for f in files:
            with contextlib.suppress(OSError):
                headers += os.path.getsize(os.path.join(root, f))
    return {"dir": str(d), "entries": len(entries), "bytes": sum(e[1] for e in entries),
            "limit_bytes": cache_limit_bytes(), "headers_bytes": headers}


def cache_clear() -> int:
    """Remove every cache entry, left-over temporary file and extracted header
    folder; returns the number of entries removed."""
    d = cache_dir()
    if d is None or not d.is_dir():
        return 0
    n = 0
    for e in os.scandir(d):
        with contextlib.suppress(OSError):
            if e.name.endswith(".bin") or e.name.startswith(".tmp-"):
                os.unlink(e.path)
                n += e.name.endswith(".bin")
    shutil.rmtree(d / "nvrtc-headers", ignore_errors=True)
    with _toolkit_lock:
        _toolkit_memo.clear()
    return n


def _evict(d: Path, limit: int) -> None:
    """Least recently used entries go first, down to 90% of the bound (a hit
    refreshes an entry's time)."""
    entries = _entries_of(d)
    total = sum(e[1] for e in entries)
    if total <= limit:
        return
    for _, size, path in sorted(entries):
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
        if total <= limit * 0.9:
            break


def _cache_read(path: Path):
    """(ModuleBinary, Dependencies), or None when missing, truncated or
    corrupt: the whole payload is covered by a SHA-256 stored in the header.
    An entry is the header, the metadata as JSON, the PTX, the cubin (the PTX
    lies outside the JSON: decoding it there was a tenth of a warm start)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 32 + 16
    if len(data) < head or not data.startswith(_MAGIC):
        return None
    digest = data[len(_MAGIC):len(_MAGIC) + 32]
    meta_len, ptx_len = struct.unpack("<QQ", data[len(_MAGIC) + 32:head])
    payload = data[head:]
    if hashlib.sha256(payload).digest() != digest or meta_len + ptx_len > len(payload):
        return None
    try:
        meta = json.loads(payload[:meta_len])
        deps = sources.Dependencies(**meta.pop("deps"))
        ptx = payload[meta_len:meta_len + ptx_len].decode()
        return ModuleBinary(cubin=payload[meta_len + ptx_len:], ptx=ptx, **meta), deps
    except (ValueError, TypeError, KeyError):
        return None


def _cache_write(path: Path, b: ModuleBinary, deps) -> None:
    meta = asdict(b)
    meta.pop("cubin")
    meta.pop("ptx")
    meta["deps"] = asdict(deps)
    meta_bytes = json.dumps(meta).encode()
    ptx_bytes = b.ptx.encode()
    payload = meta_bytes + ptx_bytes + b.cubin
    blob = (_MAGIC + hashlib.sha256(payload).digest()
            + struct.pack("<QQ", len(meta_bytes), len(ptx_bytes)) + payload)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)  # atomic: a reader sees the old entry or the new one
        tmp = None
        _evict(path.parent, cache_limit_bytes())
    except OSError:
        pass  # a full disk or read-only cache only costs a recompile
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _is_ptx_text(text: str) -> bool:
    return bool(re.search(r"^\s*\.version\s+\d", text, re.M)) and ".entry" in text


# --------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------
def _read_source(path_or_source) -> tuple[Path | None, str]:
    if isinstance(path_or_source, (bytes, bytearray)):
        try:
            path_or_source = bytes(path_or_source).decode()
        except UnicodeDecodeError as e:
            raise ValueError(f"a bytes source must be UTF-8 text (CUDA C++ or PTX): {e}") from None
        return None, path_or_source
    if isinstance(path_or_source, os.PathLike):
        p = sources.find_source(os.fspath(path_or_source))
        return p, _file_text(p)
    if not isinstance(path_or_source, str):
        raise TypeError("the source must be a file path or CUDA C++/PTX text (str, bytes or "
                        f"os.PathLike), got {type(path_or_source).__name__}")
    s = path_or_source
    looks_like_code = "\n" in s or "__global__" in s or ".entry" in s
    if not looks_like_code:
        p = sources.find_source(s)
        return p, _file_text(p)
    return None, s


def _file_text(path: Path) -> str:
    data = sources.read_file(path)[0]
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (CUDA C++ or PTX): {e}") from None


_DEFINE_VALUE = (str, int, float)


def _normalize_defines(defines) -> tuple:
    """{NAME: value}, or a list of 'NAME', 'NAME=VALUE' or (NAME, value)."""
    if defines is None:
        return ()
    if isinstance(defines, (str, bytes)):
        defines = [defines]
    if isinstance(defines, dict):
        items = list(defines.items())
    else:
        try:
            raw = list(defines)
        except TypeError:
            raise TypeError("defines must be a dict {NAME: value} or a list of 'NAME=VALUE' "
                            f"strings, got {type(defines).__name__}") from None
        items = []
        for d in raw:
            if isinstance(d, str):
                k, eq, v = d.partition("=")
                items.append((k.strip(), v if eq else None))
            elif isinstance(d, tuple) and len(d) == 2:
                items.append(d)
            else:
                raise TypeError(f"define {d!r}: write it as 'NAME', 'NAME=VALUE' or (NAME, value)")
    out = {}
    for k, v in items:
        if not isinstance(k, str) or not re.match(r"^[A-Za-z_]\w*$", k):
            raise ValueError(f"define name {k!r} is not a C identifier")
        if isinstance(v, bool):
            v = int(v)
        if v is not None and not isinstance(v, _DEFINE_VALUE):
            raise TypeError(f"define {k}: value {v!r} of type {type(v).__name__} is not a "
                            "number or a string")
        out[k] = None if v is None else str(v)
    return tuple(sorted(out.items()))


def _normalize_names(names) -> tuple | None:
    if names is None:
        return None
    if isinstance(names, str):
        names = [names]
    try:
        names = list(names)
    except TypeError:
        raise TypeError(f"names must be a list of kernel names, got {type(names).__name__}") \
            from None
    for n in names:
        if not isinstance(n, str) or not n.strip():
            raise TypeError(f"a kernel name must be a non-empty string (an extern \"C\" name, "
                            f"'ns::kern' or 'kern<128, float>'), got {n!r}")
    return tuple(dict.fromkeys(n.strip() for n in names))


_ARCH_OPT = re.compile(r"^(?:-arch|--gpu-architecture|-gpu-architecture)(?:=(.*))?$")
_INC_OPT = re.compile(r"^(?:-I|--include-path=|-include-path=)(.*)$")
_INC_ALONE = ("-I", "--include-path", "-include-path")
_REGCAP = re.compile(r"^--?maxrregcount(?:=(\d+))?$")
# Options after which NVRTC gives no cubin (LTO IR, OptiX IR, a syntax check).
_NO_CUBIN = re.compile(r"^--?(?:dlto|dlink-time-opt|gen-opt-lto|optix-ir|fdevice-syntax-only)$")


def _normalize_options(options, arch):
    """(arch, include folders given as options, the other options, register
    cap). An architecture among the options is the same as arch=: given both,
    they must agree. A string is one option."""
    if options is None:
        options = ()
    if isinstance(options, str):
        if len(shlex.split(options)) > 1:
            raise ValueError(f"options={options!r} is one string holding several options: pass "
                             f"a list, options={shlex.split(options)!r}")
        options = (options,)
    try:
        options = list(options)
    except TypeError:
        raise TypeError(f"options must be a list of strings, got {type(options).__name__}") \
            from None
    for o in options:
        if not isinstance(o, str):
            raise TypeError(f"option {o!r} is a {type(o).__name__}; every option is a string")
    rest, includes, opt_arch, cap = [], [], None, None
    it = iter(o.strip() for o in options)
    for o in it:
        m = _ARCH_OPT.match(o)
        if m:
            opt_arch = m.group(1) if m.group(1) is not None else next(it, "")
            continue
        if o in _INC_ALONE:
            includes.append(next(it, ""))
            continue
        m = _INC_OPT.match(o)
        if m:
            includes.append(m.group(1))
            continue
        if _NO_CUBIN.match(o):
            raise ValueError(f"{o}: NVRTC would give no cubin (LTO or OptiX IR, or a syntax "
                             "check only), and drvgemm loads cubins: leave the option out")
        m = _REGCAP.match(o)
        if m:
            value = m.group(1)
            if value is None:
                value = next(it, "")
                o = f"{o}={value}"
            if not value.isdigit():
                raise ValueError(f"{o}: the register cap must be a number")
            cap = int(value)
        rest.append(o)
    if opt_arch is not None:
        a = normalize_arch(opt_arch)
        if arch is not None and normalize_arch(arch) != a:
            raise ValueError(f"arch={arch!r} and the option -arch={opt_arch} disagree: give the "
                             "architecture once, as arch=")
        arch = a
    return normalize_arch(arch), includes, rest, cap


def _include_folders(paths) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths or ():
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"include path {p!r} is not a path")
        d = Path(os.path.expanduser(os.fspath(p))).resolve()
        if not d.is_dir():
            raise ValueError(f"include path {os.fspath(p)!r} is not a folder")
        if d not in out:
            out.append(d)
    return out


# --------------------------------------------------------------------------
# who is compiling (the CLI prints a line only when something is compiled)
# --------------------------------------------------------------------------
_listeners: list = []
_after_debug = False   # a -G compile ran in this process (see compile_module_binary)


@contextlib.contextmanager
def compile_listener(fn):
    """Call ``fn(description)`` each time a compiler actually runs (never for
    a cache hit) for the length of a ``with`` block."""
    _listeners.append(fn)
    try:
        yield
    finally:
        _listeners.remove(fn)


def _announce(what: str) -> None:
    for fn in list(_listeners):
        fn(what)


# --------------------------------------------------------------------------
# compile
# --------------------------------------------------------------------------
def compile_binary(path_or_source, name, *, defines=None, arch=None, options=(),
                   include_paths=(), lineinfo=True) -> CompiledBinary:
    """One kernel's binary; see ``drvgemm.compile``."""
    if not isinstance(name, str) or not name.strip():
        raise TypeError("name must be the kernel's name: an extern \"C\" name, 'ns::kern', a "
                        f"template name expression such as 'kern<128>', or a PTX .entry; got "
                        f"{name!r}")
    mod = compile_module_binary(path_or_source, [name], defines=defines, arch=arch,
                                options=options, include_paths=include_paths, lineinfo=lineinfo)
    return mod.binary(name.strip())


@dataclass
class _Inputs:
    """Everything one compile reads, normalised: what the cache key and
    ``input_digest`` are made of, and what the compile itself is given."""
    src_path: Path | None
    text: str
    names: list
    kind: str
    source_name: str
    arch: str
    options: list
    defines: list
    regcap: int | None
    lineinfo: bool
    search: list
    main_dir: Path | None
    tk_opts: list
    tk_dirs: list
    deps: sources.Dependencies
    key_parts: dict


def _compile_inputs(path_or_source, names, defines, arch, options, include_paths,
                    lineinfo) -> _Inputs:
    src_path, text = _read_source(path_or_source)
    names = _normalize_names(names)
    kind = "ptx" if (src_path and src_path.suffix == ".ptx") or (not src_path and _is_ptx_text(text)) \
        else "cu"
    source_name = src_path.name if src_path else \
        f"<source:{names[0] if names else 'module'}>"
    arch, opt_includes, options, regcap = _normalize_options(options, arch)
    defines = _normalize_defines(defines)
    user_dirs = _include_folders(list(_include_folders(include_paths)) + opt_includes)
    if kind == "ptx" and (defines or user_dirs):
        raise ValueError("defines and include paths apply to CUDA C++ only; a .ptx file is "
                         "assembled as written")

    raw = text.encode()
    if kind == "cu":
        tk_opts, tk_dirs, tk_id = toolkit_headers()
        # NVRTC looks for the main file's "quoted" includes in the folder of its
        # program name: the source's own folder, or for text the working folder.
        main_dir = src_path.parent if src_path else Path.cwd()
        search = user_dirs + ([src_path.parent] if src_path and src_path.parent not in user_dirs else [])
        search += [d for d in sources.include_dirs() + [sources.shim_dir()] if d not in search]
        deps = sources.scan_dependencies(raw, main_dir, search, tk_dirs)
        toolchain = [list(nvrtc_version()), _dist_version("nvidia-cuda-nvrtc"), tk_id]
    else:
        tk_opts, tk_dirs, main_dir, search = [], [], None, []
        deps = sources.Dependencies()
        toolchain = [list(nvjitlink_version()), _dist_version("nvidia-nvjitlink")]
    key_parts = {
        "drvgemm": _drvgemm_version(), "kind": kind, "names": sorted(names or ["*"]),
        "arch": arch, "options": options, "defines": defines, "lineinfo": lineinfo,
        "include": [str(d) for d in search], "main_dir": str(main_dir), "toolchain": toolchain,
        "source": hashlib.sha256(raw).hexdigest(),
        "source_name": str(src_path) if src_path else source_name,
    }
    return _Inputs(src_path, text, names, kind, source_name, arch, options, defines, regcap,
                   lineinfo, search, main_dir, tk_opts, tk_dirs, deps, key_parts)


# The code that turns inputs into a compile (options, NVRTC's invocation, the
# include walk): part of input_digest, so that a change to it is a change of input.
_COMPILER_CODE = hashlib.sha256(
    Path(__file__).read_bytes() + Path(sources.__file__).read_bytes()).hexdigest()


def input_digest(path_or_source, names=None, *, defines=None, arch=None, options=(),
                 include_paths=(), lineinfo=True) -> str | None:
    """A digest of everything a compile's machine code depends on, the same
    wherever the files lie (a clone elsewhere gives the same digest): the
    source and the bytes of every file it includes, the names, defines,
    options, arch, the toolchain, and this module's own code. Two compiles
    with one digest are the same compile. None where an #include cannot be
    followed (its file is unknown). No compiler runs."""
    inp = _compile_inputs(path_or_source, names, defines, arch, options, include_paths,
                          lineinfo)
    if not inp.deps.exact:
        return None
    parts = {k: v for k, v in inp.key_parts.items()
             if k not in ("include", "main_dir", "source_name")}
    parts["included"] = sorted((Path(f).name, d) for f, d in inp.deps.files.items())
    parts["compiler"] = _COMPILER_CODE
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def compile_module_binary(path_or_source, names=None, *, defines=None, arch=None, options=(),
                          include_paths=(), lineinfo=True) -> ModuleBinary:
    """Compile (or fetch from the cache) one module; see ``drvgemm.compile_module``."""
    inp = _compile_inputs(path_or_source, names, defines, arch, options, include_paths,
                          lineinfo)
    src_path, text, names, kind = inp.src_path, inp.text, inp.names, inp.kind
    source_name, arch, options, defines = inp.source_name, inp.arch, inp.options, inp.defines
    search, tk_opts, tk_dirs, deps = inp.search, inp.tk_opts, inp.tk_dirs, inp.deps
    key = hashlib.sha256(json.dumps(inp.key_parts, sort_keys=True).encode()).hexdigest()

    cdir = cache_dir()
    entry_path = cdir / f"{key}.bin" if cdir is not None and deps.exact else None
    if entry_path is not None:
        hit = _cache_read(entry_path)
        if hit is not None and hit[1].still_valid():
            with contextlib.suppress(OSError):
                os.utime(entry_path)  # least recently used goes first
            return hit[0]

    _announce(f"{source_name}" + (f" [{', '.join(names)}]" if names else "") + f" for {arch}")
    if kind == "cu":
        prog_name = str(src_path) if src_path else source_name
        built = _nvrtc_compile(text, prog_name, source_name, names, defines, arch, options,
                               lineinfo, search, tk_opts, tk_dirs)
        built.files = ([str(src_path)] if src_path else []) + list(deps.files)
    else:
        built = _nvjitlink_assemble(text, source_name, names, arch, options, lineinfo)
        built.files = [str(src_path)] if src_path else []
    global _after_debug
    debug = kind == "cu" and any(o in ("-G", "--device-debug", "-device-debug") for o in options)
    _after_debug = _after_debug or debug
    if _after_debug and not debug:
        # NVRTC (seen with 13.5) keeps state from a -G compile: later compiles
        # in the same process can give other machine code than a fresh process
        # (the Hopper rungs' SASS changes). Such cubins stay out of the disk
        # cache, which must hold what a clean process would build.
        entry_path = None
    built.notes = _register_cap_notes(built.log, inp.regcap)
    for entry, notes in built.notes.items():
        for n in notes:
            warnings.warn(f"{source_name}: {entry}: {n}", RuntimeWarning, stacklevel=3)
    if entry_path is not None:
        _cache_write(entry_path, built, deps)
    return built


def _register_cap_notes(log: str, cap: int | None) -> dict:
    """A --maxrregcount cap does not apply to a kernel with __launch_bounds__
    (ptxas derives the cap from the bounds and says nothing): say so where
    ptxas used more registers than the cap."""
    if cap is None:
        return {}
    out = {}
    for entry, r in parse_resources(log).items():
        if r.registers > max(cap, 24):  # ptxas raises caps below 24 itself, and says so
            out[entry] = [f"--maxrregcount={cap} did not apply: {r.registers} registers used "
                          "(__launch_bounds__ sets the cap; lower it there, or add a "
                          "minimum-blocks-per-SM argument)"]
    return out


# A name expression that fails is quoted back in NVRTC's log, its tokens spaced
# out (" ops :: nope"). Its line in __nv_name_map does not tell which name it
# was: ['fill', 'offsets', 'nope'] puts 'nope' on line 3, ['offsets', 'nope']
# on line 2.
_NAME_EXPR_ERR = re.compile(r'Input name expression was: "([^"]*)"')
_LOG_ERR = re.compile(r"^(?P<file>[^\n(]*)\((?P<line>\d+)\): (?:catastrophic )?error", re.M)


def _nvrtc_compile(text, prog_name, source_name, names, defines, arch, options, lineinfo,
                   search, tk_opts, tk_dirs) -> ModuleBinary:
    # -default-device: everything here runs on the GPU; without it NVRTC
    # 13.0 rejects unannotated helpers such as a lambda inside a kernel.
    opts = [f"-arch={arch}", "-std=c++17", "--ptxas-options=--verbose", "-default-device"]
    if lineinfo:
        opts.append("-lineinfo")
    given = [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines] + list(options)
    opts += [f"-I{d}" for d in search] + list(tk_opts) + given
    names = list(names or ())
    err, log, cubin, ptx, lowered = _nvrtc_run(text, prog_name, names, opts)
    if err is not None:
        failed = {"".join(x.split()) for x in _NAME_EXPR_ERR.findall(log)}
        bad = [i for i, n in enumerate(names) if "".join(n.split()) in failed]
        other = [m for m in _LOG_ERR.finditer(log) if m.group("file") != "__nv_name_map"]
        if bad and not other:
            # Only name expressions failed: list what the source does have.
            good = [n for i, n in enumerate(names) if i not in bad]
            err2, _, _, ptx2, _ = _nvrtc_run(text, prog_name, good, opts)
            found = [symbols.call_name(e) for e in _entries(ptx2)] if err2 is None else []
            missing = ", ".join(repr(names[i]) for i in bad)
            raise CompileError(f"{source_name} compiled, but it has no kernel named {missing}; "
                               f"entries found: {', '.join(found) or 'none'} (a kernel is named "
                               "by its C++ name, 'ns::kern', or a template name expression "
                               "such as 'kern<128, float>')", log=log, source=source_name)
        hints = compile_hints.hints(log, tk_dirs, search, prog_name, options=options,
                                    nvrtc_version=nvrtc_version(),
                                    locate_headers=_library_headers)
        raise CompileError(f"NVRTC could not compile {source_name} for {arch} "
                           f"(options: {' '.join(given) or 'none'})"
                           + "".join(f"\n  hint: {h}" for h in hints),
                           log=log, source=source_name)
    entries = _entries(ptx)
    for n in names:
        if lowered[n] not in entries:
            raise CompileError(f"{source_name}: {n!r} names {lowered[n]}, which is not a "
                               f"__global__ function; entries found: "
                               f"{', '.join(symbols.call_name(e) for e in entries)}",
                               source=source_name)
    return ModuleBinary(cubin=cubin, ptx=ptx, log=log, arch=arch, kind="cu",
                        source_name=source_name, lowered=lowered, entries=entries, notes={},
                        files=[])


def _nvrtc_run(text, prog_name, names, opts):
    """(error or None, log, cubin, ptx, lowered names) of one NVRTC run."""
    err, prog = nvrtc.nvrtcCreateProgram(text.encode(), prog_name.encode(), 0, [], [])
    _check_nvrtc(err, "nvrtcCreateProgram", source=prog_name)
    try:
        for n in names:
            err, = nvrtc.nvrtcAddNameExpression(prog, n.encode())
            _check_nvrtc(err, "nvrtcAddNameExpression", prog, prog_name)
        bopts = [o.encode() for o in opts]
        err, = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        log = _nvrtc_log(prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return err, log, b"", "", {}
        err, n = nvrtc.nvrtcGetCUBINSize(prog)
        _check_nvrtc(err, "nvrtcGetCUBINSize", prog, prog_name)
        cubin = b" " * n
        err, = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check_nvrtc(err, "nvrtcGetCUBIN", prog, prog_name)
        err, n = nvrtc.nvrtcGetPTXSize(prog)
        _check_nvrtc(err, "nvrtcGetPTXSize", prog, prog_name)
        ptx = b" " * n
        err, = nvrtc.nvrtcGetPTX(prog, ptx)
        _check_nvrtc(err, "nvrtcGetPTX", prog, prog_name)
        lowered = {}
        for nm in names:
            err, low = nvrtc.nvrtcGetLoweredName(prog, nm.encode())
            _check_nvrtc(err, "nvrtcGetLoweredName", prog, prog_name)
            lowered[nm] = low.decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return None, log, bytes(cubin), ptx.rstrip(b"\0").decode(), lowered


def _entries(ptx_text):
    return re.findall(r"\.entry\s+([\w$]+)\s*\(", ptx_text)


def _jitlink_error(handle, what, e, source_name, opts):
    log = ""
    if handle is not None:
        with contextlib.suppress(Exception):
            n = nvjitlink.get_error_log_size(handle)
            buf = bytearray(n)
            nvjitlink.get_error_log(handle, buf)
            log = buf.rstrip(b"\0").decode(errors="replace")
            log = log.replace("application ptx input, line", f"{source_name}, line")
    return CompileError(f"nvJitLink could not {what} {source_name} (options: {' '.join(opts)}): "
                        f"{e}", log=log, source=source_name)


def _nvjitlink_assemble(text, source_name, names, arch, options, lineinfo) -> ModuleBinary:
    entries = _entries(text)
    for name in names or ():
        if name not in entries:
            raise CompileError(f"{source_name} has no .entry named {name!r}; entries: "
                               f"{', '.join(entries) or 'none'}", source=source_name)
    opts = [f"-arch={arch}", "-verbose"]
    if lineinfo:
        opts.append("-lineinfo")
    opts += list(options)
    try:
        handle = nvjitlink.create(len(opts), opts)
    except nvjitlink.nvJitLinkError as e:
        raise _jitlink_error(None, "accept the options for", e, source_name, opts) from None
    try:
        data = text.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), source_name)
            nvjitlink.complete(handle)
            n = nvjitlink.get_linked_cubin_size(handle)
            cubin = bytearray(n)
            nvjitlink.get_linked_cubin(handle, cubin)
            n = nvjitlink.get_info_log_size(handle)
            buf = bytearray(n)
            nvjitlink.get_info_log(handle, buf)
        except nvjitlink.nvJitLinkError as e:
            raise _jitlink_error(handle, "assemble", e, source_name, opts) from None
        log = buf.rstrip(b"\0").decode(errors="replace")
    finally:
        nvjitlink.destroy(handle)
    return ModuleBinary(cubin=bytes(cubin), ptx=text, log=log, arch=arch, kind="ptx",
                        source_name=source_name, lowered={n: n for n in names or ()},
                        entries=entries, notes={}, files=[])
