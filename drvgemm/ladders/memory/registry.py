"""The memory-lesson kernels (cu/memory/mem_0*.cu): copies, strided reads and
transposes, each with its compile-time constants (passed as defines, every
one of them: the kernels refuse to compile without), the block they derive
and the grid it needs; timed by drvgemm/tools/memory_bench.py against a
device copy of the same bytes."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MemKernel", "MEM_KERNELS", "mem_kernel", "copy_grid", "transpose_grid", "catalogue"]


@dataclass(frozen=True)
class MemKernel:
    name: str
    source: str
    entry: str
    lesson: str
    items: int = 1          # elements per thread-item (float4 = 4)
    threads: int = 256      # copies: THREADS, the block
    unroll: int = 4         # copies: UNROLL, items per thread
    tile: bool = False      # transposes: 32 x 8 threads a 32 x 32 tile (constants of the source)

    @property
    def defines(self) -> dict:
        """Every define the source takes (none for the transposes, whose
        tile is a constant of the lesson)."""
        return {} if self.tile else {"THREADS": self.threads, "UNROLL": self.unroll}

    @property
    def block(self) -> tuple:
        return (32, 8, 1) if self.tile else (self.threads, 1, 1)


MEM_KERNELS = (
    MemKernel("mem_copy_scalar", "mem_01_copy.cu", "mem_copy_scalar",
              "copy with 4-byte loads and stores"),
    MemKernel("mem_copy_float4", "mem_01_copy.cu", "mem_copy_float4",
              "copy with 16-byte loads and stores (LDG.E.128)", items=4),
    MemKernel("mem_copy_strided", "mem_02_strided.cu", "mem_copy_strided",
              "every stride-th float: whole 32-byte sectors for 4 useful bytes"),
    MemKernel("mem_transpose_naive", "mem_03_transpose.cu", "mem_transpose_naive",
              "transpose: coalesced reads, writes 32 rows apart", tile=True),
    MemKernel("mem_transpose_smem", "mem_03_transpose.cu", "mem_transpose_smem",
              "through a 32x32 smem tile: 32-way bank conflicts on the column read", tile=True),
    MemKernel("mem_transpose_padded", "mem_03_transpose.cu", "mem_transpose_padded",
              "32x33 tile: the +1 spreads a column over all banks", tile=True),
    MemKernel("mem_transpose_swizzled", "mem_03_transpose.cu", "mem_transpose_swizzled",
              "32x32 tile, column c of row r stored at c ^ r", tile=True),
)


def mem_kernel(name) -> MemKernel:
    for k in MEM_KERNELS:
        if k.name == name:
            return k
    raise ValueError(f"unknown memory kernel {name!r}")


def copy_grid(mk: MemKernel, n: int) -> tuple:
    """Blocks for n floats: each thread moves ``unroll`` items of ``items``
    floats; the float4 kernel's n % 4 tail rides on block 0."""
    per_block = mk.block[0] * mk.unroll
    return (max(1, -(-(n // mk.items) // per_block)), 1, 1)


def transpose_grid(rows: int, cols: int) -> tuple:
    return (-(-rows // 32) * -(-cols // 32), 1, 1)


def catalogue() -> list[tuple]:
    """(label, source, entry, defines, arch) of every memory kernel, as the
    compile-only report lists them."""
    return [(k.name, k.source, k.entry, k.defines, None) for k in MEM_KERNELS]
