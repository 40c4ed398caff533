// Probe kernels for benchmarks/read_write_phases.py: how fast can a resident
// grid move its bytes when every block first reads its whole chunk into
// registers and only then writes it (softmax rung 09's pass, without the
// softmax)?
//
// The grid is resident (the host launches as many blocks as fit at once,
// cooperatively). Pass p gives block b the VECS * THREADS 16-byte vectors
// starting at (p * gridDim.x + b) * VECS * THREADS; thread t holds vectors
// t, t + THREADS, ... of it (coalesced). Each thread loads all of its
// vectors, then:
//   phases_local:  stores them at once (blocks drift apart freely);
//   phases_global: waits until every block of the grid has loaded this pass
//                  (a grid-wide counter), then stores them: the reads and the
//                  writes of the whole GPU in two separate phases, as in a
//                  pass of rung 09 when its rows span the grid.
// y = x afterwards either way (COMPUTE 0). `counters` (two unsigned, zero before the
// launch) are left zero by the last block to finish.
#ifndef VECS
#error "VECS must be defined (16-byte vectors a thread holds)"
#endif
#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif
// STREAMING: 1 loads and stores with the evict-first hint (ld.global.cs /
// st.global.cs), 0 plain (ld.global.nc / st.global, as rung 09's).
#ifndef STREAMING
#define STREAMING 1
#endif
// COMPUTE (phases_* only): 0 none; 1 a thread's values become
// exp(v - its max) / their sum before the barrier, with expf (rung 09's fp32
// work, without the block and row merges); 2 the same with ex2.approx.
#include "grid_flags.cuh"

#ifndef COMPUTE
#define COMPUTE 0
#endif

__device__ __forceinline__ float4 load_vec(const float4* p) {
#if STREAMING
    return __ldcs(p);
#else
    return __ldg(p);
#endif
}

__device__ __forceinline__ void store_vec(float4* p, float4 v) {
#if STREAMING
    __stcs(p, v);
#else
    *p = v;
#endif
}

__device__ __forceinline__ float exp_of(float d) {
#if COMPUTE == 2
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d * 1.4426950408889634f));
    return r;
#else
    return expf(d);
#endif
}

// The values scaled as a softmax of the thread's own values: one exp each.
template <int kVecs>
__device__ __forceinline__ float softmax_in_place(float4* v) {
    float m = -__int_as_float(0x7f800000);
#pragma unroll
    for (int i = 0; i < kVecs; ++i) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
        v[i].x = exp_of(v[i].x - m); s += v[i].x;
        v[i].y = exp_of(v[i].y - m); s += v[i].y;
        v[i].z = exp_of(v[i].z - m); s += v[i].z;
        v[i].w = exp_of(v[i].w - m); s += v[i].w;
    }
    return 1.0f / s;
}

template <bool kGlobal>
__device__ __forceinline__ void phases(const float4* __restrict__ x, float4* __restrict__ y, int passes,
                                       unsigned* counters) {
    for (int p = 0; p < passes; ++p) {
        const long long base = (static_cast<long long>(p) * gridDim.x + blockIdx.x) * VECS * THREADS;
        float4 v[VECS];
#pragma unroll
        for (int i = 0; i < VECS; ++i) v[i] = load_vec(x + base + threadIdx.x + i * THREADS);
        float scale = 1.0f;
        if constexpr (COMPUTE != 0) scale = softmax_in_place<VECS>(v);
        if constexpr (kGlobal) {
            // every thread's loads have landed before the block arrives
            __syncthreads();
            if (threadIdx.x == 0) {
                arrive_release(counters);
                const unsigned target = static_cast<unsigned>(p + 1) * gridDim.x;
                while (load_acquire(counters) < target) __nanosleep(32);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < VECS; ++i) {
            if constexpr (COMPUTE != 0)
                v[i] = make_float4(v[i].x * scale, v[i].y * scale, v[i].z * scale, v[i].w * scale);
            store_vec(y + base + threadIdx.x + i * THREADS, v[i]);
        }
    }
    if constexpr (kGlobal) {
        __syncthreads();
        if (threadIdx.x == 0 && atomicAdd(counters + 1, 1u) == gridDim.x - 1) {
            counters[0] = 0;
            counters[1] = 0;
            __threadfence();
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
phases_local(const float4* __restrict__ x, float4* __restrict__ y, int passes, unsigned* counters) {
    phases<false>(x, y, passes, counters);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
phases_global(const float4* __restrict__ x, float4* __restrict__ y, int passes, unsigned* counters) {
    phases<true>(x, y, passes, counters);
}

// One-way streams and a copy, one chunk of VECS * THREADS vectors a block
// (a grid of as many blocks as chunks: blocks start as others finish, not
// in lockstep): the rates a read-all-then-write-all scheme is made of.
// stream_read sums its chunk (one float a block out, so nothing is elided);
// stream_write writes `value` everywhere; stream_copy copies its chunk.
// A block's sum into sums[block]: the warps' sums, one atomic a warp.
__device__ __forceinline__ void add_block_sum(float s, float* sums) {
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(sums + blockIdx.x, s);
}

// Block b's chunk of VECS * THREADS vectors (chunk b), every load issued before
// the first add, summed into sums[b] (one atomic a warp).
__device__ __forceinline__ void sum_chunk(const float4* __restrict__ x, float* __restrict__ sums) {
    const long long base = static_cast<long long>(blockIdx.x) * VECS * THREADS;
    float4 v[VECS];
#pragma unroll
    for (int i = 0; i < VECS; ++i) v[i] = load_vec(x + base + threadIdx.x + i * THREADS);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < VECS; ++i) s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    add_block_sum(s, sums);
}

extern "C" __global__ void __launch_bounds__(THREADS)
stream_read(const float4* __restrict__ x, float* __restrict__ sums) {
    sum_chunk(x, sums);
}

extern "C" __global__ void __launch_bounds__(THREADS)
stream_write(float4* __restrict__ y, float value) {
    const long long base = static_cast<long long>(blockIdx.x) * VECS * THREADS;
#pragma unroll
    for (int i = 0; i < VECS; ++i) __stcs(y + base + threadIdx.x + i * THREADS, make_float4(value, value, value, value));
}

extern "C" __global__ void __launch_bounds__(THREADS)
stream_copy(const float4* __restrict__ x, float4* __restrict__ y) {
    const long long base = static_cast<long long>(blockIdx.x) * VECS * THREADS;
    float4 v[VECS];
#pragma unroll
    for (int i = 0; i < VECS; ++i) v[i] = x[base + threadIdx.x + i * THREADS];
#pragma unroll
    for (int i = 0; i < VECS; ++i) __stcs(y + base + threadIdx.x + i * THREADS, v[i]);
}

// A part of a resident grid loading (forty-fifth round): the first `active`
// blocks read their chunk of VECS * THREADS vectors (chunk b for block b), the
// others return at once -- how fast a group of blocks pulls its bytes, one
// block an SM or two. group_load_regs loads by LDG into registers, as rung 09
// does; group_load_bulk by BULK_PIECES bulk copies a block into dynamic shared
// memory (the copy engine's queue, not the SM's load slots). A block adds its
// chunk's sum to sums[block], so no load is elided.
#ifndef BULK_PIECES
#define BULK_PIECES 4
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
group_load_regs(const float4* __restrict__ x, float* __restrict__ sums, int active) {
    if (static_cast<int>(blockIdx.x) < active) sum_chunk(x, sums);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#include "ld_st.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"

constexpr unsigned kChunkBytes = VECS * THREADS * 16u;
static_assert(kChunkBytes % (16 * BULK_PIECES) == 0, "BULK_PIECES: pieces of whole 16-byte vectors");
static_assert(kChunkBytes < (1u << 20), "a chunk past what one mbarrier phase counts");

// Dynamic shared memory: kChunkBytes a block.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
group_load_bulk(const float4* __restrict__ x, float* __restrict__ sums, int active) {
    extern __shared__ float4 chunk[];
    __shared__ alignas(8) unsigned long long bar;
    if (static_cast<int>(blockIdx.x) >= active) return;
    const long long base = static_cast<long long>(blockIdx.x) * VECS * THREADS;
    const u32 b = smem_addr(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        fence_barrier_init();
        mbar_arrive_expect_tx(b, kChunkBytes);
        constexpr unsigned kPiece = kChunkBytes / BULK_PIECES;
#pragma unroll
        for (int p = 0; p < BULK_PIECES; ++p)
            bulk_load(smem_addr(chunk) + p * kPiece, x + base + p * (kPiece / 16), kPiece, b);
    }
    __syncthreads();                                 // the barrier initialised before any wait
    mbar_wait(b, 0);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < VECS; ++i) {
        const float4 v = chunk[threadIdx.x + i * THREADS];
        s += (v.x + v.y) + (v.z + v.w);
    }
    add_block_sum(s, sums);
}
#endif
