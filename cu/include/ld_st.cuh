// Shared and global memory addressing and the plain accesses. ldmatrix,
// cp.async, mbarriers and ld/st.shared take a 32-bit address in the shared
// window; computing it once per tile and adding byte offsets keeps address
// arithmetic off the 64-bit path.
#pragma once
#include "types.cuh"

DEVI u32 smem_u32(const void* p) {
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// The same conversion through the compiler's intrinsic, which it can fold
// into the address arithmetic around it (the inline-PTX form above is opaque
// to it). Both are kept because the kernels were tuned with the one they use.
DEVI u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// The block's dynamic shared memory (its size comes from the launch).
DEVI unsigned char* dynamic_smem() {
    extern __shared__ __align__(128) unsigned char drvgemm_dynamic_smem[];
    return drvgemm_dynamic_smem;
}

DEVI u32 lds32(u32 addr) {
    u32 v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}
DEVI uint4 lds128(u32 addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
DEVI void sts16(u32 addr, u16 v) {
    asm volatile("st.shared.b16 [%0], %1;" :: "r"(addr), "h"(v) : "memory");
}
DEVI void sts32(u32 addr, u32 v) {
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(addr), "r"(v) : "memory");
}

// Global memory. Plain loads and stores; the wrappers exist so that every
// access a tensor-core kernel makes is visible in one list.
DEVI u16 ldg16(const u16* p) { return *p; }
DEVI float ldg_f32(const float* p) { return *p; }
DEVI float2 ldg_f32x2(const float* p) { return *reinterpret_cast<const float2*>(p); }
DEVI float4 ldg_f32x4(const float* p) { return *reinterpret_cast<const float4*>(p); }
DEVI void stg_f32(float* p, float v) { *p = v; }
DEVI void stg_f32x2(float* p, float2 v) { *reinterpret_cast<float2*>(p) = v; }
DEVI void stg_f32x4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
