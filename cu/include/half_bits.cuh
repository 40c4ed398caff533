// bf16 / fp16 values as raw 16-bit words (no CUDA header: see types.cuh):
// two fp32 values rounded to nearest even into one packed word (the first in
// the low half), and one 16-bit word widened to fp32 (exact). BF16 picks
// bf16, else fp16. Shared by rung 20's epilogue and the split-K reduction.
#pragma once
#include "types.cuh"

template <bool BF16>
DEVI u32 pack_half2_rn(float lo, float hi) {
    u32 r;
    if constexpr (BF16)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

template <bool BF16>
DEVI float half_bits_to_f32(unsigned short bits) {
    if constexpr (BF16) return __uint_as_float(static_cast<u32>(bits) << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
}
