// Softmax rung 01: three passes over the row in global memory.
//
// One block per row. Pass 1 finds the row's max, pass 2 sums exp(x - max),
// pass 3 writes exp(x - max) / sum. Each pass re-reads the row from global
// memory (3 reads + 1 write: twice the minimum traffic), and each reduction
// is a shared-memory tree with a barrier per level.
//
// Parameters: x, y are rows x cols, row-major, contiguous; any rows, cols >= 1.
// Row offsets are 64-bit (rows * cols may exceed 2^31).
#include "softmax_common.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
static_assert((THREADS & (THREADS - 1)) == 0 && THREADS >= 32 && THREADS <= 1024,
              "THREADS: a power of two in [32, 1024]");

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_01_naive(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    __shared__ float red[THREADS];
    const long long row = blockIdx.x;
    if (row >= rows) return;  // uniform across the block: no barrier is skipped by half of it
    const elem_t* xr = x + row * cols;
    elem_t* yr = y + row * cols;
    const unsigned t = threadIdx.x;
    const unsigned n = static_cast<unsigned>(cols);  // unsigned: c + THREADS cannot wrap below 2^32

    float m = NEG_INF;
    for (unsigned c = t; c < n; c += THREADS) m = fmaxf(m, to_f32(xr[c]));
    red[t] = m;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = fmaxf(red[t], red[t + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();  // everyone has read red[0] before it is overwritten

    float l = 0.0f;
    for (unsigned c = t; c < n; c += THREADS) l += expf(to_f32(xr[c]) - m);
    red[t] = l;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    l = red[0];

    for (unsigned c = t; c < n; c += THREADS) yr[c] = from_f32(expf(to_f32(xr[c]) - m) / l);
}
