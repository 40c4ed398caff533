// cp.async (sm_80+): global -> shared without passing through registers, so
// a warp issues a tile's copies and goes on computing while they fly.
// src_bytes < size zero-fills the rest of the destination; src_bytes == 0
// reads nothing, which is how tiles hanging over the matrix edge become
// zeros (the source pointer must still be a valid, aligned address).
// Copies are grouped with commit_group; wait_group<N> returns once at most
// N of this thread's most recent groups are still in flight. Their data is
// visible to other threads only after a barrier that follows the wait.
#pragma once
#include "l2_policy.cuh"
#include "types.cuh"

// .cg: cache in L2 only; a tile is read once per block, so L1 would only
// evict more useful lines. `src` is a generic pointer, converted inside.
DEVI void cp_async_16(u32 dst, const void* src, u32 src_bytes) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global [%0], [g], 16, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// cp_async_16 under an L2 cache policy (l2_policy.cuh).
DEVI void cp_async_16_policy(u32 dst, const void* src, u32 src_bytes, u64 policy) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global.L2::cache_hint [%0], [g], 16, %2, %3; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes), "l"(policy) : "memory");
}
DEVI void cp_async_4(u32 dst, const void* src, u32 src_bytes) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.ca.shared.global [%0], [g], 4, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// The same copies from an address already in the global window
// (__cvta_generic_to_global), which the compiler can compute together with
// the pointer arithmetic around it.
DEVI void cp_async_16_global(u32 dst, u64 gsrc, u32 src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(gsrc), "r"(src_bytes) : "memory");
}
DEVI void cp_async_4_global(u32 dst, u64 gsrc, u32 src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(dst), "l"(gsrc), "r"(src_bytes) : "memory");
}

DEVI void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
DEVI void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
