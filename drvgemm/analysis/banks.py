"""The shared-memory bank model: how many wavefronts a warp-wide 4-byte
access takes, and what that gives for the transposes of cu/mem_03_transpose.cu.
Pure arithmetic."""
from __future__ import annotations

__all__ = ["smem_wavefronts", "transpose_wavefronts"]


def smem_wavefronts(word_addresses, banks: int = 32) -> int:
    """Shared-memory wavefronts one warp-wide 4-byte access takes: the most
    distinct words any single bank must deliver (a word read by several
    lanes is broadcast, costing nothing extra). 1 = conflict-free."""
    per_bank = {}
    for w in word_addresses:
        per_bank.setdefault(w % banks, set()).add(w)
    return max(len(s) for s in per_bank.values())


def transpose_wavefronts(variant: str) -> tuple[int, int]:
    """(store, load) wavefronts per warp access in cu/mem_03_transpose.cu's
    shared-memory variants ('smem', 'padded', 'swizzled'), from the index
    formulas the kernels use: the warp stores tile row lr (lane tx -> column
    tx) and loads tile column lc (lane tx -> row tx)."""
    pitch = {"smem": 32, "padded": 33, "swizzled": 32}[variant]
    swz = variant == "swizzled"
    worst_st = worst_ld = 0
    for k in range(32):
        st = [k * pitch + ((tx ^ k) if swz else tx) for tx in range(32)]
        ld = [tx * pitch + ((k ^ tx) if swz else k) for tx in range(32)]
        worst_st = max(worst_st, smem_wavefronts(st))
        worst_ld = max(worst_ld, smem_wavefronts(ld))
    return worst_st, worst_ld
