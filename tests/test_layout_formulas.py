"""Every register slot of every fragment map against the PTX ISA's own
fragment description (section "Matrix fragments for mma.m16n8k*", "Matrix
fragments for wgmma .m64nNk16", "ldmatrix"), written here from the ISA's
wording -- element a_i / b_i / c_i / d_i, groupID = %laneid >> 2,
threadID_in_group = %laneid % 4, "row = groupID for a0 and a1, groupID + 8
for a2 and a3" -- and not from drvgemm.analysis.layouts' rules. The spot
values of test_layouts.py see a few slots; this sees all of them, so two
swapped registers of any map fail here without a GPU probe."""
import pytest

from drvgemm.analysis import layouts as L


def _in(i, *members):
    return i in members


# (shape, dtype family, operand) -> f(i, groupID, threadID_in_group) -> (row, col),
# each a transcription of the ISA's table for that fragment.
def _a_m16n8k8_tf32(i, g, t):
    row = g if _in(i, 0, 2) else g + 8
    col = t if _in(i, 0, 1) else t + 4
    return row, col


def _b_m16n8k8_tf32(i, g, t):
    return (t if i == 0 else t + 4), g


def _a_m16n8k8_16(i, g, t):
    row = g if _in(i, 0, 1) else g + 8
    return row, t * 2 + (i & 1)


def _b_m16n8k8_16(i, g, t):
    return t * 2 + i, g


def _a_m16n8k16_16(i, g, t):
    row = g if _in(i, 0, 1, 4, 5) else g + 8
    col = t * 2 + (i & 1) if i < 4 else t * 2 + (i & 1) + 8
    return row, col


def _b_m16n8k16_16(i, g, t):
    row = t * 2 + (i & 1) if i < 2 else t * 2 + (i & 1) + 8
    return row, g


def _c_f32(i, g, t):
    row = g if _in(i, 0, 1) else g + 8
    return row, t * 2 + (i & 1)


ISA = {
    ("m16n8k8", "tf32", "A"): (_a_m16n8k8_tf32, 4),
    ("m16n8k8", "tf32", "B"): (_b_m16n8k8_tf32, 2),
    ("m16n8k8", "16", "A"): (_a_m16n8k8_16, 4),
    ("m16n8k8", "16", "B"): (_b_m16n8k8_16, 2),
    ("m16n8k16", "16", "A"): (_a_m16n8k16_16, 8),
    ("m16n8k16", "16", "B"): (_b_m16n8k16_16, 4),
}

CASES = [(s, t) for s, ts in L.MMA_TYPES.items() for t in ts]


def _elements_per_register(dtype):
    return 1 if dtype == "tf32" else 2      # .f16x2 / .bf16x2 hold two, .tf32 one


@pytest.mark.parametrize("shape,dtype", CASES)
@pytest.mark.parametrize("operand", ["A", "B", "C", "D"])
def test_mma_maps_are_the_isa_tables(shape, dtype, operand):
    lay = L.mma_layout(shape, dtype, operand)
    if operand in ("C", "D"):
        rule, count, per_reg = _c_f32, 4, 1            # fp32 accumulators: c0..c3
    else:
        rule, count = ISA[(shape, "tf32" if dtype == "tf32" else "16", operand)]
        per_reg = _elements_per_register(dtype)
    assert lay.lanes * lay.regs_per_lane * lay.elems_per_reg == 32 * count
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(count):
            # element i sits in register i // per_reg, half i % per_reg (a0 in the low half)
            got = lay.coord(lane, i // per_reg, i % per_reg)
            assert got == rule(i, g, t), (f"{lay.name}: lane {lane} element {i} is at {got}, "
                                          f"the ISA says {rule(i, g, t)}")


@pytest.mark.parametrize("n", [8, 16, 64, 136, 256])
def test_wgmma_accumulator_is_the_isa_table(n):
    """wgmma .m64nNk16 fp32 D: warp w of the warpgroup owns rows 16w..16w+15;
    d_i: row = 16w + groupID (+ 8 for i % 4 in {2, 3}), col = 8 * (i // 4) +
    2 * threadID_in_group + (i % 2)."""
    lay = L.wgmma_d_layout(n)
    for w in range(4):
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            for i in range(n // 2):
                row = 16 * w + g + (8 if i % 4 in (2, 3) else 0)
                col = 8 * (i // 4) + 2 * t + i % 2
                assert lay.coord(32 * w + lane, i, 0) == (row, col), (n, w, lane, i)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_is_the_isa_table(num, trans):
    """ldmatrix m8n8.b16: matrix j lands in register j; without .trans lane l
    gets row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of it; with .trans the
    same fragment positions read the stored matrix transposed."""
    lay = L.ldmatrix_layout(num, trans)
    for lane in range(32):
        for j in range(num):
            for half in range(2):
                r, c = lane // 4, 2 * (lane % 4) + half
                want = (8 * j + c, r) if trans else (8 * j + r, c)
                assert lay.coord(lane, j, half) == want
