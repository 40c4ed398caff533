// Softmax rung 03: reductions through warp shuffles.
//
// The online pairs of rung 02 are merged with __shfl_xor_sync butterflies:
// register to register inside a warp, no shared memory and no barrier.
//   softmax_03_warp_shuffle_warp:  one warp per row (short rows); THREADS / 32
//                                  rows per block; nothing is shared between warps.
//   softmax_03_warp_shuffle_block: one block per row (long rows); one butterfly
//                                  per warp, then one pair per warp through
//                                  shared memory and a single barrier.
// Loads are still scalar and the row is still read twice (see rung 04).
//
// Parameters: x, y are rows x cols, row-major, contiguous; any rows, cols >= 1.
#include "softmax_common.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_03_warp_shuffle_warp(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    const long long row = static_cast<long long>(blockIdx.x) * (THREADS / 32) + (threadIdx.x >> 5);
    if (row >= rows) return;  // the whole warp leaves together, so its shuffles stay full-mask
    const elem_t* xr = x + row * cols;
    elem_t* yr = y + row * cols;
    const unsigned lane = threadIdx.x & 31;
    const unsigned n = static_cast<unsigned>(cols);

    float m = NEG_INF, l = 0.0f;
    for (unsigned c = lane; c < n; c += 32) online_add(m, l, to_f32(xr[c]));
    const MaxSum r = shfl_merge<32>(MaxSum{m, l});
    const float inv = 1.0f / r.l;
    for (unsigned c = lane; c < n; c += 32) yr[c] = from_f32(expf(to_f32(xr[c]) - r.m) * inv);
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_03_warp_shuffle_block(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    __shared__ MaxSum part[THREADS / 32];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const elem_t* xr = x + row * cols;
    elem_t* yr = y + row * cols;
    const unsigned n = static_cast<unsigned>(cols);

    float m = NEG_INF, l = 0.0f;
    for (unsigned c = threadIdx.x; c < n; c += THREADS) online_add(m, l, to_f32(xr[c]));
    const MaxSum r = block_merge<THREADS>(MaxSum{m, l}, part);
    const float inv = 1.0f / r.l;
    for (unsigned c = threadIdx.x; c < n; c += THREADS) yr[c] = from_f32(expf(to_f32(xr[c]) - r.m) * inv);
}
