"""A compiled kernel: cubin, PTX, parameter signature and ptxas resources,
all available with no GPU; the module is loaded on the first launch."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from . import compiler, driver, sass, sources, symbols
from .compiler import CompiledBinary, ModuleBinary, Resources

__all__ = ["Kernel", "Module", "Param", "compile", "compile_once", "compile_module",
           "parse_params"]

_UNSIGNED_INTS = ("u8", "u16", "u32", "u64")


@dataclass(frozen=True)
class Param:
    index: int
    name: str          # the source's name where it could be read, else the PTX one
    ptx_type: str      # "u64", "s32", "f32", "b8[128]", ...
    size: int
    align: int
    pointer_hint: bool  # PTX marks it .ptr, or the C++ source declares a pointer

    @property
    def is_bytes(self) -> bool:
        return "[" in self.ptx_type

    def describe(self) -> str:
        return f"parameter {self.index} '{self.name}' (.{self.ptx_type})"


_SCALAR_SIZES = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2,
                 "u32": 4, "s32": 4, "b32": 4, "f32": 4,
                 "u64": 8, "s64": 8, "b64": 8, "f64": 8}
_PARAM_RE = re.compile(
    r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+"
    r"(\.ptr(?:\s+\.(?:global|const|local|shared))?(?:\s+\.align\s+\d+)?\s+)?([\w$]+)(?:\[(\d+)\])?")


_ENTRY_RE = re.compile(r"\.entry\s+([\w$]+)\s*(?:\((.*?)\)|(\{|$))", re.S | re.M)


def _entry_list(ptx: str, entry: str):
    """The match of ``.entry entry`` and its parameter list (group 2; group 3
    where it has none). NVRTC's PTX has line comments only: there the lines
    from the entry's on are stripped, up to the one that closes the list
    (stripping a whole large module cost more than the rest of a warm
    compile). A block comment before or inside the list: the whole module is
    stripped first (a ')' in a comment ends nothing)."""
    block = ptx.find("/*")
    pos = ptx.find(".entry")
    while pos >= 0 and not 0 <= block < pos:
        line_start = ptx.rfind("\n", 0, pos) + 1
        m = _ENTRY_RE.match(ptx, pos)
        if m is not None and m.group(1) == entry and "//" not in ptx[line_start:pos]:
            lines, at = [], pos
            while at < len(ptx):     # line by line, never past the list
                nl = ptx.find("\n", at)
                end = len(ptx) if nl < 0 else nl + 1
                lines.append(ptx[at:end].split("//", 1)[0])
                at = end
                if ")" in lines[-1] or "{" in lines[-1]:
                    break
            text = "".join(lines)
            if "/*" not in text:
                return _ENTRY_RE.match(text)
            break                    # a block comment in the list
        pos = ptx.find(".entry", pos + 1)
    if pos < 0:
        return None                  # no such entry outside comments
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", ptx, flags=re.S)
    return next((m for m in _ENTRY_RE.finditer(text) if m.group(1) == entry), None)


def parse_params(ptx: str, entry: str) -> list[Param]:
    """The parameter list of ``entry`` in a PTX module, in order."""
    m = _entry_list(ptx, entry)
    if m is None:
        raise ValueError(f"no .entry {entry} in the PTX")
    if m.group(2) is None:
        return []
    out = []
    for i, pm in enumerate(_PARAM_RE.finditer(m.group(2))):
        align, typ, ptr, name, count = pm.groups()
        elem = _SCALAR_SIZES.get(typ)
        if elem is None:
            raise ValueError(f"parameter {name} of {entry} has PTX type .{typ}, which "
                             "drvgemm cannot pack")
        if count is not None:
            size = elem * int(count)
            ptx_type = f"{typ}[{count}]"
            al = int(align) if align else elem
        else:
            size = elem
            ptx_type = typ
            al = int(align) if align and not ptr else elem
        out.append(Param(i, name, ptx_type, size, al, ptr is not None))
    return out


_SIGNED_WORDS = {"int", "long", "short", "char", "signed", "int8_t", "int16_t", "int32_t",
                 "int64_t", "ptrdiff_t", "intptr_t", "ssize_t", "intmax_t"}
_UNSIGNED_WORDS = {"unsigned", "size_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
                   "uintptr_t", "uintmax_t", "uint", "ushort", "ulong", "float", "double",
                   "bool", "half", "__half", "__nv_bfloat16", "float2", "float4", "int2", "int4"}


def _split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


@functools.lru_cache(maxsize=256)
def _uncommented(text: str) -> str:
    """C++ text without its comments (kept: a module's kernels search the same
    headers one after another)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


_TEMPLATE_HEAD = re.compile(r"template\s*<([^{};]*?)>\s*\Z")


def _source_param_names(texts, name: str) -> list[tuple[str, bool, bool]] | None:
    """Best effort: (name, is_pointer, is_signed_integer) for each parameter
    of kernel ``name`` (a plain, namespaced or template name) as the C++
    source or one of its headers declares it, so errors can say 'M' instead
    of '_ZN2ns4kernEPfi_param_3', and a signed type that NVRTC declares
    unsigned in PTX (int as .u32, short as .u16, signed char as .u8) takes
    negative values."""
    if isinstance(texts, str):
        texts = [texts]
    base = name.split("<", 1)[0].strip().split("::")[-1].strip()
    if not re.match(r"^[A-Za-z_]\w*$", base):
        return None
    pat = re.compile(r"__global__[^;{}]*?\b" + re.escape(base) + r"\s*\((?P<params>[^)]*)\)")
    targs = _split_params(name.split("<", 1)[1].rsplit(">", 1)[0]) if "<" in name else []
    for text in texts:
        if not text or base not in text:
            continue
        text = _uncommented(text)
        m = pat.search(text)
        if m is None:
            continue
        # The template header just before __global__, if any: its type
        # parameters stand for the name expression's arguments.
        head = _TEMPLATE_HEAD.search(text, max(0, m.start() - 4096), m.start())
        subst = {}
        for i, tp in enumerate(_split_params(head.group(1) if head else "")):
            w = re.findall(r"[A-Za-z_]\w*", tp.split("=", 1)[0])
            if len(w) >= 2 and w[0] in ("typename", "class") and i < len(targs):
                subst[w[-1]] = targs[i].strip()
        out = []
        for p in _split_params(m.group("params")):
            p = p.split("=", 1)[0].strip()
            if subst:
                p = re.sub(r"[A-Za-z_]\w*", lambda t: subst.get(t.group(0), t.group(0)), p)
            if p in ("", "void"):
                continue
            words = re.findall(r"[A-Za-z_]\w*", p)
            if not words:
                return None
            ptr = "*" in p or "&" in p
            types = set(words[:-1])
            signed = not ptr and bool(types & _SIGNED_WORDS) and not types & _UNSIGNED_WORDS
            out.append((words[-1], ptr, signed))
        return out
    return None


# -- attributes and reset (runtime block) ---------------------------------------
class KernelAttributes(dict):
    """``Kernel.attributes``: lower-case attribute name -> int. Calling it
    returns itself, so ``k.attributes()`` (the older method) still works."""

    def __call__(self):
        return self


# A variable of a PTX module the host can reach: a module-scope declaration
# in the global or const state space (instructions never start with the
# state space; an .extern one is defined elsewhere).
_PTX_VARIABLE = re.compile(r"^[ \t]*(?:\.(?:visible|weak)\s+)?\.(global|const)\s+"
                           r"(?:\.align\s+\d+\s+)?\.[a-z]\w*\s+([\w$]+)", re.M)


# Kernels and modules that are loaded: reset() makes each forget its
# handles, which went with the old context (they load again lazily, on the
# next launch).
_LOADED_KERNELS = weakref.WeakSet()
_LOADED_MODULES = weakref.WeakSet()


@driver.on_reset
def _forget_loaded_kernels():
    for k in list(_LOADED_KERNELS):
        k._forget_function()
    _LOADED_KERNELS.clear()
    for m in list(_LOADED_MODULES):
        with m._lock:
            m._cumodule = None
    _LOADED_MODULES.clear()


def _check_arch(arch: str, what: str) -> None:
    dev = driver.device()
    if dev.arch.rstrip("a") != arch.rstrip("a"):
        raise ValueError(f"{what} was compiled for {arch}, but the device is {dev.arch}: "
                         f"compile with arch=None (the current device) or arch='{dev.arch}'")


class Kernel:
    """A kernel compiled for one architecture. Cheap attributes (``ptx``,
    ``cubin``, ``resources``, ``params``) need no GPU; ``function`` loads the
    module into the current context on first use.

    The kernel owns its function attributes: ``max_threads``,
    ``static_smem`` and ``max_dynamic_smem`` read them (loading the module),
    ``set_max_dynamic_smem`` opts in to more dynamic shared memory (it only
    ever raises the limit), ``dynamic_smem_opt_in`` raises it for the length
    of a ``with`` block, ``allow_non_portable_cluster`` lifts the cluster-size
    cap. ``runners``, ``packers`` and ``fast_launchers`` are the caches of
    drvgemm.runtime.launch (launchers per launch shape), kept here so that
    they live and die with the kernel.

    ``dependent_launch`` (default False): every thread of the kernel runs
    ``griddepcontrol.wait`` (cu/include/grid_dependency.cuh,
    ``cudaGridDependencySynchronize()``) before its first global-memory
    access, so drvgemm.launch may start it with programmatic stream
    serialization: its blocks are scheduled, and run their set-up, while the
    grid ahead of it in the stream finishes (sm_90 on). Set it only for such
    a kernel: one that reads or writes global memory before the wait would
    race with that grid."""

    def __init__(self, binary: CompiledBinary, name: str, source_text=None, module=None):
        self.binary = binary
        self.name = name
        self.entry = binary.entry
        self.cubin = binary.cubin
        self.ptx = binary.ptx
        self.log = binary.log
        self.arch = binary.arch
        self.notes = tuple(binary.notes)
        self._owner = module  # the Module this kernel came from: one CUmodule for all
        self._resources: Resources | None = compiler.parse_resources(binary.log).get(self.entry)
        if self._resources is not None and self.notes:
            self._resources = dataclasses.replace(self._resources, notes=self.notes)
        params = parse_params(binary.ptx, self.entry)
        names = _source_param_names(source_text, name) if source_text and binary.kind == "cu" \
            else None
        if names and len(names) == len(params):
            params = [Param(p.index, n,
                            "s" + p.ptx_type[1:] if signed and p.ptx_type in _UNSIGNED_INTS
                            else p.ptx_type,
                            p.size, p.align, p.pointer_hint or isptr)
                      for p, (n, isptr, signed) in zip(params, names)]
        self.params: list[Param] = params
        self._module = None
        self._function = None
        self._function_int = 0
        self._lock = threading.Lock()
        self._dynamic_smem_limit = 48 * 1024
        self._static_smem = None
        self._max_threads = None
        self.runners = {}         # (grid, block, smem, stream handle, thread) -> launcher
        self.packers = {}         # thread -> argument buffer and packer
        self.fast_launchers = {}  # (grid, block, smem, stream) -> C launcher (runtime._fastlaunch)
        self._dependent_launch = False

    @property
    def dependent_launch(self) -> bool:
        return self._dependent_launch

    @dependent_launch.setter
    def dependent_launch(self, value: bool):
        if not isinstance(value, bool):
            raise TypeError(f"{self.name}: dependent_launch is True or False, not {value!r}")
        if value and not entry_waits_for_prior_grid(self.ptx, self.entry):
            raise ValueError(
                f"{self.name}: dependent_launch = True, but its PTX has no griddepcontrol.wait "
                "(cudaGridDependencySynchronize()): launched that way it would race with the "
                "grid before it; wait first thing in the kernel, or leave it a plain launch")
        with self._lock:
            if value != self._dependent_launch:
                self._dependent_launch = value
                # the launchers built so far launch the other way
                self.runners.clear()
                self.fast_launchers.clear()

    @property
    def resources(self) -> Resources | None:
        """ptxas's figures for this entry. When the compiler log carries none
        (seen with NVRTC 13.0 on a GPU machine: an empty log for a later
        compile in the same process) and a GPU is present, the loaded
        function's attributes give registers, static shared memory and the
        local-memory frame instead (spill sizes are then unknown: 0)."""
        if self._resources is None:
            if driver.has_gpu() and self.arch.rstrip("a") == driver.device().arch:
                fn = self.function
                self._resources = Resources(
                    registers=driver.function_attribute(fn, "NUM_REGS"),
                    spill_stores=0, spill_loads=0,
                    stack=driver.function_attribute(fn, "LOCAL_SIZE_BYTES"),
                    static_smem=driver.function_attribute(fn, "SHARED_SIZE_BYTES"))
        return self._resources

    # -- loading -----------------------------------------------------------
    @property
    def function(self):
        if self._function is None:
            self._load()
        return self._function

    @property
    def handle(self) -> int:
        """The CUfunction as an integer (loads the module)."""
        self.function
        return self._function_int

    def _load(self):
        with self._lock:
            if self._function is not None:
                return
            if self._owner is not None:
                self._module = self._owner.cumodule()   # checks the arch
            else:
                _check_arch(self.arch, self.name)
                self._module = driver.load_module(self.cubin,
                                                  f"{self.binary.source_name}:{self.name}")
            fn = driver.get_function(self._module, self.entry)
            self._static_smem = driver.function_attribute(fn, "SHARED_SIZE_BYTES")
            # 48 KiB minus the static shared memory until raised: what the
            # driver enforces, so a launch just above it opts in too.
            self._dynamic_smem_limit = driver.function_attribute(
                fn, "MAX_DYNAMIC_SHARED_SIZE_BYTES")
            self._max_threads = driver.function_attribute(fn, "MAX_THREADS_PER_BLOCK")
            self._function_int = int(fn)
            self._function = fn
            _LOADED_KERNELS.add(self)

    # -- attributes (the kernel owns them) -----------------------------------
    @property
    def max_threads(self) -> int:
        """Most threads per block the loaded function allows (__launch_bounds__,
        registers, the device)."""
        self.function
        return self._max_threads

    @property
    def static_smem(self) -> int:
        """Static shared memory per block, bytes, as the driver reports it."""
        self.function
        return self._static_smem or 0

    @property
    def max_dynamic_smem(self) -> int:
        """The function's current MAX_DYNAMIC_SHARED_SIZE_BYTES."""
        self.function
        return self._dynamic_smem_limit

    def set_max_dynamic_smem(self, nbytes: int) -> None:
        """Opt in to ``nbytes`` of dynamic shared memory per block. Only ever
        raises the limit, so a later smaller launch does not undo an earlier
        larger one."""
        fn = self.function
        nbytes = int(nbytes)
        with self._lock:
            if nbytes > self._dynamic_smem_limit:
                driver.set_function_attribute(fn, "MAX_DYNAMIC_SHARED_SIZE_BYTES", nbytes)
                self._dynamic_smem_limit = nbytes

    @contextlib.contextmanager
    def dynamic_smem_opt_in(self, nbytes: int):
        """Raise the dynamic shared-memory limit to ``nbytes`` for the length of
        a ``with`` block and put the old one back afterwards: occupancy queries
        count a block's shared memory only up to the current limit, and asking
        them must not change what a later launch is allowed."""
        fn = self.function
        nbytes = int(nbytes)
        with self._lock:
            old = self._dynamic_smem_limit
            raise_it = nbytes > old
            if raise_it:
                driver.set_function_attribute(fn, "MAX_DYNAMIC_SHARED_SIZE_BYTES", nbytes)
                self._dynamic_smem_limit = nbytes
        try:
            yield self
        finally:
            if raise_it:
                with self._lock:
                    if self._dynamic_smem_limit == nbytes:
                        driver.set_function_attribute(fn, "MAX_DYNAMIC_SHARED_SIZE_BYTES", old)
                        self._dynamic_smem_limit = old

    def allow_non_portable_cluster(self) -> None:
        """Let the kernel launch clusters of more than 8 blocks (sm_90)."""
        driver.set_function_attribute(self.function, "NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)

    # -- function attributes: every one read, the settable ones set ----------
    @property
    def attributes(self) -> "KernelAttributes":
        """Every CUfunction_attribute of the loaded function, as a dict with
        lower-case names (``num_regs``, ``max_dynamic_shared_size_bytes``,
        ``preferred_shared_memory_carveout``, ``required_cluster_width``, ...),
        read now. Also callable (``k.attributes()``), as it used to be."""
        return KernelAttributes(driver.function_attributes(self.function))

    def set_attribute(self, name: str, value) -> int:
        """Set a function attribute: ``max_dynamic_shared_size_bytes``
        (lowers it too, unlike set_max_dynamic_smem), ``preferred_shared_memory_carveout``
        (0..100 percent, -1, or 'default' / 'max_l1' / 'max_shared'),
        ``non_portable_cluster_size_allowed`` (0/1), ``required_cluster_width``
        / ``_height`` / ``_depth`` (a kernel compiled with __cluster_dims__
        refuses them), ``cluster_scheduling_policy_preference`` (0 / 'default',
        1 / 'spread', 2 / 'load_balancing'). Names are case-insensitive, with or
        without CU_FUNC_ATTRIBUTE_. A read-only name, a wrong type or an
        out-of-range value raises before the driver is called; the driver's
        own refusal is a CudaError. Returns the value set. A drvgemm.reset()
        forgets these (set them again)."""
        fn = self.function
        ctx = {"static_smem": self.static_smem}
        if driver.has_gpu():
            ctx["optin"] = driver.device().smem_per_block_optin
        n, v = driver.validate_function_attribute(name, value, ctx)
        with self._lock:
            driver.set_function_attribute(fn, n, v)
            if n == "MAX_DYNAMIC_SHARED_SIZE_BYTES":
                self._dynamic_smem_limit = v
                # Launchers were checked against the old limit: a lowered one
                # makes the next launch of each shape check (and opt in) again.
                self.runners.clear()
                self.fast_launchers.clear()
        return v

    def _forget_function(self):
        """drvgemm.reset(): the module, the function and every launcher built
        on them belong to the old context; the next use loads again."""
        with self._lock:
            self._module = None
            self._function = None
            self._function_int = 0
            self._static_smem = None
            self._max_threads = None
            self._dynamic_smem_limit = 48 * 1024
            self.runners.clear()
            self.packers.clear()
            self.fast_launchers.clear()

    # -- inspection ----------------------------------------------------------
    def sass(self) -> str:
        return sass.disassemble(self.cubin)

    def signature(self) -> str:
        return f"{self.name}(" + ", ".join(f"{p.name}: .{p.ptx_type}" for p in self.params) + ")"

    # -- the module's variables ------------------------------------------------
    @property
    def module(self) -> "Module":
        """The compile this kernel came from (its cubin holds every kernel and
        variable of the source)."""
        return self._owner

    def variable(self, name: str, dtype="uint8", shape=None) -> driver.DeviceArray:
        """A __device__ or __constant__ variable of this kernel's source:
        ``Module.variable``."""
        if self._owner is None:
            raise TypeError(f"{self.name} was built from a binary alone, with no Module: "
                            "compile it with drvgemm.compile / compile_module to reach its "
                            "variables")
        return self._owner.variable(name, dtype, shape)

    def __repr__(self):
        r = self.resources
        extra = f", {r}" if r else ""
        return f"<Kernel {self.name} [{self.arch}]{extra}>"


class Module:
    """One compile of one source: a cubin holding every kernel in it, loaded
    into the current context once, on the first launch of any of them.
    ``module.kernel(name)`` or ``module[name]`` gives a Kernel, by a name given
    to compile_module, an extern "C" name, a lowered (mangled) symbol, or a
    C++ name (plain, namespaced, or a template instantiation the source makes
    itself) that matches one kernel of the module; ``names`` lists them so."""

    def __init__(self, binary: ModuleBinary, source_texts=()):
        self.binary = binary
        self.cubin = binary.cubin
        self.ptx = binary.ptx
        self.log = binary.log
        self.arch = binary.arch
        self.entries: list[str] = list(binary.entries)
        self._texts = list(source_texts)
        self._kernels: dict = {}
        self._lock = threading.Lock()
        self._cumodule = None

    @property
    def names(self) -> list[str]:
        """The names given to compile_module, then every other entry by the
        name its source gives it (symbols.call_name: 'red<__nv_bfloat16, 256>'
        for '_Z3redI13__nv_bfloat16Li256EEvPKT_Pfi'), or by its symbol where
        that name is not its own (overloads) or does not demangle."""
        given = list(self.binary.lowered)
        taken = set(self.binary.lowered.values())
        readable = {e: n for n, e in self._entries_by_call_name().items()}
        return given + [readable.get(e, e) for e in self.entries if e not in taken]

    def _entries_by_call_name(self) -> dict:
        """{call name: entry} for the entries whose call name is theirs alone."""
        seen: dict = {}
        for e in self.entries:
            seen.setdefault(symbols.call_name(e), []).append(e)
        return {n: es[0] for n, es in seen.items() if len(es) == 1 and n != es[0]}

    def _symbol(self, name: str) -> str:
        if name in self.binary.lowered:
            return self.binary.lowered[name]
        if name in self.entries:
            return name
        for n, e in self._entries_by_call_name().items():
            if symbols.same_name(n, name):
                return e
        if "<" not in name:
            # A plain or namespaced name: its Itanium prefix, then a parameter
            # (never a template argument list 'I').
            parts = name.split("::")
            prefix = "_Z" + (f"{len(parts[0])}{parts[0]}" if len(parts) == 1 else
                             "N" + "".join(f"{len(p)}{p}" for p in parts) + "E")
            found = [e for e in self.entries if e.startswith(prefix)
                     and not e[len(prefix):].startswith("I")]
            if len(found) == 1:
                return found[0]
        raise KeyError(f"{self.binary.source_name} has no kernel {name!r} in this module; "
                       f"its kernels: {', '.join(self.names) or 'none'} (a template "
                       "instantiation must be named when compiling: compile_module(src, "
                       f"[{name!r}]))")

    @functools.cached_property
    def variables(self) -> dict:
        """{symbol: state space} of the module's variables that the host can
        reach ('global' for __device__, 'const' for __constant__), from the PTX:
        no GPU needed. A C++ variable inside a namespace has a mangled symbol."""
        return {m.group(2): m.group(1) for m in _PTX_VARIABLE.finditer(self.ptx)}

    def variable(self, name: str, dtype="uint8", shape=None) -> driver.DeviceArray:
        """A __device__ or __constant__ variable as a DeviceArray over its
        bytes, no copy (loads the module): ``copy_from_host`` writes it and
        ``to_host`` reads it, as cudaMemcpyToSymbol / cudaMemcpyFromSymbol do;
        a kernel launched after the write sees the new value. ``name``: as
        the source names it ('coef', 'ns::coef') or its PTX symbol.
        ``dtype`` / ``shape``: how to view the bytes (default: all of them,
        one dimension)."""
        if not isinstance(name, str):
            raise TypeError(f"a variable name is a string, got {type(name).__name__}")
        symbol = self._variable_symbol(name.strip())
        dtype = np.dtype(dtype)
        ptr, size = driver.module_global(self.cumodule(), symbol)
        if shape is None:
            if size % dtype.itemsize:
                raise ValueError(f"{name} holds {size} bytes, not a whole number of {dtype} "
                                 f"elements ({dtype.itemsize} bytes each)")
            shape = (size // dtype.itemsize,)
        arr = driver.DeviceArray(shape, dtype, ptr=ptr, owner=False, base=self)
        if arr.nbytes != size:
            raise ValueError(f"{name} holds {size} bytes; shape {tuple(arr.shape)} of {dtype} "
                             f"would cover {arr.nbytes}")
        return arr

    def _variable_symbol(self, name: str) -> str:
        found = self.variables
        if name in found:
            return name
        parts = name.split("::")
        if len(parts) > 1 and all(re.match(r"^[A-Za-z_]\w*$", p) for p in parts):
            mangled = "_ZN" + "".join(f"{len(p)}{p}" for p in parts) + "E"
            if mangled in found:
                return mangled
        raise KeyError(f"{self.binary.source_name} has no __device__ or __constant__ variable "
                       f"{name!r}; its variables: {', '.join(found) or 'none'}")

    def kernel(self, name: str) -> Kernel:
        if not isinstance(name, str):
            raise TypeError(f"a kernel name is a string, got {type(name).__name__}")
        with self._lock:
            k = self._kernels.get(name)
            if k is None:
                symbol = self._symbol(name.strip())
                b = self.binary.binary(symbol)
                k = self._kernels[name] = Kernel(b, name.strip(), self._texts, module=self)
            return k

    __getitem__ = kernel

    def __contains__(self, name) -> bool:
        try:
            self._symbol(name)
            return True
        except (KeyError, TypeError):
            return False

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.entries)

    def cumodule(self):
        """The loaded CUmodule (loads it into the current context once)."""
        with self._lock:
            if self._cumodule is None:
                _check_arch(self.arch, self.binary.source_name)
                self._cumodule = driver.load_module(self.cubin, self.binary.source_name)
                _LOADED_MODULES.add(self)
            return self._cumodule

    def __repr__(self):
        return f"<Module {self.binary.source_name} [{self.arch}]: {', '.join(self.names)}>"


def _texts_of(binary: ModuleBinary, path_or_source) -> list[str]:
    """The source and its headers, where kernel signatures are looked up."""
    out = []
    if binary.kind == "cu":
        try:
            out.append(compiler._read_source(path_or_source)[1])
        except (OSError, TypeError, ValueError):
            pass
    for f in binary.files:
        try:
            out.append(sources.read_file(f)[0].decode(errors="replace"))
        except OSError:
            pass
    return out


def compile_module(source, names=None, *, defines=None, arch=None, options=(),
                   include_paths=()) -> Module:
    """Compile a source once into a Module holding all its kernels.

    ``source``: as for ``compile``. ``names``: the kernels to take from it,
    each an extern "C" name, a C++ name ('kern', 'ns::kern') or a template
    name expression ('kern<128, float>'); None takes every kernel the source
    defines (templates need their instantiation named). ``include_paths``:
    folders searched first for #include (then the source's folder, drvgemm's
    kernel folders, and the CUDA headers, which need no option)."""
    binary = compiler.compile_module_binary(source, names, defines=defines, arch=arch,
                                            options=options, include_paths=include_paths)
    return Module(binary, _texts_of(binary, source))


def compile(path_or_source, name, *, defines=None, arch=None, options=()) -> Kernel:
    """Compile a kernel to a cubin and return a Kernel.

    ``path_or_source``: a .cu or .ptx file (a path, or a file name found in the
    package's cu/ or ptx/ folder), or source text (str or bytes). ``name``:
    the kernel: an extern "C" name, a C++ name ('kern', 'ns::kern'), a
    template name expression such as ``"gemm<128>"``, or the PTX .entry.
    ``defines``: {NAME: value} or ['NAME=VALUE', ...], passed as -D. ``arch``:
    'sm_90', 'sm_90a', ... (default: the current device's, or sm_90 with no
    GPU). ``options``: extra NVRTC options (e.g. ['--maxrregcount=64']; an
    -arch or -I among them is the same as arch= or an include path), or
    nvJitLink options for PTX. One compile of the whole source
    (compile_module) underneath.
    """
    if not isinstance(name, str) or not name.strip():
        raise TypeError("name must be the kernel's name: an extern \"C\" name, 'ns::kern', a "
                        "template name expression such as 'kern<128>', or a PTX .entry; got "
                        f"{name!r}")
    return compile_module(path_or_source, [name], defines=defines, arch=arch,
                          options=options).kernel(name)


_once: dict = {}


_ENTRY_OR_FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\b",
                            re.M)


def entry_waits_for_prior_grid(ptx: str | None, entry: str) -> bool:
    """Whether the PTX body of ``entry`` holds a ``griddepcontrol.wait`` (what
    cudaGridDependencySynchronize() compiles to): a kernel may be a dependent
    launch only then. The body runs from the entry's name to the next entry or
    function (device functions are inlined into NVRTC's kernels)."""
    if not ptx:
        return False
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(", ptx)
    if m is None:
        return False
    nxt = _ENTRY_OR_FUNC.search(ptx, m.end())
    return "griddepcontrol.wait" in ptx[m.end():nxt.start() if nxt else len(ptx)]


def compile_once(source: str, entry: str, *, dependent_launch: bool = False) -> Kernel:
    """``compile(source, entry)`` once per process, with no defines, for the
    current device (sm_90 with none): the fixed helper kernels a host side
    launches beside a GEMM (split-K reduction, staging copy, C scaling).
    ``dependent_launch``: the entry waits for the grid before it
    (Kernel.dependent_launch), which takes effect on sm_90 and later."""
    k = _once.get((source, entry))
    if k is None:
        k = _once[(source, entry)] = compile(source, entry)
        k.dependent_launch = dependent_launch and dependent_launch_arch(k.arch)
    return k


def dependent_launch_arch(arch: str) -> bool:
    """Whether kernels built for ``arch`` can be launched as dependent
    launches (programmatic stream serialization: sm_90 and later)."""
    return compiler.arch_number(arch) >= 90
