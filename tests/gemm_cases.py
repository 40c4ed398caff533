"""What the GPU property tests draw for one rung, derived from the rung's tile
and alignment (CUTLASS testbed style), importable without a GPU so that the
draw itself is tested on the CPU (tests/test_gemm_cases.py).

A case is a shape, a *layout* -- which instantiation it must reach -- and the
data: mode (exact / random), beta, host or device operands, a data seed.

Layouts:
  any             shapes as drawn; pointers as allocated (16-byte aligned)
  aligned         K and N multiples of the rung's vector width, 16-byte
                  pointers: the ALIGNED=1 (vector-load) instantiation
  aligned_k_tail  as aligned, with K % BK != 0: the vector path's last,
                  partial k-tile
  misaligned      K and N aligned, but A, B or C starts a few elements into
                  a larger buffer (an offset view), so that only the pointer
                  clause of the dispatcher keeps the vector path away

Sizes: most cases small (dimensions up to 300), some medium (up to 1100),
a few large (a dimension up to 4096, K up to 16384) with M*N*K capped so
that the float64 reference on the host stays under a second.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

PRIMES = [2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 4093]
LAYOUTS = ("any", "aligned", "aligned_k_tail", "misaligned")
MAX_MNK = 1 << 29            # the reference's cost: 2 float64 GEMMs of this size
MAX_EXACT_K_16BIT = 2048     # exact mode for 16-bit / TF32 inputs keeps K below this


@dataclass(frozen=True)
class Case:
    m: int
    n: int
    k: int
    layout: str
    shifted: str          # which operand is offset ("A", "B", "C" or ""), misaligned only
    shift: int            # elements of offset
    mode: str
    beta: float
    on_device: bool
    seed: int

    def __str__(self):
        where = "device" if self.on_device else "host"
        off = f" {self.shifted}+{self.shift}" if self.shifted else ""
        return (f"M={self.m} N={self.n} K={self.k} layout={self.layout}{off} mode={self.mode} "
                f"beta={self.beta} {where} seed={self.seed}")


def k_tile(r) -> int:
    """The rung's k-tile (BK; TILE for the shared-memory rung; 32 for the
    PTX rung, whose BK is written in its source)."""
    return int(r.defines.get("BK") or r.defines.get("TILE") or 32)


def _near(values):
    return sorted({v + d for v in values for d in (-1, 0, 1) if v + d >= 1})


def dim(r, *, large=False):
    """One dimension: 1, primes, tile +- 1, small integers; ``large``: up to 4096."""
    tiles = _near({r.tile_m, r.tile_n, k_tile(r), 8, 16, 32, 64, 128, 256})
    parts = [st.just(1), st.sampled_from(PRIMES[:9]), st.sampled_from(tiles),
             st.integers(1, 300)]
    if large:
        parts += [st.integers(1, 4096), st.sampled_from([2 * t for t in tiles] + PRIMES[9:])]
    return st.one_of(*parts)


def _round_up(x, v):
    return max(v, (x + v - 1) // v * v)


@st.composite
def cases(draw, r):
    # The size class from a uniform draw (hypothesis leans its own choices
    # towards the first option, which would make the few large cases none).
    u = draw(st.randoms(use_true_random=False)).random()
    size = "small" if u < 0.80 else "medium" if u < 0.95 else "large"
    if size == "small":
        m, n, k = draw(dim(r)), draw(dim(r)), draw(dim(r))
    elif size == "medium":
        m, n, k = (draw(st.one_of(dim(r), st.integers(300, 1100))) for _ in range(3))
    else:
        m, n = draw(dim(r, large=True)), draw(dim(r, large=True))
        k = draw(st.one_of(st.integers(2049, 16384), st.sampled_from([4099, 8191, 16384, 16383])))
    layout = draw(st.sampled_from(LAYOUTS))
    v, bk = max(1, r.vector), k_tile(r)
    if layout != "any":
        n, k = _round_up(n, v), _round_up(k, v)
    if layout == "aligned_k_tail" and k % bk == 0:
        k += v if bk > v else 1          # bk <= v only for a 1-wide vector: k stays aligned
    # the host reference's cost: shrink M, then N, never K (large K is the point)
    while m * n * k > MAX_MNK and m > 1:
        m = max(1, m // 2)
    while m * n * k > MAX_MNK and n > v:
        n = _round_up(max(1, n // 2), v if layout != "any" else 1)
    mode = draw(st.sampled_from(["exact", "random"]))
    if mode == "exact" and r.precision != "fp32" and k > MAX_EXACT_K_16BIT:
        mode = "random"
    on_device = True if layout == "misaligned" else draw(st.booleans())
    shifted, shift = "", 0
    if layout == "misaligned":
        shifted = draw(st.sampled_from(["A", "B", "C"]))
        shift = draw(st.integers(1, 3))   # 4-12 bytes (fp32), 2-6 bytes (16-bit): never 16
    return Case(m, n, k, layout, shifted, shift, mode,
                draw(st.sampled_from([0.0, 0.0, 1.0, -0.5])), on_device,
                draw(st.integers(0, 2**31 - 1)))


def expects_aligned(r, case) -> bool:
    """Whether the dispatcher must pick the ALIGNED=1 instantiation."""
    if r.host == "small_m":
        # rung 30 writes C element by element: only A's and B's pieces need
        # alignment, B's rows whole 16-byte chunks and K a multiple of 4
        if case.shifted in ("A", "B"):
            return False
        return case.n % (16 // (4 if r.precision == "fp32" else 2)) == 0 and case.k % 4 == 0
    v = max(1, r.vector)
    if case.shifted:
        return False
    return case.k % v == 0 and case.n % v == 0
