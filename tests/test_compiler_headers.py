"""The CUDA headers and the common standard headers resolve with no option;
host code gets an error that says what to do. CPU only (compiles)."""
from pathlib import Path

import pytest

import drvgemm
from drvgemm.runtime import compiler


@pytest.fixture(autouse=True)
def _headers_env(monkeypatch):
    monkeypatch.delenv("DRVGEMM_CUDA_INCLUDE", raising=False)


CUDA_HEADERS = ["cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "mma.h", "cooperative_groups.h",
                "cooperative_groups/reduce.h", "cuda/std/cstdint", "cuda/std/type_traits",
                "cuda/std/limits", "cuda/barrier", "cuda/pipeline", "math_constants.h"]


@pytest.mark.parametrize("header", CUDA_HEADERS)
def test_cuda_header_needs_no_option(header):
    k = drvgemm.compile(f'#include <{header}>\nextern "C" __global__ void k(int* o) {{ o[0] = 1; }}',
                        "k", arch="sm_90")
    assert k.entry == "k"


MIXED = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda/barrier>
#include <math_constants.h>
namespace cg = cooperative_groups;

// Each block sums its half inputs through a block barrier and a warp reduce.
extern "C" __global__ void mixed(const __half* x, const __nv_bfloat16* y, float* out, int n) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0) init(&bar, block.size());
    block.sync();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? __half2float(x[i]) + __bfloat162float(y[i]) : 0.f;
    bar.arrive_and_wait();
    auto warp = cg::tiled_partition<32>(block);
    float s = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) atomicAdd(out, s + 0.f * CUDART_PI_F);
}
'''


def test_fp16_bf16_cooperative_groups_and_barrier_in_one_kernel():
    k = drvgemm.compile(MIXED, "mixed", arch="sm_90")
    assert [p.name for p in k.params] == ["x", "y", "out", "n"]


NVCC_STYLE = r'''
#include <cstdio>
#include <cstdint>
#include <cassert>
#include <cmath>
#include <climits>
#include <cfloat>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda_runtime_api.h>

__global__ void nvcc_style(float* out, const int8_t* q, uint n) {
    uint i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(n < INT_MAX);
    if (i >= n) return;
    float m = -INFINITY;
    m = std::max(m, (float)q[i]);
    m = std::min(m, FLT_MAX);
    out[i] = std::sqrt(fabsf(m)) + (float)M_PI * 0.f;
    if (i == 0 && isinf(m)) printf("never: %f\n", m);
}

#ifndef __CUDACC_RTC__
int main() {
    FILE* f = fopen("x", "w");
    float* d;
    cudaMalloc(&d, 4);
    nvcc_style<<<1, 32>>>(d, nullptr, 0);
    fprintf(f, "done\n");
    return 0;
}
#endif
'''


def test_a_file_written_for_nvcc_with_guarded_host_code_compiles_as_is():
    k = drvgemm.compile(NVCC_STYLE, "nvcc_style", arch="sm_90")
    assert [p.name for p in k.params] == ["out", "q", "n"]
    assert [p.ptx_type for p in k.params] == ["u64", "u64", "u32"]


def test_unguarded_host_function_says_to_guard_it():
    src = NVCC_STYLE.replace("#ifndef __CUDACC_RTC__", "").replace("#endif\n", "")
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "nvcc_style", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "#ifndef __CUDACC_RTC__" in msg and "fopen" in msg


def test_host_code_in_an_included_header_names_the_header(tmp_path):
    """Host code NVRTC stops at inside a header the source includes (a
    library's launch helpers, say) is named by that header, relative to the
    folder it was found in; the source's own host code names no header."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "launcher.h").write_text(
        "#pragma once\n__host__ inline int report(int n) { fprintf(stderr, \"%d\\n\", n); "
        "return cudaGetLastError(); }\n")
    src = '#include <cstdio>\n#include <lib/launcher.h>\nextern "C" __global__ void k(int* o) { o[0] = 1; }'
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile_module(src, ["k"], include_paths=[tmp_path], arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "host code" in msg and "it stands in lib/launcher.h, which the source includes" in msg, msg
    own = NVCC_STYLE.replace("#ifndef __CUDACC_RTC__", "").replace("#endif\n", "")
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(own, "nvcc_style", arch="sm_90")
    assert "stands in" not in str(e.value).split("--- compiler log ---")[0]


def test_an_annotated_lambda_says_to_drop_the_annotation():
    """nvcc takes [=] __device__ (...) {...} in a kernel; NVRTC refuses the
    annotation whatever the options. The hint names the line; without the
    annotation the same kernel compiles."""
    src = ('extern "C" __global__ void k(float* x, float s) {\n'
           '    auto f = [=] __device__ (float v) { return v * s; };\n'
           '    x[threadIdx.x] = f(x[threadIdx.x]);\n}\n')
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "lambda annotated __device__" in msg and "line 2" in msg and "drop it" in msg, msg
    assert drvgemm.compile(src.replace(" __device__ (", " ("), "k", arch="sm_90").entry == "k"


def test_nvcc_options_are_named_with_what_they_are_for():
    """A Makefile's nvcc flags: NVRTC stops at the first it does not know; the
    hint names every nvcc-only one given, each with why it can go, and none of
    an option that is simply wrong. Left out, the compile goes through."""
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.f; }'
    nvcc = ["-O3", "-m64", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr", "-gencode",
            "arch=compute_90,code=sm_90", "-lcublas"]
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", options=["-lineinfo", *nvcc, "-use_fast_math"], arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    for said in ("-O3: the host compiler's optimisation level", "-m64, -Xcompiler -fPIC: the host "
                 "compiler's", "--expt-relaxed-constexpr: not needed", "-gencode arch=compute_90,"
                 "code=sm_90: one architecture a compile", "-lcublas: nvcc's own steps"):
        assert said in msg, (said, msg)
    assert "-lineinfo" not in msg.split("hint:")[1] and "-use_fast_math" not in msg.split("hint:")[1]
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", options=["--no-such-option"], arch="sm_90")
    assert "hint" not in str(e.value).split("--- compiler log ---")[0]
    k = drvgemm.compile(src, "k", options=["-lineinfo", "-use_fast_math"], arch="sm_90")
    assert k.entry == "k"


def test_unguarded_triple_chevron_launch_says_to_guard_it():
    """A host wrapper that launches its kernel with <<<...>>>, as nvcc files
    have: NVRTC compiles it for the GPU, where the launch would be a device-side
    one, and its own message speaks of runtime APIs; the hint says what to do."""
    src = ('extern "C" __global__ void k(int* o) { o[0] = 1; }\n'
           'void run(int* o) {\n  k<<<1, 1>>>(o);\n}\n')
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "<<<" in msg and "line 3" in msg and "#ifndef __CUDACC_RTC__" in msg, msg
    assert "drvgemm.launch" in msg


@pytest.mark.parametrize("header, says", [
    ('"defines_of_mine.h"', ["defines_of_mine.h was not found", "include_paths"]),
    ("<curand_kernel.h>", ["cuRAND's device API", "include_paths"]),
    ("<cuda_profiler_api.h>", ["not available to NVRTC", "#ifndef __CUDACC_RTC__"]),
])
def test_a_missing_header_gets_the_hint_of_its_kind(header, says):
    """A header of the user's not found is not called host-only; cuRAND's
    device header says where to get it; a CUDA host API header says to guard."""
    src = f'#include {header}\nextern "C" __global__ void k(int* o) {{ o[0] = 1; }}'
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert all(s in msg for s in says), msg
    assert ("device code only" in msg) == ("guard" in says[-1] or "RTC" in says[-1]), msg


def test_a_tma_kernel_written_for_nvcc_compiles_as_is():
    """<cuda.h> for CUtensorMap, the map by value as a __grid_constant__
    parameter, libcu++'s bulk tensor copy, a cluster shape compiled in
    (tests/data/byok/tma_tile.cu): NVRTC bundles no cuda.h, so drvgemm's
    stand-in gives the type, laid out as the driver encodes it."""
    src = Path(__file__).resolve().parent / "data" / "byok" / "tma_tile.cu"
    k = drvgemm.compile(src, "tile_copy<16, 32>", arch="sm_90")
    assert [(p.name, p.ptx_type, p.size) for p in k.params] == [
        ("map", "b8[128]", 128), ("out", "u64", 8), ("out_cols", "s32", 4)]
    assert ".param .align 64 .b8" in k.ptx and "cp.async.bulk.tensor.2d" in k.ptx
    assert ".reqnctapercluster 2, 1, 1" in k.ptx
    version = drvgemm.compile('#include <cuda.h>\nextern "C" __global__ void v(int* o) '
                              '{ o[0] = CUDA_VERSION; o[1] = sizeof(CUtensorMap); '
                              'o[2] = alignof(CUtensorMap); }', "v", arch="sm_90")
    major, minor = compiler.nvrtc_version()
    assert f", {major * 1000 + minor * 10};" in version.ptx, version.ptx
    assert ", 128;" in version.ptx and ", 64;" in version.ptx


def test_the_driver_api_in_device_code_says_it_is_host_code():
    src = ('#include <cuda.h>\nextern "C" __global__ void k(float* p) '
           '{ CUdeviceptr d = 0; cuInit(0); p[0] = d; }')
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "CUdeviceptr, cuInit: host code" in msg and "#ifndef __CUDACC_RTC__" in msg, msg


BUILTIN = sorted(p.name for p in (Path(drvgemm.__file__).parent / "runtime" / "shims" / "builtin").glob("*.h"))


@pytest.mark.parametrize("header", BUILTIN)
def test_the_runtimes_own_headers_resolve_and_their_names_are_built_in(header):
    """device_functions.h, sm_61_intrinsics.h, ...: a source may include them
    as nvcc lets it; the intrinsics, atomics, vector helpers and texture
    fetches they declare under nvcc are NVRTC's built-ins."""
    src = (f"#include <{header}>\n"
           'extern "C" __global__ void k(float4* o, int* p, double* d, cudaTextureObject_t t,\n'
           "                             const float* __restrict__ g) {\n"
           "    o[0] = make_float4(1, 2, 3, 4); p[0] = __dp4a(1, 2, 3); atomicAdd(d, 1.0);\n"
           "    o[1].x = __ldg(g) + __saturatef(2.f) + tex1Dfetch<float>(t, 3) + warpSize;\n}\n")
    assert drvgemm.compile(src, "k", arch="sm_90").entry == "k"


def test_the_builtin_stand_ins_are_not_in_nvrtcs_bundle():
    """They are put on the path with NVRTC's bundled headers, after them, for
    names the bundle lacks; a release that bundles one of them should use
    its own (then drop the stand-in)."""
    opts, dirs, ident = compiler.toolkit_headers()
    if not ident.startswith("bundled:"):
        pytest.skip(f"the CUDA headers here are not NVRTC's bundle ({ident})")
    bundle = [d for d in dirs if d.name != "builtin"]
    assert [d.name for d in dirs][-1] == "builtin" and opts[-1].endswith("builtin")
    assert not [h for h in BUILTIN if any((d / h).exists() for d in bundle)]


def test_a_toolkits_headers_come_without_the_builtin_stand_ins(monkeypatch, tmp_path):
    """With a toolkit's headers (DRVGEMM_CUDA_INCLUDE, or an NVRTC older than
    13.3) the toolkit's own device_functions.h and friends are found."""
    monkeypatch.setenv("DRVGEMM_CUDA_INCLUDE", str(tmp_path))
    opts, dirs, _ = compiler.toolkit_headers()
    assert dirs == [tmp_path.resolve()] and not any("builtin" in o for o in opts)


# One use of each C++ standard header's names, with that header alone.
STD_HEADER_USES = {
    "type_traits": "static_assert(std::is_unsigned_v<std::make_unsigned_t<int>>);",
    "limits": "static_assert(std::numeric_limits<float>::digits == 24);",
    "utility": "static_assert(std::pair<int, char>{1, 'a'}.first == 1);\n"
               "__device__ int f(int a, int b) { std::swap(a, b); return std::exchange(a, std::move(b)); }",
    "array": "static_assert(std::array<int, 2>{4, 5}.back() == 5);",
    "tuple": "static_assert(std::tuple_size_v<std::tuple<int, char>> == 2);",
    "functional": "static_assert(std::multiplies<int>{}(6, 7) == 42);",
    "numeric": "static_assert(std::lcm(4, 6) == 12);",
    "bit": "static_assert(std::bit_width(255u) == 8);",
    "iterator": "__device__ long f(const int* a) { return std::distance(a, std::next(a, 3)); }",
    "initializer_list": "static_assert(std::initializer_list<int>{1, 2}.size() == 2);",
    "new": "__device__ int* f(void* p) { return new (p) int(3); }",
}


@pytest.mark.parametrize("header", sorted(STD_HEADER_USES))
def test_a_cpp_standard_header_alone_gives_device_code_its_names(header):
    src = (f"#include <{header}>\n{STD_HEADER_USES[header]}\n"
           'extern "C" __global__ void k(int* o) { o[0] = 1; }')
    assert drvgemm.compile(src, "k", arch="sm_90").entry == "k"


def test_a_kernel_of_the_cpp_standard_headers_compiles_as_is():
    """tests/data/byok/std_headers.cu: a template kernel that includes them
    all; its static_asserts hold each header's values."""
    src = Path(__file__).resolve().parent / "data" / "byok" / "std_headers.cu"
    m = drvgemm.compile_module(src, arch="sm_90")
    assert m.names == ["std_kernel<float, 0>"]


def test_a_std_specialisation_says_where_it_goes():
    """std:: is libcu++'s cuda::std here: a specialisation written in namespace
    std is refused, and the hint names the namespace that takes it (which the
    second compile proves)."""
    body = ("template <> struct numeric_limits<My> { static constexpr bool is_specialized = true; };")
    use = ('extern "C" __global__ void k(int* o) { o[0] = std::numeric_limits<My>::is_specialized; }')
    src = "#include <limits>\nstruct My { int v; };\nnamespace std { " + body + " }\n" + use
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "std::numeric_limits is libcu++'s" in msg and "namespace cuda { namespace std" in msg, msg
    fixed = src.replace("namespace std { " + body + " }", "namespace cuda { namespace std { " + body + " } }")
    assert drvgemm.compile(fixed, "k", arch="sm_90").entry == "k"


def test_cub_whole_says_to_include_the_block_level_header():
    src = ('#include <cub/cub.cuh>\nextern "C" __global__ void k(float* o) { o[0] = 1.f; }')
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "<cub/block/block_reduce.cuh>" in msg, msg
    block = src.replace("cub/cub.cuh", "cub/block/block_reduce.cuh")
    assert drvgemm.compile(block, "k", arch="sm_90").entry == "k"


def test_host_only_header_says_to_guard_it():
    src = '#include <vector>\nextern "C" __global__ void k(int* o) { o[0] = 1; }'
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile(src, "k", arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "<vector>" in msg and "#ifndef __CUDACC_RTC__" in msg


def test_standard_names_come_only_with_their_headers():
    """As under nvcc's own headers, uint and INFINITY come from the standard
    headers (sys/types.h, cmath): a file that defines them itself is fine."""
    own = ('typedef unsigned int uint;\n#define INFINITY __int_as_float(0x7f800000)\n'
           'extern "C" __global__ void k(float* o, uint n) { o[n] = INFINITY; }')
    assert drvgemm.compile(own, "k", arch="sm_90").entry == "k"
    both = "#include <cmath>\n#include <cstdlib>\n" + own.replace("#define INFINITY", "#define X")
    assert drvgemm.compile(both, "k", arch="sm_90").entry == "k"


def test_user_header_of_a_standard_name_wins(tmp_path):
    (tmp_path / "cmath").write_text("#define MINE 3\n")
    k = drvgemm.compile_module('#include <cmath>\nextern "C" __global__ void k(int* o) '
                               '{ o[0] = MINE; }', ["k"], include_paths=[tmp_path], arch="sm_90")
    assert "mov.u32" in k.ptx and ", 3;" in k.ptx


def test_missing_cuda_headers_say_how_to_get_them(monkeypatch):
    monkeypatch.setattr(compiler, "toolkit_headers", lambda: ([], [], "none"))
    with pytest.raises(drvgemm.CompileError) as e:
        drvgemm.compile('#include <cuda_fp16.h>\nextern "C" __global__ void k() {}', "k",
                        arch="sm_90")
    msg = str(e.value).split("--- compiler log ---")[0]
    assert "nvidia-cuda-runtime" in msg and "13.3" in msg


def test_toolkit_headers_of_an_installed_toolkit(monkeypatch):
    """The path an NVRTC older than 13.3 takes: a toolkit's folders (found
    by cuda.pathfinder, or named in DRVGEMM_CUDA_INCLUDE)."""
    if compiler.pathfinder is None:
        pytest.skip("cuda.pathfinder is not installed")
    try:
        dirs = [compiler.pathfinder.locate_nvidia_header_directory(n) for n in ("cudart", "cccl")]
    except Exception as e:
        pytest.skip(f"no CUDA toolkit headers here: {e}")
    if any(d is None for d in dirs):
        pytest.skip("no CUDA toolkit headers here")
    monkeypatch.setenv("DRVGEMM_CUDA_INCLUDE", ":".join(d.abs_path for d in dirs))
    k = drvgemm.compile(MIXED, "mixed", arch="sm_90")
    assert k.entry == "mixed"
