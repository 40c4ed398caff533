"""Register layouts of mma.sync / ldmatrix / wgmma (drvgemm.layouts), on the CPU:
bijections, spot values from the PTX ISA's fragment tables, the emulator
against A·B + C, ldmatrix feeding mma, pictures and the CLI, and the probe
kernels assembling for every architecture they target."""
import argparse

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from drvgemm.analysis import layouts as L
from drvgemm.cli import layout as layout_cli
from drvgemm.runtime.compiler import compile_binary
from drvgemm.runtime.kernel import parse_params
from drvgemm.runtime.sass import disassemble, opcode_counts

MMA_CASES = [(s, t) for s, ts in L.MMA_TYPES.items() for t in ts]


# --------------------------------------------------------------------------
# every map is a bijection between register slots and matrix elements
# --------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dtype", MMA_CASES)
@pytest.mark.parametrize("operand", ["A", "B", "C"])
def test_mma_layout_is_bijection(shape, dtype, operand):
    lay = L.mma_layout(shape, dtype, operand)
    m, n, k = L.MMA_SHAPES[shape]
    assert lay.shape == {"A": (m, k), "B": (k, n), "C": (m, n)}[operand]
    assert lay.lanes * lay.regs_per_lane * lay.elems_per_reg == lay.shape[0] * lay.shape[1]
    assert lay.is_bijection()
    seen = set()
    for lane in range(32):
        for reg in range(lay.regs_per_lane):
            for elem in range(lay.elems_per_reg):
                rc = lay.coord(lane, reg, elem)
                assert lay.owner(*rc) == (lane, reg, elem)
                seen.add(rc)
    assert len(seen) == lay.shape[0] * lay.shape[1]


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_layout_is_bijection(num, trans):
    lay = L.ldmatrix_layout(num, trans)
    assert lay.shape == (8 * num, 8) and lay.regs_per_lane == num and lay.elems_per_reg == 2
    assert lay.is_bijection()
    # register i of every lane carries matrix i, whatever .trans does inside it
    assert (lay.coords[:, :, :, 0] // 8 == np.arange(num)[None, :, None]).all()
    # the lanes that supply addresses: one per stored row, the rest ignored
    rows = [lay.addressed_row(lane) for lane in range(32)]
    assert sorted(r for r in rows if r is not None) == [(m, r) for m in range(num) for r in range(8)]
    assert rows.count(None) == 32 - 8 * num
    for m in range(num):
        for r in range(8):
            assert lay.addressed_row(lay.address_lane(m, r)) == (m, r)


@pytest.mark.parametrize("n", L.WGMMA_N)
def test_wgmma_d_layout_is_bijection(n):
    lay = L.wgmma_d_layout(n)
    assert lay.shape == (64, n) and lay.lanes == 128 and lay.regs_per_lane == n // 2
    assert lay.is_bijection()
    # each warp of the warpgroup owns its own 16-row band
    warp = np.arange(128)[:, None] >> 5
    assert (lay.coords[:, :, 0, 0] // 16 == warp).all()


def test_a_broken_map_is_reported():
    # two lanes claiming the same element must not pass as a layout
    lay = L.FragmentLayout("broken", (16, 8), 32, 4, 1, lambda lane, reg, e: (lane >> 2, reg * 0))
    assert not lay.is_bijection()
    with pytest.raises(ValueError):
        lay.gather(np.zeros((32, 4, 1)))


# --------------------------------------------------------------------------
# spot values, worked out by hand from the PTX ISA fragment tables
# (groupID g = lane >> 2, threadID_in_group t = lane % 4)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dtype,operand,slot,rc", [
    # m16n8k8 tf32 A, lane 5 (g=1, t=1): a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4)
    ("m16n8k8", "tf32", "A", (5, 0, 0), (1, 1)),
    ("m16n8k8", "tf32", "A", (5, 1, 0), (9, 1)),
    ("m16n8k8", "tf32", "A", (5, 2, 0), (1, 5)),
    ("m16n8k8", "tf32", "A", (5, 3, 0), (9, 5)),
    # m16n8k8 tf32 B, lane 14 (g=3, t=2): b0 (t, g), b1 (t+4, g)
    ("m16n8k8", "tf32", "B", (14, 0, 0), (2, 3)),
    ("m16n8k8", "tf32", "B", (14, 1, 0), (6, 3)),
    # m16n8k8 f16 A, lane 27 (g=6, t=3): a3 = reg 1 high half -> (g+8, 2t+1)
    ("m16n8k8", "f16", "A", (27, 1, 1), (14, 7)),
    # m16n8k8 bf16 B, lane 9 (g=2, t=1): b1 = high half -> (2t+1, g)
    ("m16n8k8", "bf16", "B", (9, 0, 1), (3, 2)),
    # m16n8k16 A, lane 6 (g=1, t=2): a5 = reg 2 high half -> (g, 2t+1+8)
    ("m16n8k16", "f16", "A", (6, 2, 1), (1, 13)),
    ("m16n8k16", "bf16", "A", (6, 3, 0), (9, 12)),
    # m16n8k16 B, lane 7 (g=1, t=3): b2 = reg 1 low half -> (2t+8, g)
    ("m16n8k16", "bf16", "B", (7, 1, 0), (14, 1)),
    # accumulator, lane 30 (g=7, t=2): c3 -> (g+8, 2t+1); c0 -> (g, 2t)
    ("m16n8k8", "tf32", "D", (30, 3, 0), (15, 5)),
    ("m16n8k16", "f16", "C", (30, 0, 0), (7, 4)),
])
def test_mma_layout_spot_values(shape, dtype, operand, slot, rc):
    assert L.mma_layout(shape, dtype, operand).coord(*slot) == rc


def test_wgmma_and_ldmatrix_spot_values():
    # warp 2, lane 9 (g=2, t=1), register 6: second 8-column block, lower row half
    assert L.wgmma_d_coord(2, 9, 6, 16) == (32 + 2 + 8, 8 + 2)
    assert L.wgmma_d_coord(0, 0, 0, 8) == (0, 0)
    assert L.wgmma_d_coord(3, 31, 127, 256) == (63, 255)
    # lane 14 (g=3, t=2), matrix 1, low half: row g, cols 2t; .trans swaps the roles
    assert L.ldmatrix_layout(4, False).coord(14, 1, 0) == (8 + 3, 4)
    assert L.ldmatrix_layout(4, True).coord(14, 1, 0) == (8 + 4, 3)


def test_names_and_aliases():
    assert L.mma_layout("m16n8k8", "fp16", "a") is L.mma_layout("M16N8K8", "f16", "A")
    with pytest.raises(ValueError, match="tf32"):
        L.mma_layout("m16n8k16", "tf32", "A")
    with pytest.raises(ValueError):
        L.mma_layout("m16n8k4", "f16", "A")
    with pytest.raises(ValueError):
        L.mma_layout("m16n8k8", "f16", "E")
    with pytest.raises(ValueError):
        L.wgmma_d_layout(12)
    with pytest.raises(IndexError):
        L.mma_layout("m16n8k8", "tf32", "A").coord(32, 0, 0)
    with pytest.raises(IndexError):
        L.mma_layout("m16n8k8", "tf32", "A").owner(16, 0)


# --------------------------------------------------------------------------
# the emulator
# --------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(case=st.sampled_from(MMA_CASES), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_emulator_equals_matmul(case, seed, scale):
    """Registers filled as the PTX ISA's fragment tables say (not through the
    maps the emulator itself uses), one mma.sync emulated, D read back by the
    ISA's accumulator table: A·B + C. A map that disagrees with the ISA, or
    an emulator that multiplies the wrong elements, fails here."""
    import test_layout_formulas as isa
    shape, dtype = case
    m, n, k = L.MMA_SHAPES[shape]
    rng = np.random.default_rng(seed)
    A, B, C = (rng.standard_normal(s) * scale for s in ((m, k), (k, n), (m, n)))
    family = "tf32" if dtype == "tf32" else "16"
    per_reg = 1 if dtype == "tf32" else 2
    frags = []
    for op, M in (("A", A), ("B", B)):
        rule, count = isa.ISA[(shape, family, op)]
        f = np.zeros((32, count // per_reg, per_reg))
        for lane in range(32):
            for i in range(count):
                f[lane, i // per_reg, i % per_reg] = M[rule(i, lane >> 2, lane % 4)]
        frags.append(f)
    c_frag = np.zeros((32, 4, 1))
    for lane in range(32):
        for i in range(4):
            c_frag[lane, i, 0] = C[isa._c_f32(i, lane >> 2, lane % 4)]
    d_frag = L.mma_fragments(shape, dtype, frags[0], frags[1], c_frag)
    D = np.full((m, n), np.nan)
    for lane in range(32):
        for i in range(4):
            D[isa._c_f32(i, lane >> 2, lane % 4)] = d_frag[lane, i, 0]
    np.testing.assert_allclose(D, A @ B + C, rtol=1e-12, atol=1e-12 * scale * scale)
    # and the whole-matrix entry point agrees
    np.testing.assert_allclose(L.mma_emulate(shape, dtype, A, B, C), D, rtol=1e-12,
                               atol=1e-12 * scale * scale)


@pytest.mark.parametrize("shape,dtype", MMA_CASES)
def test_emulator_moves_each_product_to_its_owner(shape, dtype):
    # one-hot A and B: exactly one D element is nonzero, and it must sit in
    # the register the accumulator map names for it
    m, n, k = L.MMA_SHAPES[shape]
    lc = L.mma_layout(shape, dtype, "D")
    for (i, kk, j) in [(0, 0, 0), (m - 1, k - 1, n - 1), (9, k // 2 + 1, 5)]:
        A = np.zeros((m, k)); A[i, kk] = 3.0
        B = np.zeros((k, n)); B[kk, j] = 5.0
        d_frag = L.mma_fragments(shape, dtype, L.mma_layout(shape, dtype, "A").scatter(A),
                                 L.mma_layout(shape, dtype, "B").scatter(B), np.zeros((32, 4, 1)))
        hot = np.argwhere(d_frag != 0)
        assert hot.tolist() == [list(lc.owner(i, j))]
        assert d_frag[tuple(hot[0])] == 15.0


def test_ldmatrix_feeds_mma_fragments():
    """ldmatrix.x4 over a row-major 16x16 A tile (matrices: top-left,
    bottom-left, top-right, bottom-right) yields exactly the m16n8k16 A
    fragments; .x2.trans over a row-major 16x8 B tile yields the B
    fragments; .x2 / .x1.trans do the same for m16n8k8. Two independently
    stated maps must agree here."""
    A = np.arange(16 * 16).reshape(16, 16)
    stored = np.concatenate([A[0:8, 0:8], A[8:16, 0:8], A[0:8, 8:16], A[8:16, 8:16]])
    for dtype in ("f16", "bf16"):
        np.testing.assert_array_equal(L.ldmatrix_emulate(4, False, stored),
                                      L.mma_layout("m16n8k16", dtype, "A").scatter(A))
        B = np.arange(16 * 8).reshape(16, 8)
        np.testing.assert_array_equal(L.ldmatrix_emulate(2, True, B),
                                      L.mma_layout("m16n8k16", dtype, "B").scatter(B))
        A8 = np.arange(16 * 8).reshape(16, 8)
        np.testing.assert_array_equal(L.ldmatrix_emulate(2, False, A8),
                                      L.mma_layout("m16n8k8", dtype, "A").scatter(A8))
        B8 = np.arange(8 * 8).reshape(8, 8)
        np.testing.assert_array_equal(L.ldmatrix_emulate(1, True, B8),
                                      L.mma_layout("m16n8k8", dtype, "B").scatter(B8))


def test_pack_registers_puts_element_zero_in_the_low_half():
    import ml_dtypes
    frag = np.array([[[1.0, 2.0]]])
    w = L.pack_registers(frag, "bf16")
    assert w.dtype == np.uint32 and w.shape == (1, 1)
    assert int(w[0, 0]) == (0x4000 << 16) | 0x3F80        # bf16 2.0 high, 1.0 low
    assert int(L.pack_registers(frag, "f16")[0, 0]) == (0x4000 << 16) | 0x3C00
    assert int(L.pack_registers(np.array([[[1.0]]]), "tf32")[0, 0]) == 0x3F800000
    rng = np.random.default_rng(0)
    f = rng.integers(-8, 9, size=(32, 4, 2)).astype(np.float64)
    for dt in ("f16", "bf16"):
        back = L.unpack_registers(L.pack_registers(f, dt), dt)
        assert back.dtype in (np.float16, np.dtype(ml_dtypes.bfloat16))
        np.testing.assert_array_equal(back.astype(np.float64), f)


def test_wgmma_kmajor_offsets_tile_the_image():
    rows, ks = np.meshgrid(np.arange(64), np.arange(16), indexing="ij")
    off = L.wgmma_kmajor_offset(rows, ks, lbo=128, sbo=256)
    # every element has its own 2-byte slot in the 2048-byte image
    assert sorted(off.ravel().tolist()) == list(range(0, 2048, 2))
    # a core matrix: 8 rows of 16 contiguous bytes, 128 bytes in all
    assert L.wgmma_kmajor_offset(1, 0, lbo=128, sbo=256) == 16
    assert L.wgmma_kmajor_offset(0, 8, lbo=128, sbo=256) == 128
    assert L.wgmma_kmajor_offset(8, 0, lbo=128, sbo=256) == 256


# --------------------------------------------------------------------------
# pictures and the CLI
# --------------------------------------------------------------------------
def _cells(text):
    lines = [ln for ln in text.splitlines() if "|" in ln and "col 0" not in ln]
    return [ln.split("|", 1)[1].split() for ln in lines]


def test_picture_tf32_a():
    cells = _cells(L.picture("m16n8k8", "tf32", "A"))
    assert len(cells) == 16 and all(len(r) == 8 for r in cells)
    assert cells[0][0] == "T0:r0" and cells[0][4] == "T0:r2"
    assert cells[8][0] == "T0:r1" and cells[15][7] == "T31:r3"


def test_picture_bf16_b_shows_halves():
    cells = _cells(L.picture("m16n8k16", "bf16", "B"))
    assert len(cells) == 16 and cells[1][0] == "T0:r0.1" and cells[8][1] == "T4:r1.0"


def test_picture_ldmatrix_and_wgmma():
    text = L.picture("ldmatrix", "x4", "trans")
    assert "address from T13" in text
    assert len(_cells(text)) == 32
    wg = L.picture("wgmma", "m64n16", "d")
    cells = _cells(wg)
    assert len(cells) == 64 and all(len(r) == 16 for r in cells)
    assert cells[16][0] == "T32:r0" and cells[63][15] == "T127:r7"


def _run_cli(argv, capsys):
    parser = argparse.ArgumentParser(prog="drvgemm")
    layout_cli.add(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    rc = args.func(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli(capsys):
    rc, out, _ = _run_cli(["layout", "m16n8k8", "tf32", "A"], capsys)
    assert rc == 0 and out.strip() == L.picture("m16n8k8", "tf32", "A")
    rc, out, _ = _run_cli(["layout", "m16n8k16", "fp16", "b"], capsys)
    assert rc == 0 and "T0:r0.1" in out
    rc, out, _ = _run_cli(["layout", "m16n8k8", "bf16"], capsys)   # all three operands
    assert rc == 0 and out.count("mma.sync.aligned.m16n8k8") == 3
    rc, out, _ = _run_cli(["layout", "ldmatrix", "x2", "--trans"], capsys)
    assert rc == 0 and "ldmatrix.x2.trans" in out
    rc, out, _ = _run_cli(["layout", "wgmma", "m64n16", "d"], capsys)
    assert rc == 0 and "T127:r7" in out
    rc, out, err = _run_cli(["layout", "m16n8k16", "tf32", "A"], capsys)
    assert rc == 2 and out == "" and "tf32" in err
    rc, _, err = _run_cli(["layout", "ldmatrix", "x3"], capsys)
    assert rc == 2 and "x1, x2 or x4" in err


# --------------------------------------------------------------------------
# the hardware probes assemble, and hold the instruction they probe
# --------------------------------------------------------------------------
PROBES = (
    [("probe_mma_m16n8k8.ptx", f"probe_mma_m16n8k8_{t}", a, "HMMA")
     for t in L.MMA_TYPES["m16n8k8"] for a in ("sm_80", "sm_90")]
    + [("probe_mma_m16n8k16.ptx", f"probe_mma_m16n8k16_{t}", a, "HMMA")
       for t in L.MMA_TYPES["m16n8k16"] for a in ("sm_80", "sm_90")]
    + [("probe_ldmatrix.ptx", f"probe_ldmatrix_x{n}{'_trans' if tr else ''}", a, "LDSM")
       for n in (1, 2, 4) for tr in (False, True) for a in ("sm_80", "sm_90")]
    + [("probe_wgmma.ptx", "probe_wgmma_m64n16k16_bf16", "sm_90a", "HGMMA")]
)


@pytest.mark.parametrize("path,entry,arch,opcode", PROBES)
def test_probe_assembles(path, entry, arch, opcode):
    b = compile_binary(path, entry, arch=arch)
    assert b.kind == "ptx" and b.arch == arch and b.cubin
    sass = disassemble(b.cubin)
    # the probe's function holds exactly one instance of the instruction it probes
    body = sass.split(f".text.{entry}:", 1)[1].split(".section", 1)[0]
    assert opcode_counts(body)[opcode] == 1
    assert "LDL" not in opcode_counts(body) and "STL" not in opcode_counts(body)
    # the launcher reads the parameter list from the PTX: all of it, pointers first
    params = parse_params(b.ptx, entry)
    want = {"HMMA": ["u64"] * 4, "LDSM": ["u64"] * 3, "HGMMA": ["u64"] * 4 + ["u32"] * 3}[opcode]
    assert [p.ptx_type for p in params] == want
