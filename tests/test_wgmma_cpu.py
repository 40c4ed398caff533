"""The TMA + wgmma rung without a GPU: it compiles for sm_90a within its
register budget, its SASS uses the Hopper units (HGMMA, UTMALDG, SYNCS,
USETMAXREG), and tensor maps are checked in Python before any driver call."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from drvgemm.ladders.gemm import hopper, split_k
from drvgemm.runtime import tensormap
from drvgemm.runtime.compiler import compile_binary, parse_resources
from drvgemm.runtime.errors import CompileError, CudaError
from drvgemm.runtime.kernel import parse_params
from drvgemm.ladders.gemm.registry import RUNGS, by_name, rung_kernel
from drvgemm.runtime.launch import _Packer


def with_knobs(name, **knobs):
    """A registered Hopper rung with some defines changed (and its shared
    memory re-derived), so host-side tests pin the knobs they exercise
    instead of depending on the registered defaults."""
    import dataclasses
    r = by_name()[name]
    defines = {**r.defines, **knobs}
    smem = hopper.wgmma_smem_bytes(defines["STAGES"], defines["EPILOGUE"])
    return dataclasses.replace(r, defines=defines, smem=smem)
from drvgemm.runtime.sass import disassemble, entry_instructions, opcode_counts

SOURCE = "20_tma_wgmma.cu"
ENTRIES = {"bf16": ("gemm_tma_wgmma_bf16", 1), "fp16": ("gemm_tma_wgmma_fp16", 2),
           "tf32": ("gemm_tma_wgmma_tf32", 3)}
# Each build step of the rung, compiled as the benchmark compiles it, and the
# tuning knobs of benchmarks/wgmma_sweep.py.
# Each build starts from the registered entry (every define the kernel needs)
# and overrides what the step changes; EPILOGUE is pinned per step.
STEPS = {"tma_only": {"WARP_SPECIALIZED": 0, "EPILOGUE": 0},
         "warp_specialized": {"WARP_SPECIALIZED": 1, "EPILOGUE": 0},
         "cluster2": {"WARP_SPECIALIZED": 1, "CLUSTER": 2, "EPILOGUE": 0},
         "tma_store": {"WARP_SPECIALIZED": 1, "EPILOGUE": 2},
         "tma_store_group8": {"WARP_SPECIALIZED": 1, "EPILOGUE": 2, "GROUP": 8},
         "cluster2_tma_store": {"WARP_SPECIALIZED": 1, "CLUSTER": 2, "EPILOGUE": 2},
         "tma_only_tma_store": {"WARP_SPECIALIZED": 0, "EPILOGUE": 2},
         "tma_store_3": {"WARP_SPECIALIZED": 1, "EPILOGUE": 2, "STAGES": 3}}
CASES = ([("bf16", step) for step in STEPS]
         + [("fp16", "cluster2"), ("fp16", "tma_store"), ("tf32", "tma_only"),
            ("tf32", "cluster2"), ("tf32", "tma_store"), ("tf32", "warp_specialized")])

_built = {}


def build(prec, step):
    key = (prec, step)
    if key not in _built:
        entry, _ = ENTRIES[prec]
        r = by_name()[f"20_tma_wgmma_{prec}"]
        b = compile_binary(SOURCE, entry, arch="sm_90a",
                           defines={**r.defines, "ALIGNED": 1, **STEPS[step]})
        _built[key] = (b, disassemble(b.cubin))
    return _built[key]


@pytest.mark.parametrize("prec,step", CASES)
def test_resources_no_spills_and_no_ignored_setmaxnreg(prec, step):
    b, _ = build(prec, step)
    entry = ENTRIES[prec][0]
    res = parse_resources(b.log)[entry]
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack == 0, b.log
    if STEPS[step]["WARP_SPECIALIZED"]:
        # 384 threads, one block per SM: 168 registers each at entry. The
        # consumers' setmaxnreg.inc draws on what the producer's .dec released
        # to the block's pool: (168 - 40) * 128 == (232 - 168) * 256. With
        # fewer registers at entry the pool would come up short and the
        # consumers would wait for registers forever.
        assert res.registers == 168, b.log
        hopper.check_register_budget(res.registers, True)
    else:
        assert res.registers <= 255, b.log
    assert res.static_smem == 0  # everything lives in the dynamic ring
    log = b.log.lower()
    assert "c7508" not in log, "ptxas ignored setmaxnreg:\n" + b.log
    # ptxas says so when it must serialise wgmma (accumulators touched while in flight).
    assert "serializ" not in log, b.log


@pytest.mark.parametrize("prec,step", CASES)
def test_sass_uses_hopper_units(prec, step):
    _, sass = build(prec, step)
    ops = opcode_counts(sass)
    assert ops["UTMALDG"] >= 1, "no bulk tensor copies (UTMALDG)"
    assert ops["SYNCS"] >= 1, "no mbarrier operations (SYNCS)"
    assert ops["HGMMA"] >= 4, "no warpgroup MMA (HGMMA)"
    assert ops["LDL"] == 0 and ops["STL"] == 0, "local memory traffic"
    assert ops["HMMA"] == 0, "fell back to mma.sync"
    # nvdisasm leaves f16 inputs (the default type) unnamed: ".F32 " alone.
    shape = {"bf16": r"HGMMA\.64x256x16\.F32\.BF16 ", "fp16": r"HGMMA\.64x256x16\.F32(\.F16)? ",
             "tf32": r"HGMMA\.64x256x8\.F32\.TF32 "}[prec]
    assert re.search(shape, sass), f"expected {shape} in the SASS"
    if prec != "tf32":
        # B is N-major in shared memory: read transposed.
        assert re.search(shape + r"[^;]*tnspB", sass), "B operand not transposed"
    if STEPS[step]["WARP_SPECIALIZED"]:
        assert ops["USETMAXREG"] == 2, "expected one setmaxnreg per role"
    else:
        assert ops["USETMAXREG"] == 0
    if STEPS[step].get("CLUSTER", 1) == 2:
        assert "UTMALDG.2D.MULTICAST" in sass, "clusters share tiles through multicast"
        assert ops["UCGABAR_ARV"] >= 1 and ops["UCGABAR_WAIT"] >= 1
    else:
        assert "MULTICAST" not in sass
    # EPILOGUE 2 stores C with the copy engine (16-bit inputs; the transposed
    # tf32 tile always stores directly).
    tma_store = STEPS[step].get("EPILOGUE", 0) == 2 and prec != "tf32"
    assert (ops["UTMASTG"] > 0) == tma_store
    # Every block walks its units statically: no tile counter in global memory.
    assert "ATOMG" not in sass


def test_tf32_fragments_rounded_without_the_mask():
    """The tf32 register fragments are rounded in two instructions, leaving
    the low 13 bits to the tensor cores, which ignore them: no cvt.rna mask
    (LOP3 with 0xffffe000). 16 values per stage, loaded from 4 addresses."""
    mask = re.compile(r"LOP3\.LUT R\d+, R\d+, 0xffffe000")
    _, new = build("tf32", "warp_specialized")
    assert not mask.findall(new)
    assert opcode_counts(new)["LDS"] > 0
    # Loads at immediate offsets of one base: the four k8 steps 1 KB apart.
    assert re.search(r"LDS R\d+, \[R\d+\+0xc00\]", new)


def test_kernel_takes_tensor_maps_by_value():
    b, _ = build("bf16", "warp_specialized")
    params = parse_params(b.ptx, "gemm_tma_wgmma_bf16")
    kinds = [(p.ptx_type, p.align) for p in params]
    assert kinds[:3] == [("b8[128]", 64)] * 3, kinds
    # C, M, N, K, alpha, beta, then split-K: partials, split_stride, splits, fold
    assert [p.ptx_type for p in params[3:]] == ["u64", "u32", "u32", "u32", "f32", "f32",
                                                "u64", "u64", "u32", "u64"]


def test_registered_rungs_match_the_kernel():
    table = by_name()
    for prec in ("bf16", "fp16", "tf32"):
        r = table[f"20_tma_wgmma_{prec}"]
        assert r.host == "tma" and r.arch == "sm_90a" and r.precision == prec
        assert r.entry == ENTRIES[prec][0] and r.defines["WGMMA_ELEM"] == ENTRIES[prec][1]
        assert r.smem == hopper.wgmma_smem_bytes(r.defines["STAGES"], r.defines["EPILOGUE"])
        assert r.threads == (384 if r.defines["WARP_SPECIALIZED"] else 256)
        # The block's tile of C, as the host builds its maps from it.
        assert (r.defines["BM"], r.defines["BN"]) == (r.tile_m, r.tile_n)
    # The largest configuration (4 stages + C staging) must fit the H200's
    # 227 KB opt-in limit, with 1 KB reserved per block.
    assert hopper.wgmma_smem_bytes(4, 2) + 1024 <= 233472
    assert hopper.wgmma_smem_bytes(4, 2) <= 232448
    assert hopper.wgmma_smem_bytes(4, 2) - hopper.wgmma_smem_bytes(4, 0) == 2 * 2 * 64 * 32 * 4


# ---------------------------------------------------------------------------
# Tensor maps: every driver requirement is a clear ValueError
# ---------------------------------------------------------------------------
def good(**kw):
    args = dict(address=0x7f0000000000, dtype="bf16", rows=4096, cols=4096, row_pitch=8192,
                box_rows=128, box_cols=64)
    args.update(kw)
    return tensormap.matrix_map(args["address"], args["dtype"], args["rows"], args["cols"],
                          args["row_pitch"], args["box_rows"], args["box_cols"])


def test_valid_map_needs_no_gpu_until_encoded():
    m = good()
    assert m.dims == (4096, 4096) and m.strides == (8192,) and m.box == (64, 128)
    assert m.box_bytes == 128 * 64 * 2
    assert tensormap.matrix_map(0x1000, "fp32", 10, 8, 32, 64, 32).box_bytes == 64 * 32 * 4


@pytest.mark.parametrize("kw,match", [
    (dict(address=0x7f0000000008), "16-byte aligned"),
    (dict(row_pitch=8194, cols=4097), "multiple of 16"),
    (dict(row_pitch=4096), "smaller than"),
    (dict(box_rows=257), "1..256"),
    (dict(box_rows=0), "1..256"),
    (dict(box_cols=128), "swizzle span"),
    (dict(box_cols=4), "multiple of 16 bytes"),
    (dict(rows=0), "1..2\\^32"),
    (dict(dtype="complex64"), "not supported"),
])
def test_bad_map_raises_before_the_driver(kw, match):
    with pytest.raises(ValueError, match=match):
        good(**kw)


def test_bad_map_arguments():
    with pytest.raises(ValueError, match="strides"):
        tensormap.TensorMap(0x1000, "bf16", (64, 64), (), (64, 64))
    with pytest.raises(ValueError, match="box must have 2"):
        tensormap.TensorMap(0x1000, "bf16", (64, 64), (128,), (64,))
    with pytest.raises(ValueError, match="element_strides"):
        tensormap.TensorMap(0x1000, "bf16", (64, 64), (128,), (64, 64), element_strides=(1, 9))
    with pytest.raises(ValueError, match="swizzle"):
        tensormap.TensorMap(0x1000, "bf16", (64, 64), (128,), (64, 64), swizzle=16)
    with pytest.raises(ValueError, match="rank"):
        tensormap.TensorMap(0x1000, "bf16", (2,) * 6, (16,) * 5, (1,) * 6, swizzle=0)
    with pytest.raises(TypeError, match="integer"):
        tensormap.TensorMap(0x1000, "bf16", (64, 64.0), (128,), (64, 64))


@settings(max_examples=200)
@given(address=st.integers(0, 2**48), cols=st.integers(1, 5000), elem=st.sampled_from(
    ["bf16", "fp16", "fp32"]))
def test_alignment_rules(address, cols, elem):
    """A map over a row-major matrix with unpadded rows is accepted exactly
    when the base is 16-byte aligned and a row is a multiple of 16 bytes;
    needs_staging says when the rung must copy the operand first."""
    size = 4 if elem == "fp32" else 2
    ok = address % 16 == 0 and (cols * size) % 16 == 0
    assert tensormap.needs_staging(address, cols, size) == (not ok)
    try:
        tensormap.matrix_map(address, elem, 7, cols, cols * size, 8, 128 // size)
    except ValueError:
        assert not ok
    else:
        assert ok


def test_encode_without_driver_is_a_cuda_error():
    import drvgemm
    if drvgemm.has_gpu():
        pytest.skip("a GPU is present: encoding succeeds")
    with pytest.raises(CudaError):
        good().param_bytes


# ---------------------------------------------------------------------------
# Grid and tile scheduler
# ---------------------------------------------------------------------------
def unit_origin(geo, u, rank, cluster, units_y, tiles_x, group):
    """The kernel's unit_origin: unit -> (y0, x0), for one unit or an array."""
    g = u // (group * tiles_x)
    first = g * group
    rows = np.minimum(units_y - first, group)   # u may be an array of units
    local = u - g * group * tiles_x
    uy, tx = first + local % rows, local // rows
    return (uy * cluster + rank) * geo.tile_y, tx * geo.tile_x


def schedule(geo, m, n, cluster, blocks, group=16):
    """The kernel's walk over units for every block: returns the (y0, x0)
    tile origins computed. Block b takes units b, b + G, ... (in clusters)."""
    y_ext, x_ext = (n, m) if geo.swapped else (m, n)
    tiles_y = -(-y_ext // geo.tile_y)
    tiles_x = -(-x_ext // geo.tile_x)
    units_y = -(-tiles_y // cluster)
    units = units_y * tiles_x
    u, rank = block_walk(blocks, cluster, units)
    y0, x0 = unit_origin(geo, u, rank, cluster, units_y, tiles_x, group)
    return list(zip(y0.tolist(), x0.tolist())), tiles_y, tiles_x


def block_walk(blocks, cluster, units):
    """Every (unit, rank in its cluster) the persistent blocks take, block by
    block: block b takes units b // cluster, + G, + 2G, ... below ``units``
    (G = blocks // cluster clusters), as arrays in that order."""
    b = np.arange(blocks)
    start, stride = b // cluster, blocks // cluster
    count = np.maximum(0, -(-(units - start) // stride))
    owner = np.repeat(b, count)
    step = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    return start[owner] + step * stride, owner % cluster


@settings(max_examples=150)
@given(m=st.integers(1, 9000), n=st.integers(1, 9000), prec=st.sampled_from(["bf16", "tf32"]),
       cluster=st.sampled_from([1, 2]), resident=st.sampled_from([None, 2, 8, 128, 132]),
       group=st.sampled_from([1, 3, 8, 16, 33]), balanced=st.booleans())
def test_every_tile_computed_exactly_once(m, n, prec, cluster, resident, group, balanced):
    geo = hopper.geometry(by_name()[f"20_tma_wgmma_{prec}"])
    blocks = hopper.wgmma_grid_blocks(geo, m, n, cluster, resident, balanced=balanced)
    assert blocks % cluster == 0 and blocks >= cluster
    if resident is not None:
        assert blocks <= max(resident, cluster)
        # Balancing never adds a round of tiles.
        units = hopper.wgmma_work_units(geo, m, n, cluster)
        full = hopper.wgmma_grid_blocks(geo, m, n, cluster, resident) // cluster
        assert -(-units // (blocks // cluster)) == -(-units // full)
    seen, tiles_y, tiles_x = schedule(geo, m, n, cluster, blocks, group)
    live = [(y, x) for y, x in seen if y < tiles_y * geo.tile_y]
    assert len(live) == len(set(live)) == tiles_y * tiles_x
    # The only extra tiles are the second halves of clusters past the edge.
    assert len(seen) - len(live) == (tiles_y % cluster) * tiles_x


def test_unit_order_is_compact():
    """What GROUP buys: at 8192^2 the first 132 units (the ones in flight
    together) cover 16 tile rows x 8.25 tile columns of C, i.e. they read
    2048 rows of A and ~2300 columns of B, not 132 x 256 columns of B."""
    geo = hopper.geometry(by_name()["20_tma_wgmma_bf16"])
    first = schedule(geo, 8192, 8192, 1, 2048, group=16)[0][:132]
    rows = {y for y, _ in first}
    cols = {x for _, x in first}
    assert len(rows) == 16 and len(cols) == 9


def test_geometry_matches_the_kernel():
    bf = hopper.geometry(by_name()["20_tma_wgmma_bf16"])
    assert (bf.k_tile, bf.a_box, bf.b_box, bf.swapped) == (64, (128, 64), (64, 64), False)
    tf = hopper.geometry(by_name()["20_tma_wgmma_tf32"])
    assert (tf.k_tile, tf.a_box, tf.b_box, tf.swapped) == (32, (64, 32), (32, 32), True)
    # One stage = the 16 KB side (A for 16-bit, B for tf32) + four 8 KB boxes.
    for g in (bf, tf):
        a = g.a_box[0] * g.a_box[1] * g.elem_size
        b = g.b_box[0] * g.b_box[1] * g.elem_size
        assert (a + 4 * b if not g.swapped else 4 * a + 4 * b) == g.stage_bytes == 49152
        # Innermost box row = one 128-byte swizzle line.
        assert g.a_box[1] * g.elem_size == 128 and g.b_box[1] * g.elem_size == 128
    with pytest.raises(ValueError):
        hopper.Geometry.of("fp32", 128, 256)


# ---------------------------------------------------------------------------
# The launch configuration, against a recording stand-in for the driver
# ---------------------------------------------------------------------------
class FakeDriver:
    """cuda.bindings.driver with the calls hopper.py makes replaced by
    recorders (enums and value types are the real ones)."""

    def __init__(self):
        from cuda.bindings import driver as real
        self._real = real
        self.maps, self.allocs, self.copies, self.frees = [], [], [], []
        self.workspaces, self.memsets = [], []
        self._next = 0x7f0000100000

    def __getattr__(self, name):
        return getattr(self._real, name)

    def cuTensorMapEncodeTiled(self, dtype, rank, address, dims, strides, box, estrides,
                               interleave, swizzle, l2, fill):
        self.maps.append(dict(dtype=dtype.name, rank=rank, address=address,
                              dims=[int(x) for x in dims], strides=[int(x) for x in strides],
                              box=[int(x) for x in box], swizzle=swizzle.name))
        tm = self._real.CUtensorMap()
        return (0, tm)

    def cuMemAllocAsync(self, nbytes, stream):
        ptr, self._next = self._next, self._next + ((nbytes + 255) // 256 + 1) * 256
        self.allocs.append((ptr, nbytes))
        return (0, ptr)

    def enqueue_pad(self, copies, elem_size, stream):
        """Stands in for staging.enqueue_pad (the staging copy's launch)."""
        self.copies += [dict(src=src, dst=dst, rows=rows, width=width, pitch=pitch,
                             elem=elem_size) for src, dst, rows, width, pitch in copies]
        self.pad_launches = getattr(self, "pad_launches", 0) + 1

    def cuMemFreeAsync(self, ptr, stream):
        self.frees.append(int(ptr))
        return (0,)

    def cuMemAlloc(self, nbytes):
        ptr, self._next = self._next, self._next + ((nbytes + 255) // 256 + 1) * 256
        self.workspaces.append((ptr, nbytes))
        return (0, ptr)

    def cuMemsetD8Async(self, ptr, value, nbytes, stream):
        self.memsets.append((int(ptr), value, nbytes, int(stream)))
        return (0,)


@pytest.fixture
def fake_driver(monkeypatch):
    from types import SimpleNamespace
    from drvgemm.runtime import driver
    fake = FakeDriver()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(driver, "device", lambda: SimpleNamespace(sm_count=132))
    monkeypatch.setattr(tensormap, "_MAP_CACHE", type(tensormap._MAP_CACHE)())
    monkeypatch.setattr(hopper, "_max_clusters", {})
    monkeypatch.setattr(hopper, "enqueue_pad", fake.enqueue_pad)
    return fake


def test_launch_config_bf16(fake_driver):
    r = with_knobs("20_tma_wgmma_bf16", EPILOGUE=2)
    pa, pb, pc = 0x7f0000000000, 0x7f0010000000, 0x7f0020000000
    m, n, k = 4096, 4096, 4096
    cfg = hopper.wgmma_gemm_launch_config(r, pa, pb, pc, m, n, k, 1.0, 0.0)
    a_map, b_map, c_map = fake_driver.maps
    assert a_map == dict(dtype="CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", rank=2, address=pa,
                         dims=[k, m], strides=[2 * k], box=[64, 128],
                         swizzle="CU_TENSOR_MAP_SWIZZLE_128B")
    assert b_map == dict(dtype="CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", rank=2, address=pb,
                         dims=[n, k], strides=[2 * n], box=[64, 64],
                         swizzle="CU_TENSOR_MAP_SWIZZLE_128B")
    # C through the copy engine: 64 rows x 32 fp32 columns (one 128-byte line) per store.
    assert c_map == dict(dtype="CU_TENSOR_MAP_DATA_TYPE_FLOAT32", rank=2, address=pc,
                         dims=[n, m], strides=[4 * n], box=[32, 64],
                         swizzle="CU_TENSOR_MAP_SWIZZLE_128B")
    assert cfg["block"] == (384, 1, 1) and cfg["smem"] == r.smem
    assert cfg["cluster"] is None
    # 32 x 16 = 512 tiles > 132 SMs: persistent grid, balanced (BALANCE=1):
    # 4 rounds either way, on 128 blocks with none idle in the last.
    assert cfg["grid"] == (128, 1, 1)
    args = cfg["args"]
    assert all(len(a.param_bytes) == 128 for a in args[:3])
    # K in one piece: no workspace, no stride, one split, no fold
    assert args[3:] == [pc, m, n, k, 1.0, 0.0, 0, 0, 1, 0]
    assert not fake_driver.workspaces and not fake_driver.memsets
    assert not fake_driver.allocs and not cfg["keepalive"]
    # Same buffers again: the maps are reused.
    hopper.wgmma_gemm_launch_config(r, pa, pb, pc, m, n, k, 1.0, 0.0)
    assert len(fake_driver.maps) == 3


def test_launch_config_c_map_only_when_usable(fake_driver):
    """EPILOGUE=2 encodes a map over C only when the copy engine can take it
    (N % 4 == 0, C 16-byte aligned), the same test the kernel makes before
    using it; otherwise the slot holds zeros the kernel never reads."""
    r = with_knobs("20_tma_wgmma_bf16", EPILOGUE=2)
    pa, pb = 0x7f0000000000, 0x7f0010000000
    for pc, n, usable in [(0x7f0020000000, 4096, True), (0x7f0020000008, 4096, False),
                          (0x7f0020000000, 4098, False), (0x7f0020000000, 8193, False)]:
        assert hopper.c_map_usable(pc, n) == usable
        before = len(fake_driver.maps)
        cfg = hopper.wgmma_gemm_launch_config(r, pa, pb, pc, 300, n, 64, 1.0, 0.0)
        made = [mp for mp in fake_driver.maps[before:] if mp["address"] == pc]
        assert bool(made) == usable
        if not usable:
            assert cfg["args"][2] is tensormap.UNUSED_MAP and cfg["args"][2].param_bytes == bytes(128)
    import dataclasses
    direct = dataclasses.replace(r, name="direct", defines={**r.defines, "EPILOGUE": 0},
                                 smem=hopper.wgmma_smem_bytes(4, 0))
    cfg = hopper.wgmma_gemm_launch_config(direct, pa, pb, 0x7f0030000000, 300, 4096, 64, 1.0, 0.0)
    assert cfg["args"][2] is tensormap.UNUSED_MAP
    with pytest.raises(ValueError, match="EPILOGUE"):
        hopper.wgmma_gemm_launch_config(dataclasses.replace(direct, smem=r.smem), pa, pb,
                                     0x7f0030000000, 300, 4096, 64, 1.0, 0.0)


def test_launch_config_sm_limit(fake_driver):
    import dataclasses
    r = by_name()["20_tma_wgmma_bf16"]
    capped = dataclasses.replace(r, name="capped", defines={**r.defines, "SM_LIMIT": 128})
    cfg = hopper.wgmma_gemm_launch_config(capped, 0x1000, 0x2000, 0x3000, 4096, 4096, 64, 1, 0)
    assert cfg["grid"] == (128, 1, 1)
    small = hopper.wgmma_gemm_launch_config(capped, 0x1000, 0x2000, 0x3000, 300, 300, 64, 1, 0)
    assert small["grid"] == (3 * 2, 1, 1)     # fewer tiles than the cap: one block per tile


@pytest.mark.parametrize("m,n,cluster,blocks", [
    (4096, 4096, 1, 128),    # 512 tiles: 4 rounds on 132 SMs, on 128 blocks none idle
    (8192, 8192, 1, 128),    # 2048 tiles: 16 rounds
    (3072, 3072, 1, 96),     # 288 tiles: 3 rounds
    (8191, 8193, 1, 132),    # 2112 tiles: 16 rounds need all 132
    (1536, 2816, 1, 132),    # 132 tiles: one round, one block each
    (300, 300, 1, 6),        # fewer tiles than SMs
    (4096, 4096, 2, 128),    # clusters: 256 units of 2 tiles on 66 clusters -> 64
])
def test_balanced_grid(m, n, cluster, blocks):
    geo = hopper.geometry(by_name()["20_tma_wgmma_bf16"])
    assert hopper.wgmma_grid_blocks(geo, m, n, cluster, 132, balanced=True) == blocks


def test_launch_config_stages_unaligned_operands(fake_driver):
    r = by_name()["20_tma_wgmma_bf16"]
    pa, pb, pc = 0x7f0000000002, 0x7f0010000000, 0x7f0020000000   # A misaligned
    m, n, k = 100, 8193, 4100                                       # B rows of 16386 bytes
    cfg = hopper.wgmma_gemm_launch_config(r, pa, pb, pc, m, n, k, 1.0, 0.0)
    (a_scr, _), (b_scr, _) = fake_driver.allocs
    ca, cb = fake_driver.copies       # both in one launch of the staging copy
    assert fake_driver.pad_launches == 1
    assert ca == dict(src=pa, dst=a_scr, rows=m, width=2 * k, pitch=8208, elem=2)
    assert cb == dict(src=pb, dst=b_scr, rows=k, width=2 * n, pitch=16400, elem=2)
    a_map, b_map = fake_driver.maps
    assert a_map["address"] == a_scr and a_map["dims"] == [k, m] and a_map["strides"] == [8208]
    assert b_map["address"] == b_scr and b_map["dims"] == [n, k] and b_map["strides"] == [16400]
    assert len(cfg["keepalive"]) == 2
    del cfg
    import gc
    gc.collect()
    assert sorted(fake_driver.frees) == sorted([a_scr, b_scr])


def test_launch_config_tf32_is_swapped(fake_driver):
    r = with_knobs("20_tma_wgmma_tf32", CLUSTER=2)
    pa, pb, pc = 0x7f0000000000, 0x7f0010000000, 0x7f0020000000
    m, n, k = 1000, 300, 64
    cfg = hopper.wgmma_gemm_launch_config(r, pa, pb, pc, m, n, k, 2.0, 1.0)
    a_map, b_map = fake_driver.maps
    assert a_map["dtype"] == b_map["dtype"] == "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"
    assert a_map["dims"] == [k, m] and a_map["box"] == [32, 64]
    assert b_map["dims"] == [n, k] and b_map["box"] == [32, 32]
    # wgmma tile: 128 columns x 256 rows of C: ceil(300/128) = 3 -> 2 cluster units
    # along N, ceil(1000/256) = 4 along M: 8 units of 2 blocks.
    assert cfg["grid"] == (16, 1, 1)
    assert cfg["args"][2] is tensormap.UNUSED_MAP     # the transposed tile never stores by TMA


def test_launch_config_steps(fake_driver):
    import dataclasses
    base = by_name()["20_tma_wgmma_bf16"]
    single = dataclasses.replace(base, name="x", block=(256, 1, 1),
                                 defines={**base.defines, "WARP_SPECIALIZED": 0,
                                          "PERSISTENT": 0, "CLUSTER": 1})
    cfg = hopper.wgmma_gemm_launch_config(single, 0x1000, 0x2000, 0x3000, 4096, 4096, 64, 1, 0)
    assert cfg["grid"] == (32 * 16, 1, 1) and cfg["block"] == (256, 1, 1)
    assert cfg["cluster"] is None
    wrong = dataclasses.replace(single, block=(384, 1, 1))
    with pytest.raises(ValueError, match="WARP_SPECIALIZED"):
        hopper.wgmma_gemm_launch_config(wrong, 0x1000, 0x2000, 0x3000, 64, 64, 64, 1, 0)
    with pytest.raises(ValueError, match="K >= 1"):
        hopper.wgmma_gemm_launch_config(base, 0x1000, 0x2000, 0x3000, 64, 64, 0, 1, 0)


def test_register_budget_guard():
    hopper.check_register_budget(168, True)
    hopper.check_register_budget(100, False)   # no setmaxnreg without a producer warpgroup
    with pytest.raises(RuntimeError, match="would hang"):
        hopper.check_register_budget(160, True)
    # one consumer warpgroup (the 64-row members) moves no registers
    hopper.check_register_budget(123, True, consumers=1)


def test_64_wide_tiles_have_one_consumer():
    """wgmma M of 64 (bf16 / fp16 64 rows; tf32's C^T 64 columns: wgmma's A,
    our B, in two 32-column boxes instead of four) is one consumer
    warpgroup; any other than 64 or 128 is refused on the host and in the
    kernel."""
    assert hopper.Geometry.of("bf16", 64, 128).consumers == 1
    assert hopper.Geometry.of("bf16", 64, 128).block() == (256, 1, 1)
    assert hopper.Geometry.of("fp16", 128, 128).block() == (384, 1, 1)
    assert hopper.Geometry.of("tf32", 128, 64).consumers == 1
    assert hopper.Geometry.of("tf32", 64, 64).block() == (256, 1, 1)
    with pytest.raises(ValueError, match="rung 20 tiles"):
        hopper.Geometry.of("tf32", 128, 32)
    r = by_name()["20_tma_wgmma_tf32_128x128"]
    bad = {**r.defines, "BN": 32}
    with pytest.raises(CompileError, match="must be 128 .two consumers. or 64 .one."):
        compile_binary(SOURCE, r.entry, arch="sm_90a", defines=bad)


# ---------------------------------------------------------------------------
# The family: every registered member (tile shapes), and split-K
# ---------------------------------------------------------------------------
FAMILY = [r for r in RUNGS if r.host == "tma"]
# (member, C type): every instantiation gemm() can launch
INSTANTIATIONS = [(r.name, False) for r in FAMILY] + [(r.name, True) for r in FAMILY
                                                       if r.narrow_output]


def test_family_is_registered_once_per_tile():
    names = [r.name for r in FAMILY]
    assert len(names) == len(set(names))
    for prec in ("bf16", "fp16", "tf32"):
        members = [r for r in FAMILY if r.precision == prec]
        # the flagship keeps its plain name, and stays auto's pick (the last)
        assert members[-1].name == f"20_tma_wgmma_{prec}"
        assert (members[-1].tile_m, members[-1].tile_n) == ((256, 128) if prec == "tf32"
                                                            else (128, 256))
        tiles = {(r.tile_m, r.tile_n) for r in members}
        assert len(tiles) == len(members) >= 3
        for r in members[:-1]:
            assert r.name == f"20_tma_wgmma_{prec}_{r.tile_m}x{r.tile_n}"
    import drvgemm
    assert set(names) <= set(drvgemm.kernels())


@pytest.mark.parametrize("name", [r.name for r in FAMILY])
def test_member_constants_once(name):
    """Tile, k-tile, shared memory and splits all follow from the entry's
    defines: hopper derives the launch from the same numbers."""
    r = by_name()[name]
    geo = hopper.geometry(r)
    assert (r.defines["BM"], r.defines["BN"]) == (r.tile_m, r.tile_n)
    assert r.defines["BK"] == geo.k_tile == 128 // geo.elem_size
    assert (geo.tile_y, geo.tile_x) == ((r.tile_n, r.tile_m) if geo.swapped
                                        else (r.tile_m, r.tile_n))
    # 128 rows (two consumer warpgroups) or 64 (one); wgmma N 64-256, or
    # 8-32 rows of A for the swapped 16-bit members
    tf32 = r.precision == "tf32"
    assert geo.tile_y in (64, 128)
    assert geo.tile_x in ((8, 16, 32) if geo.swapped and not tf32 else (64, 128, 192, 256))
    assert geo.swapped == (tf32 or r.defines["SWAP_AB"] == 1)
    assert geo.consumers == geo.tile_y // 64
    assert geo.stage_bytes == geo.elem_size * geo.k_tile * (geo.tile_y + geo.tile_x)
    assert r.smem == hopper.wgmma_smem_bytes(r.defines["STAGES"], r.defines["EPILOGUE"],
                                             geo.stage_bytes, geo.consumers)
    # the opt-in limit of a block, and 1 KB reserved per block within the SM's 228 KB
    assert r.smem <= 232448 and r.smem + 1024 <= 233472
    assert r.splits == hopper.SPLITS and r.splits[0] == 1
    assert r.threads == 128 + 128 * geo.consumers and r.arch == "sm_90a"


_member_builds = {}


def member_build(name, narrow):
    key = (name, narrow)
    if key not in _member_builds:
        k = rung_kernel(by_name()[name], True, "sm_90a", narrow_output=narrow)
        _member_builds[key] = (k, disassemble(k.cubin))
    return _member_builds[key]


@pytest.mark.parametrize("name,narrow", INSTANTIATIONS)
def test_member_compiles_within_budget(name, narrow):
    r = by_name()[name]
    k, sass = member_build(name, narrow)
    res = k.resources
    geo = hopper.geometry(r)
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack == 0, k.log
    ops = opcode_counts(sass)
    if geo.consumers == 2:
        # the setmaxnreg budget: 168 at entry, (168 - 40) * 128 == (232 - 168) * 256
        assert res.registers == 168, k.log
        assert ops["USETMAXREG"] == 2
    else:
        # one consumer warpgroup, 256 threads: what it needs at entry, no move
        assert res.registers <= 255 and ops["USETMAXREG"] == 0, k.log
    hopper.check_register_budget(res.registers, True, name, geo.consumers)
    log = k.log.lower()
    assert "c7508" not in log and "serializ" not in log, k.log
    assert ops["LDL"] == 0 and ops["STL"] == 0 and ops["HMMA"] == 0
    assert ops["UTMALDG"] >= 1 and ops["SYNCS"] >= 1
    # HGMMA with the member's own wgmma N, and no other
    tf32 = r.precision == "tf32"
    shapes = set(re.findall(r"HGMMA\.(64x\d+x\d+)\.F32", sass))
    assert shapes == {f"64x{geo.tile_x}x{8 if tf32 else 16}"}, shapes
    if tf32:
        assert re.search(rf"HGMMA\.64x{geo.tile_x}x8\.F32\.TF32 ", sass)
    else:
        # the plain tile reads B MN-major (tnspB); the swapped one reads B as
        # wgmma's A (tnspA) and A K-major
        hgmma = re.findall(rf"HGMMA\.64x{geo.tile_x}x16\.F32[^;]*", sass)
        assert all(("tnspA" in h, "tnspB" in h) == (geo.swapped, not geo.swapped)
                   for h in hgmma), hgmma
        kind = {"bf16": r"\.BF16 ", "fp16": r"(\.F16)? "}[r.precision]
        assert re.search(rf"HGMMA\.64x{geo.tile_x}x16\.F32{kind}", sass)
    # the TMA-store epilogue where the entry has one (never for the transposed tf32 tile)
    assert (ops["UTMASTG"] > 0) == (r.defines["EPILOGUE"] == 2 and not geo.swapped)
    assert "ATOMG" not in sass and "MULTICAST" not in sass
    # fp32 C pairs are 8-byte stores, 16-bit C pairs 4-byte (the transposed tf32
    # tile stores single elements); the unsplit build has no fp32 partial epilogue
    assert bool(re.search(r"STG\.E\.64 ", sass)) == (not geo.swapped and not narrow)
    # the SPLIT_K=1 build: split-K partials are fp32 pairs even where C is 16-bit
    sk = rung_kernel(r, True, "sm_90a", narrow_output=narrow, split_k=True)
    assert sk.resources.spill_stores == 0, sk.log
    assert sk.resources.registers == 168 if geo.consumers == 2 else sk.resources.registers <= 255
    assert bool(re.search(r"STG\.E\.64 ", disassemble(sk.cubin))) == (not geo.swapped)


@pytest.mark.parametrize("n", [64, 128, 192, 256])
@pytest.mark.parametrize("prec", ["bf16", "tf32"])
def test_wgmma_wrapper_takes_every_n(prec, n):
    """wgmma.cuh's templated wrappers for each N (64 is not registered):
    the accumulator count and the instruction shape follow N."""
    r = by_name()[f"20_tma_wgmma_{prec}"]
    tile = {"BM": n} if prec == "tf32" else {"BN": n}
    stages = 4 if n >= 192 else 6
    b = compile_binary(SOURCE, r.entry, arch="sm_90a",
                       defines={**r.defines, "ALIGNED": 1, "STAGES": stages, **tile})
    res = parse_resources(b.log)[r.entry]
    assert res.spill_stores == 0 and res.stack == 0 and res.registers == 168
    k = 8 if prec == "tf32" else 16
    assert set(re.findall(r"HGMMA\.(64x\d+x\d+)", disassemble(b.cubin))) == {f"64x{n}x{k}"}


def test_bad_tiles_are_refused():
    r = by_name()["20_tma_wgmma_bf16"]
    from drvgemm.runtime.errors import CompileError
    with pytest.raises(CompileError, match="wgmma N"):
        compile_binary(SOURCE, r.entry, arch="sm_90a",
                       defines={**r.defines, "ALIGNED": 1, "BN": 160})
    with pytest.raises(CompileError, match="must be 128 .two consumers. or 64 .one."):
        compile_binary(SOURCE, r.entry, arch="sm_90a",
                       defines={**r.defines, "ALIGNED": 1, "BM": 256})
    with pytest.raises(CompileError, match="227 KB"):
        compile_binary(SOURCE, r.entry, arch="sm_90a",
                       defines={**r.defines, "ALIGNED": 1, "STAGES": 5})
    for bm, bn in [(128, 160), (32, 128), (256, 256)]:
        with pytest.raises(ValueError, match="rung 20 tiles"):
            hopper.Geometry.of("bf16", bm, bn)
    with pytest.raises(ValueError, match="rung 20 tiles"):
        hopper.Geometry.of("tf32", 256, 256)
    # swapped 16-bit: 8, 16 or 32 rows of A over 64- or 128-column strips
    for bm, bn in [(64, 64), (16, 32), (24, 64)]:
        with pytest.raises(ValueError, match="rung 20 tiles"):
            hopper.Geometry.of("bf16", bm, bn, {"SWAP_AB": 1})
    with pytest.raises(CompileError, match="8, 16 or 32 rows"):
        compile_binary(SOURCE, r.entry, arch="sm_90a",
                       defines={**r.defines, "ALIGNED": 1, "SWAP_AB": 1, "BM": 64, "BN": 64})


def kernel_unit_work(p, u, rank):
    """The kernel's unit_work (scheduler.cuh): unit -> tile origin, split and
    its k-tiles, with the kernel's integer arithmetic."""
    split = u // p["tile_units"]
    y0, x0 = unit_origin(p["geo"], u - split * p["tile_units"], rank, p["cluster"],
                         p["units_y"], p["tiles_x"], p["group"])
    kt0 = split * p["k_tiles"] // p["splits"]
    kt1 = (split + 1) * p["k_tiles"] // p["splits"]
    return y0, x0, split, kt0, kt1


@settings(max_examples=300)
@given(m=st.integers(1, 5000), n=st.integers(1, 5000), k=st.integers(1, 70000),
       name=st.sampled_from([r.name for r in FAMILY]), cluster=st.sampled_from([1, 2]),
       resident=st.sampled_from([None, 3, 132]), group=st.sampled_from([1, 5, 16]),
       split=st.sampled_from(hopper.SPLITS + (5, 7, 200)), balanced=st.booleans(),
       clamp=st.booleans())
def test_split_k_schedule_covers_every_tile_and_k_tile_once(m, n, k, name, cluster, resident,
                                                            group, split, balanced, clamp):
    """Work units = tiles x splits: the persistent walk of every block (in
    the kernel's own arithmetic) visits each (tile, split) exactly once, and
    for each tile the splits' k-ranges tile [0, KT) exactly, in split order."""
    geo = hopper.geometry(by_name()[name])
    kt = hopper.k_tiles(geo, k)
    s = hopper.effective_splits(geo, k, split) if clamp else split
    assert 1 <= s <= max(split, 1) and (not clamp or s <= kt)
    blocks = hopper.wgmma_grid_blocks(geo, m, n, cluster, resident, balanced=balanced, splits=s)
    units = hopper.wgmma_work_units(geo, m, n, cluster, s)
    assert blocks % cluster == 0 and blocks // cluster <= units
    y_ext, x_ext = (n, m) if geo.swapped else (m, n)
    tiles_y, tiles_x = -(-y_ext // geo.tile_y), -(-x_ext // geo.tile_x)
    units_y = -(-tiles_y // cluster)
    p = dict(geo=geo, cluster=cluster, units_y=units_y, tiles_x=tiles_x, group=group,
             tile_units=units_y * tiles_x, splits=s, k_tiles=kt)
    assert units == p["tile_units"] * s
    u, rank = block_walk(blocks, cluster, units)
    y0, x0, sp, kt0, kt1 = kernel_unit_work(p, u, rank)
    live = y0 < tiles_y * geo.tile_y   # not the second half of a cluster past the edge
    y0, x0, sp, kt0, kt1 = (a[live] for a in (y0, x0, sp, kt0, kt1))
    assert y0.size == tiles_y * tiles_x * s
    # Each (tile, split) once: in (split, tile row, tile column) order they are all there.
    order = np.lexsort((x0, y0, sp))
    ty, tx = np.divmod(np.arange(y0.size) % (tiles_y * tiles_x), tiles_x)
    assert (sp[order] == np.arange(y0.size) // (tiles_y * tiles_x)).all()
    assert (y0[order] == ty * geo.tile_y).all() and (x0[order] == tx * geo.tile_x).all()
    # Every tile's splits take split_k's pieces of [0, KT) in split order.
    ranges = split_k.split_ranges(kt, s)
    assert (kt0[order] == np.repeat([a for a, _ in ranges], tiles_y * tiles_x)).all()
    assert (kt1[order] == np.repeat([b for _, b in ranges], tiles_y * tiles_x)).all()
    assert ranges[0][0] == 0 and ranges[-1][1] == kt
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    lengths = [b - a for a, b in ranges]
    assert max(lengths) - min(lengths) <= 1 and sum(lengths) == kt
    if clamp:
        assert min(lengths) >= 1    # no empty piece once clamped


def test_split_ranges_of_long_k_fit_64_bit_arithmetic():
    """split * KT passes 2^31 for a long K with many splits: the kernel
    computes it in 64 bits; the ranges stay exact."""
    kt = (2**31 - 1) // 64 + 1
    r = split_k.split_ranges(kt, 128)
    assert r[0][0] == 0 and r[-1][1] == kt and all(a[1] == b[0] for a, b in zip(r, r[1:]))
    assert 127 * kt > 2**31


@pytest.mark.parametrize("m,n,split,stride,tiles", [
    (1, 1, 2, 64, 1), (128, 128, 8, 16384, 1), (1000, 700, 3, 700032, 48),
    (257, 129, 128, 33216, 6), (4096, 4096, 1, None, 1024)])
def test_workspace_sizes(m, n, split, stride, tiles):
    """The counters' head, then room for either kind of slices: S M x N ones
    (the reduction launch) or S - 1 of whole 128 x 128 tiles (the fold)."""
    r = by_name()["20_tma_wgmma_bf16_128x128"]
    geo = hopper.geometry(r)
    got = r.workspace_bytes(m, n, split)
    if split == 1:
        assert got == 0
        return
    assert split_k.split_stride(m, n) == stride
    assert stride >= m * n and stride % 64 == 0 and stride - m * n < 64
    assert hopper.fold_slice_floats(geo, m, n) == tiles * 128 * 128
    assert hopper.fold_counters(geo, m, n) == 2 * tiles
    assert got == hopper.FOLD_COUNTER_BYTES + max(4 * split * stride,
                                                  4 * (split - 1) * tiles * 128 * 128)
    # every slice starts 256-byte aligned
    assert all((4 * s * stride) % 256 == 0 for s in range(split))
    with pytest.raises(ValueError, match="splits K into one of"):
        r.workspace_bytes(m, n, 5)
    with pytest.raises(ValueError, match="does not split K"):
        by_name()["12_mma_bf16"].launches(None, 0, 0, 0, m, n, 64, 1.0, 0.0, split=2)


def test_split_is_clamped_to_k_tiles():
    geo = hopper.geometry(by_name()["20_tma_wgmma_bf16"])
    assert hopper.effective_splits(geo, 1, 8) == 1            # one k-tile
    assert hopper.effective_splits(geo, 64 * 3 + 1, 8) == 4   # 4 k-tiles
    assert hopper.effective_splits(geo, 65536, 128) == 128
    tf = hopper.geometry(by_name()["20_tma_wgmma_tf32"])
    assert hopper.effective_splits(tf, 100, 16) == 4          # k-tiles of 32


def _pack(kernel, cfg):
    """Pack a launch's arguments against the kernel's PTX parameter list, as
    launch() would (no GPU): a wrong count or kind raises."""
    return _Packer(kernel.params).packed(cfg.args)


@pytest.mark.parametrize("name,narrow", [("20_tma_wgmma_bf16", False),
                                         ("20_tma_wgmma_fp16_128x192", True),
                                         ("20_tma_wgmma_tf32_128x128", False)])
def test_launches_split_k(fake_driver, name, narrow):
    """launches() for split 1 is the one launch of launch_config; for S > 1
    the split kernel (units = tiles x S, partials into the workspace) and the
    reduction, whose arguments match split_reduce.cu's parameters."""
    r = by_name()[name]
    kernel, _ = member_build(name, narrow)
    geo = hopper.geometry(r)
    pa, pb, pc, ws = 0x7f0000000000, 0x7f0010000000, 0x7f0020000000, 0x7f0030000000
    m, n, k = 1000, 700, 4100
    one = r.launches(kernel, pa, pb, pc, m, n, k, 1.5, 0.5, narrow_output=narrow)
    assert len(one) == 1 and one[0][0] is kernel
    assert list(one[0][1].args[3:]) == [pc, m, n, k, 1.5, 0.5, 0, 0, 1, 0]
    assert len(_pack(kernel, one[0][1])) > 0
    tiles = hopper.wgmma_work_units(geo, m, n, 1)
    # K in pieces runs the SPLIT_K=1 build, compiled apart from the unsplit one
    split_build = rung_kernel(r, True, "sm_90a", narrow_output=narrow, split_k=True)
    assert split_build is not kernel and split_build.split_k and not kernel.split_k
    assert split_build.resources.registers == 168 and split_build.resources.spill_stores == 0
    assert split_k.split_kernel(r, kernel, narrow_output=narrow) is split_build
    assert split_k.split_kernel(r, split_build, narrow_output=narrow) is split_build
    slices = ws + hopper.FOLD_COUNTER_BYTES
    for split in (2, 3, 8, 128):
        steps = r.launches(kernel, pa, pb, pc, m, n, k, 1.5, 0.5, narrow_output=narrow,
                           split=split, workspace=ws)
        s = min(split, hopper.k_tiles(geo, k))
        units = tiles * s
        rounds = -(-units // 132)
        grid = -(-units // rounds) if r.defines["BALANCE"] else min(units, 132)
        if hopper.folds(geo, m, n, s, 132):
            # folded in the kernel: one launch, whole-tile slices, the counters
            [(k1, main)] = steps
            assert k1 is split_build and main.grid[0] == grid
            assert list(main.args[3:]) == [pc, m, n, k, 1.5, 0.5, slices,
                                           hopper.fold_slice_floats(geo, m, n), s, ws]
            _pack(k1, main)
            continue
        (k1, main), (k2, red) = steps
        assert k1 is split_build and k2.entry == split_k.REDUCE_ENTRIES[
            r.precision if narrow else "fp32"]
        stride = split_k.split_stride(m, n)
        assert list(main.args[3:]) == [pc, m, n, k, 1.5, 0.5, slices, stride, s, 0]
        assert main.grid[0] == grid
        assert red.args == (slices, pc, m * n, stride, s, 1.5, 0.5)
        assert red.block == (256, 1, 1) and red.smem == 0
        assert 1 <= red.grid[0] <= 8 * 132
        assert red.grid[0] * 256 * 4 >= m * n or red.grid[0] == 8 * 132
        _pack(k1, main)
        _pack(k2, red)
    # Short K: K of 3 k-tiles is cut into 3 pieces, whatever was asked
    short = r.launches(kernel, pa, pb, pc, m, n, 3 * geo.k_tile, 1.0, 0.0, split=8,
                       workspace=ws, narrow_output=narrow)
    assert short[0][1].args[11] == 3
    # One k-tile: no split at all, one launch, C written directly
    tiny = r.launches(kernel, pa, pb, pc, m, n, 5, 1.0, 0.0, split=8, workspace=ws,
                      narrow_output=narrow)
    assert len(tiny) == 1 and list(tiny[0][1].args[-4:]) == [0, 0, 1, 0]
    assert tiny[0][0] is kernel
    assert not r.host_side.split_k_build(r, 5, 8)
    assert r.host_side.split_k_build(r, k, 2) and not r.host_side.split_k_build(r, k, 1)
    # Without the clamp (tests of empty pieces): 8 pieces of 3 k-tiles
    raw = hopper.split_launches(r, kernel, pa, pb, pc, m, n, 3 * geo.k_tile, 1.0, 0.0,
                                split=16, workspace=ws, clamp=False, narrow_output=narrow)
    assert raw[0][1].args[11] == 16 and raw[1][1].args[4] == 16 and raw[0][0] is split_build
    # Either way when asked
    plain = hopper.split_launches(r, kernel, pa, pb, pc, m, n, k, 1.0, 0.0, split=2,
                                  workspace=ws, narrow_output=narrow, fold=False)
    assert len(plain) == 2 and plain[0][1].args[12] == 0
    folded = hopper.split_launches(r, kernel, pa, pb, pc, m, n, k, 1.0, 0.0, split=8,
                                   workspace=ws, narrow_output=narrow, fold=True)
    assert len(folded) == 1 and folded[0][1].args[12] == ws


def test_launches_refuse_a_bad_workspace(fake_driver):
    from types import SimpleNamespace
    r = by_name()["20_tma_wgmma_bf16_128x128"]
    kernel, _ = member_build(r.name, False)
    args = (kernel, 0x7f0000000000, 0x7f0010000000, 0x7f0020000000, 300, 300, 1024, 1.0, 0.0)
    with pytest.raises(ValueError, match="16-byte aligned workspace"):
        r.launches(*args, split=4, workspace=0)
    with pytest.raises(ValueError, match="16-byte aligned workspace"):
        r.launches(*args, split=4, workspace=0x7f0030000008)
    small = SimpleNamespace(__cuda_array_interface__={"data": (0x7f0030000000, False)},
                            nbytes=r.workspace_bytes(300, 300, 4) - 4)
    with pytest.raises(ValueError, match="holds"):
        r.launches(*args, split=4, workspace=small)
    with pytest.raises(ValueError, match="splits K into one of"):
        r.launches(*args, split=5, workspace=0x7f0030000000)


def entry_sass(sass, entry):
    """The instructions of one entry's .text section of a multi-kernel cubin."""
    body, section = [], None
    for line in sass.splitlines():
        head = re.match(r"^//-+ (\S+)\s+-+$", line)
        if head:
            section = head.group(1)
        elif section == f".text.{entry}":
            body.append(line)
    assert body, f"no .text.{entry} in the SASS"
    return "\n".join(body)


@pytest.mark.parametrize("deep", [False, True])
@pytest.mark.parametrize("out", ["fp32", "bf16", "fp16"])
def test_reduce_kernel(out, deep):
    """split_reduce.cu: no local memory, 16-byte loads of the partials,
    16-byte (fp32) or 8-byte (16-bit) stores of C, 16-bit results rounded
    to nearest even (F2FP), no atomics (a fixed order of summation). The
    deep entry issues a chunk's 16 slices' loads before the first add (the
    plain entry's ptxas schedule keeps ~4 in flight)."""
    k = split_k.reduce_kernel(out, deep)
    assert k is split_k.reduce_kernel(out, deep)          # cached
    assert k.entry == (split_k.DEEP_REDUCE_ENTRIES if deep else split_k.REDUCE_ENTRIES)[out]
    res = k.resources
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack == 0, k.log
    assert [p.ptx_type for p in k.params] == ["u64", "u64", "u64", "u64", "u32", "f32", "f32"]
    sass = entry_sass(disassemble(k.cubin), k.entry)
    assert re.search(r"LDG\.E\.128", sass)
    assert re.search(r"STG\.E\.128" if out == "fp32" else r"STG\.E\.64", sass)
    assert ("F2FP" in sass) == (out != "fp32")
    assert "ATOM" not in sass and "RED." not in sass
    longest, cur = 0, 0
    for line in sass.splitlines():
        if "LDG.E.128" in line:
            cur += 1
            longest = max(longest, cur)
        elif "FADD" in line:
            cur = 0
    assert (longest >= 16) if deep else (longest < 16), longest
    with pytest.raises(ValueError, match="fp32, bf16 or fp16"):
        split_k.reduce_kernel("tf32", deep)


def test_deep_reduce_takes_small_c_over_many_splits(monkeypatch):
    """The deep entry for more than DEEP_MIN_SPLITS partials of a C whose
    4-element groups give at most one 256-thread block to each SM; the plain
    entry otherwise. Both take the same launch configuration."""
    from types import SimpleNamespace
    from drvgemm.runtime import driver
    monkeypatch.setattr(split_k, "reduce_kernel",
                        lambda out="fp32", deep=False: ("deep" if deep else "plain", out))
    monkeypatch.setattr(driver, "device", lambda *a: SimpleNamespace(sm_count=132))
    edge = 256 * 132 * 4                     # elements: one block an SM
    for m, n, s, want in [(32, 32, 128, "deep"), (128, 128, 32, "deep"), (32, 32, 5, "deep"),
                          (32, 32, 4, "plain"), (1000, 700, 8, "plain"),
                          (1, edge, 16, "deep"), (1, edge + 4, 16, "plain"),
                          (1, edge + 1, 16, "plain")]:
        kern, cfg = split_k.reduce_launch(0x1000, 0x2000, m, n, s, 1.0, 0.0, "bf16")
        assert kern == (want, "bf16"), (m, n, s)
        assert cfg == split_k.reduce_launch_config(0x1000, 0x2000, m, n, s, 1.0, 0.0)


def emulate_reduce(partials, c, count, stride, splits, alpha, beta):
    """split_reduce.cu in numpy float32, group by group of four as the kernel
    walks them: the sum in split order, then alpha and beta."""
    out = c.copy()
    for i in range(0, count, 4):
        live = min(4, count - i)
        v = partials[i:i + live].astype(np.float32).copy()
        for s in range(1, splits):
            v = (v + partials[s * stride + i:s * stride + i + live]).astype(np.float32)
        v = np.float32(alpha) * v
        if beta != 0:
            v = v + np.float32(beta) * c[i:i + live]
        out[i:i + live] = v
    return out


def test_reduce_layout_emulated():
    """The host's workspace layout and the reduction's indexing agree: partial
    s of element (r, c) at s * stride + r * N + c; every element of C gets
    the sum of its S partials, none outside is touched."""
    m, n, s = 37, 29, 5
    stride = split_k.split_stride(m, n)
    rng = np.random.default_rng(1)
    parts = rng.integers(-50, 50, (s, m, n)).astype(np.float32)
    ws = np.full(s * stride, np.nan, np.float32)
    for i in range(s):
        ws[i * stride:i * stride + m * n] = parts[i].ravel()
    c = rng.integers(-5, 5, m * n).astype(np.float32)
    got = emulate_reduce(ws, c, m * n, stride, s, 2.0, -1.0)
    assert np.array_equal(got.reshape(m, n), 2 * parts.sum(0) - c.reshape(m, n))
    got0 = emulate_reduce(ws, np.full(m * n, np.nan, np.float32), m * n, stride, s, 1.0, 0.0)
    assert np.array_equal(got0.reshape(m, n), parts.sum(0))


# ---------------------------------------------------------------------------
# The staging copy (ladders/gemm/staging.py, cu/gemm/pad_rows.cu)
# ---------------------------------------------------------------------------
def test_pad_launch_config_covers_the_larger_copy():
    """grid.y is one row of blocks per copy, grid.x enough 256-thread blocks
    for the larger copy's 16-byte chunks (capped at 4 per SM); one copy
    leaves the second slot empty (rows 0)."""
    from drvgemm.ladders.gemm import staging
    a = (0x1002, 0x2000, 127, 262, 272)       # 127 rows of bf16 K = 131
    b = (0x3006, 0x9000, 131, 16382, 16384)   # 131 rows of bf16 N = 8191
    cfg = staging.pad_launch_config([a, b], sm_count=132)
    assert cfg.grid == (-(-131 * 16384 // 16 // 256), 2, 1) and cfg.block == (256, 1, 1)
    assert cfg.args == a + b and cfg.smem == 0
    one = staging.pad_launch_config([a], sm_count=132)
    assert one.grid == (-(-127 * 272 // 16 // 256), 1, 1) and one.args == a + (0,) * 5
    big = staging.pad_launch_config([(0, 0, 100000, 4100, 4112)], sm_count=132)
    assert big.grid[0] == 4 * 132
    with pytest.raises(ValueError, match="16-byte"):
        staging.pad_launch_config([(0, 0x2008, 1, 262, 272)], sm_count=132)
    with pytest.raises(ValueError, match="pitch"):
        staging.pad_launch_config([(0, 0x2000, 1, 262, 256)], sm_count=132)
    with pytest.raises(ValueError, match="one or two"):
        staging.pad_launch_config([a, b, a], sm_count=132)
    with pytest.raises(ValueError, match="2- or 4-byte"):
        staging.pad_kernel(8)


@pytest.mark.parametrize("elem", [2, 4])
def test_pad_rows_reads_elements_and_writes_whole_chunks(elem):
    """The source is only element-aligned: no global load wider than one
    element; the destination gets whole 16-byte stores; no spills."""
    from drvgemm.ladders.gemm import staging
    k = staging.pad_kernel(elem)
    assert k.resources.spill_stores == 0 and k.resources.spill_loads == 0
    code = "\n".join(entry_instructions(disassemble(k.cubin), staging.PAD_ENTRIES[elem]))
    loads = re.findall(r"\bLDG\.[A-Z0-9.]+", code)
    stores = re.findall(r"\bSTG\.[A-Z0-9.]+", code)
    narrow = "U16" if elem == 2 else None
    assert loads and stores
    for op in loads:
        assert ".64" not in op and ".128" not in op, op
        if narrow:
            assert narrow in op, op
    assert all(op.endswith(".128") for op in stores), stores
