"""compile_module: one compile, many kernels, by any C++ name; parameter
names and signedness from the source. CPU tests, and GPU tests checked
against numpy."""
from pathlib import Path

import numpy as np
import pytest

import drvgemm

DATA = Path(__file__).resolve().parent / "data" / "byok"
SRC = DATA / "kernels.cu"
INC = DATA / "include"
NAMES = ["fill", "offsets", "ops::negate", "tiles::scale_add<128, float>"]


@pytest.fixture(scope="module")
def module():
    return drvgemm.compile_module(SRC, NAMES, include_paths=[INC], arch="sm_90")


def test_one_compile_gives_every_kernel(module):
    assert isinstance(module, drvgemm.Module)
    symbols = {module.kernel(n).entry for n in NAMES}
    assert len(symbols) == 4 and symbols <= set(module.entries)
    assert module["fill"].entry == "fill" and module["ops::negate"].entry.startswith("_ZN3ops")
    assert all(module[n].cubin is module.cubin for n in NAMES)  # one cubin


def test_names_and_types_come_from_the_source(module):
    assert [p.name for p in module["ops::negate"].params] == ["x", "n"]
    k = module["tiles::scale_add<128, float>"]  # declared in a header, behind -I
    assert [p.name for p in k.params] == ["y", "x", "alpha", "n"]
    off = module["offsets"]
    assert [p.name for p in off.params] == ["out", "s", "c", "u", "n"]
    assert [p.ptx_type for p in off.params] == ["u64", "s16", "s8", "u16", "s32"]


def test_signed_small_integers_take_negative_values(module):
    from drvgemm.runtime.launch import _Packer
    packer = _Packer(module["offsets"].params)
    packer.pack([0, -3, -128, 65535, -1])
    with pytest.raises(ValueError, match="'c'"):
        packer.pack([0, 1, -129, 0, 0])
    with pytest.raises(ValueError, match="'u'"):
        packer.pack([0, 1, 1, -1, 0])


def test_names_none_takes_every_entry():
    m = drvgemm.compile_module(SRC, include_paths=[INC], arch="sm_90")
    assert "fill" in m.names and len(m) == 4   # the explicit instantiation is there too
    assert m["offsets"].entry.startswith("_Z7offsets")   # a plain name finds its kernel
    assert m["ops::negate"].entry.startswith("_ZN3ops6negate")
    with pytest.raises(KeyError, match="nope"):
        m.kernel("nope")


def test_every_entry_is_listed_by_its_source_name_and_found_by_it():
    """Without names, a module lists its C++ kernels as their source names them
    (the explicit template instantiation included), and each listed name finds
    its own entry: what `drvgemm compile my.cu` prints is what to ask for."""
    m = drvgemm.compile_module(SRC, include_paths=[INC], arch="sm_90")
    assert sorted(m.names) == sorted(["fill", "offsets", "ops::negate",
                                      "tiles::scale_add<128, float>"])
    assert sorted(m[n].entry for n in m.names) == sorted(m.entries)
    assert m["tiles::scale_add<128,float>"].entry == m["tiles::scale_add<128, float>"].entry
    with pytest.raises(KeyError, match=r"its kernels: .*tiles::scale_add<128, float>"):
        m.kernel("tiles::scale_add<64, float>")


def test_overloads_keep_their_symbols():
    src = ("__global__ void k(int* p) { p[0] = 1; }\n"
           "__global__ void k(float* p) { p[0] = 1.0f; }\n"
           "template <int N> __global__ void t(int* p) { p[0] = N; }\n"
           "template __global__ void t<3>(int*);\n"
           "template __global__ void t<4>(int*);\n")
    m = drvgemm.compile_module(src, arch="sm_90")
    names = m.names
    assert "t<3>" in names and "t<4>" in names
    ks = [n for n in names if n.startswith("_Z1k")]   # two kernels named k: their symbols
    assert len(ks) == 2 and "k" not in names
    assert sorted(m[n].entry for n in names) == sorted(m.entries)


def test_call_names_of_symbols():
    from drvgemm.runtime.symbols import call_name, demangle
    if demangle("_Z1fv") is None:
        pytest.skip("no C++ runtime demangler on this machine: symbols stand as they are")
    assert call_name("_Z3redI13__nv_bfloat16Li256EEvPKT_Pfi") == "red<__nv_bfloat16, 256>"
    assert call_name("_ZN2ns4kernEPfi") == "ns::kern"
    assert call_name("_Z4gemmILj128ELb1EEvPf") == "gemm<128u, true>"
    assert call_name("_ZN12_GLOBAL__N_14kernEPf") == "_ZN12_GLOBAL__N_14kernEPf"   # anonymous
    for plain in ("fill", "saxpy_ptx", "_Znot_a_symbol"):
        assert call_name(plain) == plain


def test_a_missing_name_is_the_one_named_and_the_source_names_are_listed():
    """The name that failed, whatever its place among the names (NVRTC's line
    numbers for them had named 'tiles::scale_add<128, float>' here, and found
    nothing), then the kernels by their source names."""
    for names, bad in ((["tiles::scale_add<128, float>", "nope"], "'nope'"),
                       (["fill", "offsets", "nope"], "'nope'"),
                       (["ops::nope", "fill"], "'ops::nope'"),
                       (["a", "fill", "b"], "'a', 'b'")):
        with pytest.raises(drvgemm.CompileError) as e:
            drvgemm.compile_module(SRC, names, include_paths=[INC], arch="sm_90")
        first = str(e.value).splitlines()[0]
        assert f"no kernel named {bad};" in first, (names, first)
        assert "entries found: " in first and "tiles::scale_add<128, float>" in first, first


def test_compile_takes_the_same_names():
    for name in NAMES:
        k = drvgemm.compile(SRC.read_text().replace("#include <tiles/scale.cuh>",
                                                    f'#include "{INC}/tiles/scale.cuh"'),
                            name, arch="sm_90")
        assert k.name == name and k.entry in k.ptx


def test_template_name_spelled_either_way():
    src = "template <int N, typename T> __global__ void tk(T* o, T v) { o[0] = v * N; }"
    m = drvgemm.compile_module(src, ["tk<128, float>", "tk<128,float>", "tk<2, int>"],
                               arch="sm_90")
    assert m["tk<128, float>"].entry == m["tk<128,float>"].entry != m["tk<2, int>"].entry
    assert [p.name for p in m["tk<2, int>"].params] == ["o", "v"]
    assert [p.ptx_type for p in m["tk<2, int>"].params] == ["u64", "s32"]


def test_unknown_name_lists_what_there_is():
    with pytest.raises(drvgemm.CompileError, match=r"no kernel named 'ops::nope'.*fill"):
        drvgemm.compile_module(SRC, ["fill", "ops::nope"], include_paths=[INC], arch="sm_90")


def test_ptx_module():
    m = drvgemm.compile_module("saxpy.ptx", arch="sm_90")
    assert m.names == ["saxpy_ptx"] and m["saxpy_ptx"].params[0].ptx_type == "f32"


# -- on the GPU -------------------------------------------------------------
@pytest.mark.gpu
def test_module_kernels_launch_and_match_numpy(gpu):
    m = drvgemm.compile_module(SRC, NAMES, include_paths=[INC])
    n = 1000
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy = drvgemm.to_device(x), drvgemm.to_device(y)
    drvgemm.launch(m["tiles::scale_add<128, float>"], grid=(n + 127) // 128, block=128,
                   args=[dy, dx, 2.5, n])
    # one fp32 rounding (an FMA) or two: within 2 ulps of the terms' magnitude
    ref = 2.5 * x.astype(np.float64) + y
    bound = 2.0 ** -23 * (np.abs(2.5 * x.astype(np.float64)) + np.abs(y))
    got = dy.to_host()
    assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) / bound)
    drvgemm.launch(m["ops::negate"], grid=(n + 255) // 256, block=256, args=[dy, n])
    np.testing.assert_array_equal(dy.to_host(), -got)
    out = drvgemm.empty((n,), np.int32)
    drvgemm.launch(m["offsets"], grid=(n + 255) // 256, block=256, args=[out, -3, -100, 7, n])
    np.testing.assert_array_equal(out.to_host(), np.arange(n) * -3 - 100 + 7)
    f = drvgemm.empty((n,), np.float32)
    drvgemm.launch(m["fill"], grid=(n + 255) // 256, block=256, args=[f, 1.5, n])
    np.testing.assert_array_equal(f.to_host(), np.full(n, 1.5, np.float32))


VARIABLES = r'''
__constant__ float coef[4];
__device__ unsigned int calls;
namespace ns { __constant__ int offset[2] = {10, 20}; }

extern "C" __global__ void weigh(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = coef[i % 4] * x[i] + ns::offset[i % 2];
    if (i == 0) atomicAdd(&calls, 1u);
}
'''


def test_variables_are_listed_without_a_gpu():
    m = drvgemm.compile_module(VARIABLES, arch="sm_90")
    assert m.variables == {"coef": "const", "calls": "global", "_ZN2ns6offsetE": "const"}
    with pytest.raises(KeyError, match="no __device__ or __constant__ variable 'coeff'.*coef"):
        m._variable_symbol("coeff")
    assert m._variable_symbol("ns::offset") == "_ZN2ns6offsetE"


def test_a_variable_is_a_view_of_the_module_global(monkeypatch):
    """variable() asks the driver for the symbol's address and size in the
    loaded module and views those bytes: no allocation, no copy."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import runtime_fakes
    from cuda.bindings import driver as cu

    class GlobalsDriver(runtime_fakes.LaunchingDriver):
        SIZES = {b"coef": 16, b"calls": 4, b"_ZN2ns6offsetE": 8}

        def cuModuleGetGlobal(self, module, name):
            self._rec("cuModuleGetGlobal", module, name)
            return (0, cu.CUdeviceptr(0x7000 + len(name)), self.SIZES[name])

    fake = runtime_fakes.install(monkeypatch, GlobalsDriver())
    k = drvgemm.compile(VARIABLES, "weigh", arch="sm_90")
    coef = k.variable("coef", np.float32)
    assert (coef.shape, coef.dtype, coef.ptr) == ((4,), np.float32, 0x7004)
    offset = k.module.variable("ns::offset", np.int32, (2, 1))
    assert offset.shape == (2, 1) and offset.ptr == 0x7000 + len(b"_ZN2ns6offsetE")
    assert k.variable("calls").shape == (4,)                  # bytes by default
    assert [c[2] for c in fake.calls if c[0] == "cuModuleGetGlobal"] == [
        b"coef", b"_ZN2ns6offsetE", b"calls"]
    assert not any(c[0] == "cuMemAlloc" for c in fake.calls)
    with pytest.raises(ValueError, match="not a whole number of float64"):
        k.variable("calls", np.float64)
    with pytest.raises(ValueError, match="holds 16 bytes"):
        k.variable("coef", np.float32, (5,))
    other = drvgemm.compile_module(VARIABLES, arch="sm_80")   # the device is an sm_90
    with pytest.raises(ValueError, match="compiled for sm_80, but the device is sm_90"):
        other.variable("coef")


@pytest.mark.gpu
def test_variables_written_from_the_host_reach_the_kernel(gpu):
    """cudaMemcpyToSymbol / FromSymbol through variable(): set __constant__
    weights, launch, read a __device__ counter back."""
    k = drvgemm.compile(VARIABLES, "weigh")
    w = np.array([0.5, -1.0, 2.0, 4.0], np.float32)
    k.variable("coef", np.float32).copy_from_host(w)
    k.variable("calls", np.uint32).copy_from_host(np.zeros(1, np.uint32))
    n = 1000
    x = np.arange(n, dtype=np.float32)
    dx, dy = drvgemm.to_device(x), drvgemm.empty((n,), np.float32)
    for _ in range(3):
        drvgemm.launch(k, grid=(n + 255) // 256, block=256, args=[dx, dy, n])
    want = w[np.arange(n) % 4] * x + np.array([10, 20], np.float32)[np.arange(n) % 2]
    np.testing.assert_array_equal(dy.to_host(), want)
    assert k.variable("calls", np.uint32).to_host()[0] == 3
    np.testing.assert_array_equal(k.variable("ns::offset", np.int32).to_host(), [10, 20])


MIXED_GPU = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda/barrier>
namespace cg = cooperative_groups;

// out[block] = sum over the block of x (fp16) * y (bf16), through a
// cuda::barrier-synchronised staging buffer and a warp-level cg::reduce.
template <int BLOCK>
__global__ void dot_blocks(const __half* x, const __nv_bfloat16* y, float* out, int n) {
    __shared__ float stage[BLOCK];
    __shared__ float warp_sums[BLOCK / 32];
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0) init(&bar, block.size());
    block.sync();
    int i = blockIdx.x * BLOCK + threadIdx.x;
    stage[threadIdx.x] = i < n ? __half2float(x[i]) * __bfloat162float(y[i]) : 0.f;
    bar.arrive_and_wait();
    auto warp = cg::tiled_partition<32>(block);
    float s = cg::reduce(warp, stage[threadIdx.x], cg::plus<float>());
    if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = s;
    bar.arrive_and_wait();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < BLOCK / 32; ++w) t += warp_sums[w];
        out[blockIdx.x] = t;
    }
}
'''


@pytest.mark.gpu
def test_fp16_bf16_cooperative_groups_barrier_kernel_matches_numpy(gpu):
    import ml_dtypes
    m = drvgemm.compile_module(MIXED_GPU, ["dot_blocks<256>"])
    n, block = 5000, 256
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    blocks = (n + block - 1) // block
    out = drvgemm.empty((blocks,), np.float32)
    drvgemm.launch(m["dot_blocks<256>"], grid=blocks, block=block,
                   args=[drvgemm.to_device(x), drvgemm.to_device(y), out, n])
    prod = np.zeros(blocks * block)
    prod[:n] = x.astype(np.float64) * y.astype(np.float64)
    np.testing.assert_allclose(out.to_host(), prod.reshape(blocks, block).sum(1),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_a_kernel_of_the_cpp_standard_headers_runs(gpu):
    """tests/data/byok/std_headers.cu (libcu++'s cuda::std as std): placement
    new, a fold over a braced list, std::array, pair, swap, tuple; 7 in every
    thread's element, over a poisoned output."""
    src = Path(__file__).resolve().parent / "data" / "byok" / "std_headers.cu"
    m = drvgemm.compile_module(src)
    out = drvgemm.to_device(np.full(64, np.nan, np.float32))
    drvgemm.launch(m["std_kernel<float, 0>"], grid=1, block=64, args=[out])
    np.testing.assert_array_equal(out.to_host(), np.full(64, 7.0, np.float32))


# -- the README's "Bring your own kernel" runs as pasted ----------------------
def _readme_blocks():
    import re
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## Bring your own kernel", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_compile_part_runs_without_a_gpu(capsys):
    compile_part = _readme_blocks()[0]
    exec(compile(compile_part, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "axpy_half<256>(x: .u64, y: .u64, a: .f32, n: .s32)" in out and "registers" in out


@pytest.mark.gpu
def test_readme_runs_on_the_gpu(gpu, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)   # its paths are the repository's
    scope = {}
    for block in _readme_blocks():
        exec(compile(block, "README.md", "exec"), scope)


def test_a_kernel_without_a_module_says_so_when_asked_for_a_variable():
    from drvgemm.runtime.kernel import Kernel
    k = drvgemm.compile_module("saxpy.ptx", arch="sm_90")["saxpy_ptx"]
    alone = Kernel(k.binary, k.name)
    with pytest.raises(TypeError, match="no Module"):
        alone.variable("x")
