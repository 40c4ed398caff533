"""Hints for a failed compile: what to do about the usual reasons a .cu
file written for nvcc fails under NVRTC (a host-only header or function, a
header not found, a <<<...>>> launch, a std:: specialisation, ...), read from
NVRTC's log. A module of its own, apart from the compiler: no machine code
depends on it, so its edits leave every compile's input digest as it was."""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

__all__ = ["hints"]

_ERR_LINE = re.compile(r"^(?P<file>[^\n(]*)\(\d+\): error: (?P<msg>[^\n]*)", re.M)
_HOST_DECL = "explicitly marked as a __host__ function is not allowed"
_UNRECOGNIZED = re.compile(r"nvrtc: error: unrecognized option")
# nvcc's options that NVRTC refuses as unrecognized, by what they are for:
# the host compiler, the linker or nvcc's own steps. Those whose value is the
# next argument are listed apart ("-Xcompiler=-fPIC" and "-O3" are one).
_NVCC_WITH_VALUE = re.compile(r"^(?:-Xcompiler|--compiler-options|-ccbin|--compiler-bindir|"
                              r"-Xlinker|--linker-options|-o|--output-file|-x|-t|--threads|"
                              r"-gencode|--generate-code|-code|--gpu-code)$")
_NVCC_KINDS = (
    (re.compile(r"^(?:-O\d?|--optimize(?:=\d)?)$"),
     "the host compiler's optimisation level: device code is optimised by default, and "
     "ptxas's own level is -Xptxas -O3"),
    (re.compile(r"^(?:-Xcompiler|--compiler-options|-ccbin|--compiler-bindir)(?:=.*)?$|^-m64$|"
                r"^--machine=?64$"), "the host compiler's"),
    (re.compile(r"^-{1,2}(?:expt-relaxed-constexpr|expt-extended-lambda|extended-lambda)$"),
     "not needed: every function here is device code (a lambda made in host code for a "
     "kernel has no NVRTC form)"),
    (re.compile(r"^(?:-gencode|--generate-code|-code|--gpu-code)(?:=.*)?$"),
     "one architecture a compile: arch='sm_90' (or -arch=sm_90)"),
    (re.compile(r"^--resource-usage$|^-res-usage$"),
     "drvgemm reports the resources itself (k.resources, drvgemm compile FILE)"),
    (re.compile(r"^(?:-Xlinker|--linker-options)(?:=.*)?$|^-l(?!ineinfo$)\w\S*$|^-L\S+$|"
                r"^(?:-o|--output-file|-x|-t|--threads)$|^-t\d+$|^--threads=\d+$|"
                r"^-{1,2}keep$|^-c$|^--compile$|^-{1,2}cudart(?:=\w+)?$"),
     "nvcc's own steps (linking, files, threads)"),
)


_CANNOT_OPEN = re.compile(r'cannot open source file "([^"]+)"')
_UNDEFINED = re.compile(r'identifier "([\w:]+)" is undefined')
_NO_STD = re.compile(r'namespace "std" has no member (?:class |function )?"(\w+)"')
_HOST_CALL = re.compile(r'calling a __host__ function(?:\("([^"]+)"\))?')
# <cub/cub.cuh>: CUB's device-wide algorithms come with it, host code that
# NVRTC refuses (CCCL 13.3 and later say so in an #error of their own, 13.0
# fails in cub/device/ with a page of errors).
_CUB_ALL = re.compile(r"cub/(?:cub\.cuh|device/)")
# A specialisation of a std:: template written for libstdc++: std:: here is
# libcu++'s cuda::std (runtime/shims/_drvgemm_std.h), which only a
# specialisation in cuda::std reaches.
_STD_SPECIALIZED = re.compile(r'class "cuda::std::(?:__\w+::)?(\w+)<[^"]*>" cannot be specialized')
# nvcc's annotated lambdas ([=] __device__ (...) {...}): NVRTC refuses the
# annotation whatever the options (13.3 and later: "is not allowed in JIT
# mode"; 13.0: "requires --extended-lambda nvcc flag", a flag it refuses).
_ANNOTATED_LAMBDA = re.compile(r"^(?P<file>[^\n(]*)\((?P<line>\d+)\): error: __host__ or "
                               r"__device__ annotation on lambda (?:is not allowed|requires)",
                               re.M)
_DEVICE_LAUNCH = re.compile(r"^(?P<file>[^\n(]*)\((?P<line>\d+)\): error: device-side kernel "
                            r"launch could not be processed", re.M)
_CUDA_HEADER = re.compile(r"^(cuda_\w+\.h|mma\.h|math_constants\.h|cooperative_groups.*|"
                          r"cuda/.*|cub/.*|thrust/.*|nv/.*|crt/.*|vector_types\.h|"
                          r"sm_\d+_\w+\.h|device_\w+\.h|cuComplex\.h|cuda_pipeline.*)$")
# Headers for host code only: the host APIs of CUDA and its libraries (not
# cuda.h: drvgemm's stand-in gives device code its CUtensorMap), and
# (after the CUDA device headers, some of which look alike) the C and C++
# standard libraries' (NVRTC has none; drvgemm's stand-ins cover what device
# code uses) and the system's.
_HOST_CUDA_HEADER = re.compile(
    r"^(?:cudaGL\.h|cudaEGL\.h|cudaProfiler\.h|cuda_profiler_api\.h|"
    r"cuda_\w*interop\.h|cuda_d3d\w*\.h|cufft\w*\.h|cublas\w*\.h|cusparse\w*\.h|"
    r"cusolver\w*\.h|curand\.h|npp\w*\.h|nvrtc\.h|nvJitLink\.h|nvml\.h|nvToolsExt\w*\.h)$")
_HOST_HEADER = re.compile(
    r"^(?:[a-z_]+|(?:assert|complex|ctype|dirent|dlfcn|errno|fcntl|fenv|float|getopt|"
    r"inttypes|iso646|limits|locale|malloc|math|memory|mpi|omp|pthread|sched|semaphore|"
    r"setjmp|signal|stdalign|stdarg|stdatomic|stdbool|stddef|stdint|stdio|stdlib|"
    r"stdnoreturn|string|strings|tgmath|threads|time|uchar|unistd|wchar|wctype)\.h|"
    r"(?:sys|GL|EGL|X11|GLFW|arpa|netinet|linux)/.*|windows\.h|"
    r"[Dd]3[Dd]\w*\.h|DirectX\w*\.h|dxgi\w*\.h)$")
# cuRAND's device API: device code, but not among NVRTC's bundled headers.
_CURAND_DEVICE = re.compile(r"^curand_\w+\.h$")
_HOST_NAMES = {"FILE", "fopen", "fclose", "fprintf", "fputs", "fwrite", "fread", "stderr",
               "stdout", "exit", "abort", "getenv", "atoi", "atof", "strtol", "time", "clock",
               "rand", "srand", "puts", "sprintf", "snprintf", "fflush", "perror", "strlen",
               "strcmp", "strcpy"}
_GUARD = "guard host code with #ifndef __CUDACC_RTC__ ... #endif"
# The runtime API (cudaMalloc), the driver API's functions and types (cuInit,
# cuCtxCreate, CUresult, CUdeviceptr); not cuComplex.h's device functions
# (cuCaddf, cuCrealf), which are cuC and a lower-case letter too.
_HOST_API = re.compile(r"^(?:std::)?cuda[A-Z]|^cu(?:[A-BD-Z]|Ctx)|^CU[a-z]")


def _nvcc_only(options) -> list[tuple[str, str]]:
    """(option with its value, what it is for) of the options only nvcc takes."""
    out, it = [], iter(options)
    for o in it:
        kind = next((why for pattern, why in _NVCC_KINDS if pattern.match(o)), None)
        if kind is not None:
            out.append((f"{o} {next(it, '')}".rstrip() if _NVCC_WITH_VALUE.match(o) else o, kind))
    return out


def _host_code(log: str, prog_name: str = "") -> tuple[list[str], list[str]]:
    """The host code NVRTC stopped at (names, in the log's order) and the files
    other than the source itself where it stands (a host header included
    unguarded: the user's own lines may hold none of it)."""
    names, files = {}, {}
    for m in _ERR_LINE.finditer(log):
        msg = m.group("msg")
        found = [n for n in _UNDEFINED.findall(msg) if n in _HOST_NAMES or _HOST_API.match(n)]
        found += [f"std::{n}" for n in _NO_STD.findall(msg)]
        found += [n or "a host function" for n in _HOST_CALL.findall(msg)]
        if _HOST_DECL in msg:
            found.append("a __host__ function")
        if found:
            names.update(dict.fromkeys(found))
            if m.group("file") != prog_name:
                files[m.group("file")] = None
    return list(names), list(files)


def _where(pattern: re.Pattern, log: str) -> str:
    """'file line N, ...' of the log's errors that ``pattern`` matches (three
    at most, then how many more); '' where none."""
    at = list(dict.fromkeys(f"{os.path.basename(m.group('file'))} line {m.group('line')}"
                            for m in pattern.finditer(log)))
    more = f" and {len(at) - 3} more" if len(at) > 3 else ""
    return ", ".join(at[:3]) + more


def _short_path(path: str, *folder_lists) -> str:
    """``path`` relative to the first folder it lies in, else as NVRTC wrote it."""
    p = Path(path)
    for folders in folder_lists:
        for d in folders or ():
            with contextlib.suppress(ValueError):
                return str(p.relative_to(d))
    return path


def hints(log: str, toolkit_dirs, search=(), prog_name: str = "", *, options=(),
          nvrtc_version=(0, 0), locate_headers=lambda lib: None) -> list[str]:
    """What to do about the usual reasons an nvcc-written file fails here:
    NVRTC's ``log`` of the source ``prog_name`` (as NVRTC names it), compiled
    with the CUDA headers of ``toolkit_dirs``, the include folders ``search``
    and the user's ``options``; ``locate_headers(lib)`` finds a CUDA
    library's headers."""
    out = []
    add_folder = ("pass its folder to compile_module(..., include_paths=[...]) or as "
                  "options=['-I<folder>']")
    if _UNRECOGNIZED.search(log):
        nvcc = _nvcc_only(options)
        if nvcc:
            groups = {}
            for o, why in nvcc:
                groups.setdefault(why, []).append(o)
            said = "; ".join(f"{', '.join(os_)}: {why}" for why, os_ in groups.items())
            out.append(f"nvcc's options, which NVRTC does not take: leave them out ({said})")
    for h in dict.fromkeys(_CANNOT_OPEN.findall(log)):
        host_only = (f"<{h}> is not available to NVRTC, which compiles device code only: "
                     f"include it only for host code and {_GUARD}")
        if _CURAND_DEVICE.match(h):
            found = locate_headers("curand")
            out.append(f"{h} is cuRAND's device API, which NVRTC does not bundle: "
                       + (f"it is in {found}: " if found else "install the nvidia-curand "
                          "wheel (or use a CUDA toolkit) and ") + add_folder)
        elif _HOST_CUDA_HEADER.match(h):
            out.append(host_only)
        elif _CUDA_HEADER.match(h):
            if not toolkit_dirs:
                v = ".".join(map(str, nvrtc_version))
                out.append(f"{h} is a CUDA header, and no CUDA headers were found for NVRTC {v}: "
                           "use NVRTC 13.3 or later (it bundles them), or install the "
                           "nvidia-cuda-runtime, nvidia-cuda-cccl and nvidia-cuda-crt wheels of "
                           "the same release (pip install 'drvgemm[headers]'), or name their "
                           "folder in DRVGEMM_CUDA_INCLUDE")
            else:
                out.append(f"{h} is not among the CUDA headers found "
                           f"({', '.join(map(str, toolkit_dirs))})")
        elif _HOST_HEADER.match(h):
            out.append(host_only)
        else:
            looked = ", ".join(str(d) for d in search)
            out.append(f"{h} was not found (looked in {looked or 'the source folder'} and the "
                       f"CUDA headers): {add_folder}")
    host, headers = _host_code(log, prog_name)
    if host:
        where = ""
        if headers:
            shown = ", ".join(_short_path(f, search, toolkit_dirs) for f in headers[:3])
            more = f" and {len(headers) - 3} more" if len(headers) > 3 else ""
            where = (f"; it stands in {shown}{more}, which the source includes: include such a "
                     "header only from the guarded host code")
        out.append(f"{', '.join(host)}: host code, which NVRTC cannot compile (every function "
                   f"here is compiled for the GPU): {_GUARD}{where}; a std:: name meant for "
                   "device code comes with its standard header (<limits>, <type_traits>, "
                   "<utility>, ...: libcu++'s cuda::std)")
    if _CUB_ALL.search(log):
        out.append("<cub/cub.cuh> brings CUB's device-wide algorithms (cub::Device*), which are "
                   "host code: include the block- or warp-level headers the kernel uses "
                   "(<cub/block/block_reduce.cuh>, <cub/warp/warp_reduce.cuh>, ...)")
    for n in dict.fromkeys(_STD_SPECIALIZED.findall(log)):
        out.append(f"std::{n} is libcu++'s cuda::std::{n} here (NVRTC has no standard library; "
                   f"drvgemm's standard headers give libcu++'s names in std): specialise it in "
                   f"namespace cuda {{ namespace std {{ ... }} }} instead of namespace std")
    lambdas = _where(_ANNOTATED_LAMBDA, log)
    if lambdas:
        out.append(f"a lambda annotated __device__ or __host__ __device__ ({lambdas}): NVRTC "
                   "compiles every function for the GPU and refuses the annotation; drop it "
                   "(a lambda in device code is device code). A lambda made in host code and "
                   "passed to a kernel (nvcc's extended lambda) has no NVRTC form: make it a "
                   "struct with a __device__ operator()")
    launches = _where(_DEVICE_LAUNCH, log)
    if launches:
        out.append(f"a <<<...>>> launch in host code ({launches}), which "
                   "NVRTC compiles for the GPU as a device-side launch: "
                   f"{_GUARD}, and launch the kernel from Python (drvgemm.launch)")
    return out
