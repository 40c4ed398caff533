// Rung 3: thread coarsening. A block of (TILE/COARSEN)^2 threads computes a
// TILE x TILE tile of C; each thread owns COARSEN x COARSEN outputs spaced
// TILE/COARSEN apart (seed 002, matmul_tiled_and_coarsened).
//
// Each value read from shared memory now feeds COARSEN multiply-adds instead
// of one, so shared-memory loads per FMA halve (COARSEN = 2). The outputs are
// strided, not contiguous, so that consecutive threadIdx.x still touch
// consecutive columns: Bs reads stay conflict-free and C stores coalesced.
// As rows are padded to BK + 4 words: a warp spans two rows ty, ty + 1 of
// As, which would otherwise sit BK = 32 words apart, in the same banks
// (2-way conflict). A pad of 4 rather than 1 keeps each row 16-byte
// aligned, so a thread's reads of 4 consecutive k still merge into one
// LDS.128.
#include "simt_common.cuh"

// TILE: rows and columns of C per block
#ifndef TILE
#error "TILE must be defined (the registry passes it)"
#endif
// BK: k-extent of a shared-memory tile
#ifndef BK
#error "BK must be defined (the registry passes it)"
#endif
// COARSEN: outputs per thread along each dimension
#ifndef COARSEN
#error "COARSEN must be defined (the registry passes it)"
#endif
// APAD: padding of an As row, in floats (a multiple of 4: aligned rows)
#ifndef APAD
#error "APAD must be defined (the registry passes it)"
#endif

constexpr int TD = TILE / COARSEN;  // threads along each dimension
constexpr int THREADS = TD * TD;
constexpr int LDA = BK + APAD;
static_assert(TILE % COARSEN == 0, "TILE must be a multiple of COARSEN");
static_assert((TILE * BK) % THREADS == 0, "tile loads must divide evenly among threads");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_coarsened(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
               int M, int N, int K, float alpha, float beta) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;               // [TILE rows][LDA]
    float* Bs = smem + TILE * LDA;  // [BK][TILE columns]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TD + tx;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    float acc[COARSEN][COARSEN];
#pragma unroll
    for (int i = 0; i < COARSEN; ++i)
#pragma unroll
        for (int j = 0; j < COARSEN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Linear thread id over the tile: a warp reads whole rows of
        // consecutive addresses (coalesced) and writes consecutive words.
#pragma unroll
        for (int p = 0; p < TILE * BK / THREADS; ++p) {
            const int e = tid + p * THREADS;
            const int r = e / BK, k = e % BK;
            const int gr = row0 + r, gk = k0 + k;
            As[r * LDA + k] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
        }
#pragma unroll
        for (int p = 0; p < BK * TILE / THREADS; ++p) {
            const int e = tid + p * THREADS;
            const int k = e / TILE, c = e % TILE;
            const int gk = k0 + k, gc = col0 + c;
            Bs[k * TILE + c] = (gk < K && gc < N) ? B[(size_t)gk * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[COARSEN], b[COARSEN];
#pragma unroll
            for (int i = 0; i < COARSEN; ++i) a[i] = As[(ty + i * TD) * LDA + kk];
#pragma unroll
            for (int j = 0; j < COARSEN; ++j) b[j] = Bs[kk * TILE + tx + j * TD];
#pragma unroll
            for (int i = 0; i < COARSEN; ++i)
#pragma unroll
                for (int j = 0; j < COARSEN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < COARSEN; ++i) {
        const int row = row0 + ty + i * TD;
#pragma unroll
        for (int j = 0; j < COARSEN; ++j) {
            const int col = col0 + tx + j * TD;
            if (row < M && col < N) store_c(C + (size_t)row * N + col, acc[i][j], alpha, beta);
        }
    }
}
