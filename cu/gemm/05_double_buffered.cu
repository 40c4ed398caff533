// Rung 5: double buffering on top of rung 4's register tiling.
//
// In rung 4 a block waits for its global loads, then computes, then waits
// again: the ~600-cycle global latency is exposed once per k-tile unless
// another block happens to cover it. Here the loads of tile t+1 are issued
// into registers before the math of tile t, so they are in flight while the
// FMAs run; the registers are then written to the second shared-memory
// buffer. Two buffers need only one __syncthreads per k-tile: the barrier
// after storing tile t+1 both publishes it and proves that every thread has
// finished reading the buffer that the store after next will overwrite.
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
// MIN_BLOCKS: keep registers <= 128 so two blocks share an SM
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (the registry passes it)"
#endif

constexpr int TX = BN / TN, TY = BM / TM;
constexpr int THREADS = TX * TY;
constexpr int A_LOADS = BM * BK / THREADS;  // floats of A each thread stages per tile
constexpr int B_LOADS = BK * BN / THREADS;
constexpr int STAGE = BM * BK + BK * BN;    // floats per buffer
static_assert(BM % TM == 0 && BN % TN == 0, "micro-tiles must tile the block");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "even tile loads");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_double_buffered(const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C, int M, int N, int K, float alpha, float beta) {
    extern __shared__ __align__(16) float smem[];  // two buffers of [BM][BK] A + [BK][BN] B

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    float a_stage[A_LOADS], b_stage[B_LOADS];
    auto load_global = [&](int k0) {
#pragma unroll
        for (int p = 0; p < A_LOADS; ++p) {
            const int e = tid + p * THREADS;
            const int gr = row0 + e / BK, gk = k0 + e % BK;
            a_stage[p] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
        }
#pragma unroll
        for (int p = 0; p < B_LOADS; ++p) {
            const int e = tid + p * THREADS;
            const int gk = k0 + e / BN, gc = col0 + e % BN;
            b_stage[p] = (gk < K && gc < N) ? B[(size_t)gk * N + gc] : 0.0f;
        }
    };
    auto store_shared = [&](float* buf) {
        // Same layouts as rung 4: As [BM][BK], Bs [BK][BN]; element e of the
        // linear order lands at offset e, so a warp stores 32 consecutive words.
#pragma unroll
        for (int p = 0; p < A_LOADS; ++p) buf[tid + p * THREADS] = a_stage[p];
#pragma unroll
        for (int p = 0; p < B_LOADS; ++p) buf[BM * BK + tid + p * THREADS] = b_stage[p];
    };

    const int ktiles = (K + BK - 1) / BK;
    if (ktiles > 0) {
        load_global(0);
        store_shared(smem);
        __syncthreads();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        const float* As = smem + (kt & 1) * STAGE;
        const float* Bs = As + BM * BK;
        const bool has_next = kt + 1 < ktiles;
        if (has_next) load_global((kt + 1) * BK);  // in flight during the FMAs below

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[(ty * TM + i) * BK + kk];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk * BN + tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }

        if (has_next) {
            store_shared(smem + ((kt + 1) & 1) * STAGE);
            __syncthreads();
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + ty * TM + i;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + tx * TN + j;
            if (col < N) store_c(C + (size_t)row * N + col, acc[i][j], alpha, beta);
        }
    }
}
