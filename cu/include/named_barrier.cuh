// Named barriers. Barrier 0 is __syncthreads(); ids 1..15 are free. `count`
// (a multiple of 32) is the number of threads that must arrive before the
// barrier completes: barrier.sync arrives and waits, barrier.arrive only
// arrives. When the barrier completes, the memory accesses each arriving
// thread made before it are performed for every participant -- which is
// what lets one group of warps hand a shared-memory buffer to another, or
// one warpgroup synchronise alone.
// The non-.aligned forms are used because the threads reach these barriers
// from different code (producer and consumer warps; code that only one
// thread of a warp runs).
#pragma once
#include "types.cuh"

DEVI void named_barrier_sync(u32 id, u32 count) {
    asm volatile("barrier.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}
DEVI void named_barrier_arrive(u32 id, u32 count) {
    asm volatile("barrier.arrive %0, %1;" :: "r"(id), "r"(count) : "memory");
}
