// Thread-block clusters (sm_90): the block's rank, the cluster barrier, and
// distributed shared memory (a peer block's shared memory, addressed through
// mapa).
#pragma once
#include "types.cuh"

__device__ __forceinline__ u32 cluster_ctarank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ u32 cluster_nctarank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}

// Whole-cluster barrier (release/acquire). Not .aligned: it is reached from
// diverged code (the GEMM's producer and consumer roles).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

// The same barrier where every thread of every warp reaches it together
// (.aligned: the cheaper form, undefined behaviour if a warp has diverged).
__device__ __forceinline__ void cluster_sync_aligned() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// A split barrier: arrive now, wait later. A block's shared memory
// disappears when it exits, so "I have finished reading the others' shared
// memory" is an arrive, and the wait before exit keeps this block's memory
// alive for the others. That arrive must be a release: a relaxed one orders
// none of this thread's accesses, and ptxas does place it right after a
// ld.shared::cluster is issued, before its data is back (seen in rung 08's
// SASS); another block can then pass its wait and exit under the load: an
// unspecified launch failure on the H200, which memcheck does not name.
__device__ __forceinline__ void cluster_arrive_release_aligned() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
// Relaxed: for an arrive that only says "I am past this point" (nothing of
// the others' memory is read after the matching wait's partner, e.g. rung
// 06, whose remote data arrives by st.async on the receiver's mbarrier).
__device__ __forceinline__ void cluster_arrive_relaxed_aligned() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_aligned() {
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// The shared-memory address `addr` of this block as seen in block `rank` of
// the cluster.
__device__ __forceinline__ u32 mapa_shared(u32 addr, u32 rank) {
    u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    return remote;
}

__device__ __forceinline__ float2 ld_shared_cluster_f32x2(u32 remote) {
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];"
                 : "=f"(v.x), "=f"(v.y) : "r"(remote) : "memory");
    return v;
}

// Store two floats at `slot` in block `peer`'s shared memory and count their
// 8 bytes on that block's mbarrier at the offset of `bar` (st.async: the
// receiver learns of the data from its barrier, no cluster barrier needed).
__device__ __forceinline__ void st_async_peer_f32x2(u32 peer, u32 slot, u32 bar, float x,
                                                    float y) {
    asm volatile("{\n\t.reg .b32 rs, rb;\n\t"
                 "mapa.shared::cluster.u32 rs, %0, %2;\n\t"
                 "mapa.shared::cluster.u32 rb, %1, %2;\n\t"
                 "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [rs], {%3, %4}, [rb];\n\t}"
                 :: "r"(slot), "r"(bar), "r"(peer), "f"(x), "f"(y) : "memory");
}
