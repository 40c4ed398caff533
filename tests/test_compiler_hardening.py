"""Bad input to the compiler gives a clear error, never a dead process or a
wrong binary (issue 16: defects 1, 5 and 6). CPU only."""
import os
import subprocess
import sys
import warnings

import pytest

import drvgemm
from drvgemm.runtime import compiler

KERNEL = 'extern "C" __global__ void v(int* o) { o[0] = X; }\n'


# -- defect 1: an architecture no tool knows ---------------------------------
def test_unknown_arch_on_ptx_is_a_value_error_not_a_dead_process():
    code = ("import drvgemm\n"
            "try:\n    drvgemm.compile('saxpy.ptx', 'saxpy_ptx', arch='sm_9')\n"
            "except ValueError as e:\n    print('VALUE', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "VALUE" in r.stdout and "sm_9" in r.stdout and "sm_90" in r.stdout


@pytest.mark.parametrize("arch", ["sm_9", "sm_99", "sm_80a", "sm_90x"])
def test_arch_checked_against_the_toolchain(arch):
    for src, name in ((KERNEL, "v"), ("saxpy.ptx", "saxpy_ptx")):
        with pytest.raises(ValueError, match=arch):
            drvgemm.compile(src, name, arch=arch, defines={"X": 1} if name == "v" else None)


def test_nvjitlink_errors_are_compile_errors_naming_the_option():
    with pytest.raises(drvgemm.CompileError, match="-nosuch"):
        drvgemm.compile("saxpy.ptx", "saxpy_ptx", arch="sm_90", options=["-nosuch"])


def test_compile_command_refuses_an_unknown_arch():
    r = subprocess.run([sys.executable, "-m", "drvgemm.cli", "compile", "--arch", "sm_9"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "sm_9" in r.stderr and "Traceback" not in r.stderr


# -- defect 5: a register cap that does not apply -----------------------------
BOUNDED = ('extern "C" __global__ void __launch_bounds__(128) heavy(float* o, const float* x) {'
           ' float a[48]; for (int i = 0; i < 48; ++i) a[i] = x[i * 128 + threadIdx.x];'
           ' float s = 0; for (int i = 0; i < 48; ++i) for (int j = 0; j < 48; ++j)'
           ' s += a[i] * a[j]; o[threadIdx.x] = s; }')


def test_ignored_register_cap_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("DRVGEMM_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = drvgemm.compile(BOUNDED, "heavy", arch="sm_90", options=["--maxrregcount=32"])
    assert k.resources.registers > 32
    assert any("maxrregcount=32" in n and "__launch_bounds__" in n for n in k.resources.notes)
    assert "did not apply" in str(k.resources)
    assert any("did not apply" in str(x.message) for x in w)
    again = drvgemm.compile(BOUNDED, "heavy", arch="sm_90", options=["--maxrregcount=32"])
    assert again.resources.notes == k.resources.notes  # a cache hit says it too


def test_register_cap_that_applies_says_nothing():
    k = drvgemm.compile("saxpy.cu", "reverse_chunks", arch="sm_90",
                        options=["--maxrregcount=32"])
    assert k.resources.registers <= 32 and not k.resources.notes


# -- defect 6: option, define, name and source forms --------------------------
def test_arch_among_the_options_is_honoured_like_arch():
    k = drvgemm.compile(KERNEL, "v", defines={"X": 1}, options=["-arch=sm_80"])
    assert k.arch == "sm_80" and ".target sm_80" in k.ptx
    k = drvgemm.compile(KERNEL, "v", defines={"X": 1}, options=["--gpu-architecture", "sm_80"],
                        arch="sm_80")
    assert k.arch == "sm_80"
    with pytest.raises(ValueError, match="disagree"):
        drvgemm.compile(KERNEL, "v", defines={"X": 1}, arch="sm_90", options=["-arch=sm_80"])


@pytest.mark.parametrize("option", ["-dlto", "--dlink-time-opt", "-optix-ir", "-fdevice-syntax-only"])
def test_an_option_that_gives_no_cubin_is_refused_by_name(option):
    """NVRTC would give LTO or OptiX IR (or nothing), and the compile would end
    in "'v' names v, which is not a __global__ function": refused first."""
    with pytest.raises(ValueError, match=f"{option}: NVRTC would give no cubin"):
        drvgemm.compile(KERNEL, "v", defines={"X": 1}, options=[option])


def test_option_as_one_string():
    # (not -G here: a -G compile changes what NVRTC builds later in the process)
    src = 'extern "C" __global__ void v(float* o, float x) { o[0] = __fdividef(1.f, x) + X; }'
    plain = drvgemm.compile(src, "v", defines={"X": 1})
    fast = drvgemm.compile(src, "v", defines={"X": 1}, options="--use_fast_math")
    assert fast.cubin != plain.cubin and fast.ptx != plain.ptx
    with pytest.raises(ValueError, match=r"\['-G', '-lineinfo'\]"):
        drvgemm.compile(KERNEL, "v", defines={"X": 1}, options="-G -lineinfo")
    with pytest.raises(TypeError, match="string"):
        drvgemm.compile(KERNEL, "v", defines={"X": 1}, options=[b"-G"])


@pytest.mark.parametrize("defines", [["X=7"], ("X=7",), "X=7", [("X", 7)], {"X": 7}])
def test_define_forms(defines):
    k = drvgemm.compile(KERNEL, "v", defines=defines)
    assert "7;" in k.ptx


def test_compiles_after_a_debug_compile_stay_out_of_the_cache(tmp_path):
    code = ("import drvgemm\n"
            "k = 'extern \"C\" __global__ void v(int* o) { o[0] = X; }'\n"
            "drvgemm.compile(k, 'v', defines={'X': 1}, options=['-G'])\n"
            "drvgemm.compile(k, 'v', defines={'X': 2})\n")
    env = dict(os.environ, DRVGEMM_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert len(list(tmp_path.glob("*.bin"))) == 1  # the -G one only


def test_define_without_value_and_bad_forms():
    assert drvgemm.compile("#ifdef ON\n#define X 3\n#endif\n" + KERNEL, "v",
                           defines=["ON"]).entry == "v"
    with pytest.raises(TypeError):
        drvgemm.compile(KERNEL, "v", defines=[1])
    with pytest.raises(TypeError):
        drvgemm.compile(KERNEL, "v", defines={"X": [1]})
    with pytest.raises(ValueError, match="identifier"):
        drvgemm.compile(KERNEL, "v", defines=["1X=2"])


@pytest.mark.parametrize("name", [None, "", 3, ["v"]])
def test_name_must_be_a_string(name):
    with pytest.raises(TypeError, match="name"):
        drvgemm.compile(KERNEL, name, defines={"X": 1})


def test_bytes_source_is_source_text():
    k = drvgemm.compile(KERNEL.encode(), "v", defines={"X": 5})
    assert k.entry == "v" and "5;" in k.ptx
    ptx = compiler.sources.find_source("saxpy.ptx").read_bytes()
    assert drvgemm.compile(ptx, "saxpy_ptx", arch="sm_90").entry == "saxpy_ptx"
    with pytest.raises(ValueError, match="UTF-8"):
        drvgemm.compile(b"\xff\xfe__global__", "v")
    with pytest.raises(TypeError, match="source"):
        drvgemm.compile(12, "v")


def test_include_path_must_be_a_folder(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        drvgemm.compile_module(KERNEL, ["v"], defines={"X": 1}, include_paths=[tmp_path / "no"])
