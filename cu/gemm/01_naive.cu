// Rung 1: one thread per element of C, straight from global memory.
//
// threadIdx.x runs along a row of C, so the 32 threads of a warp read 32
// consecutive floats of a row of B (one coalesced 128-byte request) and all
// read the same element of A (one broadcast). Nothing is reused on chip
// beyond what L1/L2 happen to keep: each multiply-add needs two loads.
#include "simt_common.cuh"

// BM: rows of C per block (threadIdx.y)
#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
// BN: columns of C per block (threadIdx.x)
#ifndef BN
#error "BN must be defined (the registry passes it)"
#endif

extern "C" __global__ void __launch_bounds__(BM * BN)
gemm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
           int M, int N, int K, float alpha, float beta) {
    const int row = blockIdx.y * BM + threadIdx.y;
    const int col = blockIdx.x * BN + threadIdx.x;
    if (row >= M || col >= N) return;

    const float* a = A + (size_t)row * K;
    const float* b = B + col;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += a[k] * *b;
        b += N;
    }
    store_c(C + (size_t)row * N + col, acc, alpha, beta);
}
