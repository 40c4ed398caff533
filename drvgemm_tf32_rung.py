"""Proposed registry entry for rung 15 (cu/gemm/15_mma_tf32_rotating.cu), kept
outside drvgemm/ while that package is being re-laid out: move ``RUNG_15``
into drvgemm/rungs.py's RUNGS (after 11_mma_tf32) when it lands.

The tile constants are named once, as the defaults of ``tf32_rung``; block,
grid (Rung.grid), shared memory and the -D defines are derived from them.
``VARIANTS`` are the other constant sets check_tf32.py times next to it.
"""
from __future__ import annotations

from drvgemm.rungs import Rung

SOURCE = "cu/gemm/15_mma_tf32_rotating.cu"
ENTRY = "mma_tf32_rotating_gemm"

# Unit roundoff of an input as the tensor core sees it, per ROUND:
# 0 = raw fp32 bits, truncated by the unit (2^-10); 1, 2 = half-ulp add
# then truncation, i.e. round to nearest, ties away (2^-11, as cvt.rna).
INPUT_ROUNDOFF = {0: 2.0 ** -10, 1: 2.0 ** -11, 2: 2.0 ** -11}


def tf32_rung(BM=128, BN=256, BK=32, WM=64, WN=64, STAGES=3, GROUP_M=8, BVEC=2, ROUND=2,
              MINB=1, name="15_mma_tf32_rotating") -> Rung:
    warps = (BM // WM) * (BN // WN)
    return Rung(
        name=name, source=SOURCE, entry=ENTRY, precision="tf32",
        block=(warps * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 4,   # STAGES x (A [BM][BK] + B [BK][BN]) fp32
        defines=dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, STAGES=STAGES, GROUP_M=GROUP_M,
                     BVEC=BVEC, ROUND=ROUND, MINB=MINB),
        vector=4,
        input_roundoff=INPUT_ROUNDOFF[ROUND],
        summary="TF32 mma.sync.m16n8k8 with one fragment set whose registers are reloaded "
                "right after their last MMA (next k-step in flight behind this one's), "
                "rounding as one VIADDMNMX (half-ulp add, NaN-safe), B fragments of two "
                "n-tiles per LDS.64, all stages in flight with one barrier per k-tile")


RUNG_15 = tf32_rung()

# Constant sets timed next to the registered one (check_tf32.py): what each
# isolates is in benchmarks/notes/tf32-mma.md.
VARIANTS = {
    RUNG_15.name: RUNG_15,                     # BK=32, 3 stages, LDS.64, rna (ROUND=2)
    "15.bk32s4.v2.rna": tf32_rung(STAGES=4, name="15.bk32s4.v2.rna"),
    "15.bk64s2.v2.rna": tf32_rung(BK=64, STAGES=2, name="15.bk64s2.v2.rna"),
    "15.bk32s3.v1.rna": tf32_rung(BVEC=1, name="15.bk32s3.v1.rna"),
    "15.bk32s3.v4.rna": tf32_rung(BVEC=4, name="15.bk32s3.v4.rna"),
    "15.bk32s3.v1.trunc": tf32_rung(ROUND=0, BVEC=1, name="15.bk32s3.v1.trunc"),
    # Two blocks per SM: 128 x 128 blocks of 4 warps (the same 64 x 64 warp
    # tile), 96 KiB each, so one block's barrier is hidden by the other's MMAs.
    "15.c2.bn128.v2.rna": tf32_rung(BN=128, MINB=2, name="15.c2.bn128.v2.rna"),
    "15.c2.bn128.v4.rna": tf32_rung(BN=128, BVEC=4, MINB=2, name="15.c2.bn128.v4.rna"),
    "15.c2.bn128.v2.rna.g16": tf32_rung(BN=128, MINB=2, GROUP_M=16,
                                        name="15.c2.bn128.v2.rna.g16"),
    "15.bk32s3.v2.add": tf32_rung(ROUND=1, name="15.bk32s3.v2.add"),
    # Truncation with LDS.64: no rounding, but MOVs to re-pair b0/b1.
    "15.bk32s3.v2.trunc": tf32_rung(ROUND=0, name="15.bk32s3.v2.trunc"),
    "15.c2.bn128.v2.trunc": tf32_rung(BN=128, MINB=2, ROUND=0, name="15.c2.bn128.v2.trunc"),
}
