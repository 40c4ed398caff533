"""The registry of GEMM rungs: each rung declared once, next to its tile
constants. The launcher (ladder.py) derives grid, block, dynamic shared
memory and compile-time defines from these entries and from nothing else.

Kernel signature shared by every GEMM rung (row-major, contiguous):
    extern "C" __global__ void ENTRY(const T* A, const T* B, float* C,
                                     int M, int N, int K, float alpha, float beta)
A is M x K, B is K x N, C is M x N (float32). C = alpha*A@B + beta*C, and
beta == 0 must never read C.

Every rung is compiled with -DALIGNED=1 or -DALIGNED=0. ALIGNED=1 is picked
by the dispatcher only when K and N are multiples of ``vector`` and the three
pointers are 16-byte aligned, so a rung's vector loads may assume that; the
ALIGNED=0 instantiation must be correct for any M, N, K >= 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rung:
    name: str                 # ladder number + what it adds, e.g. "04_reg_tiled"
    source: str               # file in cu/ or ptx/
    entry: str                # kernel symbol (extern "C", or a template name expression)
    precision: str            # "fp32" | "tf32" | "bf16" | "fp16": the input type and math
    block: tuple              # threads per block (x, y, z)
    tile_m: int               # rows of C per block
    tile_n: int               # columns of C per block: grid = (ceil(N/tile_n), ceil(M/tile_m))
    smem: int = 0             # dynamic shared memory in bytes
    defines: dict = field(default_factory=dict)   # tile constants, passed as -D
    vector: int = 1           # elements per vector access (ALIGNED=1 needs K % vector == N % vector == 0)
    arch: str = "sm_80"       # lowest architecture it runs on ("sm_90a" for wgmma)
    options: tuple = ()       # extra NVRTC options (e.g. "--maxrregcount=128")
    summary: str = ""         # one line: what this rung adds over the one before

    def grid(self, m: int, n: int) -> tuple:
        return ((n + self.tile_n - 1) // self.tile_n, (m + self.tile_m - 1) // self.tile_m, 1)

    @property
    def threads(self) -> int:
        b = tuple(self.block) + (1, 1)
        return b[0] * b[1] * b[2]


RUNGS: list[Rung] = [
    # ---- fp32 SIMT ladder (cu/01 .. cu/08) ----
    # ---- tensor cores: mma.sync / WMMA ----
    # ---- Hopper: TMA + wgmma ----
]


def by_name() -> dict[str, Rung]:
    return {r.name: r for r in RUNGS}
