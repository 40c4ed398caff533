"""Rung 30 (cu/gemm/30_small_m.cu, host side drvgemm_small_m.py) checked
with no GPU:

* every registered instantiation compiles with NVRTC for sm_80 and sm_90,
  with no spills and no stack, within its launch-bounds register cap, at the
  blocks per SM the plan assumes, and in the shared memory of both archs;
* the SASS of the aligned path streams B with 16-byte copies
  (LDGSTS.E.BYPASS.128: cp.async.cg, a 128-bit global load that lands in
  shared memory), four per warp step, and uses HMMA (16-bit) or FFMA (fp32);
  the unaligned path has no 16-byte global access at all;
* a missing define is a compile error naming it;
* a lane-level numpy emulation of the kernel (tests/small_m_emulator.py)
  gives exactly A @ B on small-integer inputs for odd shapes, both alignment
  classes, forced split counts and z chunks;
* the plan: its invariants, and its choice for a table of shapes (a change
  of choice shows up here).

Compiles are disk-cached by drvgemm.compiler (~50 compiles cold).
"""
from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import drvgemm_small_m as sm  # noqa: E402
from drvgemm import sass  # noqa: E402
from drvgemm.compiler import compile_binary, parse_resources  # noqa: E402
from drvgemm.errors import CompileError  # noqa: E402
from small_m_emulator import Emulator  # noqa: E402

SOURCE = str(ROOT / sm.SOURCE)
ARCHS = ("sm_80", "sm_90")
SMEM_OPTIN = {"sm_80": 163 * 1024, "sm_90": 227 * 1024}
SMEM_PER_SM = {"sm_80": 164 * 1024, "sm_90": 228 * 1024}


@functools.lru_cache(maxsize=None)
def _build(inst: sm.SmallMInstance, arch: str):
    b = compile_binary(SOURCE, sm.ENTRY, defines=inst.defines, arch=arch)
    return b, parse_resources(b.log)[b.entry]


@functools.lru_cache(maxsize=None)
def _sass(inst: sm.SmallMInstance) -> str:
    b, _ = _build(inst, "sm_90")
    return sass.disassemble(b.cubin)


def _ops(text: str) -> list[str]:
    return re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)",
                      text)


def _loops(text: str):
    """[(opcodes of the loop body)] for every backward branch in a disassembly."""
    labels, ins = {}, []
    for line in text.splitlines():
        m = re.match(r"^\s*(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)[^;]*?"
                      r"(?:`\((\.L_x_\d+)\))?\s*;", line)
        if m:
            ins.append((m.group(1), m.group(2)))
    out = []
    for i, (op, target) in enumerate(ins):
        if op.startswith("BRA") and target in labels and labels[target] <= i:
            out.append([o for o, _ in ins[labels[target]:i + 1]])
    return out


def _main_loop(inst) -> list[str]:
    """The loop that does the math: the one with the most HMMA / FFMA."""
    key = "HMMA" if inst.precision != "fp32" else "FFMA"
    loops = _loops(_sass(inst))
    best = max(loops, key=lambda body: sum(o.startswith(key) for o in body))
    assert any(o.startswith(key) for o in best), f"{inst.name}: no loop with {key}"
    return best


# ---------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------
def test_registry_is_complete_and_unique():
    names = [i.name for i in sm.INSTANCES]
    assert len(names) == len(set(names))
    for prec in ("bf16", "fp16"):
        for aligned in (True, False):
            for out16 in (False, True):
                rows = sorted(i.rows for i in sm.INSTANCES if i.precision == prec
                              and i.aligned == aligned and i.out16 == out16)
                assert rows == [16, 32, 64]
    assert {(i.rows, i.aligned) for i in sm.INSTANCES if i.precision == "fp32"} == \
        {(16, True), (16, False)}


@pytest.mark.parametrize("m,prec,rows,z", [(1, "bf16", 16, 1), (16, "bf16", 16, 1),
                                           (17, "fp16", 32, 1), (33, "bf16", 64, 1),
                                           (64, "bf16", 64, 1), (1, "fp32", 16, 1),
                                           (17, "fp32", 16, 2), (64, "fp32", 16, 4)])
def test_instance_choice(m, prec, rows, z):
    inst = sm.instance_for(m, prec, True)
    assert inst.rows == rows
    assert sm.plan(m, 4096, 4096, prec).zchunks == z


def test_bad_requests_raise():
    with pytest.raises(ValueError):
        sm.instance_for(65, "bf16", True)
    with pytest.raises(ValueError):
        sm.instance_for(4, "int8", True)
    with pytest.raises(ValueError):
        sm.instance_for(4, "fp32", True, out16=True)


def test_alignment_rule():
    assert sm.alignment_ok("bf16", 4096, 4096, 0x1000, 0x2000)
    assert not sm.alignment_ok("bf16", 4100, 4096, 0x1000, 0x2000)     # N % 8
    assert not sm.alignment_ok("bf16", 4096, 4098, 0x1000, 0x2000)     # K % 4
    assert not sm.alignment_ok("bf16", 4096, 4096, 0x1000, 0x2002)     # B + 1 element
    assert not sm.alignment_ok("bf16", 4096, 4096, 0x1002, 0x2000)     # A + 1 element
    assert sm.alignment_ok("bf16", 4096, 4096, 0x1008, 0x2000)         # A 8-byte is enough
    assert not sm.alignment_ok("fp32", 4096, 4096, 0x1008, 0x2000)     # fp32 A needs 16
    assert sm.alignment_ok("fp32", 4100, 4096, 0x1000, 0x2000)         # N % 4 for fp32


def test_missing_defines_are_errors():
    inst = sm.INSTANCES[0]
    for name in ("PREC", "ALIGNED", "ROWS", "WARPS", "STAGES", "MIN_BLOCKS", "OUT_16"):
        d = {k: v for k, v in inst.defines.items() if k != name}
        with pytest.raises(CompileError) as e:
            compile_binary(SOURCE, sm.ENTRY, defines=d, arch="sm_90")
        assert name in (e.value.log or "") + str(e.value)


def test_host_and_kernel_agree_on_shared_memory():
    inst = sm.instance_for(16, "bf16", True)
    bad = dict(inst.defines, SMEM_BYTES_HOST=inst.smem + 16)
    with pytest.raises(CompileError):
        compile_binary(SOURCE, sm.ENTRY, defines=bad, arch="sm_90")


# ---------------------------------------------------------------------------
# compile, resources
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("inst", sm.INSTANCES, ids=lambda i: i.name)
def test_compiles_without_spills(inst, arch):
    _, res = _build(inst, arch)
    assert res.spill_stores == 0 and res.spill_loads == 0, res
    assert res.stack == 0, res
    assert res.registers <= inst.register_cap, res
    # the occupancy the plan assumes: at least the launch-bounds promise
    assert inst.blocks_per_sm(res.registers, smem_per_sm=SMEM_PER_SM[arch]) >= \
        min(inst.min_blocks, SMEM_PER_SM[arch] // (inst.smem + 1024))
    assert inst.smem <= SMEM_OPTIN[arch]
    # what the registry says the registers are for
    if inst.precision != "fp32" and inst.rows <= 32:
        assert res.registers <= 128, res
    if inst.precision == "fp32":
        assert res.registers <= 128, res


# ---------------------------------------------------------------------------
# SASS (sm_90)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("inst", [i for i in sm.INSTANCES if i.aligned], ids=lambda i: i.name)
def test_aligned_path_streams_b_in_16_byte_copies(inst):
    ops = _ops(_sass(inst))
    assert not any(o.startswith(("LDL", "STL")) for o in ops)
    body = _main_loop(inst)
    b_copies = [o for o in body if o.startswith("LDGSTS") and o.endswith(".128")]
    # four 16-byte chunks of B per lane per step (plus, for fp32, one of A)
    assert len(b_copies) == (4 if inst.precision != "fp32" else 5), body
    assert all("BYPASS" in o for o in b_copies[:4]), b_copies
    # no plain loads of B in the loop: everything comes through the ring
    assert not any(o.startswith("LDG.") for o in body), body
    if inst.precision == "fp32":
        assert sum(o.startswith("FFMA") for o in body) == 16 * inst.rows
    else:
        hmma = [o for o in body if o.startswith("HMMA")]
        kind = "HMMA.16816.F32.BF16" if inst.precision == "bf16" else "HMMA.16816.F32"
        assert len(hmma) == 8 * inst.rows // 16
        assert all(o == kind for o in hmma), hmma
        assert sum(o.startswith("PRMT") for o in body) == 16   # one per B fragment register


@pytest.mark.parametrize("inst", [i for i in sm.INSTANCES if not i.aligned],
                         ids=lambda i: i.name)
def test_unaligned_path_has_no_wide_global_access(inst):
    ops = _ops(_sass(inst))
    assert not any(o.startswith(("LDL", "STL")) for o in ops)
    assert not any(o.startswith("LDGSTS") for o in ops)
    # the split-K workspace (16-byte aligned tiles) is the only vector traffic
    wide = [o for o in ops if o.startswith(("LDG", "STG")) and o.endswith((".64", ".128"))
            and "STRONG" not in o]
    assert all(o.startswith("STG") for o in wide), wide


def test_source_fragment_conventions_match_the_emulator():
    """The emulator hard-codes these choices; if the kernel changes them,
    the emulator must change with it."""
    text = Path(SOURCE).read_text()
    assert "prmt(w01[0][i], w01[1][i], 0x5410)" in text
    assert "prmt(w01[0][i], w01[1][i], 0x7632)" in text
    assert "a[0] = lo.x; a[2] = lo.y;" in text
    assert "a[1] = hi.x; a[3] = hi.y;" in text
    assert "c.k = step * KSTEP + 4 * (G.lane & 3);" in text
    assert "const int rslot = 8 * (lane & 3) + ((lane >> 2) ^ (2 * (lane & 3)));" in text


# ---------------------------------------------------------------------------
# emulation
# ---------------------------------------------------------------------------
EMU_CASES = [
    # precision, M, N, K, aligned, forced splits (None: the plan's)
    ("bf16", 1, 64, 16, True, None),
    ("bf16", 5, 72, 40, True, 2),
    ("bf16", 8, 8, 16, True, None),
    ("bf16", 9, 136, 100, True, 3),
    ("bf16", 16, 64, 48, True, 3),
    ("fp16", 17, 128, 64, True, 2),
    ("fp16", 33, 64, 36, True, None),
    ("bf16", 64, 72, 20, True, 2),
    ("bf16", 3, 67, 37, False, 2),
    ("fp16", 20, 70, 37, False, None),
    ("bf16", 1, 1, 1, False, None),
    ("bf16", 7, 13, 129, False, 5),
    ("fp32", 1, 128, 8, True, None),
    ("fp32", 3, 132, 20, True, 3),
    ("fp32", 16, 256, 12, True, None),
    ("fp32", 17, 130, 21, False, 2),
    ("fp32", 40, 5, 9, False, 3),
    ("fp32", 1, 1, 1, False, None),
]


@pytest.mark.parametrize("prec,m,n,k,aligned,splits", EMU_CASES)
def test_emulated_kernel_is_exact(prec, m, n, k, aligned, splits):
    rng = np.random.default_rng(m * 1000003 + n * 1009 + k)
    inst = sm.instance_for(m, prec, aligned)
    p = sm.plan(m, n, k, prec, aligned=aligned)
    sps, sp = p.steps_per_split, p.splits
    if splits:
        steps = -(-k // inst.kstep)
        sps = -(-steps // splits)
        sp = -(-steps // sps)
        assert sp == splits
    A = rng.integers(-4, 5, (m, k)).astype(np.float64)
    B = rng.integers(-4, 5, (k, n)).astype(np.float64)
    C = rng.integers(-4, 5, (m, n)).astype(np.float64)
    emu = Emulator(prec, inst.rows, inst.warps, aligned, inst.nwarps)
    out = emu.run(A, B, C, m, n, k, 1.5, -0.5, p.strips, p.zchunks, sp, sps)
    ref = 1.5 * (A @ B) - 0.5 * C
    bad = np.argwhere(out != ref)
    assert bad.size == 0, f"{prec} {m}x{n}x{k} aligned={aligned} splits={sp}: first bad {bad[:3]}"
    # beta == 0: C's contents never matter
    Cn = np.full((m, n), np.nan)
    out0 = emu.run(A, B, Cn, m, n, k, 1.0, 0.0, p.strips, p.zchunks, sp, sps)
    assert np.array_equal(out0, A @ B)


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("prec", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("m", [1, 2, 7, 16, 17, 32, 48, 64])
@pytest.mark.parametrize("n,k", [(1, 1), (4096, 4096), (11008, 4096), (4096, 11008),
                                 (28672, 8192), (128256, 4096), (64, 65536), (333, 0),
                                 (1000, 17)])
def test_plan_invariants(prec, m, n, k):
    p = sm.plan(m, n, k, prec)
    i = p.instance
    steps = -(-k // i.kstep)
    assert p.strips * i.strip >= n > (p.strips - 1) * i.strip
    assert p.zchunks * i.rows >= m > (p.zchunks - 1) * i.rows
    assert p.splits >= 1 and p.splits <= sm.MAX_SPLITS
    if steps:
        assert p.splits * p.steps_per_split >= steps
        assert (p.splits - 1) * p.steps_per_split < steps          # no empty split
    else:
        assert p.splits == 1
    assert p.grid[0] == p.strips * p.zchunks * p.splits < 2 ** 31
    assert p.workspace_floats == (0 if p.splits == 1 else
                                  p.strips * p.zchunks * p.splits * i.rows * i.strip)
    assert p.predicted_s > 0
    assert p.explain()


# The choice for decode shapes (the launch-bounds register floor, H200's
# 132 SMs): a change of model or registry shows up as a diff of this table.
PLAN_TABLE = {
    # (prec, m, n, k): (rows, splits, blocks)
    ("bf16", 1, 4096, 4096): (16, 4, 256),
    ("bf16", 16, 4096, 4096): (16, 4, 256),
    ("fp16", 4, 4096, 4096): (16, 4, 256),
    ("bf16", 16, 11008, 4096): (16, 2, 344),
    ("bf16", 16, 4096, 11008): (16, 4, 256),
    ("bf16", 16, 14336, 4096): (16, 1, 224),
    ("bf16", 16, 28672, 8192): (16, 4, 1792),
    ("bf16", 16, 128256, 4096): (16, 3, 6012),
    ("bf16", 64, 4096, 4096): (64, 4, 256),
    ("bf16", 1, 64, 65536): (16, 64, 64),
    ("fp32", 16, 4096, 4096): (16, 11, 352),
    ("fp32", 64, 4096, 4096): (16, 3, 384),
}


@pytest.mark.parametrize("key", list(PLAN_TABLE), ids=lambda k: "x".join(map(str, k)))
def test_plan_choice_table(key):
    prec, m, n, k = key
    p = sm.plan(m, n, k, prec)
    assert (p.instance.rows, p.splits, p.grid[0]) == PLAN_TABLE[key], p.explain()


def test_plan_is_deterministic_and_fills_the_gpu_for_decode():
    for n, k in [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (28672, 8192)]:
        a = sm.plan(8, n, k, "bf16")
        b = sm.plan(8, n, k, "bf16")
        assert (a.splits, a.steps_per_split, a.grid) == (b.splits, b.steps_per_split, b.grid)
        # Little's law is covered: resident blocks x bytes in flight per block
        resident = min(a.grid[0], a.blocks_per_sm * 132)
        assert resident * a.instance.in_flight_bytes >= 132 * sm.IN_FLIGHT_PER_SM, a.explain()
