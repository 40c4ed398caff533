// Rung 4: register tiling (the seed's matmul_l1_reg, MB = 8, TS = 128).
// A 16 x 16 block computes a 128 x 128 tile of C; each thread keeps an
// 8 x 8 micro-tile of accumulators in registers.
//
// Per k step a thread reads TM values of A and TN of B from shared memory
// and does TM * TN = 64 FMAs with them: shared-memory traffic per FMA falls
// 16-fold against rung 2, and the FMAs are independent, so they issue
// back to back instead of waiting on each other. Global loads use the
// linear thread id, so every warp reads whole 64- or 128-byte row segments.
#include "simt_common.cuh"

// BM: rows of C per block (TS in the seed)
#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
// BN: columns of C per block
#ifndef BN
#error "BN must be defined (the registry passes it)"
#endif
// BK: k-extent of a shared-memory tile (the seed's block_size)
#ifndef BK
#error "BK must be defined (the registry passes it)"
#endif
// TM: micro-tile rows per thread (MB in the seed)
#ifndef TM
#error "TM must be defined (the registry passes it)"
#endif
// TN: micro-tile columns per thread
#ifndef TN
#error "TN must be defined (the registry passes it)"
#endif

constexpr int TX = BN / TN, TY = BM / TM;  // threads along columns, rows
constexpr int THREADS = TX * TY;
static_assert(BM % TM == 0 && BN % TN == 0, "micro-tiles must tile the block");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "even tile loads");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_reg_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
               int M, int N, int K, float alpha, float beta) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;            // [BM rows][BK k]
    float* Bs = smem + BM * BK;  // [BK k][BN columns]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int p = 0; p < BM * BK / THREADS; ++p) {
            const int e = tid + p * THREADS;
            const int r = e / BK, k = e % BK;
            const int gr = row0 + r, gk = k0 + k;
            As[r * BK + k] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
        }
#pragma unroll
        for (int p = 0; p < BK * BN / THREADS; ++p) {
            const int e = tid + p * THREADS;
            const int k = e / BN, c = e % BN;
            const int gk = k0 + k, gc = col0 + c;
            Bs[k * BN + c] = (gk < K && gc < N) ? B[(size_t)gk * N + gc] : 0.0f;
        }
        __syncthreads();

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
        __syncthreads();
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
