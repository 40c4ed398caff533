// Rung 2: shared-memory tiling (the seed's matmul_l1), TILE x TILE threads,
// one output each, with the two TILE x TILE tiles in dynamic shared memory.
//
// Each element brought in from global memory is now used TILE times from
// shared memory, so global traffic drops by a factor of TILE. Bank use: a
// warp is one row of the block (blockDim.x == TILE == 32), so As[ty][kk] is
// one broadcast address and Bs[kk][tx] is 32 consecutive words in 32
// different banks: no conflicts on the reads, nor on the stores.
#include "simt_common.cuh"

#ifndef TILE
#error "TILE must be defined (the registry passes it)"
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_smem_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K, float alpha, float beta) {
    extern __shared__ __align__(16) float smem[];  // 2 * TILE * TILE floats
    float* As = smem;                // [TILE rows of A][TILE k]
    float* Bs = smem + TILE * TILE;  // [TILE k][TILE columns of B]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Out-of-range threads still load (zeros) and reach both barriers.
        As[ty * TILE + tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty * TILE + tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // the tile is complete before anyone reads it
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty * TILE + kk] * Bs[kk * TILE + tx];
        __syncthreads();  // everyone is done reading before the next tile overwrites it
    }
    if (row < M && col < N) store_c(C + (size_t)row * N + col, acc, alpha, beta);
}
