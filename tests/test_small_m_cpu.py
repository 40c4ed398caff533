"""Rung 30 (cu/gemm/30_small_m.cu, host side drvgemm/ladders/gemm/small_m.py)
checked with no GPU:

* every registered instantiation compiles with NVRTC for sm_80 and sm_90,
  with no spills and no stack, within its launch-bounds register cap, and
  in the shared memory of both archs (the kernel checks the host's figure
  at compile time);
* the SASS of the aligned path streams B with 16-byte copies
  (LDGSTS.E.BYPASS.128), four per warp step, with HMMA (16-bit) or FFMA
  (fp32); the unaligned path has no 8- or 16-byte plain global load of A
  or B: 16-bit loads them element by element (no LDGSTS), fp32 streams B in
  16-byte LDGSTS too (the aligned blocks around each row's columns, one
  more per row, clipped at B's end; the lanes read their words back with
  LDS.32) and A in 4-byte LDGSTS (zero-filled per element), no plain load
  of them in the main loop;
* a missing define is a compile error naming it;
* a lane-level numpy emulation of the kernel (tests/small_m_emulator.py)
  gives exactly A @ B on small-integer inputs for odd shapes, both alignment
  classes, split counts and z chunks, launched with the host side's own
  arguments;
* the host side: alignment rule, split counts, workspace layout, arguments.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from drvgemm.ladders.gemm import small_m
from drvgemm.ladders.gemm.registry import RUNGS, by_name
from drvgemm.runtime import sass
from drvgemm.runtime.compiler import compile_binary, parse_resources
from drvgemm.runtime.errors import CompileError
from drvgemm.runtime.sources import find_source
import resource_records
from small_m_emulator import Emulator, Workspace

SOURCE = str(find_source("30_small_m.cu"))
ARCHS = ("sm_80", "sm_90")
SMEM_OPTIN = {"sm_80": 163 * 1024, "sm_90": 227 * 1024}
SMEM_PER_SM = {"sm_80": 164 * 1024, "sm_90": 228 * 1024}
HOST = small_m.SMALL_M
ENTRIES = [r for r in RUNGS if r.host == "small_m"]
# (rung, aligned, narrow C) of every instantiation
INSTANCES = [(r, al, nar) for r in ENTRIES for al in (True, False)
             for nar in ((False, True) if r.narrow_output else (False,))]


def _id(x):
    r, al, nar = x
    return f"{r.name}-a{int(al)}{'-out16' if nar else ''}"


@functools.lru_cache(maxsize=None)
def _build(name, aligned, narrow, arch):
    r = by_name()[name]
    b = compile_binary(SOURCE, r.entry, defines=r.instantiation_defines(aligned, narrow),
                       arch=arch)
    return b, parse_resources(b.log)[b.entry]


@functools.lru_cache(maxsize=None)
def _sass(name, aligned, narrow):
    b, _ = _build(name, aligned, narrow, "sm_90")
    return sass.disassemble(b.cubin)


def test_registry_is_complete():
    names = {r.name for r in ENTRIES}
    assert names == {"30_small_m_fp32", "30_small_m_bf16", "30_small_m_bf16_r32",
                     "30_small_m_bf16_r64", "30_small_m_fp16", "30_small_m_fp16_r32",
                     "30_small_m_fp16_r64"}
    for r in ENTRIES:
        g = small_m.geometry(r)
        assert r.smem == g.smem and r.block == (g.threads, 1, 1)
        assert (r.tile_m, r.tile_n) == (g.rows, g.strip)
        assert r.narrow_output == (r.precision != "fp32")
        assert r.defines["OUT_16"] == 0 and "SMEM_BYTES_HOST" not in r.defines
        # each build checks its own figure; a launch declares the larger one
        for al in (True, False):
            assert r.instantiation_defines(al)["SMEM_BYTES_HOST"] == g.smem_of(al) <= g.smem
        assert g.smem == max(g.smem_of(True), g.smem_of(False))
        if r.precision != "fp32":
            assert g.smem_of(True) == g.smem_of(False)
    # fp32 unaligned: 33 blocks of 16 bytes per B row of a step, not 32
    f32 = small_m.geometry(by_name()["30_small_m_fp32"])
    assert f32.smem_of(False) - f32.smem_of(True) == f32.warps * f32.stages * 4 * 16
    # the constants the H200 runs chose (benchmarks/notes/small-m.md)
    assert by_name()["30_small_m_bf16"].defines["STAGES"] == 6
    assert by_name()["30_small_m_bf16_r64"].defines["MIN_BLOCKS"] == 2


def test_missing_defines_are_errors():
    r = by_name()["30_small_m_bf16"]
    full = r.instantiation_defines(True)
    for name in ("PREC", "ALIGNED", "ROWS", "WARPS", "STAGES", "MIN_BLOCKS", "OUT_16"):
        d = {k: v for k, v in full.items() if k != name}
        with pytest.raises(CompileError) as e:
            compile_binary(SOURCE, r.entry, defines=d, arch="sm_90")
        assert name in (e.value.log or "") + str(e.value)


def test_host_and_kernel_agree_on_shared_memory():
    r = by_name()["30_small_m_bf16"]
    bad = dict(r.instantiation_defines(True), SMEM_BYTES_HOST=r.smem + 16)
    with pytest.raises(CompileError):
        compile_binary(SOURCE, r.entry, defines=bad, arch="sm_90")
    # the fp32 builds differ: each one's figure is its own
    f32 = by_name()["30_small_m_fp32"]
    for al in (True, False):
        bad = dict(f32.instantiation_defines(al),
                   SMEM_BYTES_HOST=small_m.geometry(f32).smem_of(not al))
        with pytest.raises(CompileError):
            compile_binary(SOURCE, f32.entry, defines=bad, arch="sm_90")


def compile_inputs(inst, arch):
    """(source, entry, defines, arch) of one of INSTANCES on one arch."""
    r, al, nar = inst
    return SOURCE, r.entry, r.instantiation_defines(al, nar), arch


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("inst", INSTANCES, ids=_id)
def test_compiles_without_spills(inst, arch):
    # ptxas's figures, from tests/data/resource_records.json where it holds this very compile
    r = inst[0]
    res = resource_records.resources(*compile_inputs(inst, arch))
    g = small_m.geometry(r)
    assert res.spill_stores == 0 and res.spill_loads == 0, res
    assert res.stack == 0, res
    assert res.registers <= g.register_cap, res
    assert g.blocks_per_sm(smem_per_sm=SMEM_PER_SM[arch]) >= \
        min(g.min_blocks, SMEM_PER_SM[arch] // (g.smem + 1024))
    assert g.smem <= SMEM_OPTIN[arch]


def _main_loop(inst):
    key = "HMMA" if inst[0].precision != "fp32" else "FFMA"
    loops = []
    text = _sass(inst[0].name, inst[1], inst[2])
    labels, ins = {}, []
    for line in text.splitlines():
        m = sass._LABEL.match(line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = sass.OPCODE.search(line)
        if m:
            t = sass._BRANCH_TARGET.search(line, m.end())
            ins.append((m.group(1) + m.group(2), t.group(1) if t else None))
    for i, (op, target) in enumerate(ins):
        if op.startswith("BRA") and target in labels and labels[target] <= i:
            loops.append([o for o, _ in ins[labels[target]:i + 1]])
    best = max(loops, key=lambda body: sum(o.startswith(key) for o in body))
    assert any(o.startswith(key) for o in best), f"{inst[0].name}: no loop with {key}"
    return best


@pytest.mark.parametrize("inst", [i for i in INSTANCES if i[1] and not i[2]], ids=_id)
def test_aligned_path_streams_b_in_16_byte_copies(inst):
    r = inst[0]
    ops = sass.opcodes(_sass(*[inst[0].name, inst[1], inst[2]]))
    assert not any(o.startswith(("LDL", "STL")) for o in ops)
    body = _main_loop(inst)
    b_copies = [o for o in body if o.startswith("LDGSTS") and o.endswith(".128")]
    assert len(b_copies) == (4 if r.precision != "fp32" else 5), body
    assert all("BYPASS" in o for o in b_copies[:4]), b_copies
    assert not any(o.startswith("LDG.") for o in body), body
    rows = r.defines["ROWS"]
    if r.precision == "fp32":
        assert sum(o.startswith("FFMA") for o in body) == 16 * rows
    else:
        hmma = [o for o in body if o.startswith("HMMA")]
        kind = "HMMA.16816.F32.BF16" if r.precision == "bf16" else "HMMA.16816.F32"
        assert len(hmma) == 8 * rows // 16 and all(o == kind for o in hmma), hmma


@pytest.mark.parametrize("inst", [i for i in INSTANCES if not i[1] and not i[2]], ids=_id)
def test_unaligned_path_has_no_wide_global_access(inst):
    r = inst[0]
    ops = sass.opcodes(_sass(inst[0].name, inst[1], inst[2]))
    assert not any(o.startswith(("LDL", "STL")) for o in ops)
    wide = [o for o in ops if o.startswith(("LDG.", "STG")) and o.endswith((".64", ".128"))
            and "STRONG" not in o]
    assert all(o.startswith("STG") for o in wide), wide   # the workspace tiles only
    copies = [o for o in ops if o.startswith("LDGSTS")]
    if r.precision != "fp32":
        assert not copies, copies          # cp.async has no 2-byte copy
        return
    # fp32: B in 16-byte copies of the aligned blocks around each row's
    # columns (whole in the main stretch, clipped at B's end in the last
    # steps), A in one 4-byte cp.async per element; the ring stays asynchronous
    body = _main_loop(inst)
    loop_copies = [o for o in body if o.startswith("LDGSTS")]
    b_whole = [o for o in loop_copies if o == "LDGSTS.E.BYPASS.128"]
    b_clipped = [o for o in loop_copies if o == "LDGSTS.E.BYPASS.128.ZFILL"]
    a_copies = [o for o in loop_copies if o == "LDGSTS.E"]
    # 4 rows of 32 lanes, and block 32 of each row (lanes 0..3); each path once.
    # 4-byte copies: A's 4, and each of the 5 clipped blocks' element-wise
    # form (the block that holds B's last element, named element by element)
    assert (len(b_whole), len(b_clipped), len(a_copies)) == (5, 5, 4 + 5 * 4), loop_copies
    assert len(loop_copies) == 34, loop_copies
    assert not any(o.startswith("LDG.") for o in body), body
    # the lanes read back words: 4 LDS.32 per B row, 16 a step; A broadcast in LDS.128
    loads = [o for o in body if o.startswith("LDS")]
    assert sum(o == "LDS.128" for o in loads) == r.defines["ROWS"], loads
    assert sum(o == "LDS" for o in loads) >= 16, loads
    assert sum(o.startswith("FFMA") for o in body) == 16 * r.defines["ROWS"]


def test_alignment_rule():
    bf, f32 = by_name()["30_small_m_bf16"], by_name()["30_small_m_fp32"]
    ok = HOST.aligned
    assert ok(bf, 1, 4096, 4096, 0x1000, 0x2000, 0)
    assert not ok(bf, 1, 4100, 4096, 0x1000, 0x2000, 0)     # N % 8
    assert not ok(bf, 1, 4096, 4098, 0x1000, 0x2000, 0)     # K % 4
    assert not ok(bf, 1, 4096, 4096, 0x1000, 0x2002, 0)     # B + 1 element
    assert not ok(bf, 1, 4096, 4096, 0x1002, 0x2000, 0)     # A + 1 element
    assert ok(bf, 1, 4096, 4096, 0x1008, 0x2000, 0x3002)    # A 8-byte is enough; C any
    assert not ok(f32, 1, 4096, 4096, 0x1008, 0x2000, 0)    # fp32 A needs 16
    assert ok(f32, 1, 4100, 4096, 0x1000, 0x2000, 0)        # N % 4 for fp32


def test_split_counts_are_distinct_and_never_empty():
    r = by_name()["30_small_m_bf16"]
    g = small_m.geometry(r)
    for m, n, k in [(1, 4096, 4096), (16, 64, 65536), (3, 100, 17), (8, 8, 1)]:
        counts = HOST.split_counts(r, m, n, k)
        assert counts[0] == 1 and list(counts) == sorted(set(counts))
        assert max(counts) <= small_m.MAX_SPLITS
        steps = -(-k // g.kstep)
        for s in counts:
            strips, z, splits, sps = g.shape(m, n, k, s)
            assert splits == s and (s - 1) * sps < steps <= s * sps
            # every warp keeps >= MIN_STEPS_PER_WARP steps, unless unsplit
            assert s == 1 or sps >= g.kwarps * small_m.MIN_STEPS_PER_WARP


def test_launch_arguments_and_workspace_layout():
    r = by_name()["30_small_m_bf16"]
    m, n, k, split = 5, 200, 4096, 4
    need = HOST.workspace_bytes(r, m, n, split)
    strips = -(-n // 64)
    assert need == 256 + strips * split * 16 * 64 * 4
    with pytest.raises(ValueError, match="workspace"):
        HOST.launches(r, "K", 1, 2, 3, m, n, k, 1.0, 0.0, split=split, workspace=0)
    [(kern, cfg)] = HOST.launches(r, "K", 0xA0, 0xB0, 0xC0, m, n, k, 2.0, 0.5, split=split,
                                  workspace=0x10000)
    assert kern == "K" and cfg.block == (128, 1, 1) and cfg.smem == r.smem
    assert cfg.grid == (strips * split, 1, 1)
    assert cfg.args == (0xA0, 0xB0, 0xC0, 0x10000 + 256, 0x10000, m, n, k, 2.0, 0.5, strips, 1,
                        split, 64, split)      # 4 splits: one reduction level
    # many splits: a counter per strip, then one per group of each strip
    m, n, k, split = 3, 130, 16 * 16 * 128, 128
    g = small_m.reduction_group(split)
    assert g == 16
    heads = 3 * (1 + split // g) * 4          # 3 strips of 64
    assert HOST.workspace_bytes(r, m, n, split) == 256 * -(-heads // 256) + 3 * split * 16 * 64 * 4
    [(_, cfg)] = HOST.launches(r, "K", 0xA0, 0xB0, 0xC0, m, n, k, 1.0, 0.0, split=split,
                               workspace=0x10000)
    assert cfg.args[3] == 0x10000 + 256 * -(-heads // 256) and cfg.args[-3:] == (split, 16, g)
    # K = 0: one empty split, A and B never read
    [(_, cfg)] = HOST.launches(r, "K", 0, 0, 0xC0, m, n, 0, 1.0, 3.0)
    assert cfg.args[:5] == (0xC0, 0xC0, 0xC0, 0, 0) and cfg.args[-3:] == (1, 0, 1)
    assert HOST.workspace_bytes(r, m, n, 1) == 0


EMU_CASES = [
    # rung, M, N, K, aligned, split
    ("30_small_m_bf16", 1, 64, 16, True, 1),
    ("30_small_m_bf16", 5, 72, 40, True, 2),
    ("30_small_m_bf16", 9, 136, 100, True, 3),
    ("30_small_m_bf16", 16, 64, 48, True, 3),
    ("30_small_m_fp16_r32", 17, 128, 64, True, 2),
    ("30_small_m_fp16_r64", 33, 64, 36, True, 1),
    ("30_small_m_bf16_r64", 64, 72, 20, True, 2),
    ("30_small_m_bf16", 3, 67, 37, False, 2),
    ("30_small_m_fp16_r32", 20, 70, 37, False, 1),
    ("30_small_m_bf16", 1, 1, 1, False, 1),
    ("30_small_m_bf16", 7, 13, 129, False, 5),
    ("30_small_m_bf16", 40, 72, 64, True, 2),          # z chunks of 16-bit rows
    ("30_small_m_fp32", 1, 128, 8, True, 1),
    ("30_small_m_fp32", 3, 132, 20, True, 3),
    ("30_small_m_fp32", 17, 130, 21, False, 2),
    ("30_small_m_fp32", 40, 5, 9, False, 3),
    ("30_small_m_fp32", 1, 1, 1, False, 1),
    # two reduction levels: groups of 8 (the last one short), N under the strip
    ("30_small_m_bf16", 3, 40, 16 * 40, False, 40),
    ("30_small_m_bf16_r32", 20, 72, 16 * 64, True, 64),
    ("30_small_m_fp32", 2, 130, 4 * 33, False, 33),
]


@pytest.mark.parametrize("name,m,n,k,aligned,split", EMU_CASES)
def test_emulated_kernel_is_exact(name, m, n, k, aligned, split):
    r = by_name()[name]
    g = small_m.geometry(r)
    rng = np.random.default_rng(m * 1000003 + n * 1009 + k)
    A = rng.integers(-4, 5, (m, k)).astype(np.float64)
    B = rng.integers(-4, 5, (k, n)).astype(np.float64)
    C = rng.integers(-4, 5, (m, n)).astype(np.float64)
    ws = HOST.workspace_bytes(r, m, n, split)
    [(_, cfg)] = HOST.launches(r, None, 1, 2, 3, m, n, k, 1.5, -0.5, split=split,
                               workspace=0x1000 if ws else 0)
    strips, zchunks, splits, sps, group = cfg.args[10:]
    assert splits == split
    emu = Emulator(r.precision, g.rows, g.warps, aligned, g.nwarps)
    out = emu.run(A, B, C, m, n, k, 1.5, -0.5, strips, zchunks, splits, sps, group)
    bad = np.argwhere(out != 1.5 * (A @ B) - 0.5 * C)
    assert bad.size == 0, f"{name} {m}x{n}x{k} aligned={aligned} split={split}: {bad[:3]}"
    out0 = emu.run(A, B, np.full((m, n), np.nan), m, n, k, 1.0, 0.0, strips, zchunks, splits,
                   sps, group)
    assert np.array_equal(out0, A @ B)    # beta == 0: C never read


# fp32's unaligned stream: the shift of each row inside its 16-byte blocks
# comes from B's address and N (B 4, 8 or 12 bytes into its allocation, N % 4
# of 1, 2, 3 or 0), the last rows end at B's end (clipped copies, rows >= K
# when K % 4 != 0), and N below, at and over the 128 columns of a warp.
SHIFTED_CASES = [
    # M, N, K, B offset in bytes, split
    (1, 129, 9, 4, 1), (3, 130, 7, 8, 1), (2, 131, 5, 12, 1), (5, 128, 6, 4, 1),
    (1, 1, 1, 4, 1), (2, 1, 7, 12, 1), (1, 2, 3, 8, 1), (4, 3, 11, 4, 1),
    (3, 5, 13, 12, 2), (17, 127, 10, 8, 1), (2, 257, 9, 12, 2), (1, 259, 17, 4, 3),
    (6, 384, 9, 8, 1), (33, 67, 21, 4, 2), (1, 4097, 3, 12, 1), (2, 130, 64, 0, 4),
    (1, 133, 33, 0, 2),
]


@pytest.mark.parametrize("m,n,k,b_offset,split", SHIFTED_CASES)
def test_shifted_fp32_stream_is_exact(m, n, k, b_offset, split):
    r = by_name()["30_small_m_fp32"]
    g = small_m.geometry(r)
    rng = np.random.default_rng(m * 7 + n * 131 + k * 17 + b_offset)
    A = rng.integers(-4, 5, (m, k)).astype(np.float64)
    B = rng.integers(-4, 5, (k, n)).astype(np.float64)
    pb = 0x10000 + b_offset
    assert not HOST.aligned(r, m, n, k, 0x20000, pb, 0x30000) or b_offset == 0
    ws = Workspace(8 << 20)
    [(_, cfg)] = HOST.launches(r, None, 0x20000, pb, 0x30000, m, n, k, 1.0, 0.0, split=split,
                               workspace=ws.base)
    strips, zchunks, splits, sps = cfg.args[10:14]
    emu = Emulator("fp32", g.rows, g.warps, False, g.nwarps, b_offset=b_offset)
    out = emu.run(A, B, np.full((m, n), np.nan), m, n, k, 1.0, 0.0, strips, zchunks, splits,
                  sps, *cfg.args[14:], workspace=ws, work=cfg.args[3], counters=cfg.args[4])
    bad = np.argwhere(out != A @ B)
    assert bad.size == 0, f"{m}x{n}x{k} B+{b_offset}: {len(bad)} wrong, first {tuple(bad[0])}"
    assert ws.is_zero()


def test_shifted_rows_read_past_column_n_only_into_unstored_columns():
    """The emulated lanes of a warp whose 128 columns pass N read the next
    rows' elements there (one contiguous stretch of B), and zeros past B's
    end: the columns past N carry values that the epilogue never stores."""
    emu = Emulator("fp32", 16, 4, False, b_offset=8)
    n, k = 5, 9
    B = np.arange(1, k * n + 1, dtype=np.float64).reshape(k, n)
    b = emu._shifted_b(B, n, k, 0, 4)            # rows 4..7, columns 0..127
    flat = B.reshape(-1)
    for j in range(4):
        cols = np.arange(32)[:, None] + 32 * np.arange(4)[None, :]
        e = (4 + j) * n + cols
        want = np.where(e < flat.size, flat[np.minimum(e, flat.size - 1)], 0.0)
        assert np.array_equal(b[j], want)
    assert np.array_equal(emu._shifted_b(B, n, k, 0, 8)[1:], np.zeros((3, 32, 4)))  # rows >= K


# One workspace per (stream, host side), kept and reused by launches of every
# shape and every rung-30 entry (dispatch._Workspace): what one split-K launch
# leaves in it is what the next one finds. The tiles start after the counters
# rounded to 256 bytes, so a launch with more than 64 (z chunk, strip) pairs
# finds its counters 64.. where an earlier launch's partials were. These are
# the shapes that failed on the H200 (N = 4104: 65 strips of 64, or 33 of 128
# with z chunks), each after a launch of 64 or fewer counters (K shortened
# where the emulation would be slow: the counters do not depend on K).
REUSE_CASES = [
    # rung, aligned, (M, N, K, split) of the earlier launch, then of the later one
    ("30_small_m_bf16", False, (1, 4096, 64, 4), (1, 4104, 97, 4)),
    ("30_small_m_fp16", False, (2, 4096, 64, 4), (7, 4104, 97, 4)),
    ("30_small_m_bf16_r32", False, (17, 4096, 64, 4), (17, 4104, 97, 4)),
    ("30_small_m_fp16_r64", False, (33, 4096, 64, 4), (33, 4104, 97, 4)),
    ("30_small_m_fp32", False, (1, 4096, 16, 4), (17, 4104, 37, 4)),
    ("30_small_m_fp32", False, (16, 4096, 16, 4), (32, 4104, 37, 4)),
    ("30_small_m_fp32", False, (1, 128, 16, 2), (64, 4104, 21, 2)),
    ("30_small_m_bf16", True, (1, 4096, 64, 4), (16, 4104, 64, 4)),
    # two reduction levels (group counters after the strip counters) and back
    ("30_small_m_bf16", False, (3, 200, 16 * 48, 48), (5, 4104, 97, 4)),
    ("30_small_m_fp32", False, (2, 4104, 37, 4), (3, 300, 4 * 40, 40)),
]


def _emulated_call(ws, r, aligned, m, n, k, split, clear_partials=True):
    """One launch through the host side's arguments on the workspace ``ws``
    (zeroed when made, as the dispatcher's): the emulated C (NaN where never
    written) and the exact product."""
    g = small_m.geometry(r)
    rng = np.random.default_rng(m * 7919 + n * 31 + k)
    A = rng.integers(-4, 5, (m, k)).astype(np.float64)
    B = rng.integers(-4, 5, (k, n)).astype(np.float64)
    assert HOST.workspace_bytes(r, m, n, split) <= ws.mem.size
    [(_, cfg)] = HOST.launches(r, None, 0x100, 0x200, 0x300, m, n, k, 1.0, 0.0, split=split,
                               workspace=ws.base)
    work, counters = cfg.args[3:5]
    strips, zchunks, splits, sps, group = cfg.args[10:]
    assert splits == split
    emu = Emulator(r.precision, g.rows, g.warps, aligned, g.nwarps)
    out = emu.run(A, B, np.full((m, n), np.nan), m, n, k, 1.0, 0.0, strips, zchunks, splits, sps,
                  group, workspace=ws, work=work, counters=counters, clear_partials=clear_partials)
    return out, A @ B


@pytest.mark.parametrize("name,aligned,first,second", REUSE_CASES,
                         ids=[f"{c[0]}-a{int(c[1])}-M{c[3][0]}" for c in REUSE_CASES])
def test_split_k_workspace_is_reusable_across_shapes(name, aligned, first, second):
    r = by_name()[name]
    ws = Workspace(8 << 20)
    for m, n, k, split in (first, second, first):
        out, want = _emulated_call(ws, r, aligned, m, n, k, split)
        bad = np.argwhere(out != want)
        assert bad.size == 0, (f"{name} aligned={int(aligned)} {m}x{n}x{k} split={split} after "
                               f"another shape on the same workspace: {len(bad)} wrong or "
                               f"unwritten outputs, first at {tuple(bad[0])}")
        assert ws.is_zero(), "a split-K launch leaves its workspace all zero"


def test_workspace_left_dirty_breaks_the_next_shape():
    """What the kernel did before its last block cleared the partials: the
    later launch's counter 64 holds an earlier partial and strip 64 (columns
    4096 .. 4103) is never written."""
    r = by_name()["30_small_m_bf16"]
    ws = Workspace(8 << 20)
    _emulated_call(ws, r, False, 1, 4096, 64, 4, clear_partials=False)
    out, _ = _emulated_call(ws, r, False, 1, 4104, 97, 4, clear_partials=False)
    bad = np.argwhere(~np.isfinite(out))
    assert len(bad) == 8 and tuple(bad[0]) == (0, 4096)


def test_last_block_clears_every_partial_it_reads():
    """The kernel side of the emulator's clear_partials: every workspace read
    of the reduction is sum_and_clear's, where each ldcg of a partial is
    followed by a zero store to it."""
    src = open(SOURCE).read()
    body = src[src.index("DEVI void sum_and_clear("):]
    body = body[:body.index("\n}\n")]
    assert body.count("ldcg_f32x4(") == body.count("stcg_zero_f32x4(") == 4
    kernel = src[src.index("small_m_gemm("):]
    assert "ldcg_f32x4(" not in kernel and kernel.count("sum_and_clear(") == 2
