// mbarrier (sm_90): a 64-bit shared-memory object counting arrivals and, for
// bulk copies, bytes still in flight (the transaction count). A phase
// completes when both reach zero; its parity (0, 1, 0, ...) is what waiters
// test. The copy engine (TMA, bulk copies) and st.async signal them.
#pragma once
#include "types.cuh"

__device__ __forceinline__ void mbar_init(u32 bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(arrivals) : "memory");
}

// Make initialised barriers visible to the async proxy (the copy engine
// signals them) and to the other CTAs of a cluster.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` more to come from bulk copies.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

// Arrive on the barrier at the same shared-memory offset in CTA `rank` of the
// cluster (which may be this CTA). Default semantics (release, CTA scope): a
// cluster-scope release would fence all of this thread's outstanding global
// stores (MEMBAR.ALL.GPU) on every stage, and the only thing to order here
// is the warpgroup's finished wgmma reads of its own shared memory.
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 rank) {
    asm volatile("{\n\t.reg .b32 remote;\n\t"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}"
                 :: "r"(bar), "r"(rank) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(u32 bar, u32 parity) {
    u32 done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}

// The same test at cluster scope (acquire.cluster): the bytes were stored by
// other blocks of the cluster (st.async), not by this block's copies.
__device__ __forceinline__ bool mbar_try_wait_cluster(u32 bar, u32 parity) {
    u32 done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}

__device__ __forceinline__ u64 globaltimer_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// A wait that outlasts this many nanoseconds is a deadlock (a phase or byte
// count that can never complete): trap, so the launch fails with an error
// instead of hanging the process. 0 disables the check.
#ifndef MBAR_WATCHDOG_NS
#define MBAR_WATCHDOG_NS 10000000000ull
#endif

// Block until the phase of parity `parity` has completed. try_wait suspends
// the thread in hardware for a while before returning false, so this loop is
// not a hot spin; the clock is only read once the first try has failed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    if (mbar_try_wait(bar, parity)) return;
#if MBAR_WATCHDOG_NS
    const u64 start = globaltimer_ns();
    while (!mbar_try_wait(bar, parity))
        if (globaltimer_ns() - start > MBAR_WATCHDOG_NS) __trap();
#else
    while (!mbar_try_wait(bar, parity)) {
    }
#endif
}

