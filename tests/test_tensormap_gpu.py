"""TensorMap's rule checker against the driver's own verdict: for many random
maps near every documented limit, ``tiled_map_problem`` must say "legal"
exactly when ``cuTensorMapEncodeTiled`` returns CUDA_SUCCESS; and a TMA
kernel of one's own, written for nvcc, launched with a drvgemm.TensorMap.
GPU only."""
from pathlib import Path
import random

import numpy as np
import pytest

import drvgemm
from drvgemm.runtime import driver, tensormap
from drvgemm.runtime.tensormap import TensorMap, tiled_map_problem

pytestmark = pytest.mark.gpu

SEED = 20240615


def _pick(rng, options, weights=None):
    return rng.choices(options, weights)[0]


def _random_map(rng, base):
    rank = _pick(rng, [1, 2, 3, 4, 5, 6], [2, 4, 4, 2, 2, 1])
    dtype = _pick(rng, list(tensormap.ELEMENT_TYPES))
    esize = tensormap.ELEMENT_TYPES[dtype][1]
    interleave = _pick(rng, [0, 16, 32], [6, 2, 2])
    swizzle = _pick(rng, [0, 32, 64, 128])
    align = _pick(rng, [0, 8, 16, 32, 48], [4, 1, 2, 2, 1])
    dims = [_pick(rng, [1, 2, 7, 64, 1000, 2**32, 2**32 + 1], [2, 2, 2, 4, 2, 1, 1])
            for _ in range(rank)]
    unit = _pick(rng, [16, 32], [3, 1])
    strides = [_pick(rng, [unit * rng.randint(1, 64), unit * rng.randint(1, 4096), 0, 8, 24,
                           2**40 - 16, 2**40, rng.randint(1, 10**6)],
                     [6, 4, 1, 1, 1, 1, 1, 1])
               for _ in range(rank - 1)]
    if rng.random() < 0.1 and rank > 1:
        strides = strides[:-1]                       # wrong count
    row16 = max(1, 16 // esize)
    box = [_pick(rng, [1, 2, row16, row16 * 2, 32 // esize or 1, 64 // esize or 1,
                       128 // esize or 1, 256 // esize, 256, 257, 0],
                 [1, 1, 3, 2, 2, 2, 2, 1, 1, 1, 1]) for _ in range(rank)]
    es = [_pick(rng, [1, 2, 8, 9, 0], [8, 2, 1, 1, 1]) for _ in range(rank)]
    l2 = _pick(rng, [0, 64, 128, 256])
    oob = _pick(rng, ["zero", "nan"], [3, 1])
    return dict(dtype=dtype, address=base + align, dims=dims, strides=strides, box=box,
                element_strides=es, interleave=interleave, swizzle=swizzle, l2_promotion=l2,
                oob_fill=oob)


def _driver_accepts(d, m) -> tuple[bool, str]:
    tm = object.__new__(TensorMap)      # the same arguments, none of our checks
    tm.dtype = m["dtype"]
    tm._enum = tensormap.ELEMENT_TYPES[m["dtype"]][0]
    tm.address, tm.dims, tm.strides, tm.box = m["address"], m["dims"], m["strides"], m["box"]
    tm.element_strides, tm.interleave, tm.swizzle = m["element_strides"], m["interleave"], \
        m["swizzle"]
    tm.l2_promotion, tm.oob_fill = m["l2_promotion"], m["oob_fill"]
    args = list(tm.driver_args(d))
    args[1] = len(m["dims"])
    res = d.cuTensorMapEncodeTiled(*args)
    return res[0] == 0, getattr(res[0], "name", str(res[0]))


def test_checker_agrees_with_the_driver_on_random_maps(gpu):
    if gpu.cc < (9, 0):
        pytest.skip("tensor maps need sm_90")
    d = driver.bindings()
    buf = drvgemm.empty((1 << 20,), np.uint8)
    rng = random.Random(SEED)
    disagree, legal = [], 0
    for _ in range(3000):
        m = _random_map(rng, buf.ptr)
        problem = tiled_map_problem(m["dtype"], m["address"], m["dims"], m["strides"], m["box"],
                                    m["element_strides"], interleave=m["interleave"],
                                    swizzle=m["swizzle"], l2_promotion=m["l2_promotion"],
                                    oob_fill=m["oob_fill"])
        if len(m["dims"]) > 5 or len(m["strides"]) != len(m["dims"]) - 1 or \
                len(m["box"]) != len(m["dims"]):
            assert problem is not None       # the driver reads past its arrays here: not asked
            continue
        ok, code = _driver_accepts(d, m)
        legal += ok
        if ok != (problem is None):
            disagree.append((m, code, problem))
    assert legal > 100, f"only {legal} legal maps drawn (seed {SEED})"
    # The contract: every map the driver accepts is accepted (a false refusal is
    # the bug this checker exists to avoid). The driver also refuses maps for
    # rules it does not document (seen: rank-1 maps with a box wider than the
    # tensor, some swizzled rank-1 maps); those reach the driver, whose error is
    # raised as a CudaError naming the map, so they are counted, not failed.
    refused_wrongly = [(m, code, p) for m, code, p in disagree if code == "CUDA_SUCCESS"]
    assert not refused_wrongly, (
        f"seed {SEED}: {len(refused_wrongly)} maps the driver accepts were refused, e.g.\n"
        + "\n".join(f"  checker {p!r}: {m}" for m, code, p in refused_wrongly[:10]))
    passed_to_driver = len(disagree) - len(refused_wrongly)
    print(f"seed {SEED}: {legal} legal maps; {passed_to_driver} refused by the driver only")


def test_rank3_map_with_smaller_middle_stride_encodes(gpu):
    if gpu.cc < (9, 0):
        pytest.skip("tensor maps need sm_90")
    buf = drvgemm.empty((64 * 8 * 1024 * 2,), np.uint8)
    m = TensorMap(buf.ptr, "bf16", (64, 8, 1024), (131072, 128), (64, 8, 64))
    assert len(m.encode().param_bytes) == 128


def test_a_tma_kernel_of_ones_own_takes_a_tensor_map(gpu):
    """tests/data/byok/tma_tile.cu as nvcc users write it (<cuda.h>'s
    CUtensorMap by value, libcu++'s bulk tensor copy, clusters of 2): every
    16 x 32 box of a 40 x 72 matrix lands where it was, the boxes' overhang
    past the matrix (and a whole column of boxes past it) as zeros."""
    if gpu.cc < (9, 0):
        pytest.skip("tensor maps need sm_90")
    src = Path(__file__).resolve().parent / "data" / "byok" / "tma_tile.cu"
    k = drvgemm.compile(src, "tile_copy<16, 32>")
    rows, cols = 40, 72
    m = np.random.default_rng(7).random((rows, cols), dtype=np.float32)
    dm = drvgemm.to_device(m)
    box = drvgemm.TensorMap(dm.ptr, "fp32", (cols, rows), (cols * 4,), (32, 16), swizzle=0)
    grid = (4, 3)                       # 3 box columns cover 72; the cluster of 2 wants 4
    out = drvgemm.empty((grid[1] * 16, grid[0] * 32), np.float32)
    drvgemm.launch(k, grid=grid, block=128, args=[box, out, grid[0] * 32])
    want = np.zeros(out.shape, np.float32)
    want[:rows, :cols] = m
    np.testing.assert_array_equal(out.to_host(), want)
