"""Argument checking and packing, the no-GPU paths and the CLI: CPU only."""
import struct
import subprocess
import sys

import numpy as np
import pytest

import drvgemm
from drvgemm.runtime.driver import DeviceArray
from drvgemm.runtime.kernel import parse_params
from drvgemm.runtime.launch import _Packer


@pytest.fixture(scope="module")
def saxpy():
    return drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90")


def fake_ptr(addr):
    return DeviceArray((4,), np.float32, ptr=addr, owner=False)


def test_signature_from_ptx_with_source_names(saxpy):
    assert saxpy.signature() == "saxpy(a: .f32, x: .u64, y: .u64, n: .s32)"


def test_parse_params_handles_ptr_annotations_and_byte_arrays():
    ptx = """.visible .entry k(
        .param .u64 .ptr .global .align 4 k_param_0,
        .param .align 64 .b8 k_param_1[128],
        .param .f32 k_param_2
    )
    { ret; }"""
    p = parse_params(ptx, "k")
    assert [(x.ptx_type, x.size, x.align) for x in p] == [("u64", 8, 8), ("b8[128]", 128, 64),
                                                        ("f32", 4, 4)]
    assert p[0].pointer_hint and p[1].is_bytes


@pytest.mark.parametrize("ptx", [
    # the entry named first inside a line comment, then for real
    "// .entry k(.param .u32 wrong)\n.visible .entry k(\n .param .u64 k_a, // a ) here\n"
    " .param .f32 k_b\n)\n{ ret; }",
    # a block comment inside the parameter list
    ".visible .entry k(\n .param .u64 k_a, /* ) { */\n .param .f32 k_b\n)\n{ ret; }",
    # a block comment before the entry, holding another .entry k
    "/* .entry k(.param .u32 wrong) */\n.visible .entry k(.param .u64 k_a, .param .f32 k_b)\n{}",
    # another entry first, whose name k is a prefix of
    ".visible .entry kk(.param .u32 kk_x)\n{}\n.visible .entry k(.param .u64 k_a,\n"
    ".param .f32 k_b){}",
])
def test_parse_params_skips_comments_and_other_entries(ptx):
    assert [(x.name, x.ptx_type) for x in parse_params(ptx, "k")] == [("k_a", "u64"),
                                                                      ("k_b", "f32")]


@pytest.mark.parametrize("ptx", [".visible .entry k\n.maxntid 32, 1, 1\n{ ret; }",
                                 ".visible .entry k()\n{ ret; }", ".entry k{ret;}"])
def test_parse_params_of_an_entry_without_parameters(ptx):
    assert parse_params(ptx, "k") == []


def test_parse_params_names_a_missing_entry():
    with pytest.raises(ValueError, match="no .entry k in the PTX"):
        parse_params("// .entry k(.param .u32 x)\n.visible .entry kk()\n{}", "k")


def test_pack_layout_and_float32_conversion(saxpy):
    pk = _Packer(saxpy.params)
    pk.pack([0.1, fake_ptr(0x1000), 0x2000, -7])
    a, _, x, y, n = struct.unpack("<f4sQQi", bytes(pk.buf)[:28])
    assert a == np.float32(0.1)  # a Python float goes to .f32 as float32, not double
    assert (x, y, n) == (0x1000, 0x2000, -7)


class FakeCai:
    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0xABC0, False),
                                "version": 3}


def test_cuda_array_interface_objects_are_pointers(saxpy):
    pk = _Packer(saxpy.params)
    pk.pack([1.0, FakeCai(), FakeCai(), 4])
    assert struct.unpack_from("<Q", bytes(pk.buf), 8)[0] == 0xABC0


@pytest.mark.parametrize("args, exc, match", [
    ([1.0, 0, 0], TypeError, r"takes 4 arguments \(a: .f32, x: .u64, y: .u64, n: .s32\), got 3"),
    ([1.0, 0, 0, 1, 2], TypeError, "got 5"),
    ([fake_ptr(16), 0, 0, 1], TypeError, r"parameter 0 'a' \(.f32\) is a scalar, but got a device"),
    ([1.0, 0, 0, fake_ptr(16)], TypeError, "parameter 3 'n'.*pointer where a scalar belongs"),
    ([1.0, 0.5, 0, 1], TypeError, "parameter 1 'x'.*device pointer"),
    ([1.0, np.zeros(4, np.float32), 0, 1], TypeError, "host \\(numpy\\) array.*to_device"),
    ([1.0, "x", 0, 1], TypeError, "parameter 1 'x'.*not a device array"),
    ([1.0, 0, 0, 2**31], ValueError, r"parameter 3 'n' \(.s32\): 2147483648 is out of range"),
    ([1.0, 0, 0, -2**31 - 1], ValueError, "out of range"),
    ([1.0, 0, 0, 3.0], TypeError, "expects an integer, got float"),
    (["one", 0, 0, 1], TypeError, "expects a float, got str"),
    ([1e40, 0, 0, 1], ValueError, "overflows float32"),
])
def test_bad_arguments_name_the_parameter(saxpy, args, exc, match):
    with pytest.raises(exc, match=match):
        _Packer(saxpy.params).pack(args)


def test_unsigned_slot_rejects_negative():
    k = drvgemm.compile('extern "C" __global__ void u(unsigned n, float* p) {}', "u")
    with pytest.raises(ValueError, match=r"parameter 0 'n' \(.u32\): -1 is out of range"):
        _Packer(k.params).pack([-1, 0])


def test_no_gpu_is_a_clean_reason_not_a_crash():
    if drvgemm.has_gpu():
        pytest.skip("a GPU is present")
    reason = drvgemm.no_gpu_reason()
    assert reason and "driver" in reason
    with pytest.raises(drvgemm.NoDeviceError):
        drvgemm.device()


@pytest.mark.xdist_group("kernel_set")    # compiles the whole kernel set: see test_compiler.py
def test_cli_without_gpu_prints_compile_report():
    if drvgemm.has_gpu():
        pytest.skip("a GPU is present: the main job would benchmark")
    out = subprocess.run([sys.executable, "-m", "drvgemm.cli"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert out.stdout.startswith("no GPU found")
    header = out.stdout.splitlines()[1].split()
    assert header[:5] == ["kernel", "arch", "regs", "spill", "st"]
    assert "saxpy_ptx" in out.stdout and "FAILED" not in out.stdout


def test_cli_errors_are_one_line():
    out = subprocess.run([sys.executable, "-m", "drvgemm.cli", "bench", "--sizes", "x"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "sizes must be integers" in out.stderr


class FakeLaunch:
    """Stands in for cuda.bindings' cuLaunchKernel: records each call and
    the packed parameter values it would have read."""

    def __init__(self, packer, fmt):
        self.calls, self.packer, self.fmt = [], packer, fmt

    def __call__(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls.append(((gx, gy, gz), (bx, by, bz), smem, stream, params,
                           struct.unpack(self.fmt, bytes(self.packer.buf)[:struct.calcsize(self.fmt)])))
        return (0,)


def test_generated_launcher_packs_and_calls_with_the_bound_shape(saxpy):
    pk = _Packer(saxpy.params)
    fake = FakeLaunch(pk, "<f4xQQi")
    run = pk.make_runner(fake, "fn", 3, 2, 1, 128, 1, 1, 4096, None)
    assert run([0.5, fake_ptr(0x1000), FakeCai(), 9]) == 0
    assert run((2.0, 0x10, 0x20, -1)) == 0
    (g, b, smem, stream, params, vals), second = fake.calls
    assert (g, b, smem, stream, params) == ((3, 2, 1), (128, 1, 1), 4096, None, pk.array_addr)
    assert vals == (0.5, 0x1000, 0xABC0, 9)
    assert second[5] == (2.0, 0x10, 0x20, -1)


@pytest.mark.parametrize("args, exc, match", [
    ([1.0, 0, 0], TypeError, "takes 4 arguments"),
    ((1.0, 0.5, 0, 1), TypeError, "parameter 1 'x'.*device pointer"),
    ((1.0, 0, 0, 2**31), ValueError, "parameter 3 'n'.*out of range"),
    ((1e40, 0, 0, 1), ValueError, "overflows float32"),
    (7, TypeError, "args must be a sequence"),
])
def test_generated_launcher_names_the_bad_argument_and_does_not_launch(saxpy, args, exc, match):
    pk = _Packer(saxpy.params)
    fake = FakeLaunch(pk, "<f4xQQi")
    run = pk.make_runner(fake, "fn", 1, 1, 1, 32, 1, 1, 0, None)
    with pytest.raises(exc, match=match):
        run(args)
    assert fake.calls == []


def test_each_thread_packs_into_its_own_buffer(saxpy):
    import threading
    from drvgemm.runtime.launch import _packer
    k = drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90")
    main = _packer(k, threading.get_ident())
    assert _packer(k, threading.get_ident()) is main
    seen = []
    t = threading.Thread(target=lambda: seen.append(_packer(k, threading.get_ident())))
    t.start()
    t.join()
    assert seen[0] is not main and seen[0].array_addr != main.array_addr


def test_closed_stream_is_refused_not_replaced_by_the_default_stream():
    from drvgemm.runtime.driver import Stream, stream_handle
    s = Stream.__new__(Stream)
    s.ptr = 0
    with pytest.raises(ValueError, match="stream was closed"):
        stream_handle(s)


# ---------------------------------------------------------------------------
# The C fast path (drvgemm._fastlaunch), driven with a stand-in for the
# driver's cuLaunchKernel: a ctypes callback that records what it was given.
# ---------------------------------------------------------------------------
import ctypes  # noqa: E402

_LAUNCH_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7),
                             ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


class FakeDriver:
    """cuLaunchKernel's stand-in: reads saxpy's four slots (f32, u64, u64,
    s32) through the parameter array, as the driver would."""

    def __init__(self, result=0):
        self.calls, self.result = [], result
        self.fn = _LAUNCH_T(self._launch)
        self.address = ctypes.cast(self.fn, ctypes.c_void_p).value

    def _launch(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        slot = lambda i, t: ctypes.cast(params[i], ctypes.POINTER(t)).contents.value  # noqa: E731
        self.calls.append((f, (gx, gy, gz), (bx, by, bz), smem, stream,
                           (slot(0, ctypes.c_float), slot(1, ctypes.c_uint64),
                            slot(2, ctypes.c_uint64), slot(3, ctypes.c_int32))))
        return self.result


def _fast():
    from drvgemm.runtime import launch as _  # noqa: F401  (the module binds the C path)
    import sys
    fl = sys.modules["drvgemm.runtime.launch"]._fastlaunch
    if fl is None:
        pytest.skip("drvgemm.runtime._fastlaunch is not built here (no C compiler)")
    return fl


def _saxpy_launcher(saxpy, driver_fn, grid=(3, 2, 1), block=(128, 1, 1), smem=4096,
                    stream=0x55):
    import sys
    lm = sys.modules["drvgemm.runtime.launch"]
    pk = _Packer(saxpy.params)
    kinds = [lm._FAST_KINDS[p.ptx_type] for p in saxpy.params]
    return _fast().Launcher(driver_fn.address, 0x1234, grid + block, smem, stream, kinds,
                            pk.offsets, pk.fmt.size, DeviceArray, pk.packed)


def test_c_launcher_packs_every_kind_and_calls_the_driver(saxpy):
    drv = FakeDriver()
    run = _saxpy_launcher(saxpy, drv)
    assert run((0.5, fake_ptr(0x1000), 0x2000, -9)) == 0
    assert run([2, fake_ptr(0x10), FakeCai(), 2**31 - 1]) == 0   # int -> f32; a foreign array
    (f, g, b, smem, stream, vals), second = drv.calls
    assert (f, g, b, smem, stream) == (0x1234, (3, 2, 1), (128, 1, 1), 4096, 0x55)
    assert vals == (0.5, 0x1000, 0x2000, -9)
    assert second[5] == (2.0, 0x10, 0xABC0, 2**31 - 1)


@pytest.mark.parametrize("args, exc, match", [
    ((1.0, 0, 0), TypeError, "takes 4 arguments"),
    ((1.0, 0.5, 0, 1), TypeError, "parameter 1 'x'.*device pointer"),
    ((1.0, 0, 0, 2**31), ValueError, "parameter 3 'n'.*out of range"),
    ((1e40, 0, 0, 1), ValueError, "overflows float32"),
    ((1.0, 0, 0, 3.0), TypeError, "expects an integer, got float"),
    ((1.0, np.zeros(4, np.float32), 0, 1), TypeError, "host \\(numpy\\) array"),
])
def test_c_launcher_names_the_bad_argument_and_does_not_launch(saxpy, args, exc, match):
    drv = FakeDriver()
    with pytest.raises(exc, match=match):
        _saxpy_launcher(saxpy, drv)(args)
    assert drv.calls == []


def test_c_launch_dispatch_hit_miss_and_failure(saxpy):
    """drvgemm.launch in C: a cached shape launches from C; a new shape, a
    cluster launch or a stream object go to Python; a failed launch reports
    through the Python error path."""
    import sys
    lm = sys.modules["drvgemm.runtime.launch"]
    fl = _fast()
    seen = []

    class K:  # only what the C path reads
        fast_launchers = {}

    kern = K()
    drv = FakeDriver()
    kern.fast_launchers[(3, 2, 1), (128, 1, 1), 4096, None] = _saxpy_launcher(saxpy, drv)
    try:
        fl.bind(lambda *a, **k: seen.append(("slow", k)),
                lambda *a, **k: seen.append(("first", k)),
                lambda err, k, grid, block, smem: seen.append(("failed", err, k, grid, block,
                                                               smem)))
        args = (0.25, fake_ptr(0x40), 0x80, 7)
        assert fl.launch(kern, (3, 2, 1), (128, 1, 1), args, smem=4096) is None
        assert drv.calls[-1][5] == (0.25, 0x40, 0x80, 7) and seen == []
        fl.launch(kern, (3, 2, 1), (128, 1, 1), args, smem=0)            # new shape
        fl.launch(kern, (3, 2, 1), (128, 1, 1), args, smem=4096, cluster=(2, 1, 1))
        fl.launch(kern, (3, 2, 1), (128, 1, 1), args, smem=4096, stream=object())
        assert [s[0] for s in seen] == ["first", "slow", "slow"]
        assert len(drv.calls) == 1
        drv.result = 700                                                  # ILLEGAL_ADDRESS
        seen.clear()
        fl.launch(kern, (3, 2, 1), (128, 1, 1), args, smem=4096)
        # failed() gets what drvgemm.runtime.launch._fast_failed takes
        assert seen[0] == ("failed", 700, kern, (3, 2, 1), (128, 1, 1), 4096)
        assert seen[1][0] == "slow"
    finally:
        fl.bind(lm.launch_py, lm._first_launch, lm._fast_failed)


def test_launch_is_the_c_path_when_built():
    """launch_path() names the function drvgemm.launch really is: the C one
    exactly when the extension can be imported (and is not switched off)."""
    import importlib.util
    import os
    import drvgemm.runtime.launch as lm
    built = importlib.util.find_spec("drvgemm.runtime._fastlaunch") is not None
    want = "C" if built and not os.environ.get("DRVGEMM_NO_FASTLAUNCH") else "Python"
    assert drvgemm.launch_path() == want
    if want == "C":
        assert drvgemm.launch is lm._fastlaunch.launch
        assert type(drvgemm.launch).__name__ == "builtin_function_or_method"
    else:
        assert drvgemm.launch is lm.launch_py


def test_fast_path_can_be_switched_off():
    """DRVGEMM_NO_FASTLAUNCH=1: drvgemm.launch is the Python implementation."""
    import os
    env = dict(os.environ, DRVGEMM_NO_FASTLAUNCH="1")
    code = ("import drvgemm, drvgemm.runtime.launch as _; import sys; lm = sys.modules['drvgemm.runtime.launch']; "
            "print(drvgemm.launch_path(), drvgemm.launch is lm.launch_py)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Python", "True"]


def test_c_launcher_packs_a_by_value_byte_block():
    """A 128-byte slot (a TensorMap) given as bytes or as an object with
    .param_bytes is copied into the parameter block from C; anything else
    goes to the checked packer."""
    seen = []

    def launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        seen.append((ctypes.string_at(params[0], 128),
                     ctypes.cast(params[1], ctypes.POINTER(ctypes.c_uint64)).contents.value))
        return 0
    fn = _LAUNCH_T(launch)
    slow = []

    def slow_pack(args):
        slow.append(args)
        return bytes(range(128)) + (7).to_bytes(8, "little")

    class Map:
        param_bytes = b"\x5a" * 128
    run = _fast().Launcher(ctypes.cast(fn, ctypes.c_void_p).value, 0x1, (1, 1, 1, 32, 1, 1), 0,
                           0, [5, 0], [0, 128], 136, DeviceArray, slow_pack, (128, 8))
    assert run((b"\x01" * 128, 0x10)) == 0
    assert run((Map(), 0x20)) == 0
    assert seen == [(b"\x01" * 128, 0x10), (b"\x5a" * 128, 0x20)] and slow == []
    assert run((b"\x01" * 64, 0x30)) == 0                  # the wrong size: the checked packer
    assert len(slow) == 1 and seen[-1] == (bytes(range(128)), 7)
    with pytest.raises(ValueError, match="bad slot"):      # a byte slot needs its size
        _fast().Launcher(ctypes.cast(fn, ctypes.c_void_p).value, 0x1, (1, 1, 1, 32, 1, 1), 0,
                         0, [5], [0], 128, DeviceArray, slow_pack)


_ENCODE_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint,
                             ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                             ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32),
                             ctypes.POINTER(ctypes.c_uint32), ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_int)


def test_c_encoder_passes_every_field_and_the_address():
    """_fastlaunch.Encoder with a stand-in for cuTensorMapEncodeTiled: every
    field reaches the driver as given, the 128 bytes come back, a refusal
    comes back as its CUresult and a misaligned address is refused first."""
    calls = []

    def encode(out, dtype, rank, addr, dims, strides, box, estr, il, sw, l2, oob):
        calls.append((dtype, rank, addr, [dims[i] for i in range(rank)],
                      [strides[i] for i in range(rank - 1)], [box[i] for i in range(rank)],
                      [estr[i] for i in range(rank)], il, sw, l2, oob))
        if addr == 0xDEAD00:
            return 1
        ctypes.memmove(out, (addr).to_bytes(8, "little") * 16, 128)
        return 0
    fn = _ENCODE_T(encode)
    enc = _fast().Encoder(ctypes.cast(fn, ctypes.c_void_p).value, 9, (64, 1000), (1408,),
                          (64, 128), (1, 1), 0, 3, 2, 0, 16)
    raw = enc(0x7000_0100)
    assert raw == (0x7000_0100).to_bytes(8, "little") * 16
    assert calls[0] == (9, 2, 0x7000_0100, [64, 1000], [1408], [64, 128], [1, 1], 0, 3, 2, 0)
    assert enc(0xDEAD00) == 1
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        enc(0x7000_0108)
    assert len(calls) == 2



# ---------------------------------------------------------------------------
# Dependent launches (Kernel.dependent_launch): the C path calls
# cuLaunchKernelEx with programmatic stream serialization.
# ---------------------------------------------------------------------------
class _LaunchAttribute(ctypes.Structure):      # CUlaunchAttribute (cuda.h)
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):         # CUlaunchConfig (cuda.h)
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


_LAUNCH_EX_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


def test_ctypes_mirrors_have_the_driver_struct_sizes():
    assert ctypes.sizeof(_LaunchAttribute) == 72 and ctypes.sizeof(_LaunchConfig) == 56


def test_c_launcher_of_a_dependent_kernel_calls_launch_ex_with_the_attribute(saxpy):
    """Given cuLaunchKernelEx's address, a Launcher passes the launch shape,
    stream and parameters in a CUlaunchConfig with one attribute:
    PROGRAMMATIC_STREAM_SERIALIZATION (6) = 1; cuLaunchKernel is not called."""
    seen = []

    def launch_ex(cfg, f, params, extra):
        c = cfg.contents
        attrs = [(c.attrs[i].id, c.attrs[i].value) for i in range(c.num_attrs)]
        slot = lambda i, t: ctypes.cast(params[i], ctypes.POINTER(t)).contents.value  # noqa: E731
        seen.append((f, tuple(c.grid), tuple(c.block), c.smem, c.stream, attrs,
                     (slot(0, ctypes.c_float), slot(1, ctypes.c_uint64),
                      slot(2, ctypes.c_uint64), slot(3, ctypes.c_int32))))
        return 0
    ex = _LAUNCH_EX_T(launch_ex)
    plain = FakeDriver()
    import sys
    lm = sys.modules["drvgemm.runtime.launch"]
    pk = _Packer(saxpy.params)
    kinds = [lm._FAST_KINDS[p.ptx_type] for p in saxpy.params]
    fl = _fast()
    launcher = lambda attributes: fl.Launcher(  # noqa: E731
        plain.address, 0x1234, (3, 2, 1, 128, 1, 1), 4096, 0x55, kinds, pk.offsets,
        pk.fmt.size, DeviceArray, pk.packed, None, ctypes.cast(ex, ctypes.c_void_p).value,
        attributes)
    assert launcher(fl.EX_DEPENDENT)((0.5, fake_ptr(0x1000), 0x2000, -9)) == 0
    assert seen == [(0x1234, (3, 2, 1), (128, 1, 1), 4096, 0x55, [(6, 1)],
                     (0.5, 0x1000, 0x2000, -9))]
    # a cooperative launch: COOPERATIVE (2) = 1, after the serialization when both
    seen.clear()
    assert launcher(fl.EX_COOPERATIVE)((1.0, 0x10, 0x20, 3)) == 0
    assert launcher(fl.EX_DEPENDENT | fl.EX_COOPERATIVE)((1.0, 0x10, 0x20, 3)) == 0
    assert [s[5] for s in seen] == [[(2, 1)], [(6, 1), (2, 1)]]
    assert plain.calls == []
    # cuLaunchKernelEx without attributes to set, or an unknown one: refused
    for bad in (0, 4):
        with pytest.raises(ValueError, match="ex_attributes"):
            launcher(bad)


def test_c_path_keeps_cooperative_launchers_apart(saxpy, monkeypatch):
    """A cooperative launch goes through the C path too, under its own key:
    the first launch of a shape through Python (the grid checked against the
    resident blocks), the next from C with the cooperative attribute; a plain
    launch of the same shape is a different launcher."""
    import sys
    lm = sys.modules["drvgemm.runtime.launch"]
    fl = _fast()
    seen = []

    def launch_ex(cfg, f, params, extra):
        c = cfg.contents
        seen.append((tuple(c.grid), [(c.attrs[i].id, c.attrs[i].value)
                                     for i in range(c.num_attrs)]))
        return 0
    ex = _LAUNCH_EX_T(launch_ex)
    plain = FakeDriver()
    monkeypatch.setattr(lm, "_fast_address", plain.address)
    monkeypatch.setattr(lm, "_fast_ex_address", ctypes.cast(ex, ctypes.c_void_p).value)
    first = []

    def checked_first_launch(kernel, grid, block, args, **kw):
        first.append(kw.get("cooperative", False))
        key = (grid, block, kw.get("smem", 0), kw.get("stream")) + \
            (("cooperative",) if kw.get("cooperative") else ())
        kernel.fast_launchers[key] = lm._fast_launcher(kernel, grid, block, kw.get("smem", 0),
                                                       kw.get("stream"),
                                                       kw.get("cooperative", False))
    monkeypatch.setattr(lm, "_check_config",
                        lambda k, g, b, s: (4, 1, 1, 128, 1, 1, s))

    class K:  # what the C path and _fast_launcher read
        params, handle, name, dependent_launch = saxpy.params, 0x1234, "saxpy", False
        fast_launchers: dict = {}
        packers: dict = {}
    kern = K()
    args = (0.5, fake_ptr(0x1000), 0x2000, 9)
    try:
        fl.bind(lm.launch_py, checked_first_launch, lm._fast_failed)
        for _ in range(3):
            fl.launch(kern, 4, 128, args, cooperative=True)
        fl.launch(kern, 4, 128, args, cooperative=False)
        fl.launch(kern, 4, 128, args)
    finally:
        fl.bind(lm.launch_py, lm._first_launch, lm._fast_failed)
    assert first == [True, False]
    assert set(kern.fast_launchers) == {(4, 128, 0, None, "cooperative"), (4, 128, 0, None)}
    assert seen == [((4, 1, 1), [(2, 1)])] * 2
    assert len(plain.calls) == 1       # the plain shape's second launch: cuLaunchKernel


WAITS_FIRST = r'''
extern "C" __global__ void waits_first(float* y) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    y[threadIdx.x] = 1.0f;
}
extern "C" __global__ void never_waits(float* y) { y[threadIdx.x] = 2.0f; }
'''


def test_dependent_launch_is_a_bool_and_resets_the_launchers():
    mod = drvgemm.compile_module(WAITS_FIRST, ["waits_first", "never_waits"], arch="sm_90")
    k = mod["waits_first"]
    k.fast_launchers[(1,), (1,), 0, None] = object()
    k.runners[(1,), (1,), 0, 0, 0] = object()
    with pytest.raises(TypeError, match="True or False"):
        k.dependent_launch = 1
    assert k.dependent_launch is False and k.fast_launchers
    k.dependent_launch = True
    assert k.fast_launchers == {} and k.runners == {}
    # the other entry of the same module does not wait: refused, by name
    with pytest.raises(ValueError, match="never_waits.*no griddepcontrol.wait"):
        mod["never_waits"].dependent_launch = True
    assert mod["never_waits"].dependent_launch is False
