"""Softmax rungs 07..09 (the 16-byte window) and the dispatcher without a GPU:
every registered instantiation compiles (sm_90; sm_80 where it has no
cluster) with no spills inside its launch bounds (ptxas's figures from
tests/data/resource_records.json where it holds that very compile), the SASS of the window
path carries 128-bit loads and stores on odd rows, fp32 rung 09 keeps expf
out of the phase before its row's wait (its exps go with the stores), a missing define is a
compile error in every softmax and memory kernel, the window map covers
every element of a row exactly once at any offset, the split rung's
workspace protocol holds across plans, and auto's choice for a committed
table of shapes (tests/data/softmax_choices.json) is what it was:

    python tests/test_softmax_window_cpu.py    # rewrite the table after a deliberate change
"""
import json
import re
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from drvgemm.ladders.memory import registry as mem_registry
from drvgemm.ladders.softmax import dispatch as sm
from drvgemm.ladders.softmax import plan as smplan
from drvgemm.ladders.softmax import registry as smr
from drvgemm.runtime import compiler, sass, sources
from drvgemm.runtime.errors import CompileError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import resource_records  # noqa: E402

CHOICES = Path(__file__).resolve().parent / "data" / "softmax_choices.json"


def _build(cfg, prec, arch):
    b = compiler.compile_binary(cfg.source, cfg.entry, defines=cfg.defines(prec), arch=arch)
    return b, compiler.parse_resources(b.log)[cfg.entry]


def _budget(cfg):
    # registers a thread that still let min_blocks blocks share an SM (65536 an SM)
    return min(255, 65536 // (cfg.threads * cfg.min_blocks))


def _no_spill(r):
    return r.spill_stores == 0 and r.spill_loads == 0 and r.stack == 0


def _cases():
    out = []
    for cfg in smr.WINDOW_CONFIGS:
        for prec in smr.window_precisions(cfg):
            archs = ("sm_90",) + (("sm_80",) if cfg.arch == "sm_80" and prec != "fp16" else ())
            for arch in archs:
                out.append(pytest.param(cfg, prec, arch,
                                        id=f"{cfg.describe().replace(' ', '-')}-{prec}-{arch}"))
    return out


def compile_inputs(cfg, prec, arch):
    """(source, entry, defines, arch) of one of _cases()."""
    return cfg.source, cfg.entry, cfg.defines(prec), arch


@pytest.mark.parametrize("cfg,prec,arch", _cases())
def test_every_window_instantiation_compiles_without_spills(cfg, prec, arch):
    # ptxas's figures, from tests/data/resource_records.json where that holds this
    # very compile (the digest of all it reads), else compiled here
    r = resource_records.resources(*compile_inputs(cfg, prec, arch))
    assert _no_spill(r), (cfg.describe(), prec, arch, r)
    assert r.registers <= _budget(cfg), (cfg.describe(), r)


def test_cluster_rung_is_refused_on_sm80():
    cfg = next(c for c in smr.WINDOW_CONFIGS if c.kind == "cluster")
    with pytest.raises(CompileError):
        _build(cfg, "fp32", "sm_80")


def _missing_define_cases():
    out = []
    for entry in ("softmax_07_any_row", "softmax_08_any_row_cluster", "softmax_09_split_row",
                  "softmax_11_any_row_pipelined"):
        cfg = next(c for c in smr.WINDOW_CONFIGS if c.entry == entry)
        for name in cfg.defines("fp32"):
            out.append(pytest.param(cfg.source, cfg.entry, cfg.defines("fp32"), name,
                                    id=f"{entry}-{name}"))
    for r in smr.SOFTMAX_RUNGS:
        c = r.configs[-1]
        d = c.defines("fp32", c.vec(4))
        for name in d:
            out.append(pytest.param(r.source, c.entry, d, name, id=f"{c.entry}-{name}"))
    for mk in mem_registry.MEM_KERNELS:
        for name in mk.defines:
            out.append(pytest.param(mk.source, mk.entry, mk.defines, name,
                                    id=f"{mk.entry}-{name}"))
    return out


@pytest.mark.parametrize("source,entry,defines,missing", _missing_define_cases())
def test_a_missing_define_is_a_compile_error(source, entry, defines, missing):
    """Issue 13: no kernel falls back on a default; the registry passes
    every value, and leaving one out names it in the compiler's error."""
    compiler.compile_binary(source, entry, defines=defines, arch="sm_90")   # complete: compiles
    d = dict(defines)
    del d[missing]
    with pytest.raises(CompileError) as e:
        compiler.compile_binary(source, entry, defines=d, arch="sm_90")
    assert f"{missing} must be defined" in (e.value.log or str(e.value))


# ---------------------------------------------------------------------------
# SASS: 128-bit accesses on odd rows, the exchanges of 08 and 09
# ---------------------------------------------------------------------------
def _function_sass(cfg, prec="fp32", whole=False):
    b, _ = _build(cfg, prec, "sm_90")
    text = sass.disassemble(b.cubin)
    if whole:
        return text
    m = re.search(r"^\.text\." + re.escape(cfg.entry) + r":\n(.*?)(?=^//-{5,}|\Z)", text,
                  re.S | re.M)
    assert m, cfg.entry
    return m.group(1)


def _n(text, op, width):
    return len(re.findall(r"\b" + op + r"(?:\.[A-Z0-9_]+)*\." + width + r"\b", text))


@pytest.mark.parametrize("shape,prec", [((8192, 50257), "fp32"), ((777, 12345), "fp32"),
                                        ((100000, 128), "fp32"), ((4, 1048576), "fp32"),
                                        ((2048, 32000), "bf16"), ((65536, 36), "fp32"),
                                        ((4096, 4097), "bf16"), ((3, 777777), "fp16"),
                                        ((65536, 129), "fp32")])
def test_window_path_issues_128_bit_loads_and_stores_on_odd_rows(shape, prec):
    """Odd lengths and offset rows are exactly where rungs 04..06 fall back to
    scalar accesses for the whole array: here every vector inside the row is
    one LDG.128 / STG.128 (one per item per thread), only the peel and tail
    are element-wise, and nothing goes to local memory."""
    p = sm.plan(*shape, prec, aligned=False)
    assert p.pitched, p.describe()
    # the launched entry and the row step it calls (the cubin also holds the other
    # split entry, compiled with this config's ITEMS: not what runs)
    text = _function_sass(p.config, prec)
    # rung 11 reads its rows out of the landing buffers its bulk copies fill
    load = "LDS" if p.config.kind == "pipelined" else "LDG"
    if load == "LDS":
        assert "UBLKCP.S.G" in text, p.describe()
    loads, stores = _n(text, load, "128"), _n(text, "STG", "128")
    want = p.config.items * p.config.rpt
    assert loads >= want and stores >= want - 1, (p.describe(), loads, stores)
    assert "LDL" not in text and "STL" not in text


def test_cluster_rung_exchanges_through_dsmem_and_split_rung_through_global_atomics():
    clu = sm.plan(32, 50257, "fp32").config
    assert clu.kind == "cluster", clu.describe()
    text = _function_sass(clu)
    assert "UCGABAR_ARV" in text and "UCGABAR_WAIT" in text
    assert re.search(r"\bLD\.E\.64\b", text), "no 64-bit DSMEM load of the peers' pairs"
    # rung 11 pushes its pairs into the peers' shared memory (st.async, counted
    # on their mbarriers) and waits on its own: no cluster barrier a row
    pipe = sm.plan(8192, 50257, "fp32").config
    assert pipe.kind == "pipelined", pipe.describe()
    text = _function_sass(pipe)
    assert "STAS.64" in text and "UBLKCP.S.G" in text and "SYNCS.PHASECHK.TRANS64.TRYWAIT" in text
    assert text.count("UCGABAR_WAIT") == 2, "cluster barriers only at the start and the end"
    spl = sm.plan(4, 1048576, "fp32").config
    text = _function_sass(spl, whole=True)   # the row step is a function of its own
    assert re.search(r"\b(RED|ATOM)G?\.E\.ADD", text), "no arrival counter"
    assert "NANOSLEEP" in text
    assert re.search(r"\bLDG\.E\.STRONG\.GPU\b", text), "the counter is not read at GPU scope"
    assert _n(text, "LDG", "128") >= spl.items and _n(text, "STG", "128") >= spl.items
    # the arrival is a release increment (MEMBAR.ALL.GPU, then the RED), not
    # __threadfence's sequentially consistent MEMBAR.SC.GPU, which every block
    # would wait on once a row; the one SC fence left is the counters' reset
    # at the end of a launch, once per entry (two entries in the cubin)
    arrive = re.findall(r"MEMBAR\.(\w+)\.GPU[^\n]*\n(?:[^\n]*\n){0,3}?[^\n]*\bREDG\.E\.ADD", text)
    assert arrive and set(arrive) == {"ALL"}, arrive
    assert len(re.findall(r"MEMBAR\.SC\.GPU", text)) <= 2


def test_fp32_split_rung_exponentiates_at_the_store():
    """fp32 rung 09's resident row step (EXP_AT_STORE): before the row's wait
    only fast exps (MUFU.EX2 alone; expf's FFMA.RM rounding step only in the
    pairs' rescales: the block pair's, the shared part's merge), after it an expf for every held value, the
    exps of each 16-byte store issued between the stores, not all before the
    first (the store drain hides them)."""
    for shape in ((4, 1048576), (16, 1048576)):
        cfg = sm.plan(*shape, "fp32").config
        assert cfg.entry == "softmax_09_split_row", cfg.describe()
        text = _function_sass(cfg, whole=True)
        m = re.search(r"^\$softmax_09_split_row\$\S*split_row_stepILb1E\S*:\n(.*?)(?=^\$|\Z)", text,
                      re.S | re.M)
        assert m, "no resident row step"
        body = m.group(1)
        wait = body.rfind("NANOSLEEP")
        assert wait > 0, "no wait on the row's counter"
        before, after = body[:wait], body[wait:]
        held = cfg.items * 4
        assert len(re.findall(r"\bMUFU\.EX2\b", before)) >= held, cfg.describe()
        assert len(re.findall(r"\bFFMA\.RM\b", before)) <= 4, "expf before the wait"
        assert len(re.findall(r"\bFFMA\.RM\b", after)) >= held, "no expf at the store"
        first_store = after.find("STG.E.128")
        assert first_store > 0
        assert len(re.findall(r"\bMUFU\.EX2\b", after[first_store:])) >= 4 * (cfg.items - 1), \
            "every exp issued before the first store"


# ---------------------------------------------------------------------------
# the window map, emulated: every element of the row once, nothing outside
# ---------------------------------------------------------------------------
def _window_cover(lo, cols, vec, items, stride, first=0, lanes=None):
    """Elements each (item, lane) of window_load touches, as the kernel
    computes them: vector (first + it * stride + lane); inside -> whole
    vector, straddling -> the elements inside, outside -> none."""
    hi = lo + cols
    touched = []
    for it in range(items):
        for lane in range(stride if lanes is None else lanes):
            e0 = (first + it * stride + lane) * vec
            if e0 >= lo and e0 + vec <= hi:
                touched += list(range(e0, e0 + vec))
            elif e0 < hi and e0 + vec > lo:
                touched += [e for e in range(e0, e0 + vec) if lo <= e < hi]
    return touched


@pytest.mark.parametrize("vec", [4, 8])
@pytest.mark.parametrize("cols", [1, 2, 3, 5, 7, 8, 9, 31, 33, 127, 129, 1000, 4097])
def test_window_covers_each_element_of_a_row_once_at_every_offset(vec, cols):
    for lo in range(vec):
        nv = -(-(lo + cols) // vec)
        cfg = smplan._pick_rows(nv, smr.window_configs("fp32" if vec == 4 else "bf16")) or \
            smplan._pick_block(nv, smr.window_configs("fp32" if vec == 4 else "bf16"))
        assert cfg is not None and cfg.window >= nv
        got = _window_cover(lo, cols, vec, cfg.items, cfg.row_threads)
        assert sorted(got) == list(range(lo, lo + cols)), (vec, cols, lo, cfg.describe())


def test_cluster_slices_cover_the_row_once():
    cfg = sm.plan(8192, 50257, "fp32", aligned=False).config
    for lo in range(4):
        got = []
        for rank in range(cfg.cluster):
            got += _window_cover(lo, 50257, 4, cfg.items, cfg.threads,
                                 first=rank * cfg.threads * cfg.items)
        assert sorted(got) == list(range(lo, lo + 50257))


# ---------------------------------------------------------------------------
# the dispatcher's choice table
# ---------------------------------------------------------------------------
# (rows, cols, precision, aligned, pitch pad in elements (0: contiguous))
CHOICE_SHAPES = [
    (r, c, prec, al, pad)
    for prec in ("fp32", "bf16")
    for (r, c) in [(1048576, 1), (1048576, 2), (1048576, 3), (1048576, 8), (524288, 31),
                   (262144, 33), (131072, 127), (100000, 128), (65536, 129), (65536, 256),
                   (32768, 1000), (16384, 1024), (8192, 4096), (4096, 4097), (777, 12345),
                   (2048, 16384), (2048, 32000), (8192, 50257), (1024, 50257), (1024, 128256),
                   (512, 151936), (2048, 151936), (64, 262144), (16, 1048576), (4, 1048576),
                   (1, 1048576), (2, 8388608), (3, 777777), (65537, 7), (1, 1), (1, 1000),
                   (128, 128), (8, 4096), (32, 50257), (100, 32000), (64, 16384),
                   # outside the suite: benchmarks/softmax_route_gaps.py's open routes
                   (1024, 200064), (64, 200064), (256, 50257)]
    for (al, pad) in ((True, 0), (False, 0), (True, 3))
]


def _choice(rows, cols, prec, aligned, pad, cc=(9, 0)):
    p = sm.plan(rows, cols, prec, aligned=aligned, ldx=cols + pad, ldy=cols + pad, cc=cc)
    return {"rung": p.rung, "config": p.describe(), "grid": p.grid[0], "smem": p.smem}


def _table():
    out = {}
    for cc in ((9, 0), (8, 0)):
        for rows, cols, prec, al, pad in CHOICE_SHAPES:
            key = f"sm_{cc[0]}{cc[1]} {rows}x{cols} {prec} {'aligned' if al else 'misaligned'}" \
                  f"{f' pitch+{pad}' if pad else ''}"
            out[key] = _choice(rows, cols, prec, al, pad, cc)
    return out


def test_the_gpu_sequence_of_split_plans_takes_both_split_entries():
    """test_softmax_window_gpu.py's sequence of split plans on one workspace
    means to cross the resident and the streamed entry: a registry change
    that lets the resident grid hold its longest row (the 16-bit chunks with
    a shared part held 2 x 9000001) must move the sequence, not drop a case."""
    from test_softmax_window_gpu import SPLIT_SEQUENCE
    entries = {sm.plan(r, c, prec, aligned=off == 0, cc=(9, 0), sm_count=132).entry
               for r, c, prec, off in SPLIT_SEQUENCE}
    assert entries == {"softmax_09_split_row", "softmax_09_split_row_stream"}


def test_auto_choices_match_the_committed_table():
    """A change in what auto runs for any of these shapes is visible here
    (and in the diff of tests/data/softmax_choices.json when regenerated)."""
    recorded = json.loads(CHOICES.read_text())
    now = _table()
    assert sorted(now) == sorted(recorded)
    changed = {k: (recorded[k], v) for k, v in now.items() if recorded[k] != v}
    assert not changed, "auto changed for: " + "; ".join(
        f"{k}: {a['config']} -> {b['config']}" for k, (a, b) in sorted(changed.items()))


@pytest.mark.parametrize("shape,prec,rung,extra", [
    ((1048576, 3), "fp32", "softmax_04_vectorized", None),      # rows <= 8: rung 04
    ((65536, 256), "fp32", "softmax_04_vectorized", None),      # measured 0.992 vs 0.969
    # rung 07's 32 lanes x 4 vectors: 0.909 / 0.949 against rung 04's warp a row
    # 0.851 / 0.876 (32768 x 1000 / 16384 x 1024, twenty-second round)
    ((32768, 1000), "bf16", "softmax_07_any_row",
     lambda p: (p.config.row_threads, p.config.items) == (32, 4)),
    ((16384, 1024), "bf16", "softmax_07_any_row",
     lambda p: (p.config.row_threads, p.config.items) == (32, 4)),
    ((2048, 32000), "fp32", "softmax_06_pipelined", None),      # bulk prefetch
    ((1024, 128256), "fp32", "softmax_06_pipelined", None),
    # rung 11 (persistent window clusters, benchmarks/softmax_pipelined.py): fp32
    # 0.852 vs 0.636, 0.821 vs 0.765; bf16 0.890 vs 0.749, 0.873 vs 0.799, 0.833 vs 0.730
    ((512, 151936), "fp32", "softmax_11_any_row_pipelined",
     lambda p: (p.config.items, p.config.cluster, p.config.stages) == (19, 8, 2)),
    # 16 lanes x 3 vectors: 0.975 / 0.987 against 8 x 4's 0.958 / 0.947 (two runs)
    ((100000, 128), "fp32", "softmax_07_any_row",
     lambda p: (p.config.row_threads, p.config.items) == (16, 3)),
    # one lane, one 16-byte vector a row: 0.990 against two lanes of 8 bytes' 0.789
    ((1048576, 8), "bf16", "softmax_04_vectorized",
     lambda p: (p.config.row_threads, p.vec) == (1, 8)),
    # split chunks held packed, two passes: 0.719 (fp16) against four unpacked's 0.555;
    # packed with a part in shared memory, one pass (thirty-eighth round)
    ((16, 1048576), "bf16", "softmax_09_split_row",
     lambda p: p.config.packed and p.config.shared_items and p.slots == 16),
    ((777, 12345), "fp32", "softmax_07_any_row", lambda p: p.config.row_threads == 512),
    ((4096, 4097), "fp32", "softmax_07_any_row", None),
    ((8192, 50257), "fp32", "softmax_11_any_row_pipelined",
     lambda p: (p.config.items, p.config.cluster, p.config.stages) == (13, 4, 3)),
    # 16-bit rows held packed (benchmarks/softmax_packed.py): 0.747 vs 0.634,
    # 0.793 vs 0.645, 0.970 vs 0.735, 1.033 vs 0.909, 0.688 (6 x 512 x 8) vs 0.496
    ((8192, 50257), "bf16", "softmax_11_any_row_pipelined",
     lambda p: (p.config.threads, p.config.cluster, p.config.items) == (512, 2, 7)),
    ((1024, 128256), "bf16", "softmax_11_any_row_pipelined",
     lambda p: (p.config.threads, p.config.cluster, p.config.items) == (256, 8, 8)),
    # few rows a cluster: rung 08 (0.711 vs 0.679 on rung 11)
    ((64, 262144), "bf16", "softmax_08_any_row_cluster", None),
    ((2048, 32000), "bf16", "softmax_07_any_row",
     lambda p: (p.config.threads, p.config.items, p.config.packed) == (512, 8, True)),
    ((777, 12345), "bf16", "softmax_07_any_row",
     lambda p: (p.config.threads, p.config.items, p.config.packed) == (256, 7, True)),
    ((512, 151936), "bf16", "softmax_11_any_row_pipelined",
     lambda p: (p.config.threads, p.config.cluster, p.config.items) == (512, 4, 10)),
    # 128-thread packed blocks for 513..1024 vectors: 0.848 vs 0.595 at 256 x 4
    ((4096, 4097), "bf16", "softmax_07_any_row",
     lambda p: (p.config.threads, p.config.items, p.config.packed) == (128, 5, True)),
    # fewer rows than SMs: unpacked, more blocks a row (32 x 50257 1.02 of copy)
    ((32, 50257), "bf16", "softmax_08_any_row_cluster",
     lambda p: (p.config.cluster, p.config.packed) == (7, False)),
    ((4, 1048576), "fp32", "softmax_09_split_row", lambda p: p.split * p.slots >= 132),
    # chunks partly in shared memory hold rows of 8388608 at once (1R + 1W, not streamed)
    ((2, 8388608), "fp32", "softmax_09_split_row",
     lambda p: p.config.shared_items and not p.entry.endswith("_stream")),
    ((16, 1048576), "fp32", "softmax_09_split_row",
     lambda p: p.config.shared_items and p.slots == 8),
    # rows outside the suite (benchmarks/softmax_route_gaps.py, thirty-sixth
    # round): fp32 past rung 11's longest row, many rows, rung 09 in passes
    # 0.863 / 0.880 vs rung 04's stream 0.643 / 0.641 ...
    ((1024, 262144), "fp32", "softmax_09_split_row",
     lambda p: p.config.shared_items and (p.split, p.slots) == (8, 33)),
    ((2048, 163840), "fp32", "softmax_09_split_row",
     lambda p: p.config.shared_items and (p.split, p.slots) == (5, 52)),
    # ... and 16-bit rows of 57K..82K on rung 11's 2 x 512 slices, 0.925 / 0.864
    # vs rung 08's 0.838 / 0.848
    ((8192, 64000), "bf16", "softmax_11_any_row_pipelined",
     lambda p: (p.config.threads, p.config.cluster, p.config.items) == (512, 2, 8)),
    ((1024, 65536), "fp16", "softmax_11_any_row_pipelined",
     lambda p: (p.config.threads, p.config.cluster, p.config.items) == (512, 2, 8)),
    ((8192, 81920), "bf16", "softmax_11_any_row_pipelined",
     lambda p: (p.config.threads, p.config.cluster, p.config.items) == (512, 2, 10)),
])
def test_auto_takes_the_measured_winner(shape, prec, rung, extra):
    p = sm.plan(*shape, prec)
    assert p.rung == rung, p.describe()
    if extra is not None:
        assert extra(p), p.describe()


def test_misaligned_or_pitched_rows_keep_vector_accesses():
    """Where rungs 04..06 would read scalars for the whole array, auto takes a
    window rung instead (every vector inside a row one 128-bit access)."""
    for cols in (4096, 30000, 131072):
        for kw in ({"aligned": False}, {"ldx": cols + 1, "ldy": cols + 1}):
            p = sm.plan(64 if cols > 4096 else 4096, cols, "fp32", **kw)
            assert p.pitched and p.config.vec == 4, (cols, kw, p.describe())
    with pytest.raises(ValueError, match="contiguous"):
        sm.plan(10, 100, kernel="softmax_04_vectorized", ldx=101)


SHAPES = [(r, c) for r in (1, 3, 4, 77, 1000, 65536, 1048576) for c in
          (1, 2, 3, 7, 31, 33, 127, 129, 1000, 4097, 12345, 16385, 32000, 50257, 128256, 151936,
           262145, 1048576, 5_000_001)]


@pytest.mark.parametrize("prec", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("kernel", ["auto", "softmax_07_any_row", "softmax_08_any_row_cluster",
                                    "softmax_09_split_row", "softmax_11_any_row_pipelined"])
def test_every_plan_is_within_device_limits(prec, aligned, kernel):
    for rows, cols in SHAPES:
        if rows * cols > 2**33:
            continue
        try:
            p = sm.plan(rows, cols, prec, aligned=aligned, kernel=kernel)
        except ValueError as e:
            assert kernel == "softmax_07_any_row" and "at most" in str(e) and cols > 16000 or \
                kernel == "softmax_08_any_row_cluster" and "at most" in str(e) and cols > 190000 or \
                kernel == "softmax_11_any_row_pipelined" and "at most" in str(e) and cols > 151936
            continue
        c = p.config
        assert p.block[0] == c.threads <= 1024
        assert 1 <= p.grid[0] <= 2**31 - 1 and p.grid[1:] == (1, 1)
        if not p.pitched:
            continue
        assert c in smr.window_configs(prec), "plans only registered instantiations"
        nv = sm.window_vectors(cols, smr.vec_of(prec), aligned)
        assert p.smem == (c.stages * c.threads * c.items * 16 if c.kind == "pipelined" else
                          c.shared_items * c.threads * 16 if c.kind == "split" else 0)
        assert p.smem * c.min_blocks <= 227 * 1024
        if c.kind == "rows":
            assert c.window >= nv and p.grid[0] * c.rows_per_block >= rows
        elif c.kind == "cluster":
            assert c.window >= nv and c.cluster <= 8 and p.grid[0] == rows * c.cluster
        elif c.kind == "pipelined":
            # one cluster a row until prepare() knows how many fit at once
            assert c.window >= nv and c.cluster <= 8 and p.grid[0] == min(rows, 2**31 // c.cluster) * c.cluster
        else:
            # every block of a cooperative grid resident at once (min_blocks is
            # what __launch_bounds__ guarantees per SM)
            assert p.cooperative and p.grid[0] == p.split * p.slots <= c.min_blocks * 132
            assert p.workspace_bytes == sm.split_workspace_layout(p.slots, p.split)["bytes"]
            if c.kind == "split":
                assert p.split * c.window >= nv
        assert 0.0 <= p.predicted <= 1.0


def test_explicit_window_rungs_say_what_they_take():
    with pytest.raises(ValueError, match="sm_90"):
        sm.plan(4, 5000, kernel="softmax_08_any_row_cluster", cc=(8, 0))
    with pytest.raises(ValueError, match="at most"):
        sm.plan(4, 20000, kernel="softmax_07_any_row")
    p = sm.plan(1, 1, kernel="softmax_09_split_row")
    assert p.split == 1 and p.slots == 1 and p.cooperative
    p = sm.plan(4, 50000, kernel="auto", cc=(8, 0))      # no clusters before sm_90
    assert p.rung in ("softmax_07_any_row", "softmax_09_split_row", "softmax_04_vectorized")
    with pytest.raises(ValueError):
        smr.window_configs("fp32")[0].defines("bf16")   # a config has one vector width


# ---------------------------------------------------------------------------
# the split rung's workspace protocol, emulated across a sequence of plans
# ---------------------------------------------------------------------------
def old_layout(slots, split):
    """The prototype's first layout (counters after the pairs), kept to show
    the emulation catches it."""
    pairs_bytes = slots * 2 * split * 8
    return {"arrive": pairs_bytes, "leave": pairs_bytes + slots * 4, "pairs": 0,
            "bytes": pairs_bytes + slots * 8}


def emulate_launch(ws: bytearray, rows, split, slots, layout):
    """One launch: check the precondition (a slot's counters read zero when a
    launch starts), then write what the kernel writes: every chunk's pair for
    every row of its slot (parity double-buffered), the arrive counts, and
    the last leaver's reset. Returns the problems."""
    lay = layout(slots, split)
    if len(ws) < lay["bytes"]:
        ws.extend(bytes(lay["bytes"] - len(ws)))
    problems = []
    u32 = lambda off: struct.unpack_from("<I", ws, off)[0]  # noqa: E731
    for s in range(slots):
        a, l = u32(lay["arrive"] + 4 * s), u32(lay["leave"] + 4 * s)
        if a or l:
            problems.append(f"slot {s}: counters ({a}, {l}) at launch")
    for s in range(slots):
        k = 0
        for _row in range(s, rows, slots):
            for c in range(split):
                off = lay["pairs"] + ((s * 2 + (k & 1)) * split + c) * 8
                struct.pack_into("<ff", ws, off, 3.0 + c, 1000.0 + k)   # positive floats: big u32s
                struct.pack_into("<I", ws, lay["arrive"] + 4 * s, u32(lay["arrive"] + 4 * s) + 1)
            k += 1
        struct.pack_into("<I", ws, lay["leave"] + 4 * s, split)
        if u32(lay["arrive"] + 4 * s) != k * split:
            problems.append(f"slot {s}: arrive {u32(lay['arrive'] + 4 * s)} != {k * split}")
        struct.pack_into("<I", ws, lay["arrive"] + 4 * s, 0)
        struct.pack_into("<I", ws, lay["leave"] + 4 * s, 0)
    return problems


# the split cases of the GPU tests and the prototype's check, in their order
SEQUENCE = [(3, 1048576, "fp32", 0), (3, 1048575, "fp32", 1), (3, 1048576, "bf16", 5),
            (3, 777_777, "fp16", 3), (2, 4_500_000, "fp32", 1), (2, 9_000_001, "bf16", 0),
            (40, 300_000, "fp32", 1), (1, 1048576, "fp32", 0), (4, 1048576, "fp32", 0),
            (16, 1048576, "fp32", 0), (1, 1048576, "fp32", 0), (64, 262144, "fp32", 0),
            (4, 1048576, "bf16", 0), (3, 1048576, "fp32", 0)]


def _run_sequence(layout):
    ws, out = bytearray(), []
    for rows, cols, prec, off in SEQUENCE:
        p = sm.plan(rows, cols, prec, aligned=off == 0)
        assert p.split, p.describe()
        out += [f"{rows} rows {p.describe()}: {m}"
                for m in emulate_launch(ws, rows, p.split, p.slots, layout)]
    return out


def test_counters_are_zero_at_every_launch_of_a_mixed_sequence():
    assert _run_sequence(sm.split_workspace_layout) == []


def test_the_emulation_catches_the_first_layout():
    assert _run_sequence(old_layout), "the old layout should have been caught"


def test_counter_head_and_pairs_never_overlap():
    for slots in (1, 2, 3, 37, 264, smr.WS_MAX_SLOTS):
        for split in (1, 2, 48, 65, 264):
            lay = sm.split_workspace_layout(slots, split)
            assert lay["leave"] + 4 * smr.WS_MAX_SLOTS <= lay["pairs"]
            assert lay["bytes"] == lay["pairs"] + slots * 2 * split * 8
    with pytest.raises(ValueError):
        sm.split_workspace_layout(smr.WS_MAX_SLOTS + 1, 1)


def test_the_kernel_takes_the_head_size_from_the_registry():
    cfg = next(c for c in smr.WINDOW_CONFIGS if c.kind == "split")
    assert cfg.defines("fp32")["WS_MAX_SLOTS"] == smr.WS_MAX_SLOTS
    src = sources.find_source(cfg.source).read_text()
    assert "constexpr int WS_MAX_SLOTS" not in src, "the head size must come from the registry"


def test_split_plans_are_refitted_to_the_resident_blocks():
    p = sm.plan(4, 1048576, "fp32")
    q = sm._fit_split(p, 200)                  # fewer resident than planned (264)
    assert q.split == p.split and q.slots * q.split <= 200
    assert q.workspace_bytes == sm.split_workspace_layout(q.slots, q.split)["bytes"]
    assert sm._fit_split(p, 10_000) is p
    with pytest.raises(RuntimeError, match="resident"):
        sm._fit_split(p, p.split - 1)
    s = sm.plan(2, 12_000_000, "fp32")          # past what the resident chunks hold: streamed
    assert s.config.kind == "split_stream", s.describe()
    q = sm._fit_split(s, 100)
    assert q.slots * q.split <= 100 and q.slots == 2


def test_window_configs_refuse_chunks_held_where_no_kernel_holds_them():
    with pytest.raises(ValueError, match="shared memory"):       # 16-bit chunks pack instead
        smr.WindowConfig("softmax_09_split_row", 512, 7, 8, min_blocks=2, shared_items=9)
    with pytest.raises(ValueError, match="shared memory"):       # only rung 09 has the slots
        smr.WindowConfig("softmax_07_any_row", 256, 4, 4, row_threads=8, shared_items=2)
    with pytest.raises(ValueError, match="shared memory"):
        smr.WindowConfig("softmax_09_split_row_stream", 512, 4, 4, min_blocks=2, shared_items=4)
    with pytest.raises(ValueError, match="packed"):              # fp32 has nothing to pack
        smr.WindowConfig("softmax_09_split_row", 512, 8, 4, min_blocks=2, packed=True)
    with pytest.raises(ValueError, match="packed"):              # the streamed entry is unpacked
        smr.WindowConfig("softmax_09_split_row_stream", 512, 2, 8, min_blocks=2, packed=True)


def test_split_chunks_with_a_shared_part_launch_with_their_shared_memory(monkeypatch):
    """fp32 16 x 1048576: chunks of 7 vectors a thread in registers and 9 in
    shared memory, two passes; the cooperative launch declares the slots."""
    p = sm.plan(16, 1048576, "fp32")
    c = p.config
    assert (c.items, c.shared_items) == (7, 9) and p.smem == c.smem() == 9 * 512 * 16
    assert c.window == 512 * 16 and p.split * c.window >= 1048576 // 4
    assert -(-16 // p.slots) == 2
    assert dict(p.defines)["SITEMS"] == 9 and dict(p.defines)["PACKED"] == 0
    seen = []
    monkeypatch.setattr(sm, "workspace", lambda n, stream=None: type("W", (), {"ptr": 0x5000})())
    monkeypatch.setattr(sm, "launch", lambda k, grid, block, args, **kw: seen.append((grid, kw)))
    sm.run_plan("k", p, 0x1000_0000, 0x2000_0000, 16, 1048576)
    assert seen == [(p.grid, {"smem": p.smem, "stream": None, "cooperative": True})]


@pytest.mark.parametrize("prec", ["bf16", "fp16"])
def test_packed_split_chunks_with_a_shared_part_take_one_pass(prec, monkeypatch):
    """16-bit 16 x 1048576: chunks held packed, 6 vectors a thread in registers
    and 11 in shared memory, so the resident grid takes the 16 rows in one pass
    (the packed chunks alone took two) at either alignment; the cooperative
    launch declares the slots."""
    for aligned in (True, False):
        p = sm.plan(16, 1048576, prec, aligned=aligned)
        c = p.config
        assert c.packed and (c.items, c.shared_items) == (6, 11), p.describe()
        assert p.smem == c.smem() == 11 * 512 * 16 and 2 * p.smem <= 227 * 1024
        assert p.slots == 16 and p.split * c.window >= sm.window_vectors(1048576, 8, aligned)
        assert dict(p.defines)["SITEMS"] == 11 and dict(p.defines)["PACKED"] == 1
        old = sm.config_plan(smr.WindowConfig("softmax_09_split_row", 512, 8, 8, min_blocks=2,
                                              packed=True), 16, 1048576, prec, aligned=aligned)
        assert -(-16 // old.slots) == 2
    seen = []
    monkeypatch.setattr(sm, "workspace", lambda n, stream=None: type("W", (), {"ptr": 0x5000})())
    monkeypatch.setattr(sm, "launch", lambda k, grid, block, args, **kw: seen.append((grid, kw)))
    sm.run_plan("k", p, 0x1000_0000, 0x2000_0000, 16, 1048576)
    assert seen == [(p.grid, {"smem": p.smem, "stream": None, "cooperative": True})]


# ---------------------------------------------------------------------------
# softmax(): views with a row pitch, checked before the GPU
# ---------------------------------------------------------------------------
class FakeDeviceArray:
    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x10000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


def test_device_views_give_their_row_pitch():
    assert sm._device_view(FakeDeviceArray((3, 4)))[3] == 4
    assert sm._device_view(FakeDeviceArray((3, 4), strides=(16, 4)))[3] == 4
    assert sm._device_view(FakeDeviceArray((3, 4), strides=(28, 4), ptr=0x10004))[3] == 7
    assert sm._device_view(FakeDeviceArray((1, 4), strides=(4, 4)))[3] == 4
    for strides in ((12, 4), (16, 8), (18, 4)):
        with pytest.raises(ValueError, match="contiguous elements"):
            sm._device_view(FakeDeviceArray((3, 4), strides=strides))


def test_device_views_of_more_axes_step_through_rows_at_one_pitch():
    """Every axis before the last is a row index (as torch.softmax(x, -1)):
    (batch, heads, rows, cols) of a contiguous tensor, or of a column slice;
    axes of one element step nowhere; a transposed batch has no one pitch."""
    assert sm._device_view(FakeDeviceArray((2, 3, 4)))[1:4:2] == ((2, 3, 4), 4)
    assert sm._device_view(FakeDeviceArray((2, 3, 4), strides=(84, 28, 4)))[3] == 7
    assert sm._device_view(FakeDeviceArray((2, 1, 3, 4), strides=(48, 999, 16, 4)))[3] == 4
    assert sm._device_view(FakeDeviceArray((5,), strides=(4,)))[3] == 5
    assert sm._device_view(FakeDeviceArray((2, 3, 0), strides=(0, 0, 4)))[3] == 0
    for shape, strides in (((2, 3, 4), (16, 32, 4)),      # batch and rows transposed
                           ((2, 3, 4), (100, 28, 4)),     # a batch pitch off the rows'
                           ((5,), (8,))):                 # a strided row
        with pytest.raises(ValueError, match="one row pitch"):
            sm._device_view(FakeDeviceArray(shape, strides=strides))
    with pytest.raises(ValueError, match="scalar"):
        sm._device_view(FakeDeviceArray(()))
    assert sm._rows_cols((2, 3, 4)) == (6, 4) and sm._rows_cols((7,)) == (1, 7)


def test_out_has_the_shape_of_x_whatever_its_axes():
    with pytest.raises(ValueError, match=r"out must be 2 x 3 x 4 float32 \(x's shape"):
        sm.softmax(FakeDeviceArray((2, 3, 4)), out=FakeDeviceArray((6, 4)))


def test_misaligned_element_pointers_are_refused():
    with pytest.raises(ValueError, match="aligned to their 4-byte elements"):
        sm.softmax(FakeDeviceArray((3, 4), ptr=0x10002), out=FakeDeviceArray((3, 4)))


if __name__ == "__main__":
    CHOICES.write_text(json.dumps(_table(), indent=1, sort_keys=True) + "\n")
    print(f"{len(_table())} choices -> {CHOICES}", file=sys.stderr)


# ---------------------------------------------------------------------------
# the row-length suite of drvgemm bench --memory --softmax-rows (pure Python)
# ---------------------------------------------------------------------------
def test_row_suite_spans_the_issue():
    from drvgemm.tools import memory_bench as mb
    cols = {c for _, c in mb.SOFTMAX_ROW_SUITE}
    assert len(mb.SOFTMAX_ROW_SUITE) >= 24 and min(cols) == 1 and max(cols) == 1048576
    assert {32000, 50257, 128256, 151936} <= cols
    assert sum(c % 2 for c in cols) >= 8, "odd lengths"
    assert any(r * c * 2 < mb.LARGE_BYTES for r, c in mb.SOFTMAX_ROW_SUITE)
    assert sum(r * c * 4 >= mb.LARGE_BYTES for r, c in mb.SOFTMAX_ROW_SUITE) >= 20
    assert max(r * c * 4 for r, c in mb.SOFTMAX_ROW_SUITE) <= 2 << 30


@pytest.mark.parametrize("rows,cols,prec", [(4, 1048576, "fp32"), (8192, 50257, "bf16"),
                                           (65537, 7, "fp32")])
def test_row_suite_records_carry_the_manifests_sass_hash(rows, cols, prec):
    """A suite record's sass_hash is the manifest's digest of the kernel auto
    runs, so a reader can tell whether the results belong to the code."""
    import sass_manifest
    from drvgemm.tools import memory_bench as mb
    if sass_manifest.other_toolchain():
        pytest.skip(sass_manifest.other_toolchain())
    p = sm.plan(rows, cols, prec)
    got = mb._sass_hash(p)["sass_hash"]
    manifest = json.loads((Path(__file__).parent / "data" / "sass_manifest.json").read_text())
    keys = [k for k, v in manifest.items() if v == got]
    assert keys and all(f"/{prec}/" in k for k in keys), (p.describe(), got, keys)


def test_row_suite_summary_against_the_targets():
    import io
    from drvgemm.tools import memory_bench as mb

    def rec(m, n, frac, vs, us, tus, cls, ok=True):
        return {"kernel": "softmax_07_any_row", "precision": "fp32", "m": m, "n": n,
                "median_ms": 1.0, "gbps": 1.0, "copy_fraction": frac, "vs_torch": vs,
                "call_us": us, "torch_call_us": tus, "shape_class": cls, "auto": True,
                "correct": ok, "config": "cfg"}

    recs = [rec(1, 8, 0.5, 1.1, 9.0, 10.0, "small"), rec(2, 8, 0.6, 0.9, 12.0, 10.0, "small"),
            rec(4096, 4097, 0.88, 1.5, 50, 80, "large"),
            rec(8192, 50257, 0.78, 1.4, 900, 1500, "large", ok=False),
            rec(100000, 128, 0.95, 0.98, 30, 29, "large"),
            {"kernel": "copy", "precision": "fp32", "m": 1, "n": 8, "baseline": True}]
    s = mb.softmax_rows_summary(recs)["fp32"]
    assert s["shapes"] == 5 and s["large_shapes"] == 3 and s["small_shapes"] == 2
    assert s["min_copy_ratio_large"] == 0.78
    assert s["geomean_copy_ratio_large"] == pytest.approx((0.88 * 0.78 * 0.95) ** (1 / 3), abs=1e-4)
    assert s["large_below_0.85_of_copy"] == ["8192x50257"]
    assert s["large_not_faster_than_torch"] == ["100000x128"]
    assert s["small_slower_per_call_than_torch"] == ["2x8"]
    assert s["wrong"] == ["8192x50257"]
    buf = io.StringIO()
    mb.print_softmax_rows_report(recs, file=buf)
    text = buf.getvalue()
    assert "WRONG RESULT" in text and "below 0.85: 8192x50257" in text


def test_row_suite_summary_of_the_back_to_back_column():
    import io
    from drvgemm.tools import memory_bench as mb

    def rec(m, n, frac, b2b, vs2, cls="large"):
        return {"kernel": "softmax_07_any_row", "precision": "bf16", "m": m, "n": n,
                "median_ms": 1.0, "gbps": 1.0, "copy_fraction": frac, "vs_torch": 1.5,
                "copy_fraction_b2b": b2b, "vs_torch_b2b": vs2, "call_us": 5, "torch_call_us": 9,
                "shape_class": cls, "auto": True, "correct": True, "config": "cfg"}
    recs = [rec(4096, 4097, 0.88, 0.93, 1.6), rec(64, 262144, 0.71, 0.80, 2.0),
            rec(100000, 128, 0.95, 0.99, 0.97), rec(1, 8, 0.5, 0.4, 0.9, "small")]
    s = mb.softmax_rows_summary(recs)["bf16"]
    assert s["min_copy_ratio_large_b2b"] == 0.80
    assert s["geomean_copy_ratio_large_b2b"] == pytest.approx((0.93 * 0.80 * 0.99) ** (1 / 3),
                                                              abs=1e-4)
    assert s["large_below_0.85_of_copy_b2b"] == ["64x262144"]
    assert s["large_not_faster_than_torch_b2b"] == ["100000x128"]
    assert s["min_vs_torch_large_b2b"] == 0.97
    assert s["min_copy_ratio_large"] == 0.71            # the isolated column as before
    assert "geomean_copy_ratio_large_b2b_graph" not in s
    buf = io.StringIO()
    mb.print_softmax_rows_report(recs, file=buf)
    assert "bf16 back to back: large shapes min 0.8" in buf.getvalue()
    assert "graph" not in buf.getvalue()
    # against a captured graph's copies too, where the records have it
    for r, g in zip(recs, (0.9, 0.7, 0.8, 0.3)):
        r["copy_fraction_b2b_graph"] = g
    s = mb.softmax_rows_summary(recs)["bf16"]
    assert s["geomean_copy_ratio_large_b2b_graph"] == pytest.approx((0.9 * 0.7 * 0.8) ** (1 / 3),
                                                                   abs=1e-4)
    assert s["geomean_copy_ratio_large_b2b"] == pytest.approx((0.93 * 0.80 * 0.99) ** (1 / 3),
                                                              abs=1e-4)
    buf = io.StringIO()
    mb.print_softmax_rows_report(recs, file=buf)
    assert "both from graphs: geomean 0.79" in buf.getvalue()
    # records without the column (older files) summarise as before
    plain = [{k: v for k, v in r.items() if not k.endswith("_b2b")} for r in recs]
    assert "min_copy_ratio_large_b2b" not in mb.softmax_rows_summary(plain)["bf16"]


def test_back_to_back_calls_cycle_through_their_own_buffers(monkeypatch):
    """_b2b_ms: each call of a batch takes the next (x_i, y_i) of the rotation,
    the copies of x start as x, and every buffer it made is freed."""
    from drvgemm.tools import memory_bench as mb

    class Buf:
        made = []

        def __init__(self, shape, dtype):
            self.shape, self.dtype, self.freed, self.data = shape, dtype, False, None
            Buf.made.append(self)

        def free(self):
            self.freed = True
    x = Buf((4, 8), np.float32)
    x.data = "x"
    Buf.made.clear()
    seen = {"softmax": [], "copy": []}
    monkeypatch.setattr(mb.driver, "empty", lambda shape, dtype: Buf(shape, dtype))

    def memcpy(dst, src, n):
        if src is x and dst.data is None:
            dst.data = "x"                       # the set's copy of x
        else:
            seen["copy"].append((src, dst))
    monkeypatch.setattr(mb.driver, "memcpy_dtod", memcpy)
    monkeypatch.setattr(mb.sm, "softmax", lambda xi, out: seen["softmax"].append((xi, out)))
    monkeypatch.setattr(mb.driver, "synchronize", lambda: None)

    def batch(enqueue, n, reps, sync=None):
        for _ in range(n):
            enqueue()
        return 1.0
    monkeypatch.setattr(mb, "batch_median_ms", batch)
    l2 = 60 << 20
    nbytes = 8 << 20
    got = mb._b2b_ms(x, nbytes, None, l2, batch=20, reps=2)
    sets = got["sets"]
    assert sets == mb.rotation_sets(2 * nbytes, l2, 20) > 1
    assert got["softmax"] == got["copy"] == 1.0 and "torch" not in got
    xs = {id(a) for a, _ in seen["softmax"]}
    ys = {id(b) for _, b in seen["softmax"]}
    assert len(xs) == len(ys) == sets               # every set used, x among them
    assert all(a is x or a.data == "x" for a, _ in seen["softmax"])
    assert all(a.freed for a in Buf.made) and not x.freed
    # no GPU here: nothing could be captured, and the columns say why
    assert "copy_graph" not in got and got["copy_graph_error"]
    assert "softmax_graph" not in got and got["softmax_graph_error"]


def test_back_to_back_calls_from_captured_graphs(monkeypatch):
    """_b2b_ms times softmax and the copy a second way, each as one replay of
    a captured graph of a batch of its calls (on the legacy stream, 0),
    reported per call; softmax runs once before its capture (its plan and
    workspace made outside the graph); the graphs are closed."""
    from drvgemm.tools import memory_bench as mb

    class Buf:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, dtype

        def free(self):
            pass
    monkeypatch.setattr(mb.driver, "empty", lambda shape, dtype: Buf(shape, dtype))
    copies = []
    monkeypatch.setattr(mb.driver, "memcpy_dtod", lambda dst, src, n: copies.append(dst))
    events = []
    monkeypatch.setattr(mb.sm, "softmax", lambda xi, out: events.append("softmax"))
    monkeypatch.setattr(mb.driver, "synchronize", lambda: events.append("sync"))

    class Graph:
        def __init__(self, calls):
            self.calls, self.closed = calls, False

        def replay(self, stream=None):
            events.append(("replay", stream, self.calls))

        def close(self):
            self.closed = True
    made = []

    def captured(call, n):
        events.append("capture")
        for _ in range(n):
            call()
        made.append(Graph(n))
        return made[-1]
    monkeypatch.setattr(mb, "_captured", captured)

    def batch(enqueue, n, reps, sync=None):
        events.append(("batch", n))
        for _ in range(n):
            enqueue()
        return 8.0           # ms an enqueue() (batch_median_ms divides by n)
    monkeypatch.setattr(mb, "batch_median_ms", batch)
    got = mb._b2b_ms(Buf((4, 8), np.float32), 8 << 20, None, 60 << 20, batch=20, reps=2)
    assert got["copy"] == 8.0 and got["softmax"] == 8.0
    assert got["copy_graph"] == got["softmax_graph"] == 8.0 / 20   # one replay: 20 calls
    assert events[:3] == ["softmax", "sync", "capture"]
    assert events.count(("replay", 0, 20)) >= 2 and ("batch", 1) in events
    assert len(made) == 2 and all(g.closed for g in made)
    assert "copy_graph_error" not in got and "softmax_graph_error" not in got
    # a replay the driver refuses leaves that column out, with the reason
    monkeypatch.setattr(Graph, "replay", lambda self, stream=None: (_ for _ in ()).throw(
        RuntimeError("refused")))
    got = mb._b2b_ms(Buf((4, 8), np.float32), 8 << 20, None, 60 << 20, batch=20, reps=2)
    assert got["softmax"] == got["copy"] == 8.0 and "copy_graph" not in got
    assert got["softmax_graph_error"] == got["copy_graph_error"] == "RuntimeError: refused"


def test_torch_baseline_sees_the_rows():
    """torch.softmax(dim=-1) must get the rows x cols tensor: a bf16 view of
    the device buffer that came out 1-D made the baseline one row of
    rows x cols elements (59-109x slower than a softmax along the rows)."""
    import types
    from drvgemm.runtime.driver import DeviceArray
    from drvgemm.tools import memory_bench as mb
    from drvgemm.ladders.softmax import registry as sm_registry
    seen = []

    class Tensor:
        def __init__(self, shape):
            self.shape = tuple(shape)

        def view(self, dtype):
            return self

    def as_tensor(obj, device):
        seen.append(tuple(obj.__cuda_array_interface__["shape"]))
        return Tensor(seen[-1])

    torch = types.SimpleNamespace(as_tensor=as_tensor, bfloat16="bf16")
    for precision in ("bf16", "fp32"):
        x = DeviceArray((3, 5), sm_registry.numpy_dtype(precision), ptr=0x10000, owner=False)
        assert mb._torch_view(torch, x).shape == (3, 5), precision


# ---------------------------------------------------------------------------
# store_vector_warp (softmax_window.cuh): the shifted stores' bytes, emulated
# ---------------------------------------------------------------------------
def _warp_store_row(cols, lo, d_y, kstride, items, first=0):
    """One 16-bit row group's stores as store_vector_warp makes them, lane by lane in
    warps of 32 (kStride lanes a group, warp-aligned): each lane's 16-byte
    block (its last d bytes ++ the next lane's first 16 - d, composed as the
    kernel does) and its uncovered elements one by
    one. The block: each lane's words rotated to start at byte 16 - d, bytes
    [0, d) of a word kept, the rest the next lane's rotated words'. Returns
    (bytes written, times each byte was written, the row's expected bytes,
    where the row starts)."""
    size = 2
    wvec = 16 // size
    group = min(kstride, 32)
    base = 64                                      # y row start: 16-aligned + (d + lo * size) % 16
    y_row = base + (d_y + lo * size) % 16
    yw = y_row - lo * size                         # window element 0's address
    d = (yw) % 16
    hi = lo + cols
    buf = bytearray(y_row + cols * size + 64)
    count = [0] * len(buf)
    vals = [(0x1000 + 37 * e) & 0xFFFF for e in range(hi + 4 * wvec)]

    def words(e0):                                 # the vector's four packed words
        b = b"".join(v.to_bytes(size, "little") for v in vals[e0:e0 + wvec])
        return [int.from_bytes(b[4 * j:4 * j + 4], "little") for j in range(4)]

    def rotated(e0, dl):                           # the vector's words from byte 16 - d on
        own = words(e0)
        s = (16 - dl) & 15
        q, sh = s >> 2, 8 * (s & 3)
        pick = [own[(q + i) & 3] for i in range(5)]
        return [(((pick[j + 1] << 32) | pick[j]) >> sh) & 0xFFFFFFFF for j in range(4)]

    def put(addr, data):
        for i, byte in enumerate(data):
            buf[addr + i] = byte
            count[addr + i] += 1

    for it in range(items):
        for w0 in range(0, kstride, 32 if kstride >= 32 else kstride):
            lanes = range(w0, min(w0 + 32, kstride))
            e0s = {l: (first + it * kstride + l) * wvec for l in lanes}
            inn = {l: e0s[l] < hi and e0s[l] + wvec > lo for l in lanes}
            whole = {l: inn[l] and e0s[l] >= lo and e0s[l] + wvec <= hi for l in lanes}
            for l in lanes:
                hw = l % 32                                    # the hardware lane
                nxt = l + 1 if hw != 31 and l + 1 in e0s else l   # shfl_down past the warp: own
                prv = l - 1 if hw != 0 and l - 1 in e0s else l
                shifted = inn[l] and d != 0
                next_whole = whole[nxt] and (hw + 1) % group != 0
                prev_whole = whole[prv] and hw % group != 0
                block = shifted and whole[l] and next_whole
                head_done = shifted and whole[l] and prev_whole
                a = yw + e0s[l] * size
                if block:
                    dl = d                                     # this row's d (shifted lanes)
                    out = []
                    for j in range(4):
                        kept = min(max(dl - 4 * j, 0), 4)      # bytes of word j from this lane
                        mask = 0xFFFFFFFF if kept == 4 else (1 << (8 * kept)) - 1
                        mine, theirs = rotated(e0s[l], dl)[j], rotated(e0s[nxt], dl)[j]
                        out.append((mine & mask) | (theirs & ~mask & 0xFFFFFFFF))
                    assert (a + 16 - dl) % 16 == 0
                    put(a + 16 - dl, b"".join(o.to_bytes(4, "little") for o in out))
                if not inn[l]:
                    continue
                if whole[l] and not shifted:
                    assert a % 16 == 0
                    put(a, b"".join(o.to_bytes(4, "little") for o in words(e0s[l])))
                    continue
                split = (16 - d) // size if shifted else 0
                for k in range(wvec):
                    e = e0s[l] + k
                    covered = head_done if k < split else block
                    if lo <= e < hi and not covered:
                        put(yw + e * size, vals[e].to_bytes(size, "little"))
    want = b"".join(vals[e].to_bytes(size, "little") for e in range(lo, hi))
    return buf, count, want, y_row


@pytest.mark.parametrize("kstride,items", [(4, 6), (16, 3), (32, 3), (64, 2), (128, 1)])
def test_warp_store_writes_each_byte_of_the_row_once(kstride, items):
    """16-bit rows (fp32 rows off x's phase keep their pieces, forty-second
    round): every phase of y against x, every start of the row in its first vector,
    rows that end anywhere: each byte of the row written exactly once, with
    the row's value, and no byte outside it -- the blocks composed across lanes
    and the elements at warps' and rows' ends together."""
    size = 2
    wvec = 16 // size
    for d_y in range(0, 16, size):
        for lo in range(wvec):
            for cols in {1, wvec - 1, wvec, 3 * wvec + 1, kstride * wvec // 2 + 3,
                         kstride * items * wvec - lo}:
                if cols < 1 or lo + cols > kstride * items * wvec:
                    continue
                buf, count, want, y0 = _warp_store_row(cols, lo, d_y, kstride, items)
                span = range(y0, y0 + cols * size)
                assert all(count[i] == 1 for i in span), (d_y, lo, cols)
                assert sum(count) == len(span), (d_y, lo, cols)
                assert bytes(buf[y0:y0 + cols * size]) == want, (d_y, lo, cols)


def _rung07_block_row_sass(prec):
    """The SASS and plan of 4096 x 4097 (rung 07, a block a row), built here."""
    p = sm.plan(4096, 4097, prec, cc=(9, 0))
    assert p.rung == "softmax_07_any_row", p.describe()
    b = compiler.compile_binary(p.source, p.entry, defines=dict(p.defines), arch="sm_90")
    return sass.disassemble(b.cubin), p          # one kernel in the module


@pytest.mark.parametrize("prec", ["bf16", "fp16"])
def test_rows_off_x_phase_store_one_block_a_lane(prec):
    """store_vector_warp in the built code (rung 07, a block a row), 16-bit:
    the warp's vote on the rows' phase, the four words handed down a lane,
    and one 16-byte store a vector on each path -- no 2-, 4- or 8-byte pieces
    (the forty-first round's stores)."""
    text, p = _rung07_block_row_sass(prec)
    assert re.search(r"\bVOTE\.ANY\b", text), "no warp vote on the rows' phase"
    assert len(re.findall(r"\bSHFL\.DOWN\b", text)) >= 4 * p.config.items, "words not handed down"
    assert len(re.findall(r"\bSTG\.E\.128\b", text)) >= 2 * p.config.items
    assert not re.search(r"\bSTG\.E\.64\b", text), "pieces of 8 bytes"


def test_fp32_rows_off_x_phase_store_pieces():
    """fp32 rows off x's phase keep the 8-byte pieces (4 + 8 + 4 or 8 + 8 a
    vector), which measured ahead of the blocks shifted across lanes (0.84 /
    0.62 of copy, forty-second round): no vote, no words handed down."""
    text, p = _rung07_block_row_sass("fp32")
    assert not re.search(r"\bVOTE\.ANY\b", text), "a vote on the rows' phase"
    assert len(re.findall(r"\bSTG\.E\.64\b", text)) >= 2 * p.config.items, "no 8-byte pieces"
    assert len(re.findall(r"\bSTG\.E\.128\b", text)) >= p.config.items


@pytest.mark.parametrize("prec,rows,cols", [("fp32", 4, 1048576), ("bf16", 16, 1048576)])
def test_split_rows_in_one_pass_load_evict_first(prec, rows, cols):
    """Rung 09's resident entry loads the vectors it holds in registers with
    .cs (LDG.E.EF.128) when the launch holds every row at once, by the
    read-only path otherwise -- both loops in the build, one per item each --
    copies its shared part under an L2 policy made in the kernel (evict first
    or normal, the same choice), and its streamed entry (x read twice) and the
    other window rungs keep the read-only path only."""
    p = sm.plan(rows, cols, prec, cc=(9, 0))
    assert p.rung == "softmax_09_split_row", p.describe()
    binary = compiler.compile_binary(p.source, p.entry, defines=dict(p.defines), arch="sm_90")
    text = sass.disassemble(binary.cubin)
    resident = sass.entry_instructions(text, p.entry)
    assert sum("LDG.E.EF.128" in i for i in resident) == p.config.items
    if p.config.shared_items:
        # the shared part's cp.async under a policy made in the kernel: evict first or normal
        ptx = binary.ptx if isinstance(binary.ptx, str) else binary.ptx.decode()
        assert "createpolicy.fractional.L2::evict_first" in ptx
        assert "createpolicy.fractional.L2::evict_normal" in ptx
        assert re.search(r"cp\.async\.cg\.shared\.global\.L2::cache_hint", ptx)
    assert sum(re.search(r"\bLDG\.E\.128\b", i) is not None for i in resident) == p.config.items
    if ".text.softmax_09_split_row_stream" in text:
        assert not any("EF" in i for i in sass.entry_instructions(text, "softmax_09_split_row_stream")
                       if i.startswith("LDG") or " LDG" in i)
    for shape in ((4096, 4097), (8192, 50257), (131072, 127)):     # rungs 07, 11, 10
        other = sm.plan(*shape, prec, cc=(9, 0))
        t = sass.disassemble(compiler.compile_binary(other.source, other.entry, defines=dict(other.defines),
                                                     arch="sm_90").cubin)
        assert "LDG.E.EF" not in t, other.describe()
