// The copy engine (TMA, sm_90): bulk tensor copies global <-> shared memory
// driven by a tensor map, plain bulk copies of contiguous bytes, and the
// proxy fence and bulk groups that order them against ordinary stores.
#pragma once
#include "l2_policy.cuh"
#include "types.cuh"

// A CUtensorMap as the driver encodes it (cuTensorMapEncodeTiled): 128
// opaque bytes, 64-byte aligned. Declared here because NVRTC has no cuda.h.
// Passed by value as `const __grid_constant__ TmaMap`: the copy engine reads
// the descriptor straight from the kernel's parameter space, so the kernel
// must never take a local copy of it (the address would then be a stack slot
// the copy engine cannot see).
struct __align__(64) TmaMap {
    u64 opaque[16];
};

// Bulk tensor copies (TMA): one thread hands the copy engine a box of a
// global tensor; the engine writes it to shared memory (swizzled as the
// tensor map says, out-of-bounds elements zero-filled) and signals the
// mbarrier with the box's full byte count.
__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaMap* map, int c0, int c1, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

// The same box written to the same offset in every CTA of `cta_mask`, each
// of whose mbarriers (same offset) is signalled with the box's bytes.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const TmaMap* map, int c0, int c1,
                                                      u32 bar, unsigned short cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar),
                    "h"(cta_mask)
                 : "memory");
}

// Bring the tensor map's 128 bytes into the descriptor cache ahead of the
// first copy.
__device__ __forceinline__ void tma_prefetch_map(const TmaMap* map) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<u64>(map)) : "memory");
}

// A contiguous run of `bytes` (a multiple of 16, both addresses 16-byte
// aligned) from global memory into this block's shared memory, completing on
// the mbarrier `bar` (announced by the same thread with expect_tx first).
__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// The same with an L2 evict-first policy: for data read exactly once, so it
// does not push out lines that will be read again.
__device__ __forceinline__ void bulk_load_evict_first(u32 dst, const void* src, u32 bytes,
                                                      u32 bar) {
    const u64 policy = l2_policy(true);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy) : "memory");
}

// Bulk tensor stores (shared -> global through the copy engine). Generic-proxy
// writes to the shared-memory source must be fenced into the async proxy
// before the store is issued; a source buffer may be rewritten only once the
// bulk group that reads it has finished reading (wait_group.read).
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Box at (c0, c1) of the map's global tensor <- the (swizzled) box in shared
// memory at `src`. Elements outside the tensor are not written.
__device__ __forceinline__ void tma_store_2d(const TmaMap* map, u32 src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit_group() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// At most N of this thread's committed bulk groups still reading shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}

// At most N of this thread's committed bulk groups not yet complete.
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
    asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
}
