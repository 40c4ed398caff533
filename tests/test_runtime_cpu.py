"""The driver layer on a stand-in driver (tests/runtime_fakes.py), CPU only:
function attributes, occupancy without side effects, cooperative launches,
signed small integers and bools in argument slots, stream-ordered copies,
graph capture, the no-GPU error, and the host side's bands of rows for an M
too tall for one grid."""
import dataclasses
import gc
import struct
import sys
import threading
import tracemalloc
import traceback
from pathlib import Path

import numpy as np
import pytest

import drvgemm
from drvgemm.runtime import driver, launch as launch_mod
from drvgemm.runtime.driver import DeviceArray
from drvgemm.runtime.kernel import KernelAttributes, Param
from drvgemm.runtime.launch import _Packer, slot_type

sys.path.insert(0, str(Path(__file__).resolve().parent))
import runtime_fakes  # noqa: E402
from runtime_fakes import loaded  # noqa: E402


@pytest.fixture
def fake(monkeypatch):
    return runtime_fakes.install(monkeypatch)


@pytest.fixture(scope="module")
def saxpy_source():
    return drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90")


@pytest.fixture
def saxpy(saxpy_source):
    # A fresh Kernel object over the same binary: tests mark it loaded.
    from drvgemm.runtime.kernel import Kernel
    return Kernel(saxpy_source.binary, saxpy_source.name,
                  "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n)")


# ---------------------------------------------------------------------------
# function attributes
# ---------------------------------------------------------------------------
CTX = {"optin": 232448, "static_smem": 1024}


@pytest.mark.parametrize("name, value, want", [
    ("max_dynamic_shared_size_bytes", 231424, ("MAX_DYNAMIC_SHARED_SIZE_BYTES", 231424)),
    ("MAX_DYNAMIC_SHARED_SIZE_BYTES", 0, ("MAX_DYNAMIC_SHARED_SIZE_BYTES", 0)),
    ("CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT", 50,
     ("PREFERRED_SHARED_MEMORY_CARVEOUT", 50)),
    ("preferred_shared_memory_carveout", "max_shared", ("PREFERRED_SHARED_MEMORY_CARVEOUT", 100)),
    ("preferred_shared_memory_carveout", -1, ("PREFERRED_SHARED_MEMORY_CARVEOUT", -1)),
    ("non_portable_cluster_size_allowed", True, ("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)),
    ("required_cluster_width", 2, ("REQUIRED_CLUSTER_WIDTH", 2)),
    ("cluster_scheduling_policy_preference", "spread",
     ("CLUSTER_SCHEDULING_POLICY_PREFERENCE", 1)),
])
def test_settable_attributes_validate_to_driver_values(name, value, want):
    assert driver.validate_function_attribute(name, value, CTX) == want


@pytest.mark.parametrize("name, value, exc, match", [
    ("num_regs", 32, ValueError, "num_regs is read-only; settable: max_dynamic"),
    ("max_threads_per_block", 128, ValueError, "read-only"),
    ("no_such_thing", 1, ValueError, "unknown function attribute 'no_such_thing'"),
    ("max_dynamic_shared_size_bytes", 231425, ValueError,
     r"out of range \[0, 231424\].*1024 B of which"),
    ("max_dynamic_shared_size_bytes", -1, ValueError, "out of range"),
    ("max_dynamic_shared_size_bytes", 1.5, TypeError, "takes an integer, got float"),
    ("max_dynamic_shared_size_bytes", True, TypeError, "takes an integer, got bool"),
    ("preferred_shared_memory_carveout", 101, ValueError, r"\[-1, 100\]"),
    ("preferred_shared_memory_carveout", "most", ValueError, "max_l1"),
    ("non_portable_cluster_size_allowed", 2, ValueError, "0 or 1"),
    ("cluster_scheduling_policy_preference", 3, ValueError, "load balancing"),
    (5, 1, TypeError, "named by a string"),
])
def test_bad_attribute_settings_are_clear_errors(name, value, exc, match):
    with pytest.raises(exc, match=match):
        driver.validate_function_attribute(name, value, CTX)


def test_kernel_attributes_reads_every_attribute_and_stays_callable(fake, saxpy):
    loaded(saxpy)
    fake.attrs[("fn", "NUM_REGS")] = 40
    a = saxpy.attributes
    assert isinstance(a, KernelAttributes) and a() is a     # k.attributes() still works
    # every one the installed cuda.bindings names (13.3 has no SHARED_MEMORY_MODE)
    known = {n.lower() for n in driver.FUNCTION_ATTRIBUTES
             if hasattr(fake.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + n)}
    assert set(a) == known and {"num_regs", "max_dynamic_shared_size_bytes"} <= known
    assert a["num_regs"] == 40


def test_an_attribute_the_driver_refuses_is_left_out_and_not_asked_again(fake, saxpy, monkeypatch):
    loaded(saxpy)
    monkeypatch.setattr(driver, "_REFUSED_FUNCTION_ATTRIBUTES", set())
    asked = []
    answer = fake.cuFuncGetAttribute

    def refusing(attr, fn):
        name = attr.name[len("CU_FUNC_ATTRIBUTE_"):]
        asked.append(name)
        if name == "DEVICE_NODE_UPDATE_SUPPORTED":     # in every cuda.bindings 13
            return (fake.CUresult.CUDA_ERROR_INVALID_VALUE, 0)
        return answer(attr, fn)

    monkeypatch.setattr(fake, "cuFuncGetAttribute", refusing)
    first, second = dict(saxpy.attributes), dict(saxpy.attributes)
    assert "device_node_update_supported" not in first and first == second
    assert asked.count("DEVICE_NODE_UPDATE_SUPPORTED") == 1 and asked.count("NUM_REGS") == 2


def test_set_attribute_calls_the_driver_and_can_lower_the_smem_limit(fake, saxpy):
    loaded(saxpy, static_smem=1024)
    saxpy.set_max_dynamic_smem(100_000)
    assert saxpy.max_dynamic_smem == 100_000
    assert saxpy.set_attribute("max_dynamic_shared_size_bytes", 20_000) == 20_000
    assert saxpy.max_dynamic_smem == 20_000                  # lowered, and known to be
    saxpy.set_attribute("preferred_shared_memory_carveout", "max_l1")
    assert fake.attrs[("fn", "PREFERRED_SHARED_MEMORY_CARVEOUT")] == 0
    with pytest.raises(ValueError, match=r"\[0, 231424\]"):   # optin 232448 - 1024 static
        saxpy.set_attribute("max_dynamic_shared_size_bytes", 232448)
    with pytest.raises(ValueError, match="read-only"):
        saxpy.set_attribute("num_regs", 1)
    sets = [c for c in fake.calls if c[0] == "cuFuncSetAttribute"]
    assert sets[-1] == ("cuFuncSetAttribute", "PREFERRED_SHARED_MEMORY_CARVEOUT", 0)


def test_occupancy_leaves_every_attribute_as_it_was(fake, saxpy, monkeypatch):
    """occupancy() asks the driver with the limit raised, then puts it back:
    no attribute of the kernel differs afterwards (the driver's own view and
    the kernel's)."""
    loaded(saxpy)
    seen = []
    monkeypatch.setattr(driver, "occupancy_max_active_blocks",
                        lambda fn, t, s: seen.append(fake.attrs.get(
                            (fn, "MAX_DYNAMIC_SHARED_SIZE_BYTES"))) or 1)
    monkeypatch.setattr(driver, "occupancy_available_dynamic_smem", lambda fn, b, t: 1000)
    monkeypatch.setattr(driver, "occupancy_max_potential_block_size", lambda fn, s: (132, 1024))
    before_attrs = dict(fake.attrs)
    before = saxpy.max_dynamic_smem
    out = drvgemm.occupancy(saxpy, 256, smem=100_000)
    assert out.driver_blocks_per_sm == 1
    assert seen and seen[0] > 100_000              # asked with the limit raised
    assert saxpy.max_dynamic_smem == before
    assert fake.attrs.get(("fn", "MAX_DYNAMIC_SHARED_SIZE_BYTES"), before) == before
    assert {k: v for k, v in fake.attrs.items() if k[1] != "MAX_DYNAMIC_SHARED_SIZE_BYTES"} == \
        {k: v for k, v in before_attrs.items() if k[1] != "MAX_DYNAMIC_SHARED_SIZE_BYTES"}


# ---------------------------------------------------------------------------
# cooperative launches
# ---------------------------------------------------------------------------
def test_cooperative_launch_checks_the_grid_against_co_resident_blocks(fake, saxpy, monkeypatch):
    loaded(saxpy)
    occupancy = []
    monkeypatch.setattr(driver, "occupancy_max_active_blocks",
                        lambda fn, t, s: occupancy.append(t) or 2)
    launches = []
    monkeypatch.setattr(driver, "launch_kernel_ex",
                        lambda *a, **k: launches.append((a, k)) or 0)
    coop = []

    def cooperative(fn, gx, gy, gz, bx, by, bz, smem, stream, params):
        coop.append(((gx, gy, gz), (bx, by, bz), smem, stream))
        return (0,)
    monkeypatch.setattr(fake, "cuLaunchCooperativeKernel", cooperative, raising=False)
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(launch_mod, "_cu_stream", lambda h: h)
    args = (1.0, 0x1000, 0x2000, 8)
    with pytest.raises(ValueError, match=r"265 blocks, but at most 264 blocks of 128 threads.*"
                                         r"2 blocks/SM x 132 SMs.*grid-wide sync"):
        launch_mod.launch_py(saxpy, 265, 128, args, cooperative=True)
    assert not coop
    for _ in range(3):
        launch_mod.launch_py(saxpy, (132, 2), 128, args, cooperative=True)
    # cuLaunchCooperativeKernel each time; the grid checked on the first launch only
    # (the C path's cooperative launcher: test_launch_cpu.py)
    assert coop == [((132, 2, 1), (128, 1, 1), 0, None)] * 3 and len(occupancy) == 2
    # the refused grid was never cached: it is refused again
    with pytest.raises(ValueError, match="265 blocks"):
        launch_mod.launch_py(saxpy, 265, 128, args, cooperative=True)
    # with a cluster (or attributes): cuLaunchKernelEx and its cooperative attribute
    monkeypatch.setattr(driver, "occupancy_max_active_clusters", lambda *a: 132)
    launch_mod.launch_py(saxpy, 132, 128, args, cooperative=True, cluster=(1, 1, 1))
    (a, k), = launches
    assert a[1] == (132, 1, 1) and a[2] == (128, 1, 1) and k["cooperative"] is True


WAITS_FIRST = r'''
extern "C" __global__ void waits_first(float a, const float* x, float* y, int n) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x < n) y[threadIdx.x] = a * x[threadIdx.x];
}
'''


def test_python_path_keeps_a_dependent_launchs_configuration(fake, monkeypatch):
    """launch_py's launcher for a dependent kernel calls cuLaunchKernelEx with
    programmatic serialization (and the cooperative attribute for a
    cooperative launch), its configuration built on the first launch of the
    shape and reused after, not rebuilt each call."""
    k = loaded(drvgemm.compile(WAITS_FIRST, "waits_first", arch="sm_90"))
    k.dependent_launch = True
    monkeypatch.setattr(driver, "occupancy_max_active_blocks", lambda fn, t, s: 2)
    monkeypatch.setattr(launch_mod, "_cu_stream", lambda h: h)
    built = []
    real = driver.launch_config_ex
    monkeypatch.setattr(driver, "launch_config_ex",
                        lambda *a, **kw: built.append((a, kw)) or real(*a, **kw))
    args = (1.0, 0x1000, 0x2000, 8)
    for _ in range(3):
        launch_mod.launch_py(k, 4, 128, args)
    for _ in range(2):
        launch_mod.launch_py(k, 4, 128, args, cooperative=True)
    ex = [c for c in fake.calls if c[0] == "cuLaunchKernelEx"]
    assert len(ex) == 5 and len(built) == 2 and "cuLaunchKernel" not in fake.names()
    A = fake.CUlaunchAttributeID
    plain_cfg, coop_cfg = ex[0][1], ex[3][1]
    assert ex[1][1] is ex[2][1] is plain_cfg and ex[4][1] is coop_cfg
    assert [a.id for a in plain_cfg.attrs] == \
        [A.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION]
    assert [a.id for a in coop_cfg.attrs] == \
        [A.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, A.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION]
    assert plain_cfg.gridDimX == 4 and plain_cfg.blockDimX == 128


def test_launch_kernel_ex_sets_the_cooperative_attribute(fake, monkeypatch):
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    assert driver.launch_kernel_ex("fn", (4, 1, 1), (64, 1, 1), 0, 0, 0, cooperative=True) == 0
    cfg = fake.calls[-1][1]
    A = fake.CUlaunchAttributeID
    assert [a.id for a in cfg.attrs] == [A.CU_LAUNCH_ATTRIBUTE_COOPERATIVE]
    assert cfg.attrs[0].value.cooperative == 1 and cfg.gridDimX == 4
    driver.launch_kernel_ex("fn", (4, 1, 1), (64, 1, 1), 0, 0, 0, cluster=(2, 1, 1))
    assert [a.id for a in fake.calls[-1][1].attrs] == [A.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION]


# ---------------------------------------------------------------------------
# argument slots: signed small integers, bools
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SignedParam(Param):
    signed: bool = True


def _params(*types, signed=False):
    cls = SignedParam if signed else Param
    sizes = {"8": 1, "16": 2, "32": 4, "64": 8}
    return [cls(i, f"p{i}", t, sizes[t[1:]], sizes[t[1:]], False) for i, t in enumerate(types)]


def test_signed_small_integers_take_negative_values():
    pk = _Packer(_params("u16", "u8", signed=True))       # NVRTC's .u16/.u8 for short/signed char
    pk.pack([-1, -128])
    assert struct.unpack_from("<hb", bytes(pk.buf)) == (-1, -128)
    with pytest.raises(ValueError, match=r"'p0' \(.u16\): 40000 is out of range \[-32768, 32767\]"):
        pk.pack([40000, 0])
    pk = _Packer(_params("s16", "s8"))
    pk.pack([-300, -5])
    assert struct.unpack_from("<hb", bytes(pk.buf)) == (-300, -5)
    with pytest.raises(ValueError, match=r"-1 is out of range \[0, 65535\]"):
        _Packer(_params("u16", "u8")).pack([-1, 0])         # unsigned stays unsigned
    assert slot_type(_params("u32", signed=True)[0]) == "s32"   # the C path packs it signed


@pytest.mark.parametrize("value", [True, False, np.True_])
def test_bool_is_never_a_device_pointer(value, saxpy_source):
    with pytest.raises(TypeError, match="bool"):
        driver.device_pointer(value, "A")
    with pytest.raises(TypeError, match="parameter 1 'x'.*(bool|device pointer)"):
        _Packer(saxpy_source.params).pack([1.0, value, 0, 1])


# ---------------------------------------------------------------------------
# no GPU: a fresh error each time (defect 3)
# ---------------------------------------------------------------------------
def test_no_device_error_is_fresh_each_time_and_holds_nothing():
    if drvgemm.has_gpu():
        pytest.skip("a GPU is present")
    first, fresh, depths = None, 0, set()
    tracemalloc.start()
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(8):
        try:
            drvgemm.to_device(np.ones(10 * 2**20 // 8))     # 10 MB each
        except drvgemm.NoDeviceError as e:
            depths.add(len(traceback.extract_tb(e.__traceback__)))
            if first is None:
                first = e                                  # the caller keeps one error
            else:
                fresh += e is not first
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert fresh == 7                                      # new objects, not one re-raised
    assert len(depths) == 1                                # tracebacks do not grow
    # One kept error holds its own 10 MB frame; a shared one would hold all 80.
    assert grown < 30 * 2**20, f"{grown / 2**20:.0f} MB held by the errors' frames"
    assert "no CUDA driver" in str(first) or first.description


# ---------------------------------------------------------------------------
# stream-ordered copies (defect 2)
# ---------------------------------------------------------------------------
def test_copies_with_a_stream_are_queued_on_it_and_wait_for_it_alone(fake):
    x = np.arange(12, dtype=np.float32)
    d = driver.to_device(x, stream=0x55)
    d.to_host(stream=0x55)
    names = fake.names()
    assert ("cuMemcpyHtoDAsync", d.ptr, 48, 0x55) in fake.calls
    assert ("cuMemcpyDtoHAsync", d.ptr, 48, 0x55) in fake.calls
    assert names.index("cuMemcpyDtoHAsync") < names.index("cuStreamSynchronize")
    assert ("cuStreamSynchronize", 0x55) in fake.calls
    assert "cuCtxSynchronize" not in names and "cuMemcpyHtoD" not in names
    assert "cuMemcpyDtoH" not in names
    fake.calls.clear()
    driver.to_device(x).to_host()                # no stream: the synchronous copies
    assert [c[0] for c in fake.calls if "cpy" in c[0]] == ["cuMemcpyHtoD", "cuMemcpyDtoH"]


# ---------------------------------------------------------------------------
# graph capture: the rule and its refusals
# ---------------------------------------------------------------------------
def test_graph_capture_rule(fake):
    other = []
    with drvgemm.graph() as g:
        assert ("cuStreamBeginCapture", g.handle, "CU_STREAM_CAPTURE_MODE_RELAXED") in fake.calls
        assert driver.stream_handle(None) == g.handle       # stream=None is the graph's
        assert driver.stream_handle(7) == 7                 # an explicit stream is itself
        t = threading.Thread(target=lambda: other.append(driver.stream_handle(None)))
        t.start()
        t.join()
        out = drvgemm.empty((4,), np.float32)               # allocated during capture
        with pytest.raises(ValueError, match="graph cannot move host data"):
            drvgemm.to_device(np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="graph cannot move host data"):
            out.to_host()
        with pytest.raises(RuntimeError, match="do not nest"):
            with drvgemm.graph():
                pass
    assert other == [0]                                     # other threads unaffected
    assert driver.stream_handle(None) == 0
    assert any(a is out for a in g.keep)                    # kept alive for replays
    assert g.nodes == 3 and "cuGraphInstantiate" in fake.names()
    g.replay()
    g.replay(stream=0x99)
    assert [c for c in fake.calls if c[0] == "cuGraphLaunch"] == \
        [("cuGraphLaunch", "exec", g.handle), ("cuGraphLaunch", "exec", 0x99)]
    g.close()
    assert "cuGraphExecDestroy" in fake.names() and ("cuStreamDestroy", g.handle) in fake.calls
    with pytest.raises(RuntimeError, match="closed"):
        g.replay()


def test_graph_error_inside_the_block_is_the_one_raised(fake):
    with pytest.raises(KeyError):
        with drvgemm.graph() as g:
            raise KeyError("inside")
    assert "cuGraphDestroy" in fake.names() and "cuGraphInstantiate" not in fake.names()
    with pytest.raises(RuntimeError, match="closed"):
        g.replay()
    with pytest.raises(ValueError, match="legacy default stream"):
        drvgemm.graph(0)


def test_c_fast_path_hands_stream_none_to_python_while_capturing(fake):
    fl = launch_mod._fastlaunch
    if fl is None:
        pytest.skip("drvgemm.runtime._fastlaunch is not built here")
    seen = []

    class K:
        fast_launchers = {((1, 1, 1), (32, 1, 1), 0, None): object()}   # not a Launcher

    try:
        fl.bind(lambda *a, **k: seen.append(("slow", k.get("stream"))),
                lambda *a, **k: seen.append(("first", k.get("stream"))),
                lambda err, *a: None)
        with drvgemm.graph():
            fl.launch(K(), (1, 1, 1), (32, 1, 1), (), smem=0)
            fl.launch(K(), (2, 1, 1), (32, 1, 1), ())
        fl.launch(K(), (2, 1, 1), (32, 1, 1), ())
    finally:
        fl.bind(launch_mod.launch_py, launch_mod._first_launch, launch_mod._fast_failed)
    # Inside: both to the Python path (which knows the capture stream), even
    # the shape that has a C launcher; after: a new shape is a first launch.
    assert seen == [("slow", None), ("slow", None), ("first", None)]


# ---------------------------------------------------------------------------
# M above 65535 tiles (defect 7): bands of rows, each its own launch
# ---------------------------------------------------------------------------
def test_tall_m_is_split_into_launches_of_at_most_65535_tile_rows():
    from drvgemm.ladders.gemm.host import MAX_GRID_Y, PlainHost
    from drvgemm.ladders.gemm.registry import by_name
    r = next(x for x in by_name().values() if x.host == "" and x.precision == "fp32")
    m, n, k = MAX_GRID_Y * r.tile_m * 2 + 5, 33, 7
    pa, pb, pc = 0x7f0000000000, 0x7f1000000000, 0x7f2000000000
    a, b, c = (DeviceArray((1,), np.float32, ptr=p, owner=False) for p in (pa, pb, pc))
    steps = PlainHost().launches(r, "kern", a, b, c, m, n, k, 2.0, 0.5)
    assert len(steps) == 3
    band = MAX_GRID_Y * r.tile_m
    for i, (kern, cfg) in enumerate(steps):
        rows = min(band, m - i * band)
        assert kern == "kern" and cfg.grid[1] <= MAX_GRID_Y
        assert cfg.grid == r.grid(rows, n)
        assert cfg.args == (pa + i * band * k * 4, b, pc + i * band * n * 4, rows, n, k, 2.0, 0.5)
    assert sum(cfg.args[3] for _, cfg in steps) == m
    # Below the limit: the one launch, with the caller's own objects.
    (_, cfg), = PlainHost().launches(r, "kern", a, b, c, band, n, k, 1.0, 0.0)
    assert cfg.args[:3] == (a, b, c) and cfg.grid[1] == MAX_GRID_Y
    # A 16-bit C (narrow output) is offset by its own element size.
    r16 = next((x for x in by_name().values() if x.host == "" and x.precision == "bf16"), None)
    if r16 is not None:
        steps = PlainHost().row_blocks(r16, a, c, MAX_GRID_Y * r16.tile_m + 1, 8, 16, True)
        assert steps[1] == (pa + MAX_GRID_Y * r16.tile_m * 16 * 2,
                            pc + MAX_GRID_Y * r16.tile_m * 8 * 2, 1)


def test_plain_split_k_launches(monkeypatch):
    """Rung 08's split-K on the plain host: the split build on a grid of
    pieces writing partials (alpha 1, beta 0) into the workspace, then the
    reduction with the caller's alpha and beta into C; the count clamped to
    the k-tiles; the unsplit build refused for pieces and the split build for
    one piece; a missing workspace and a too-tall split grid refused."""
    from runtime_fakes import H200
    from drvgemm.ladders.gemm import split_k
    from drvgemm.ladders.gemm.host import MAX_GRID_Y
    from drvgemm.ladders.gemm.registry import by_name
    monkeypatch.setattr(driver, "device", lambda *a: H200)
    monkeypatch.setattr(split_k, "reduce_kernel",
                        lambda out="fp32", deep=False: f"reduce:{out}" + (":deep" if deep else ""))

    class Build(str):
        split_k = True
    split_build, unsplit = Build("split"), "unsplit"
    monkeypatch.setattr(split_k, "_split_build", lambda r, aligned, narrow: split_build)
    import dataclasses
    from drvgemm.ladders.gemm.registry import SIMT_SPLITS
    r = dataclasses.replace(by_name()["08_warp_tiled"], splits=SIMT_SPLITS)
    assert r.has_split_k_build and r.host_side.workspace_bytes(r, 300, 260, 4) == \
        4 * 4 * split_k.split_stride(300, 260)
    pa, pb, pc, pw = 0x7f0000000000, 0x7f1000000000, 0x7f2000000000, 0x7f3000000000
    a, b, c = (DeviceArray((1,), np.float32, ptr=p, owner=False) for p in (pa, pb, pc))
    (k1, part), (k2, red) = r.launches(split_build, a, b, c, 300, 260, 1001, 2.0, 0.5,
                                       split=8, workspace=pw)
    # 300 x 260 is fewer 4-element groups than 132 SMs' blocks of 256: the deep entry
    assert k1 is split_build and k2 == "reduce:fp32:deep"
    assert part.grid == r.grid(300, 260)[:2] + (8,) and part.block == tuple(r.block)
    assert part.args == (a, b, pw, 300, 260, 1001, 1.0, 0.0)
    assert red.args == (pw, c, 300 * 260, split_k.split_stride(300, 260), 8, 2.0, 0.5)
    # the unsplit build passed for pieces: the split build is compiled instead
    (k1, _), _ = r.launches(unsplit, a, b, c, 300, 260, 1001, 1.0, 0.0, split=8, workspace=pw)
    assert k1 is split_build
    # 12 pieces asked of K = 17 (3 k-tiles of 8): 3
    (_, part), (_, red) = r.launches(split_build, a, b, c, 300, 260, 17, 1.0, 0.0, split=12,
                                     workspace=pw)
    assert part.grid[2] == 3 and red.args[4] == 3
    assert r.host_side.split_counts(r, 300, 260, 17) == (1,)   # 3 k-tiles: no piece of 16
    assert r.host_side.split_counts(r, 300, 260, 400) == (1, 2, 3)   # 50 k-tiles
    # one k-tile: K in one piece, by the unsplit build only
    (kern, cfg), = r.launches(unsplit, a, b, c, 300, 260, 8, 1.0, 0.0, split=4, workspace=pw)
    assert kern == "unsplit" and cfg.args[2] is c
    with pytest.raises(ValueError, match="SPLIT_K=0 build"):
        r.launches(split_build, a, b, c, 300, 260, 8, 1.0, 0.0, split=4, workspace=pw)
    with pytest.raises(ValueError, match="workspace"):
        r.launches(split_build, a, b, c, 300, 260, 1001, 1.0, 0.0, split=4)
    with pytest.raises(ValueError, match="split 1 takes any M"):
        r.launches(split_build, a, b, c, (MAX_GRID_Y + 1) * r.tile_m, 8, 1001, 1.0, 0.0,
                   split=2, workspace=pw)
    with pytest.raises(ValueError, match="does not split K"):
        by_name()["01_naive"].launches(unsplit, a, b, c, 8, 8, 64, 1.0, 0.0, split=2)


# ---------------------------------------------------------------------------
# gemm() / softmax() with host operands and a stream: every copy on that
# stream, and only that stream waited for (defect 2), on the stand-in driver
# ---------------------------------------------------------------------------
@pytest.fixture
def launching(monkeypatch):
    from drvgemm.runtime import launch as lm
    fake = runtime_fakes.install(monkeypatch, runtime_fakes.LaunchingDriver())
    monkeypatch.setattr(lm, "_fast_address", None)
    monkeypatch.setattr(lm, "_launch_fn", None)
    monkeypatch.setattr(lm, "_cu_streams", {})
    from drvgemm.runtime import kernel as km
    km._forget_loaded_kernels()        # cached kernels: launchers bound to an earlier driver
    yield fake
    km._forget_loaded_kernels()


def _ordered_on(fake, stream):
    """The copies and launches of one call, as (call, stream)."""
    out = []
    for c in fake.calls:
        if c[0] in ("cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync"):
            out.append((c[0], c[3]))
        elif c[0] in ("cuLaunchKernel", "cuStreamSynchronize", "cuMemsetD8Async"):
            out.append((c[0], c[-1]))
        elif c[0] in ("cuMemcpyHtoD", "cuMemcpyDtoH", "cuCtxSynchronize"):
            out.append((c[0], None))
    return out


def test_gemm_with_host_operands_orders_every_copy_on_the_callers_stream(launching):
    from drvgemm.ladders.gemm.dispatch import gemm
    a = np.ones((40, 24), np.float32)
    b = np.ones((24, 8), np.float32)
    c = np.zeros((40, 8), np.float32)
    out = gemm(a, b, c, beta=0.5, kernel="04_reg_tiled", stream=0x77)
    assert out is c
    seq = _ordered_on(launching, 0x77)
    assert seq == [("cuMemcpyHtoDAsync", 0x77)] * 3 + [("cuLaunchKernel", 0x77),
                                                       ("cuMemcpyDtoHAsync", 0x77),
                                                       ("cuStreamSynchronize", 0x77)], seq
    launching.calls.clear()
    gemm(a, b, kernel="04_reg_tiled")                       # no stream: the legacy stream
    assert _ordered_on(launching, 0) == [("cuMemcpyHtoD", None), ("cuMemcpyHtoD", None),
                                         ("cuLaunchKernel", 0), ("cuMemcpyDtoH", None)]


def test_softmax_with_host_input_orders_every_copy_on_the_callers_stream(launching):
    from drvgemm.ladders.softmax.dispatch import softmax
    x = np.zeros((16, 300), np.float32)
    y = softmax(x, stream=0x99)
    assert isinstance(y, np.ndarray) and y.shape == x.shape
    seq = _ordered_on(launching, 0x99)
    assert seq == [("cuMemcpyHtoDAsync", 0x99), ("cuLaunchKernel", 0x99),
                   ("cuMemcpyDtoHAsync", 0x99), ("cuStreamSynchronize", 0x99)], seq


def test_gemm_of_a_dlpack_producer_returns_the_callers_kind(launching):
    from drvgemm.ladders.gemm.dispatch import gemm
    from drvgemm.runtime import dlpack

    class Producer:                     # a DLPack-only CUDA array
        def __init__(self, shape):
            self.mem = drvgemm.empty(shape, np.float32)
        def __dlpack_device__(self):
            return (dlpack.KDL_CUDA, 0)
        def __dlpack__(self, stream=None, max_version=None):
            return dlpack.make_capsule(self.mem.ptr, self.mem.shape, np.float32, self)

    out = gemm(Producer((32, 16)), Producer((16, 8)), kernel="04_reg_tiled")
    assert isinstance(out, DeviceArray) and out.shape == (32, 8)
    assert [c[0] for c in launching.calls if "Launch" in c[0]] == ["cuLaunchKernel"]
    assert not any(c[0].startswith("cuMemcpy") for c in launching.calls)   # no copies


def test_import_leaves_ml_dtypes_until_a_bfloat16_is_asked_for():
    """ml_dtypes' import took ~0.5 s of the 0.8 s of ``import drvgemm``, paid by
    every command and child process: it now waits for the first bfloat16,
    and the dtype questions that do not need it answer without it."""
    import subprocess
    code = ("import sys, numpy as np, drvgemm\n"
            "from drvgemm.runtime import dtypes\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported with drvgemm'\n"
            "assert dtypes.precision_of(np.float16) == 'fp16'\n"
            "assert dtypes.precision_of(np.float64) is None\n"
            "assert dtypes.precision_of('bfloat16') == 'bf16'\n"
            "assert not dtypes.is_bf16(np.int16)\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported by a question about another type'\n"
            # sizes of a bf16 element: the compile report's softmax catalogue asks
            # them, inside the kernel set's timed warm start (tests/test_compiler.py)
            "from drvgemm.ladders.softmax import registry as sr\n"
            "assert dtypes.itemsize('bf16') == 2 and sr.element_bytes('bf16') == 2\n"
            "assert sr.vec_of('bf16') == 8 and sr.catalogue()\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported for the size of a bf16'\n"
            "assert dtypes.numpy_dtype('bf16').name == 'bfloat16'\n"
            "assert 'ml_dtypes' in sys.modules\n"
            "assert dtypes.precision_of(dtypes.bf16()) == 'bf16' and dtypes.is_bf16('bfloat16')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
