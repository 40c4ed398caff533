// Rung 7: a STAGES-deep cp.async pipeline feeding rung 6's micro-tiles.
//
// cp.async (Ampere and later) copies global memory straight into shared
// memory: no staging registers, no load-to-store dependency for the warp to
// wait on, and STAGES - 1 tiles can be in flight while one is computed, so
// the global latency is covered even at low occupancy.
//
// cp.async copies bytes as they are, so it cannot transpose A on the way
// in (a 16-byte chunk is 4 consecutive k of one row). A therefore stays
// row-major in shared memory, [BM][BK + APAD], and fragments are read along
// k instead: one LDS.128 gives a row's 4 next k values, so 8 LDS.128 cover
// 4 k steps of the thread's 8 rows -- the same 2 LDS.128 per k step as the
// transposed layout of rung 6, for 32 registers instead of 8. A row length
// of BK + APAD == 4 mod 8 words puts the rows ty*4 and ty*4 + 4 that one
// warp reads 16 banks apart, so those reads are conflict-free.
//
// With ALIGNED=1 every chunk is one 16-byte cp.async.cg (cached in L2 only:
// the data is reused from shared memory, not from L1). With ALIGNED=0 a
// chunk is four 4-byte cp.async.ca, each zero-filled on its own when it
// falls outside the matrix (src-size operand 0: nothing is read, zeros are
// written), so any M, N, K works.
#include "cp_async.cuh"
#include "ld_st.cuh"
#include "simt_common.cuh"

#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
#ifndef BN
#error "BN must be defined (the registry passes it)"
#endif
#ifndef BK
#error "BK must be defined (the registry passes it)"
#endif
#ifndef TM
#error "TM must be defined (the registry passes it)"
#endif
#ifndef TN
#error "TN must be defined (the registry passes it)"
#endif
// STAGES: shared-memory stages: STAGES - 1 tiles in flight during the math
#ifndef STAGES
#error "STAGES must be defined (the registry passes it)"
#endif
// APAD: floats of padding per As row
#ifndef APAD
#error "APAD must be defined (the registry passes it)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (the registry passes it)"
#endif

constexpr int TX = BN / TN, TY = BM / TM;  // 16 x 16 threads
constexpr int THREADS = TX * TY;
constexpr int SUB_M = TM / 4, SUB_N = TN / 4;  // 4 x 4 sub-blocks per thread
constexpr int LDA = BK + APAD, LDB = BN;
constexpr int A_STAGE = BM * LDA, B_STAGE = BK * LDB;
constexpr int STAGE = A_STAGE + B_STAGE;      // floats per stage
constexpr int A_CHUNKS = BM * BK / 4 / THREADS;  // 16-byte chunks per thread per tile
constexpr int B_CHUNKS = BK * BN / 4 / THREADS;
static_assert(STAGES >= 2, "a pipeline needs at least two stages");
static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "4-wide sub-blocks and k-quads");
static_assert(LDA % 8 == 4, "As row length == 4 mod 8 words: aligned and conflict-free");
static_assert(A_CHUNKS * 4 * THREADS == BM * BK && B_CHUNKS * 4 * THREADS == BK * BN,
              "tile loads must divide evenly among threads");

// Copy the quad src[0..3], of which only the first `valid` exist, to dst.
// `fallback` is any valid address of the same matrix: with src-size 0
// nothing is read, but the operand still names memory that exists.
__device__ __forceinline__ void copy_quad_async(float* dst, const float* src, int valid,
                                                const float* fallback) {
#if ALIGNED
    const bool in = valid > 0;  // a quad is entirely inside or entirely outside
    cp_async_16_global(smem_addr(dst), __cvta_generic_to_global(in ? src : fallback),
                       in ? 16 : 0);
#else
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const bool in = c < valid;
        cp_async_4_global(smem_addr(dst + c), __cvta_generic_to_global(in ? src + c : fallback),
                          in ? 4 : 0);
    }
#endif
}

__device__ __forceinline__ float component(const float4& v, int c) {
    return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_cp_async(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
              int M, int N, int K, float alpha, float beta) {
    extern __shared__ __align__(16) float smem[];  // STAGES x { As [BM][LDA], Bs [BK][LDB] }

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    // Copy mapping: consecutive threads take consecutive 16-byte chunks of a
    // row (of A: BK/4 chunks per row; of B: BN/4), so a warp reads whole
    // 32-byte sectors and writes contiguous shared memory.
    const float* a_src[A_CHUNKS];
    int a_valid[A_CHUNKS], a_dst[A_CHUNKS];
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) {
        const int e = tid + i * THREADS;
        const int r = e / (BK / 4), q = e % (BK / 4);
        a_src[i] = A + (size_t)(row0 + r) * K + q * 4;
        a_valid[i] = row0 + r < M ? K - q * 4 : 0;  // k values left in the row, from the next tile on
        a_dst[i] = r * LDA + q * 4;
    }
    const float* b_src[B_CHUNKS];
    int b_krem[B_CHUNKS], b_cols[B_CHUNKS], b_dst[B_CHUNKS];
#pragma unroll
    for (int i = 0; i < B_CHUNKS; ++i) {
        const int e = tid + i * THREADS;
        const int k = e / (BN / 4), cq = e % (BN / 4);
        b_src[i] = B + (size_t)k * N + col0 + cq * 4;
        b_krem[i] = K - k;                 // rows of B left below this chunk, from the next tile on
        b_cols[i] = N - col0 - cq * 4;     // columns of B from this chunk's first to the edge
        b_dst[i] = A_STAGE + k * LDB + cq * 4;
    }
    const size_t b_step = (size_t)BK * N;
    const int ktiles = (K + BK - 1) / BK;

    // Issue the copies of the next k-tile (in order: 0, 1, 2, ...) into
    // `stage`, then commit them as one group. A tile index past the end
    // still commits an (empty) group, so that commit group g always holds
    // k-tile g and the wait below can count groups instead of tiles.
    int tiles_issued = 0;
    auto issue_next_tile = [&](int stage) {
        if (tiles_issued < ktiles) {
            float* s = smem + stage * STAGE;
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                copy_quad_async(s + a_dst[i], a_src[i], a_valid[i], A);
                a_src[i] += BK;
                a_valid[i] -= BK;
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                copy_quad_async(s + b_dst[i], b_src[i], b_krem[i] > 0 ? b_cols[i] : 0, B);
                b_src[i] += b_step;
                b_krem[i] -= BK;
            }
        }
        ++tiles_issued;
        cp_async_commit();
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    // Prologue: k-tiles 0 .. STAGES-2 go into stages 0 .. STAGES-2
    // (groups 0 .. STAGES-2).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue_next_tile(s);

    int read_stage = 0;             // stage holding k-tile kt
    int write_stage = STAGES - 1;   // stage receiving k-tile kt + STAGES - 1
    for (int kt = 0; kt < ktiles; ++kt) {
        // Committed so far: groups 0 .. kt + STAGES - 2 (STAGES - 1 in the
        // prologue, one per earlier iteration). Allowing the newest
        // STAGES - 2 of them to stay pending means groups 0 .. kt are done:
        // k-tile kt has landed -- for this thread's copies.
        cp_async_wait<STAGES - 2>();
        // The barrier makes every thread's copies of tile kt visible, and
        // proves that every thread has finished computing tile kt - 1, whose
        // stage (kt - 1) % STAGES is the one refilled next. So one barrier
        // per k-tile is enough.
        __syncthreads();
        issue_next_tile(write_stage);  // k-tile kt + STAGES - 1, group kt + STAGES - 1

        const float* as = smem + read_stage * STAGE + ty * 4 * LDA;
        const float* bs = smem + read_stage * STAGE + A_STAGE + tx * 4;
#pragma unroll
        for (int kq = 0; kq < BK / 4; ++kq) {
            // a[s*4 + r] = A[row s*BM/SUB_M + ty*4 + r][4 k values]
            float4 a[TM];
#pragma unroll
            for (int s = 0; s < SUB_M; ++s)
#pragma unroll
                for (int r = 0; r < 4; ++r)
                    a[s * 4 + r] = *reinterpret_cast<const float4*>(
                        as + (s * (BM / SUB_M) + r) * LDA + kq * 4);
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                float b[TN];
#pragma unroll
                for (int t = 0; t < SUB_N; ++t) {
                    const float4 v = *reinterpret_cast<const float4*>(
                        bs + (kq * 4 + c) * LDB + t * (BN / SUB_N));
                    b[t * 4 + 0] = v.x; b[t * 4 + 1] = v.y; b[t * 4 + 2] = v.z; b[t * 4 + 3] = v.w;
                }
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const float ai = component(a[i], c);
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += ai * b[j];
                }
            }
        }

        read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
        write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
    }
    cp_async_wait<0>();  // only empty groups can be left; leave nothing in flight

#pragma unroll
    for (int s = 0; s < SUB_M; ++s)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = row0 + s * (BM / SUB_M) + ty * 4 + r;
            const int i = s * 4 + r;
#pragma unroll
            for (int t = 0; t < SUB_N; ++t) {
                const int col = col0 + t * (BN / SUB_N) + tx * 4;
                const int j = t * 4;
                store_c_quad(C, row, col, M, N,
                             make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]),
                             alpha, beta);
            }
        }
}
