"""The mma.sync / WMMA rungs (09-16), checked without a GPU: each compiles
for sm_80 and sm_90 at ALIGNED=0 and ALIGNED=1 (the PTX rung as written)
with no spills and no stack, one block fits an SM of the architecture it is
registered for, and the SASS (nvdisasm) holds the instructions the rung
exists to show: HMMA of the right shape and type, LDGSTS where it copies
with cp.async, LDSM where it uses ldmatrix, BAR.ARV where warps hand stages
over. The registry entries agree with the kernels' tile constants.

Compiles are disk-cached by drvgemm.compiler; a cold run is ~25 compiles.
"""
from __future__ import annotations

import functools
import re
from collections import Counter

import pytest

from drvgemm.runtime import sass, sources
from drvgemm.runtime.compiler import compile_binary, parse_resources
from drvgemm.runtime.errors import CompileError
from drvgemm.analysis.occupancy import SPECS, kernel_max_threads, model
from drvgemm.ladders.gemm.registry import RUNGS, by_name

# The mma.sync / WMMA ladder of the plain signature (rung 30: tests/test_small_m_cpu.py).
TENSOR = [r for r in RUNGS if r.precision != "fp32" and r.arch == "sm_80" and r.host == ""]
ARCHS = ("sm_80", "sm_90")
DEVICE_OF_ARCH = {"sm_80": "A100", "sm_90": "H200"}

# The SASS opcode each input type's mma.sync / wmma becomes.
HMMA = {"tf32": "HMMA.1688.F32.TF32", "bf16": "HMMA.16816.F32.BF16", "fp16": "HMMA.16816.F32"}
K_PER_MMA = {"tf32": 8, "bf16": 16, "fp16": 16}
ELEMENT_BYTES = {"tf32": 4, "bf16": 2, "fp16": 2}




def is_ptx(r) -> bool:
    return r.source.endswith(".ptx")


CASES = [(r.name, arch, aligned) for r in TENSOR for arch in ARCHS
         for aligned in ((None,) if is_ptx(r) else (0, 1))]


def _case_id(case):
    name, arch, aligned = case
    return f"{name}-{arch}" + ("" if aligned is None else f"-aligned{aligned}")


@functools.lru_cache(maxsize=None)
def build(name: str, arch: str, aligned):
    r = by_name()[name]
    defines = None if aligned is None else dict(r.defines, ALIGNED=aligned)
    b = compile_binary(r.source, r.entry, defines=defines, arch=arch)
    res = parse_resources(b.log)[b.entry]
    ops = Counter(sass.opcodes(sass.disassemble(b.cubin)))
    return b, res, ops


def base_counts(ops: Counter) -> Counter:
    c = Counter()
    for op, n in ops.items():
        c[op.split(".")[0]] += n
    return c


def test_the_tensor_rungs_are_registered():
    names = [r.name for r in TENSOR]
    assert names == ["09_wmma_fp16", "10_mma_tf32_ptx", "11_mma_tf32", "12_mma_bf16",
                     "13_mma_fp16", "14_warp_specialized_mma_bf16", "15_mma_tf32_rotating",
                     "16_mma_tf32_rotating_ptx"]
    for r in TENSOR:
        family = "wmma" if "wmma" in r.name else "mma"
        assert f"{family}_{r.precision}" in r.name, r.name


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_compiles_without_spills_and_fits_an_sm(case):
    name, arch, aligned = case
    r = by_name()[name]
    b, res, _ = build(name, arch, aligned)
    assert (res.spill_stores, res.spill_loads, res.stack) == (0, 0, 0), f"{name}: {res}"
    assert res.registers <= 255
    spec = SPECS[DEVICE_OF_ARCH[arch]]
    occ = model(spec, res.registers, r.threads, r.smem, res.static_smem, barriers=res.barriers)
    assert occ.blocks_per_sm >= 1, f"{name} on {spec.name}: {occ.reason or occ.limiters}"
    # The kernel's launch bounds are the registry's block.
    assert kernel_max_threads(b.ptx, b.entry) == r.threads


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_sass_shows_what_the_rung_is_about(case):
    name, arch, aligned = case
    r = by_name()[name]
    _, _, ops = build(name, arch, aligned)
    base = base_counts(ops)
    hmma = ops[HMMA[r.precision]]
    assert hmma == base["HMMA"] and hmma > 0, f"{name}: HMMA variants {dict(ops)}"
    # One k-tile of the main loop issues (WM/16) x (WN/8) x (BK/k) MMAs per
    # warp, all in registers; the loop body appears once (or unrolled whole).
    d = dict(dict(BM=128, BN=256, BK=32, WM=64, WN=64), **r.defines)
    per_tile = (d["WM"] // 16) * (d["WN"] // 8) * (d["BK"] // K_PER_MMA[r.precision])
    assert hmma % per_tile == 0, f"{name}: {hmma} HMMA, not a multiple of {per_tile}"
    # Tensor-core operands come from shared memory through ldmatrix (wmma.load
    # compiles to it too).
    assert base["LDSM"] > 0
    if r.precision in ("bf16", "fp16") and "wmma" not in name:
        assert ops["LDSM.16.MT88.4"] > 0, "B fragments via ldmatrix.trans"
    # cp.async: 16-byte copies when aligned (the PTX rung decides at run time
    # and has both), 4-byte copies for unaligned fp32, none for unaligned
    # 16-bit data (rows may start at any 2 bytes: plain loads and stores).
    ldgsts = {op: n for op, n in ops.items() if op.startswith("LDGSTS")}
    if aligned is None or aligned == 1:
        assert any(op.endswith(".128") for op in ldgsts), f"{name}: {ldgsts}"
    elif r.precision == "tf32":
        assert ldgsts, f"{name}: 4-byte cp.async expected"
    else:
        assert not ldgsts and base["STS"] > 0
    # Warp specialisation: stages handed over with named barriers that only
    # arrive; the non-specialised rungs only ever use __syncthreads.
    if "warp_specialized" in name:
        assert base["BAR"] > 1 and any(op.startswith("BAR.ARV") for op in ops)
    else:
        assert not any(op.startswith("BAR.ARV") for op in ops)


def test_rung11_takes_only_its_warp_tile():
    """16 warps of 64 x 32 (WN=32) measured slower and were removed: the
    kernel refuses any warp tile but the registered one."""
    r = by_name()["11_mma_tf32"]
    with pytest.raises(CompileError, match="WN"):
        compile_binary(r.source, r.entry, defines=dict(r.defines, WN=32, ALIGNED=1), arch="sm_90")


def test_a_missing_define_fails_the_compile():
    """One source of truth: a kernel does not fall back on a default of its own."""
    for name, missing in (("08_warp_tiled", "KT_UNROLL"), ("12_mma_bf16", "BK"),
                          ("20_tma_wgmma_bf16", "STAGES")):
        r = by_name()[name]
        defines = {k: v for k, v in r.defines.items() if k != missing}
        with pytest.raises(CompileError, match=missing):
            compile_binary(r.source, r.entry, defines=dict(defines, ALIGNED=1), arch=r.arch
                           if r.arch.endswith("a") else "sm_90")


def test_tile_twins_share_their_tiles():
    t = by_name()
    for ptx, cpp in ((t["10_mma_tf32_ptx"], t["11_mma_tf32"]),
                     (t["16_mma_tf32_rotating_ptx"], t["15_mma_tf32_rotating"])):
        assert (ptx.tile_m, ptx.tile_n, ptx.block, ptx.smem, ptx.input_roundoff) == \
            (cpp.tile_m, cpp.tile_n, cpp.block, cpp.smem, cpp.input_roundoff)
    plain, ws = t["12_mma_bf16"], t["14_warp_specialized_mma_bf16"]
    # Same block and warp tiles; 14 is compared side by side with 12 compiled at
    # 14's own k-tile, stages and FRAG_PIPE=0 (benchmarks/mma_sweep.py: 12_base vs
    # 14_base), since only 12 can afford double-buffered fragments.
    assert (plain.tile_m, plain.tile_n) == (ws.tile_m, ws.tile_n)
    assert "FRAG_PIPE" not in ws.defines
    for key in ("BM", "BN", "WM", "WN"):
        assert ws.defines[key] == plain.defines[key]
    assert ws.threads == plain.threads + 32 * ws.defines["PRODUCER_WARPS"]


@pytest.mark.parametrize("r", TENSOR, ids=lambda r: r.name)
def test_registry_vector_is_one_16_byte_copy(r):
    assert r.vector * ELEMENT_BYTES[r.precision] == 16


@pytest.mark.parametrize("r", [r for r in TENSOR if "wmma" not in r.name], ids=lambda r: r.name)
def test_registry_smem_is_the_stages_of_the_tiles(r):
    d = dict(dict(BM=128, BN=256, BK=32), **r.defines)
    stage = (d["BM"] * d["BK"] + d["BK"] * d["BN"]) * ELEMENT_BYTES[r.precision]
    if r.name == "16_mma_tf32_rotating_ptx":
        # Rung 16 steps a stage address by the stage's bytes and wraps it at
        # the end of the stages.
        text = sources.find_source(r.source).read_text()
        (end,) = set(re.findall(r"add\.s32\s+%send, %smem, (\d+);", text))
        (step,) = set(re.findall(r"add\.s32\s+%nxt, %cur, (\d+);", text))
        assert int(step) == stage and r.smem == int(end)
    elif is_ptx(r):
        # The PTX rung spells its stages out: two stage indices step round
        # STAGES values, a stage starts at index * stage bytes.
        text = sources.find_source(r.source).read_text()
        stages = {int(n) for n in re.findall(r"setp\.eq\.s32\s+%p0, %(?:ps|cs), (\d+);", text)}
        strides = {int(n) for n in re.findall(r"mad\.lo\.s32\s+%stage, %(?:ps|cs), (\d+), %smem;",
                                              text)}
        assert len(stages) == 1 and strides == {stage}
        assert r.smem == stages.pop() * stage
    else:
        assert r.smem == r.defines["STAGES"] * stage


@pytest.mark.parametrize("name", ["10_mma_tf32_ptx", "16_mma_tf32_rotating_ptx"])
def test_ptx_rung_is_hand_written_for_the_h200_driver(name):
    text = sources.find_source(by_name()[name].source).read_text()
    version = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", text, re.M)
    assert version and (int(version.group(1)), int(version.group(2))) <= (8, 0)
    assert re.search(r"^\s*\.target\s+sm_80\b", text, re.M)
    mmas = len(re.findall(r"^\s*mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32", text, re.M))
    cvts = len(re.findall(r"^\s*cvt\.rna\.tf32\.f32", text, re.M))
    if name == "10_mma_tf32_ptx":
        # Every operand goes through cvt.rna.tf32.f32 before its mma: 32 per
        # k-step of 8, 4 k-steps per k-tile, 32 MMAs per k-step.
        assert (mmas, cvts) == (4 * 32, 4 * 32)
    else:
        # Two main loops (16-byte and 4-byte copies) of 4 k-steps x 32 MMAs;
        # every fragment register rounded by add.s32 of 0x1000 then max.s32
        # with itself: per loop 4 k-steps x 32, plus the 32 of the prologue.
        adds = re.findall(r"^\s*add\.s32\s+%rt, (%\w+), 4096;\n\s*max\.s32\s+%\w+, %rt, (%\w+);",
                          text, re.M)
        assert mmas == 2 * 4 * 32 and cvts == 0
        assert len(adds) == 2 * (4 * 32 + 32) and all(x == y for x, y in adds)


@pytest.mark.parametrize("name, aligned", [("15_mma_tf32_rotating", 0),
                                           ("15_mma_tf32_rotating", 1),
                                           ("16_mma_tf32_rotating_ptx", None)])
def test_rotating_tf32_rounds_in_one_instruction_and_loads_b_in_pairs(name, aligned):
    """Rungs 15 and 16's design, as their SASS shows it on sm_90: operands
    rounded by one VIADDMNMX each (no FSETP + predicated IADD, which is what
    cvt.rna becomes), B fragments of two n-tiles per LDS.64, main loops free
    of local memory, and in the 16-byte main loop no branch but its back-edge
    (the stage copy sits among the MMAs). Rung 16 (PTX) has both main loops
    in one kernel: each is checked."""
    r = by_name()[name]
    defines = None if aligned is None else r.instantiation_defines(aligned)
    b = compile_binary(r.source, r.entry, defines=defines, arch="sm_90")
    mains = [lp for lp in sass.loops(sass.disassemble(b.cubin))
             if any(op == "HMMA" for op, _ in lp)]
    assert len(mains) == (2 if aligned is None else 1), [len(lp) for lp in mains]
    for loop in mains:
        ops = Counter(op + mods for op, mods in loop)
        base = Counter(op for op, _ in loop)
        hmma = ops["HMMA.1688.F32.TF32"]
        assert hmma == (64 // 16) * (64 // 8) * (32 // 8), dict(ops)   # one k-tile per trip
        # every A and B register of a k-tile rounded once: per k8 step a warp loads
        # 4 x 4 A and 8 x 2 B registers
        assert base["VIADDMNMX"] == 4 * (4 * 4 + 8 * 2), dict(base)
        assert base["FSETP"] == 0 and base["F2F"] == 0
        assert ops["LDS.64"] == 4 * 8 * 2 // 2, dict(ops)
        assert not any(op in ("LDL", "STL") for op in base)
    vector = [lp for lp in mains if any(op == "LDGSTS" and mods.endswith(".128")
                                        for op, mods in lp)]
    if aligned != 0:
        (loop,) = vector
        assert [op for op, _ in loop].count("BRA") == 1
