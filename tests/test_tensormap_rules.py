"""TensorMap's rule checker against a table of maps the driver's documented
requirements (cuTensorMapEncodeTiled) allow or refuse; CPU only. The GPU
test (test_tensormap_gpu.py) asks the driver itself about random maps."""
import sys
from pathlib import Path

import pytest

from drvgemm.runtime import tensormap
from drvgemm.runtime.tensormap import TensorMap, tiled_map_problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
import runtime_fakes  # noqa: E402

A = 0x7f0000000000   # 256-byte aligned

LEGAL = [
    # The public Hopper kernel's map: a middle dimension with a smaller stride
    # than the outer one (not monotone; the driver does not care).
    dict(dtype="bf16", dims=(64, 8, 1024), strides=(131072, 128), box=(64, 8, 64)),
    dict(dtype="fp32", dims=(4096,), strides=(), box=(256,), swizzle=0),                 # rank 1
    dict(dtype="fp16", dims=(8, 4, 4, 4, 4), strides=(16, 64, 256, 1024),
         box=(8, 4, 4, 4, 4), swizzle=0),                                               # rank 5
    dict(dtype="uint8", dims=(2**32, 2), strides=(2**32,), box=(128, 1)),                # 2^32
    dict(dtype="fp32", dims=(4, 2), strides=(2**40 - 16,), box=(4, 1), swizzle=0),       # < 2^40
    dict(dtype="fp32", dims=(64, 64), strides=(16,), box=(32, 64)),    # rows overlap: legal
    dict(dtype="bf16", dims=(64, 64), strides=(128,), box=(16, 64), swizzle=32),         # 32 B
    dict(dtype="bf16", dims=(64, 64), strides=(128,), box=(32, 64), swizzle=64),         # 64 B
    dict(dtype="fp32", dims=(64, 64), strides=(256,), box=(4, 8), swizzle=0),            # 16 B row
    dict(dtype="fp32", dims=(64, 64), strides=(256,), box=(32, 64),
         element_strides=(1, 8)),
    dict(dtype="bf16", dims=(64, 64), strides=(128,), box=(64, 64), swizzle="128B_ATOM_32B"),
    dict(dtype="fp16", dims=(8, 16, 16), strides=(16, 256), box=(8, 16, 16), interleave=16,
         swizzle=0),
    # Interleaved: the inner box row need not be a multiple of 16 bytes.
    dict(dtype="fp16", dims=(4, 16, 16), strides=(16, 256), box=(4, 16, 16), interleave=16,
         swizzle=128),
    dict(dtype="fp16", dims=(16, 16, 16), strides=(32, 512), box=(16, 16, 16), interleave=32,
         swizzle=32),
    # 32-byte interleave with a 128-byte swizzle: the H200's driver encodes it
    # (tests/test_tensormap_gpu.py's random maps found it).
    dict(dtype="uint64", dims=(64, 16, 7), strides=(11968, 191488), box=(8, 16, 7),
         interleave=32, swizzle=128),
    dict(dtype="fp32", dims=(64, 64), strides=(256,), box=(32, 64), l2_promotion=0),
    dict(dtype="tfloat32", dims=(64, 64), strides=(256,), box=(32, 64), oob_fill="nan"),
    dict(dtype="fp64", dims=(64, 64), strides=(512,), box=(16, 64), oob_fill="nan"),
    dict(dtype="int64", dims=(64, 64), strides=(512,), box=(16, 64)),
]

ILLEGAL = [
    (dict(address=A + 8), "16-byte aligned"),
    (dict(interleave=32, swizzle=32, dims=(16, 16, 16), strides=(32, 512), box=(16, 16, 16),
          address=A + 16, dtype="fp16"), "32-byte aligned"),
    (dict(dims=(64,) * 6, strides=(16,) * 5, box=(1,) * 6), "rank must be 1..5"),
    (dict(dims=(), strides=(), box=()), "rank must be 1..5"),
    (dict(dims=(2**32 + 1, 2)), "dims\\[0\\].*1..2\\^32"),
    (dict(dims=(64, 0)), "dims\\[1\\]"),
    (dict(strides=(8200,)), "strides\\[0\\] = 8200.*multiples of 16"),
    (dict(strides=(2**40,)), "below 2\\^40"),
    (dict(strides=(128, 128)), "needs 1 strides"),
    (dict(box=(64, 257)), "box\\[1\\] = 257.*1..256"),
    (dict(box=(64, 0)), "box\\[1\\] = 0"),
    (dict(box=(64,)), "box must have 2"),
    (dict(box=(4, 64), swizzle=0), "box\\[0\\] = 4.*multiple of 16 bytes"),
    (dict(box=(128, 64)), "256 bytes exceeds the 128-byte swizzle span"),
    (dict(box=(32, 64), swizzle=32), "64 bytes exceeds the 32-byte swizzle span"),
    (dict(box=(128, 64), swizzle="128B_ATOM_64B"), "128-byte swizzle span"),
    (dict(element_strides=(1, 9)), "element_strides\\[1\\] = 9"),
    (dict(element_strides=(0, 1)), "element_strides\\[0\\] = 0"),
    (dict(element_strides=(1,)), "element_strides must have 2"),
    (dict(swizzle=16), "swizzle = 16"),
    (dict(swizzle="256B"), "swizzle"),
    (dict(interleave=16, swizzle=0), "interleave needs rank >= 3"),
    (dict(interleave=8), "interleave = 8"),
    (dict(interleave=32, swizzle=32, dims=(16, 16, 16), strides=(48, 512), box=(16, 16, 16)),
     "multiples of 32"),
    (dict(l2_promotion=32), "l2_promotion = 32"),
    (dict(oob_fill="nan", dtype="uint16"), "floating-point"),
    (dict(oob_fill="inf"), "oob_fill"),
    (dict(dtype="complex64"), "not supported"),
    (dict(dtype="16u4_align8b"), "packed sub-byte"),
]

BASE = dict(dtype="bf16", address=A, dims=(4096, 4096), strides=(8192,), box=(64, 128))


def _map(**kw):
    args = {**BASE, **kw}
    return (args.pop("dtype"), args.pop("address"), args.pop("dims"), args.pop("strides"),
            args.pop("box"), args)


@pytest.mark.parametrize("kw", LEGAL, ids=lambda kw: f"{kw['dtype']}-{kw['dims']}")
def test_legal_maps_pass(kw):
    dtype, address, dims, strides, box, rest = _map(**kw)
    rest.setdefault("swizzle", 128)
    assert tiled_map_problem(dtype, address, dims, strides, box, **rest) is None
    m = TensorMap(address, dtype, dims, strides, box, **{**{"l2_promotion": 256}, **rest})
    assert m.dims == tuple(dims) and m.strides == tuple(strides)


@pytest.mark.parametrize("kw, match", ILLEGAL, ids=[m for _, m in ILLEGAL])
def test_illegal_maps_name_the_rule(kw, match):
    dtype, address, dims, strides, box, rest = _map(**kw)
    rest.setdefault("swizzle", 128)
    problem = tiled_map_problem(dtype, address, dims, strides, box, **rest)
    assert problem is not None and __import__("re").search(match, problem), problem
    with pytest.raises(ValueError, match=match):
        TensorMap(address, dtype, dims, strides, box, **rest)


def test_matrix_map_still_refuses_overlapping_rows():
    with pytest.raises(ValueError, match="rows would overlap"):
        tensormap.matrix_map(A, "bf16", 64, 64, 64, 64, 64)


def test_encode_passes_interleave_swizzle_and_fill_to_the_driver(monkeypatch):
    got = {}

    class D(runtime_fakes.FakeDriver):
        def cuTensorMapEncodeTiled(self, *args):
            got["args"] = args
            return (0, self._real.CUtensorMap())

    d = D()
    monkeypatch.setattr(tensormap.driver, "bindings", lambda: d)
    m = TensorMap(A, "fp16", (16, 16, 16), (32, 512), (16, 16, 16), interleave=32, swizzle=32,
                  l2_promotion=128, oob_fill="nan")
    assert len(m.param_bytes) == 128
    dt, rank, addr, dims, strides, box, es, il, swz, l2, fill = got["args"]
    assert (dt.name, rank, addr) == ("CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 3, A)
    assert [int(x) for x in dims] == [16, 16, 16] and [int(x) for x in strides] == [32, 512]
    assert (il.name, swz.name, l2.name, fill.name) == (
        "CU_TENSOR_MAP_INTERLEAVE_32B", "CU_TENSOR_MAP_SWIZZLE_32B",
        "CU_TENSOR_MAP_L2_PROMOTION_L2_128B", "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA")
    m2 = TensorMap(A, "bf16", (64, 64), (128,), (64, 64), swizzle="128B_ATOM_32B")
    assert m2.driver_args(d)[8].name == "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B"
