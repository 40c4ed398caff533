"""The hardware says where fragment elements live: the probe kernels in ptx/
load registers verbatim from per-lane tables, run one mma.sync / ldmatrix /
wgmma, and store what they got verbatim. The per-lane tables are built from
drvgemm.layouts, so every comparison below asserts that the layouts module
describes the hardware. All values are small integers: exact in tf32, f16,
bf16 and in fp32 accumulation, so every check is an exact equality."""
import numpy as np
import pytest

import drvgemm
from drvgemm.analysis import layouts as L

pytestmark = pytest.mark.gpu

MMA_CASES = [(s, t) for s, ts in L.MMA_TYPES.items() for t in ts]
_kernels = {}


def _kernel(path, entry, arch=None):
    key = (path, entry, arch)
    if key not in _kernels:
        _kernels[key] = drvgemm.compile(path, entry, arch=arch)
    return _kernels[key]


def _needs_cc(major, minor=0, *, exact=False):
    cc = tuple(drvgemm.device().cc)
    if (cc != (major, minor)) if exact else (cc < (major, minor)):
        pytest.skip(f"needs compute capability {'' if exact else '>= '}{major}.{minor}, "
                    f"device has {cc[0]}.{cc[1]}")


def _poisoned(shape):
    return drvgemm.to_device(np.full(shape, np.nan, dtype=np.float32))


# --------------------------------------------------------------------------
# mma.sync
# --------------------------------------------------------------------------
def run_mma_probe(shape, dtype, A, B, C):
    """Scatter A, B, C into per-lane registers with the layouts module, run
    the probe, return (hardware D fragments (32, 4, 1), D gathered by the
    accumulator map)."""
    la, lb, lc = (L.mma_layout(shape, dtype, op) for op in "abc")
    a_words = L.pack_registers(la.scatter(A), dtype)
    b_words = L.pack_registers(lb.scatter(B), dtype)
    c_table = np.ascontiguousarray(lc.scatter(C)[..., 0], dtype=np.float32)
    d = _poisoned((32, 4))
    k = _kernel(f"probe_mma_{shape}.ptx", f"probe_mma_{shape}_{dtype}")
    drvgemm.launch(k, grid=(1, 1, 1), block=(32, 1, 1),
                   args=[drvgemm.to_device(a_words), drvgemm.to_device(b_words),
                         drvgemm.to_device(c_table), d])
    d_frag = d.to_host().reshape(32, 4, 1).astype(np.float64)
    assert not np.isnan(d_frag).any(), "the probe left D registers unwritten"
    return d_frag, lc.gather(d_frag)


def _misplaced(got, want, decode, limit=6):
    """Describe where the hardware put what: 'D(3,5) holds A(11,5), expected A(3,5)'."""
    bad = np.argwhere(got != want)
    lines = [f"D{tuple(map(int, ij))} holds {decode(got[tuple(ij)])}, expected "
             f"{decode(want[tuple(ij)])}" for ij in bad[:limit]]
    return f"{len(bad)} of {got.size} elements misplaced:\n  " + "\n  ".join(lines)


@pytest.mark.parametrize("shape,dtype", MMA_CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mma_random_integers(gpu, shape, dtype, seed):
    _needs_cc(8, 0)
    m, n, k = L.MMA_SHAPES[shape]
    rng = np.random.default_rng(seed)
    A = rng.integers(-8, 9, size=(m, k)).astype(np.float64)
    B = rng.integers(-8, 9, size=(k, n)).astype(np.float64)
    C = rng.integers(-64, 65, size=(m, n)).astype(np.float64)
    d_frag, D = run_mma_probe(shape, dtype, A, B, C)
    np.testing.assert_array_equal(D, A @ B + C, err_msg=f"{shape} {dtype} seed {seed}")
    # the fragment-level emulator predicts every lane's registers
    la, lb, lc = (L.mma_layout(shape, dtype, op) for op in "abc")
    np.testing.assert_array_equal(
        d_frag, L.mma_fragments(shape, dtype, la.scatter(A), lb.scatter(B), lc.scatter(C)))


@pytest.mark.parametrize("shape,dtype", MMA_CASES)
def test_mma_a_layout_with_index_matrix(gpu, shape, dtype):
    """A holds its own index (r*K + c + 1 <= 256: exact even in bf16); B picks
    8 of A's columns (B[k, j] = 1 where k = j + 8s), so D must show A's
    elements in place: a wrong A or D map shows which element went where."""
    _needs_cc(8, 0)
    m, n, k = L.MMA_SHAPES[shape]
    A = np.arange(1, m * k + 1, dtype=np.float64).reshape(m, k)
    decode = lambda v: f"A{divmod(int(v) - 1, k)}"
    for s in range(k // n):
        B = np.zeros((k, n))
        B[np.arange(n) + n * s, np.arange(n)] = 1.0
        _, D = run_mma_probe(shape, dtype, A, B, np.zeros((m, n)))
        want = A[:, n * s:n * (s + 1)]
        assert (D == want).all(), f"{shape} {dtype} A columns {n * s}..: " + \
            _misplaced(D, want, decode)


@pytest.mark.parametrize("shape,dtype", MMA_CASES)
def test_mma_b_layout_with_index_matrix(gpu, shape, dtype):
    """B holds its own index; A[r, k] = 1 where k = r mod K copies B's row
    r mod K into D's row r."""
    _needs_cc(8, 0)
    m, n, k = L.MMA_SHAPES[shape]
    B = np.arange(1, k * n + 1, dtype=np.float64).reshape(k, n)
    A = np.zeros((m, k))
    A[np.arange(m), np.arange(m) % k] = 1.0
    _, D = run_mma_probe(shape, dtype, A, B, np.zeros((m, n)))
    want = B[np.arange(m) % k]
    assert (D == want).all(), f"{shape} {dtype}: " + \
        _misplaced(D, want, lambda v: f"B{divmod(int(v) - 1, n)}")


@pytest.mark.parametrize("shape,dtype", MMA_CASES)
def test_mma_c_and_d_share_the_layout(gpu, shape, dtype):
    """A = B = 0: D = C, so the registers C enters through and D leaves
    through follow the same map."""
    _needs_cc(8, 0)
    m, n, k = L.MMA_SHAPES[shape]
    C = np.arange(1, m * n + 1, dtype=np.float64).reshape(m, n)
    _, D = run_mma_probe(shape, dtype, np.zeros((m, k)), np.zeros((k, n)), C)
    assert (D == C).all(), f"{shape} {dtype}: " + \
        _misplaced(D, C, lambda v: f"C{divmod(int(v) - 1, n)}")


# --------------------------------------------------------------------------
# ldmatrix
# --------------------------------------------------------------------------
def _code(m, r, c):
    # 16-bit tag of element (matrix m, row r, column c) of the stored tile
    return 1 + 64 * m + 8 * r + c


def _decode(v):
    v = int(v) - 1
    return f"m{v // 64} row {(v // 8) % 8} col {v % 8}" if 0 <= v < 256 else f"raw {v + 1:#x}"


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix(gpu, num, trans):
    _needs_cc(8, 0)
    lay = L.ldmatrix_layout(num, trans)
    rng = np.random.default_rng(num + 8 * trans)
    # the 32 stored rows (4 matrices x 8 rows) sit in shuffled 16-byte slots,
    # so a lane that supplied the wrong row address is caught
    slot_of = rng.permutation(32)              # stacked row 8m + r -> slot
    tile = np.zeros((32, 8), dtype=np.uint16)
    for s in range(32):
        m, r = divmod(s, 8)
        tile[slot_of[s]] = [_code(m, r, c) for c in range(8)]
    offsets = np.zeros(32, dtype=np.uint32)
    for lane in range(32):
        addressed = lay.addressed_row(lane)
        # lanes whose address is ignored point at rows of matrices not loaded
        stacked = 8 * addressed[0] + addressed[1] if addressed else lane
        offsets[lane] = 16 * slot_of[stacked]
    out = drvgemm.to_device(np.full((32, num), 0xFFFFFFFF, dtype=np.uint32))
    k = _kernel("probe_ldmatrix.ptx", f"probe_ldmatrix_x{num}{'_trans' if trans else ''}")
    drvgemm.launch(k, grid=(1, 1, 1), block=(32, 1, 1),
                   args=[drvgemm.to_device(tile), drvgemm.to_device(offsets), out])
    got = out.to_host().view(np.uint16).reshape(32, num, 2)
    rows, cols = lay.coords[..., 0], lay.coords[..., 1]
    want = (1 + 64 * (rows // 8) + 8 * (rows % 8) + cols).astype(np.uint16)
    if not (got == want).all():
        bad = np.argwhere(got != want)[:6]
        detail = "\n  ".join(f"lane {l} reg {g} half {e}: got {_decode(got[l, g, e])}, "
                             f"expected {_decode(want[l, g, e])}" for l, g, e in bad)
        pytest.fail(f"{lay.name}: {int((got != want).sum())} of {got.size} halves differ:\n  "
                    + detail)


# --------------------------------------------------------------------------
# wgmma
# --------------------------------------------------------------------------
WG_N = 16
LBO, SBO = 128, 256     # K-adjacent core matrices packed together, M/N groups 256 B apart


def _kmajor_image(rows_by_k, nbytes, lbo, sbo):
    """Shared-memory image of a K-major operand given as (rows, K) values."""
    import ml_dtypes
    img = np.zeros(nbytes // 2, dtype=np.uint16)
    r, kk = np.meshgrid(np.arange(rows_by_k.shape[0]), np.arange(rows_by_k.shape[1]),
                        indexing="ij")
    off = L.wgmma_kmajor_offset(r, kk, lbo=lbo, sbo=sbo)
    img[off // 2] = rows_by_k.astype(ml_dtypes.bfloat16).view(np.uint16)
    return img


def run_wgmma_probe(A, B, C, *, accumulate, descriptor_offsets=(LBO, SBO)):
    """Images always laid out with (LBO, SBO); ``descriptor_offsets`` is what
    the descriptors claim, exchanged only to diagnose a failure."""
    lay = L.wgmma_d_layout(WG_N)
    lbo, sbo = descriptor_offsets
    a_img = _kmajor_image(A, 2048, LBO, SBO)         # A: 64 rows (M) of K
    b_img = _kmajor_image(B.T, 512, LBO, SBO)        # B: 16 rows (N) of K
    c_table = np.ascontiguousarray(lay.scatter(C)[..., 0], dtype=np.float32)
    d = _poisoned((128, WG_N // 2))
    k = _kernel("probe_wgmma.ptx", "probe_wgmma_m64n16k16_bf16", arch="sm_90a")
    drvgemm.launch(k, grid=(1, 1, 1), block=(128, 1, 1),
                   args=[drvgemm.to_device(a_img), drvgemm.to_device(b_img),
                         drvgemm.to_device(c_table), d, lbo, sbo, int(accumulate)])
    d_frag = d.to_host().reshape(128, WG_N // 2, 1).astype(np.float64)
    return lay.gather(d_frag)


def _operand_hint(A, B, C, accumulate, want):
    """When D is wrong, say whether the operand images were the problem (the
    descriptor offsets read the other way round) rather than the D map."""
    swapped = run_wgmma_probe(A, B, C, accumulate=accumulate, descriptor_offsets=(SBO, LBO))
    if (swapped == want).all():
        return (" -- with the descriptor's LBO and SBO fields exchanged the result is right: "
                "the operand offsets, not the D layout, are what is wrong")
    return ""


def test_wgmma_d_layout_with_index_product(gpu):
    """D = A*B with A[r, 0] = r + 1, A[r, 1] = 1 and B[0, n] = 64, B[1, n] = n:
    D[r, n] = 64 (r + 1) + n names its own row and column."""
    _needs_cc(9, 0, exact=True)
    A = np.zeros((64, 16)); A[:, 0] = np.arange(1, 65); A[:, 1] = 1
    B = np.zeros((16, WG_N)); B[0, :] = 64; B[1, :] = np.arange(WG_N)
    want = A @ B
    D = run_wgmma_probe(A, B, np.zeros((64, WG_N)), accumulate=False)
    if not (D == want).all():
        decode = lambda v: f"({int(v) // 64 - 1}, {int(v) % 64})"
        pytest.fail("wgmma D: " + _misplaced(D, want, decode)
                    + _operand_hint(A, B, np.zeros((64, WG_N)), False, want))


@pytest.mark.parametrize("seed", [0, 1])
def test_wgmma_random_integers_accumulate(gpu, seed):
    _needs_cc(9, 0, exact=True)
    rng = np.random.default_rng(seed)
    A = rng.integers(-4, 5, size=(64, 16)).astype(np.float64)
    B = rng.integers(-4, 5, size=(16, WG_N)).astype(np.float64)
    C = rng.integers(-64, 65, size=(64, WG_N)).astype(np.float64)
    D = run_wgmma_probe(A, B, C, accumulate=True)
    if not (D == A @ B + C).all():
        pytest.fail(f"wgmma D != A*B + C (seed {seed}) in {int((D != A @ B + C).sum())} places"
                    + _operand_hint(A, B, C, True, A @ B + C))
