// Counters in global memory through which blocks of one grid hand work to
// each other (a split row's statistics, a split tile's partial products):
// the writer's data, then a release increment; the reader's acquire load of
// the count, then the data, read from L2.
#pragma once
#include "types.cuh"

DEVI u32 load_acquire(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// A release increment, not __threadfence() + atomicAdd: the fence is a
// sequentially consistent one (MEMBAR.SC.GPU), more than the data-before-count
// order needs.
DEVI void arrive_release(u32* p) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(p) : "memory");
}

// Another block's data, from L2 (cached at L2 only: never a stale L1 line).
DEVI float4 ldcg_f32x4(const float* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p) : "memory");
    return v;
}
