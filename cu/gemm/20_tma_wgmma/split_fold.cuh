// Rung 20's split-K folded in the kernel (the host passes fold != 0): the
// pieces of a tile's K other than the last write their raw fp32 partials to
// the workspace and count themselves; the last piece waits for the count and
// adds the partials to its own accumulators, in split order, before the
// tile's ordinary epilogue. Part of 20_tma_wgmma.cu, included after its
// constants, Problem and Work.
//
// A slice (one split's partials) holds whole tiles in the accumulators' own
// order: block b = tile x CONSUMERS + consumer warpgroup is ACC / 4 rows of
// 128 float4, thread t's q-th four accumulators at row q, column t. Each warp
// store or load is then 512 contiguous bytes, and no edge tile needs a guard
// (its padding rows and columns are written and read like the others, and
// never reach C).
#pragma once

// Counter and slice block of warpgroup c's part of unit w's tile.
__device__ __forceinline__ int fold_block(const Problem& p, const Work& w, int c) {
    return ((w.y0 / TILE_Y) * p.tiles_x + w.x0 / TILE_X) * CONSUMERS + c;
}

__device__ __forceinline__ float* fold_slot(float* slice, int block) {
    return slice + (static_cast<size_t>(block) * (ACC / 4) * 128 + (threadIdx.x & 127)) * 4;
}

__device__ __forceinline__ void store_fold_partial(const float (&acc)[ACC], float* slice,
                                                   int block) {
    float* q = fold_slot(slice, block);
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i)
        stg_f32x4(q + i * 128 * 4,
                  make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
}

// Every thread of the warpgroup has stored its partials (the barrier), then
// one thread's release increment publishes them all.
__device__ __forceinline__ void fold_arrive(u32* counter, int c) {
    named_barrier_sync(1 + c, 128);
    if ((threadIdx.x & 127) == 0) arrive_release(counter);
}

// The last piece: wait until the splits - 1 others have arrived, set the
// counter back to zero for the next launch (no one else touches it in this
// one), then add slices 0 .. splits - 2 in order. A wait that outlasts
// MBAR_WATCHDOG_NS is a broken schedule: trap rather than hang.
__device__ __forceinline__ void fold_partials(float (&acc)[ACC], float* partials,
                                              long long stride, int splits, u32* counter,
                                              int block, int c) {
    // The warpgroup's first warp waits, every lane on lane 0's reading: a
    // wait the compiler sees as uniform keeps the mainloop's stage cursor
    // and wgmma descriptors in uniform registers (a one-thread spin made
    // them per-thread: four R2UR a wgmma).
    if (__shfl_sync(0xffffffffu, threadIdx.x & 127, 0) < 32) {
        const u32 others = static_cast<u32>(splits - 1);
        if (__shfl_sync(0xffffffffu, load_acquire(counter), 0) < others) {
            const u64 start = globaltimer_ns();
            while (__shfl_sync(0xffffffffu, load_acquire(counter), 0) < others) {
                __nanosleep(64);
                if (MBAR_WATCHDOG_NS && globaltimer_ns() - start > MBAR_WATCHDOG_NS) __trap();
            }
        }
        if ((threadIdx.x & 127) == 0)
            asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" :: "l"(counter) : "memory");
    }
    named_barrier_sync(1 + c, 128);
    // Per slice, CHUNK float4 loads in flight a thread before their adds.
    constexpr int CHUNK = ACC / 4 < 8 ? ACC / 4 : 8;
    const float* q = fold_slot(partials, block);
#pragma unroll
    for (int i0 = 0; i0 < ACC / 4; i0 += CHUNK) {
        for (int s = 0; s < splits - 1; ++s) {
            float4 v[CHUNK];
#pragma unroll
            for (int i = 0; i < CHUNK; ++i) v[i] = ldcg_f32x4(q + s * stride + (i0 + i) * 128 * 4);
#pragma unroll
            for (int i = 0; i < CHUNK; ++i) {
                float* a = acc + 4 * (i0 + i);
                a[0] += v[i].x;
                a[1] += v[i].y;
                a[2] += v[i].z;
                a[3] += v[i].w;
            }
        }
    }
}
