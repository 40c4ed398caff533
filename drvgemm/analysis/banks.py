"""The shared-memory bank model: how many wavefronts a warp-wide 4-byte
access takes, and what that gives for the transposes of cu/mem_03_transpose.cu
and the row tiles of cu/softmax/softmax_10_row_tile.cu. Pure arithmetic."""
from __future__ import annotations

import functools

__all__ = ["smem_wavefronts", "transpose_wavefronts", "row_tile_bank_load", "row_tile_crowded"]


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


@functools.lru_cache(maxsize=4096)
def row_tile_bank_load(cols: int, row_threads: int, itemsize: int = 2) -> int:
    """The most lanes of a warp on one shared-memory bank in rung 10's first
    plain slot, for rows of ``cols`` elements of ``itemsize`` bytes on
    ``row_threads`` lanes. The kernel's layout: row g of a tile at byte shift
    + itemsize * g * cols, lane l of its group reading its row's element l
    (fp32, reduce_run) or whole 32-bit word l (16-bit, reduce_run_words)
    first; a warp holds 32 / row_threads groups. Tried at every phase of the
    tile's first byte in its 16-byte vector, as the tiles of a launch take
    them all."""
    worst = 0
    for shift in range(0, 16, itemsize):
        words: dict = {}
        for g in range(32 // row_threads):
            s = shift + itemsize * g * cols
            if itemsize == 4:
                word0, nwords = s >> 2, cols
            else:
                o = (s >> 1) & 1
                word0, nwords = ((s & ~3) >> 2) + o, (cols - o) >> 1
            for lane in range(min(row_threads, nwords)):
                words.setdefault((word0 + lane) & 31, set()).add(word0 + lane)
        worst = max([worst] + [len(w) for w in words.values()])
    return worst


def row_tile_crowded(cols: int, row_threads: int, itemsize: int = 2) -> bool:
    """Whether rung 10's plain slots put three or more lanes of a warp on one
    bank for rows of ``cols`` elements of ``itemsize`` bytes on
    ``row_threads`` lanes (bf16 rows of 32 / 64 / 127: 16 / 16 / 8 lanes a
    bank, rows of 31 / 33: 2; fp32 x 127 on four lanes: 4). Such rows take
    the kernel's CROWDED build (softmax_10_row_tile.cu): a lane group reads
    16-byte vectors, one 16-bit lane a row rotates its slots."""
    return row_tile_bank_load(cols, row_threads, itemsize) > 2
