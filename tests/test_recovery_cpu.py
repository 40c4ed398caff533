"""drvgemm.reset() on a stand-in driver and drvgemm.isolated() in real child
processes: CPU only."""
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import drvgemm
from drvgemm.runtime import driver, launch as launch_mod, tensormap
from drvgemm.runtime.launch import _Packer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import runtime_fakes  # noqa: E402
from runtime_fakes import loaded  # noqa: E402


@pytest.fixture
def fake(monkeypatch):
    return runtime_fakes.install(monkeypatch)


def test_reset_makes_old_objects_stale_and_drops_caches(fake, monkeypatch):
    k = loaded(drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90"))
    k.runners[(1, 32, 0, 0, 1)] = "launcher"
    k.fast_launchers[(1, 32, 0, None)] = "c launcher"
    a = drvgemm.to_device(np.arange(8, dtype=np.float32))
    v = a.view(np.int32)
    s = drvgemm.Stream()
    e = drvgemm.Event()
    with drvgemm.graph() as g:
        pass
    monkeypatch.setattr(tensormap, "_MAP_CACHE", type(tensormap._MAP_CACHE)({"key": "map"}))
    monkeypatch.setitem(launch_mod._cu_streams, 0x5000, "CUstream")
    hook_calls = []
    monkeypatch.setattr(driver, "_reset_hooks", driver._reset_hooks + [lambda: hook_calls.append(1)])
    gen = driver.generation()
    fake.calls.clear()

    assert drvgemm.reset() == gen + 1 == driver.generation()

    names = fake.names()
    assert names[:3] == ["cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
                         "cuDevicePrimaryCtxRetain"]
    assert ("cuCtxSetCurrent", "ctx-new") in fake.calls and driver._context == "ctx-new"
    # Nothing of the old context went back to the driver: no frees, no destroys.
    assert not any(n in names for n in ("cuMemFree", "cuStreamDestroy", "cuEventDestroy",
                                        "cuGraphExecDestroy"))
    assert hook_calls == [1]
    assert k._function is None and not k.runners and not k.fast_launchers   # reloads lazily
    assert not tensormap._MAP_CACHE and 0x5000 not in launch_mod._cu_streams
    for use in (a.to_host, lambda: a.copy_from_host(np.zeros(8, np.float32)),
                lambda: a.ptr, lambda: a.__cuda_array_interface__, lambda: v.to_host(),
                lambda: a.__dlpack__(stream=-1), lambda: drvgemm.to_device(a),
                lambda: driver.device_pointer(a, "parameter 1 'x'")):
        with pytest.raises(drvgemm.StaleObjectError, match="generation .*before drvgemm.reset"):
            use()
    with pytest.raises(drvgemm.StaleObjectError, match="parameter 1 'x'"):
        _Packer(k.params).pack([1.0, a, 0, 1])           # as a kernel argument
    with pytest.raises(drvgemm.StaleObjectError, match="stream was created before"):
        driver.stream_handle(s)
    with pytest.raises(drvgemm.StaleObjectError):
        e.record()
    with pytest.raises(drvgemm.StaleObjectError, match="capture it again"):
        g.replay()
    assert "stale" in repr(a) and a.shape == (8,)
    for obj in (a, v, s, e, g):                          # finalizers: no driver calls either
        obj.__del__()
    assert not any(n in fake.names() for n in ("cuMemFree", "cuStreamDestroy", "cuEventDestroy"))
    b = drvgemm.to_device(np.ones(4, np.float32))         # new objects work
    assert b.generation == driver.generation() and driver.device_pointer(b) == b.ptr


def test_reset_reports_failing_callbacks_after_resetting(fake, monkeypatch):
    def bad():
        raise OSError("boom")
    monkeypatch.setattr(driver, "_reset_hooks", [bad])
    with pytest.raises(RuntimeError, match="1 reset callback.*boom"):
        drvgemm.reset()
    assert "cuDevicePrimaryCtxReset" in fake.names()


def test_reset_without_a_gpu_says_so():
    if drvgemm.has_gpu():
        pytest.skip("a GPU is present")
    with pytest.raises(drvgemm.NoDeviceError):
        drvgemm.reset()


# ---------------------------------------------------------------------------
# isolated(): one child each, so the whole story is one test (spawn is slow)
# ---------------------------------------------------------------------------
def _raises(n):
    raise ValueError(f"bad value {n}")


def _dies(code):
    os._exit(code)


def test_isolated_returns_reraises_and_survives_a_dead_child():
    assert drvgemm.isolated(math.sqrt, 16.0) == 4.0
    with pytest.raises(ValueError, match="bad value 3") as info:
        drvgemm.isolated(_raises, 3)
    assert any("child process" in n for n in getattr(info.value, "__notes__", ["child process"]))
    with pytest.raises(drvgemm.IsolatedError, match="died without an answer \\(exit code 7\\)"):
        drvgemm.isolated(_dies, 7)
    with pytest.raises(TypeError, match="picklable"):
        drvgemm.isolated(lambda: 1)


def test_isolated_refuses_a_function_a_new_process_cannot_import(tmp_path):
    """A function defined in a notebook, ``python -c`` or a script on stdin
    lives in a __main__ with no file: the spawned child died looking for it
    ("died without an answer (exit code 1)"). Now the call says why at once;
    a script run from its file still works."""
    import subprocess
    code = ("import drvgemm\n"
            "def double(x):\n    return 2 * x\n"
            "print(drvgemm.isolated(double, 21))\n")
    r = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "cannot import" in r.stderr and "TypeError" in r.stderr, r.stderr
    script = tmp_path / "experiment.py"
    script.write_text(code.replace("print(", "if __name__ == '__main__':\n    print("))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "42", r.stderr


def test_errors_survive_pickling():
    """drvgemm.isolated() sends a child's exception back through a pipe."""
    import pickle
    from drvgemm.runtime.errors import CompileError, CudaError, NoDeviceError
    e = pickle.loads(pickle.dumps(CudaError("cuLaunchKernel", 700, "CUDA_ERROR_ILLEGAL_ADDRESS",
                                            "an illegal memory access", hint="check pointers")))
    assert (type(e), e.call, e.code, e.name, e.hint) == \
        (CudaError, "cuLaunchKernel", 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "check pointers")
    assert "illegal memory access" in str(e)
    n = pickle.loads(pickle.dumps(NoDeviceError("cuInit", 100, "NO_DEVICE", "no device")))
    assert type(n) is NoDeviceError and n.code == 100
    c = pickle.loads(pickle.dumps(CompileError("NVRTC failed", log="x.cu(3): error", source="x.cu")))
    assert (type(c), c.log, c.source) == (CompileError, "x.cu(3): error", "x.cu")
    assert "x.cu(3): error" in str(c)


def test_reset_drops_the_gemm_and_softmax_call_caches(fake):
    """A cached gemm() call keeps its launches with the workspace and staging
    buffers of its context, a cached softmax() call its plan and pointers:
    reset() must drop both, so the next call is planned in the new context."""
    from drvgemm.ladders.gemm import dispatch as gemm_dispatch
    from drvgemm.ladders.softmax import dispatch as softmax_dispatch
    gemm_dispatch._calls["sig"] = "call"
    gemm_dispatch._workspaces[(0, "tma")] = "workspace"
    softmax_dispatch._calls["sig"] = "call"
    softmax_dispatch._workspaces[0] = "workspace"
    drvgemm.reset()
    assert not gemm_dispatch._calls and not gemm_dispatch._workspaces
    assert not softmax_dispatch._calls and not softmax_dispatch._workspaces



def test_a_module_loads_again_after_reset(monkeypatch):
    """The kernels of one compile share its CUmodule; reset() destroys it with
    the old context, so the module must load again for the next launch, not
    hand the old handle to cuModuleGetFunction."""
    class CountingDriver(runtime_fakes.LaunchingDriver):
        loads = 0

        def cuModuleLoadData(self, image):
            CountingDriver.loads += 1
            self._rec("cuModuleLoadData", CountingDriver.loads)
            return (0, f"module-{CountingDriver.loads}")

        def cuModuleGetFunction(self, module, name):
            self._rec("cuModuleGetFunction", module)
            return super().cuModuleGetFunction(module, name)

    fake = runtime_fakes.install(monkeypatch, CountingDriver())
    mod = drvgemm.compile_module("saxpy.cu", arch="sm_90")
    k = mod.kernel("saxpy")
    k.function
    drvgemm.reset()
    k.function
    got = [c[1] for c in fake.calls if c[0] == "cuModuleGetFunction"]
    assert got == ["module-1", "module-2"], fake.calls
