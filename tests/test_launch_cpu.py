"""Argument checking and packing, the no-GPU paths and the CLI: CPU only."""
import struct
import subprocess
import sys

import numpy as np
import pytest

import drvgemm
from drvgemm.driver import DeviceArray
from drvgemm.kernel import parse_params
from drvgemm.launch import _Packer


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
    from drvgemm.launch import _packer
    k = drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90")
    main = _packer(k, threading.get_ident())
    assert _packer(k, threading.get_ident()) is main
    seen = []
    t = threading.Thread(target=lambda: seen.append(_packer(k, threading.get_ident())))
    t.start()
    t.join()
    assert seen[0] is not main and seen[0].array_addr != main.array_addr


def test_closed_stream_is_refused_not_replaced_by_the_default_stream():
    from drvgemm.driver import Stream, stream_handle
    s = Stream.__new__(Stream)
    s.ptr = 0
    with pytest.raises(ValueError, match="stream was closed"):
        stream_handle(s)
