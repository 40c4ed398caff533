// L2 cache policies (createpolicy, sm_80+) for the accesses that take a
// cache hint: bulk copies, cp.async, loads. Evict first for data read
// exactly once, so it does not push out lines that will be read again;
// evict normal otherwise.
#pragma once
#include "types.cuh"

__device__ __forceinline__ u64 l2_policy(bool evict_first) {
    u64 p;
    if (evict_first) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    else asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
    return p;
}
