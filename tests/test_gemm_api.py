"""gemm() argument checks: all raised before anything touches the GPU."""
import numpy as np
import pytest

import drvgemm
from drvgemm.ladders.gemm.registry import RUNGS


def fp32_rung():
    names = drvgemm.kernels("fp32")
    if not names:
        pytest.skip("no fp32 rung registered")
    return names[0]


@pytest.mark.parametrize("a, b, c, kw, exc, match", [
    (np.ones((4, 3), np.float64), np.ones((3, 2)), None, {}, TypeError, "float32, float16 or bfloat16"),
    (np.ones((4, 3), np.float32), np.ones((4, 2), np.float32), None, {}, ValueError,
     "inner dimensions differ"),
    (np.ones((4, 3), np.float32), np.ones((3, 2), np.float16), None, {}, TypeError,
     "same dtype"),
    (np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), np.ones((4, 3), np.float32), {},
     ValueError, "C must be 4x2"),
    (np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), None, {"beta": 1.0}, ValueError,
     "needs an input C"),
    (np.ones((4, 6), np.float32)[:, ::2], np.ones((3, 2), np.float32), None, {}, ValueError,
     "not C-contiguous"),
    (np.ones(4, np.float32), np.ones((4, 2), np.float32), None, {}, ValueError, "2-D"),
    ([[1.0]], np.ones((1, 1), np.float32), None, {}, TypeError, "numpy array, a DeviceArray"),
    (np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), None, {"kernel": "99_nope"},
     ValueError, "unknown kernel '99_nope'"),
])
def test_bad_input_is_rejected_clearly(a, b, c, kw, exc, match):
    kw = dict(kw)
    kw.setdefault("kernel", fp32_rung())
    with pytest.raises(exc, match=match):
        drvgemm.gemm(a, b, c, **kw)


def test_precision_mismatch_names_the_rung():
    wrong = [r for r in RUNGS if r.precision in ("bf16", "fp16")]
    if not wrong:
        pytest.skip("no 16-bit rung registered")
    with pytest.raises(TypeError, match=f"{wrong[0].name} takes {wrong[0].precision}"):
        drvgemm.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32),
                     kernel=wrong[0].name)


def test_empty_m_or_n_is_a_no_op_without_gpu():
    out = drvgemm.gemm(np.ones((0, 3), np.float32), np.ones((3, 4), np.float32),
                       kernel=fp32_rung())
    assert out.shape == (0, 4)
    c = np.full((5, 0), 7.0, np.float32)
    assert drvgemm.gemm(np.ones((5, 3), np.float32), np.ones((3, 0), np.float32), c,
                        kernel=fp32_rung()) is c


def test_kernels_lists_the_ladder_in_order():
    names = drvgemm.kernels()
    numbers = [int(n.split("_", 1)[0]) for n in names]
    assert numbers == sorted(numbers) and len(set(names)) == len(names)
    assert drvgemm.kernels("fp32") == ["01_naive", "02_smem_tiled", "03_coarsened",
                                       "04_reg_tiled", "05_double_buffered", "06_vectorized",
                                       "07_cp_async", "08_warp_tiled", "08_warp_tiled_64x64",
                                       "30_small_m_fp32"]
    for precision, dt in (("fp32", np.float32), ("fp16", np.float16)):
        for name in drvgemm.kernels(precision):
            # every listed name is one gemm() takes, for inputs of that precision
            # (an empty M gives the result without a GPU)
            out = drvgemm.gemm(np.ones((0, 3), dt), np.ones((3, 2), dt), kernel=name)
            assert out.shape == (0, 2)
    assert set(drvgemm.kernels("fp16")).isdisjoint(drvgemm.kernels("bf16"))
    assert sorted(sum((drvgemm.kernels(p) for p in ("fp32", "tf32", "fp16", "bf16")), [])) \
        == sorted(names)


def test_output_type_is_checked_before_the_gpu():
    import ml_dtypes
    bf = np.ones((4, 4), ml_dtypes.bfloat16)
    f32 = np.ones((4, 4), np.float32)
    with pytest.raises(TypeError, match="float32 or the inputs' own type"):
        drvgemm.gemm(bf, bf, out_dtype=np.float16, kernel="12_mma_bf16")
    with pytest.raises(TypeError, match="float32 or the inputs' own type"):
        drvgemm.gemm(f32, f32, out_dtype="bf16", kernel=fp32_rung())
    with pytest.raises(TypeError, match="12_mma_bf16 writes a float32 C.*20_tma_wgmma_bf16"):
        drvgemm.gemm(bf, bf, out_dtype="bf16", kernel="12_mma_bf16")
    with pytest.raises(TypeError, match="12_mma_bf16 writes a float32 C"):
        drvgemm.gemm(bf, bf, np.zeros((4, 4), ml_dtypes.bfloat16), kernel="12_mma_bf16")
    with pytest.raises(TypeError, match="C is float32 but out_dtype is bfloat16"):
        drvgemm.gemm(bf, bf, np.zeros((4, 4), np.float32), out_dtype="bf16")
    with pytest.raises(TypeError, match="not a dtype"):
        drvgemm.gemm(bf, bf, out_dtype=object())


def test_empty_product_has_the_requested_output_type():
    import ml_dtypes
    bf = np.ones((0, 4), ml_dtypes.bfloat16)
    out = drvgemm.gemm(bf, np.ones((4, 3), ml_dtypes.bfloat16), out_dtype="bf16",
                       kernel="20_tma_wgmma_bf16")
    assert out.shape == (0, 3) and out.dtype == ml_dtypes.bfloat16


def test_only_the_hopper_and_small_m_16bit_rungs_write_a_16bit_c():
    narrow = {r.name for r in RUNGS if r.narrow_output}
    assert {"20_tma_wgmma_bf16", "20_tma_wgmma_fp16"} <= narrow
    assert all(n.startswith(("20_tma_wgmma_", "30_small_m_")) for n in narrow)
    assert all(by_prec in ("bf16", "fp16") for by_prec in
               (r.precision for r in RUNGS if r.narrow_output))


class FakeDeviceArray:
    """A __cuda_array_interface__ object (what CuPy / PyTorch hand over) at
    a made-up address: gemm() must judge it before anything touches the GPU."""

    def __init__(self, shape, strides=None, typestr="<f4", ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 3,
                                         "strides": strides}


F32 = np.float32


@pytest.mark.parametrize("which", ["A", "B", "C"])
def test_fortran_ordered_operands_are_refused(which):
    ops = {"A": np.ones((4, 3), F32), "B": np.ones((3, 2), F32), "C": np.ones((4, 2), F32)}
    ops[which] = np.asfortranarray(ops[which])
    assert not ops[which].flags.c_contiguous
    with pytest.raises(ValueError, match=f"{which} is not C-contiguous"):
        drvgemm.gemm(ops["A"], ops["B"], ops["C"], kernel=fp32_rung())


def test_a_single_row_or_column_in_fortran_order_is_contiguous_and_accepted():
    # (1, K) and (K, 1) arrays are both C- and F-contiguous: nothing to refuse;
    # an empty M makes the call complete without a GPU.
    out = drvgemm.gemm(np.ones((0, 3), F32, order="F"), np.ones((3, 1), F32, order="F"),
                       kernel=fp32_rung())
    assert out.shape == (0, 1)


@pytest.mark.parametrize("which, shape, strides", [
    ("A", (4, 3), (4, 16)),        # transposed (column-major) view
    ("B", (3, 2), (4, 12)),
    ("A", (4, 3), (16, 4)),        # padded rows (a slice of a wider matrix)
    ("C", (4, 2), (16, 4)),
    ("C", (4, 2), (4, 16)),
    ("B", (3, 2), (16, 8)),        # every other column
])
def test_cuda_array_interface_strides_are_checked(which, shape, strides):
    ops = {"A": FakeDeviceArray((4, 3)), "B": FakeDeviceArray((3, 2)),
           "C": FakeDeviceArray((4, 2))}
    ops[which] = FakeDeviceArray(shape, strides)
    with pytest.raises(ValueError, match=rf"{which} has strides \({strides[0]}, {strides[1]}\)"):
        drvgemm.gemm(ops["A"], ops["B"], ops["C"], kernel=fp32_rung())


@pytest.mark.parametrize("a_dev, b_dev, c_dev", [
    (False, True, None), (True, False, None), (False, False, True), (True, True, False),
    (False, True, False), (True, False, True),
])
def test_host_and_device_operands_are_not_mixed(a_dev, b_dev, c_dev):
    a = FakeDeviceArray((4, 3)) if a_dev else np.ones((4, 3), F32)
    b = FakeDeviceArray((3, 2)) if b_dev else np.ones((3, 2), F32)
    c = None if c_dev is None else (FakeDeviceArray((4, 2)) if c_dev else np.ones((4, 2), F32))
    with pytest.raises(TypeError, match="must all be host .numpy. arrays or all device arrays"):
        drvgemm.gemm(a, b, c, kernel=fp32_rung())
