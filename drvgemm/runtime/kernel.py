"""A compiled kernel: cubin, PTX, parameter signature and ptxas resources,
all available with no GPU; the module is loaded on the first launch."""
from __future__ import annotations

import contextlib
import re
import threading
import weakref
from dataclasses import dataclass

from . import compiler, driver, sass
from .compiler import CompiledBinary, Resources

__all__ = ["Kernel", "Param", "compile", "parse_params"]


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


def parse_params(ptx: str, entry: str) -> list[Param]:
    """The parameter list of ``entry`` in a PTX module, in order."""
    ptx = re.sub(r"/\*.*?\*/|//[^\n]*", "", ptx, flags=re.S)  # a ')' in a comment ends nothing
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        if re.search(r"\.entry\s+" + re.escape(entry) + r"\s*(\{|$)", ptx, re.M):
            return []
        raise ValueError(f"no .entry {entry} in the PTX")
    out = []
    for i, pm in enumerate(_PARAM_RE.finditer(m.group(1))):
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


def _source_param_names(source: str, entry: str) -> list[tuple[str, bool, bool]] | None:
    """Best effort: (name, is_pointer, is_signed_integer) for each parameter
    of ``entry`` as the C++ source declares it, so errors can say 'M' instead
    of 'k_param_3', and an ``int`` (which NVRTC declares .u32) takes -1."""
    base = entry.split("<", 1)[0]
    m = re.search(r"__global__[^;{]*?\b" + re.escape(base) + r"\s*\(([^)]*)\)", source, re.S)
    if m is None:
        return None
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", m.group(1), flags=re.S)
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
    out = []
    for p in parts:
        p = p.split("=", 1)[0].strip()
        name = re.findall(r"[A-Za-z_]\w*", p)
        if not name:
            return None
        words = set(name[:-1])
        signed = ("*" not in p and not words & {"unsigned", "size_t", "uint32_t", "uint64_t",
                                                "uintptr_t", "float", "double", "bool"}
                  and bool(words & {"int", "long", "short", "int32_t", "int64_t", "ptrdiff_t"}))
        out.append((name[-1], "*" in p, signed))
    return out


# -- attributes and reset (runtime block) ---------------------------------------
class KernelAttributes(dict):
    """``Kernel.attributes``: lower-case attribute name -> int. Calling it
    returns itself, so ``k.attributes()`` (the older method) still works."""

    def __call__(self):
        return self


# Kernels whose module is loaded: reset() makes each forget it (they reload
# lazily on the next launch).
_LOADED_KERNELS = weakref.WeakSet()


@driver.on_reset
def _forget_loaded_kernels():
    for k in list(_LOADED_KERNELS):
        k._forget_function()
    _LOADED_KERNELS.clear()


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
    they live and die with the kernel."""

    def __init__(self, binary: CompiledBinary, name: str, source_text: str | None = None):
        self.binary = binary
        self.name = name
        self.entry = binary.entry
        self.cubin = binary.cubin
        self.ptx = binary.ptx
        self.log = binary.log
        self.arch = binary.arch
        self._resources: Resources | None = compiler.parse_resources(binary.log).get(self.entry)
        params = parse_params(binary.ptx, self.entry)
        names = _source_param_names(source_text, name) if source_text and binary.kind == "cu" \
            else None
        if names and len(names) == len(params):
            params = [Param(p.index, n,
                            "s" + p.ptx_type[1:] if signed and p.ptx_type in ("u32", "u64")
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

    @property
    def resources(self) -> Resources | None:
        """ptxas's figures for this entry. When the compiler log carries none
        (seen with NVRTC 13.0 on a GPU machine: an empty log for a later
        compile in the same process) and a GPU is present, the loaded
        function's attributes give registers, static shared memory and the
        local-memory frame instead (spill sizes are then unknown: 0)."""
        if self._resources is None:
            if driver.has_gpu() and self.arch.rstrip("a") == driver.device().arch:
                a = self.attributes()
                self._resources = Resources(
                    registers=a["num_regs"], spill_stores=0, spill_loads=0,
                    stack=a["local_size_bytes"], static_smem=a["shared_size_bytes"])
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
            dev = driver.device()
            if dev.arch.rstrip("a") != self.arch.rstrip("a"):
                raise ValueError(f"{self.name} was compiled for {self.arch}, but the device "
                                 f"is {dev.arch}: compile with arch=None (the current device) "
                                 f"or arch='{dev.arch}'")
            self._module = driver.load_module(self.cubin, f"{self.binary.source_name}:{self.name}")
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

    def __repr__(self):
        r = self.resources
        extra = f", {r}" if r else ""
        return f"<Kernel {self.name} [{self.arch}]{extra}>"


def compile(path_or_source, name, *, defines=None, arch=None, options=()) -> Kernel:
    """Compile a kernel to a cubin and return a Kernel.

    ``path_or_source``: a .cu or .ptx file (a path, or a file name found in the
    package's cu/ or ptx/ folder), or source text. ``name``: the kernel's symbol
    (extern "C" name, a template name expression such as ``"gemm<128>"``, or
    the PTX .entry). ``defines``: {NAME: value} passed as -D. ``arch``: 'sm_90',
    'sm_90a', ... (default: the current device's, or sm_90 with no GPU).
    ``options``: extra NVRTC options (e.g. '--maxrregcount=64') or nvJitLink
    options for PTX.
    """
    binary = compiler.compile_binary(path_or_source, name, defines=defines, arch=arch,
                                     options=options)
    src = None
    if binary.kind == "cu":
        try:
            _, src = compiler._read_source(path_or_source)
        except OSError:
            src = None
    return Kernel(binary, name, src)
