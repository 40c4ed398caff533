"""The GPU property tests' draw (tests/gemm_cases.py), checked on the CPU:
every alignment class comes up on purpose and means what it says, most
cases are small, a few are large, and the reference stays affordable."""
import pytest
from hypothesis import HealthCheck, given, settings

from drvgemm.ladders.gemm.registry import RUNGS

from gemm_cases import LAYOUTS, MAX_MNK, cases, expects_aligned, k_tile

# one rung per kind of tile and vector width
PICKED = [r for r in RUNGS if r.name in ("01_naive", "08_warp_tiled", "10_mma_tf32_ptx",
                                         "12_mma_bf16", "20_tma_wgmma_tf32")]


@pytest.mark.parametrize("r", PICKED, ids=lambda r: r.name)
def test_cases_reach_every_class(r):
    seen = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=cases(r))
    def draw(case):
        v = max(1, r.vector)
        assert case.m * case.n * case.k <= MAX_MNK or case.m == 1
        assert min(case.m, case.n, case.k) >= 1
        if case.layout in ("aligned", "aligned_k_tail", "misaligned"):
            assert case.k % v == 0 and case.n % v == 0, case
        if case.layout == "aligned_k_tail":
            assert case.k % k_tile(r) != 0, case
        if case.layout == "misaligned":
            assert case.on_device and case.shifted in "ABC" and 1 <= case.shift <= 3
            assert (case.shift * 2) % 16 != 0
        assert expects_aligned(r, case) == (case.layout in ("aligned", "aligned_k_tail")
                                            or (case.layout == "any" and case.k % v == 0
                                                and case.n % v == 0))
        seen.append(case)

    draw()
    layouts = {c.layout for c in seen}
    assert layouts == set(LAYOUTS)
    aligned_tail = [c for c in seen if c.layout == "aligned_k_tail"]
    assert len(aligned_tail) >= 15
    small = [c for c in seen if max(c.m, c.n, c.k) <= 300]
    assert len(small) >= 0.5 * len(seen)
    assert any(c.k > 4096 for c in seen), f"no large K drawn ({len(seen)} cases, largest K {max(c.k for c in seen)})"
    assert any(c.m == 1 or c.n == 1 or c.k == 1 for c in seen)
    assert {c.mode for c in seen} == {"exact", "random"}
    assert {c.beta for c in seen} >= {0.0, 1.0}
