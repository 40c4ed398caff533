"""The any-row-length softmax kernels (cu/softmax/07..09) and their planner
(drvgemm_softmax_any.py at the repository root) without a GPU: every
registered instantiation compiles for sm_90 (and sm_80 unless it uses
clusters) with no spills inside its launch bounds, the SASS of the windowed
path carries 128-bit loads and stores, a missing define is a compile error,
and the planner picks a sensible, launchable config for a table of shapes."""
import re

import pytest

from drvgemm import compiler, sass

A = pytest.importorskip("drvgemm_softmax_any")

DEVICE = dict(max_threads=1024, max_grid_x=2**31 - 1, smem_per_block=48 * 1024,
              regs_per_sm=65536, sm_count=132, max_cluster=8)


def _build(cfg, prec, arch):
    b = compiler.compile_binary(cfg.source, cfg.entry, defines=cfg.defines(prec), arch=arch)
    return b, compiler.parse_resources(b.log)[cfg.entry]


def _prec_of(cfg):
    return "fp32" if cfg.vec == 4 else "bf16"


def _budget(cfg):
    return min(255, 65536 // (cfg.threads * cfg.min_blocks))


@pytest.mark.parametrize("cfg", A.configs(), ids=lambda c: c.describe().replace(" ", "-"))
def test_every_instantiation_compiles_for_sm90_without_spills(cfg):
    b, r = _build(cfg, _prec_of(cfg), "sm_90")
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack == 0, (cfg.describe(), r)
    assert r.registers <= _budget(cfg), (cfg.describe(), r)


def _sm80_and_fp16_cases():
    out = []
    for cfg in A.configs():
        precs = ["fp32"] if cfg.vec == 4 else ["bf16", "fp16"]
        for prec in precs:
            for arch in (("sm_80",) if cfg.arch == "sm_80" else ()) + (("sm_90",) if prec == "fp16" else ()):
                out.append(pytest.param(cfg, prec, arch,
                                        id=f"{cfg.describe().replace(' ', '-')}-{prec}-{arch}"))
    return out


@pytest.mark.parametrize("cfg,prec,arch", _sm80_and_fp16_cases())
def test_sm80_and_fp16_instantiations_fit_their_bounds(cfg, prec, arch):
    b, r = _build(cfg, prec, arch)
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack == 0, (cfg.describe(), prec, arch, r)
    assert r.registers <= _budget(cfg)


def test_cluster_kernel_is_refused_on_sm80():
    cfg = next(c for c in A.configs("fp32") if c.kind == "cluster")
    with pytest.raises(Exception):
        _build(cfg, "fp32", "sm_80")


@pytest.mark.parametrize("missing", ["DTYPE", "THREADS", "ROW_THREADS", "ITEMS", "RPT", "MIN_BLOCKS"])
def test_a_missing_define_is_a_compile_error(missing):
    cfg = next(c for c in A.configs("fp32") if c.kind == "rows")
    d = cfg.defines("fp32")
    del d[missing]
    with pytest.raises(compiler.CompileError) as e:
        compiler.compile_binary(cfg.source, cfg.entry, defines=d, arch="sm_90")
    assert missing in str(e.value.log if hasattr(e.value, "log") else e.value)


def _function_sass(cfg, prec="fp32"):
    b, _ = _build(cfg, prec, "sm_90")
    text = sass.disassemble(b.cubin)
    m = re.search(r"^\.text\." + re.escape(cfg.entry) + r":\n(.*?)(?=^//-{5,}|\Z)", text, re.S | re.M)
    assert m, cfg.entry
    return m.group(1)


def _n(text, op, width):
    return len(re.findall(r"\b" + op + r"(?:\.[A-Z0-9_]+)*\." + width + r"\b", text))


@pytest.mark.parametrize("shape,prec", [((8192, 50257), "fp32"), ((777, 12345), "fp32"),
                                        ((100000, 128), "fp32"), ((4, 1048576), "fp32"),
                                        ((2048, 32000), "bf16"), ((512, 151936), "fp16"),
                                        ((65536, 33), "fp32"), ((4096, 4097), "bf16")])
def test_windowed_path_issues_128_bit_loads_and_stores_on_odd_rows(shape, prec):
    """Odd lengths are exactly where the older rungs fell back to scalar
    accesses for the whole array: here every vector inside the row is one
    LDG.128 / STG.128 (one per item per thread), and only the peel/tail is
    element-wise; no local memory."""
    p = A.plan(*shape, prec, aligned=False)
    text = _function_sass(p.config, prec)
    loads, stores = _n(text, "LDG", "128"), _n(text, "STG", "128")
    want = p.config.items * p.config.rpt
    assert loads >= want and stores >= want - 1, (p.describe(), loads, stores)
    assert "LDL" not in text and "STL" not in text


def test_cluster_kernel_exchanges_through_dsmem_and_split_kernel_through_global_atomics():
    clu = A.plan(8192, 50257, "fp32").config
    text = _function_sass(clu)
    assert "UCGABAR_ARV" in text and "UCGABAR_WAIT" in text
    assert re.search(r"\bLD\.E\.64\b", text), "no 64-bit DSMEM load of the peers' pairs"
    spl = A.plan(4, 1048576, "fp32").config
    b, _ = _build(spl, "fp32", "sm_90")
    text = sass.disassemble(b.cubin)     # the row step is a function of its own: whole cubin
    assert re.search(r"\b(RED|ATOM)G?\.E\.ADD", text), "no arrival counter"
    assert "NANOSLEEP" in text
    assert re.search(r"\bLDG\.E\.STRONG\.GPU\b", text), "the counter is not read at GPU scope"
    assert _n(text, "LDG", "128") >= spl.items and _n(text, "STG", "128") >= spl.items


# ---------------------------------------------------------------------------
# planner
# ---------------------------------------------------------------------------
TABLE = [
    # rows, cols, prec, aligned, expected kind, extra check
    (100000, 128, "fp32", True, "rows", lambda c: c.row_threads == 8 and c.items == 4),
    (1048576, 1, "fp32", True, "rows", lambda c: c.row_threads == 1),
    (1048576, 3, "bf16", True, "rows", lambda c: c.row_threads == 1),
    (524288, 31, "fp32", True, "rows", lambda c: c.row_threads <= 4),
    (32768, 1000, "fp32", True, "rows", lambda c: c.row_threads == 32),
    (777, 12345, "fp32", True, "rows", lambda c: c.row_threads == c.threads),
    (4096, 16384, "fp32", True, "rows", lambda c: c.row_threads == c.threads == 512),
    (2048, 32000, "fp32", True, "cluster", lambda c: c.cluster == 2),
    (8192, 50257, "fp32", True, "cluster", lambda c: c.cluster == 4),
    (1024, 128256, "fp32", True, "cluster", lambda c: c.cluster == 8),
    (512, 151936, "fp32", True, "cluster", lambda c: c.cluster == 8),
    (512, 151936, "bf16", False, "cluster", lambda c: c.cluster == 8),
    (4, 1048576, "fp32", True, "split", None),
    (4, 1048576, "bf16", False, "split", None),
    (16, 262144, "fp32", True, "split", None),
    (2, 8388608, "fp32", True, "split_stream", None),
    (4, 16384, "fp32", True, "rows", None),   # 256 KiB: launch-bound, no grid-wide sync
    (1, 1, "fp32", True, "rows", None),
]


@pytest.mark.parametrize("rows,cols,prec,aligned,kind,extra", TABLE,
                         ids=[f"{r}x{c}-{p}-{'al' if a else 'mis'}" for r, c, p, a, _, _ in TABLE])
def test_planner_picks_a_sensible_config(rows, cols, prec, aligned, kind, extra):
    p = A.plan(rows, cols, prec, aligned)
    c = p.config
    assert c.kind == kind, p.describe()
    if extra is not None:
        assert extra(c), p.describe()
    assert c in A.configs(prec), "plans only registered instantiations"
    vec = A.vec_of(prec)
    nv = A.window_vectors(cols, vec, aligned and cols % vec == 0)
    if kind == "rows":
        assert c.window >= nv and p.grid[0] * c.rows_per_block >= rows
        # the smallest registered lane group that holds the row
        if c.row_threads <= 32:
            assert not any(o.kind == "rows" and o.row_threads <= 32 and nv <= o.window < c.window
                           for o in A.configs(prec))
    elif kind == "cluster":
        assert c.window >= nv and p.grid[0] == rows * c.cluster
    elif kind == "split":
        assert p.split * c.window >= nv and p.grid[0] == p.split * p.slots
        assert p.slots == min(rows, (c.min_blocks * 132) // p.split)
        assert p.cooperative
        assert p.split * p.slots >= 132, "the whole GPU works on the rows"
    else:
        assert p.grid[0] == p.split * p.slots <= c.min_blocks * 132


SHAPES = [(r, c) for r in (1, 3, 4, 77, 1000, 65536, 1048576) for c in
          (1, 2, 3, 7, 31, 33, 127, 129, 1000, 4097, 12345, 16385, 32000, 50257, 128256, 151936,
           262145, 1048576, 5_000_001)]


@pytest.mark.parametrize("prec", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("aligned", [True, False])
def test_every_plan_is_within_device_limits(prec, aligned):
    for rows, cols in SHAPES:
        if rows * cols > 2**33:
            continue
        p = A.plan(rows, cols, prec, aligned)
        c = p.config
        assert p.block[0] == c.threads <= DEVICE["max_threads"]
        assert 1 <= p.grid[0] <= DEVICE["max_grid_x"] and p.grid[1:] == (1, 1)
        assert p.smem == 0
        assert c.threads * c.min_blocks * 64 <= DEVICE["regs_per_sm"] or c.min_blocks == 1
        if c.kind == "cluster":
            assert c.cluster <= DEVICE["max_cluster"] and p.grid[0] % c.cluster == 0
        if p.split:
            # every block of a cooperative grid resident at once (min_blocks is
            # what __launch_bounds__ guarantees per SM)
            assert p.grid[0] <= c.min_blocks * DEVICE["sm_count"]
            assert p.workspace_bytes >= p.slots * 2 * p.split * 8 + p.slots * 8
        assert 0.0 <= p.predicted_copy_ratio <= 1.0


def test_plan_rejects_bad_input():
    with pytest.raises(ValueError):
        A.plan(0, 10)
    with pytest.raises(ValueError):
        A.plan(10, 0)
    with pytest.raises(ValueError):
        A.plan(10, 10, "fp64")
    with pytest.raises(ValueError):
        A.configs("fp32")[0].defines("bf16")   # a config is registered for one vector width


def test_misalignment_costs_at_most_one_vector():
    for cols in (128, 4096, 50257):
        al = A.window_vectors(cols, 4, True)
        mis = A.window_vectors(cols, 4, False)
        assert mis - al <= 1
