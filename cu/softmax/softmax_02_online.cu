// Softmax rung 02: the online algorithm, one pass for max and sum together.
//
// One block per row. Each thread keeps a running (max m, sum l of exp(x - m))
// and rescales l by exp(m_old - m_new) when a larger element arrives, so max
// and sum come out of a single read of the row. The per-thread pairs are then
// merged by a shared-memory tree, and a second pass writes exp(x - M) / L:
// 2 reads + 1 write instead of rung 01's 3 + 1.
//
// Parameters: x, y are rows x cols, row-major, contiguous; any rows, cols >= 1.
#include "softmax_common.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
static_assert((THREADS & (THREADS - 1)) == 0 && THREADS >= 32 && THREADS <= 1024,
              "THREADS: a power of two in [32, 1024]");

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_02_online(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    __shared__ MaxSum red[THREADS];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const elem_t* xr = x + row * cols;
    elem_t* yr = y + row * cols;
    const unsigned t = threadIdx.x;
    const unsigned n = static_cast<unsigned>(cols);

    float m = NEG_INF, l = 0.0f;
    for (unsigned c = t; c < n; c += THREADS) online_add(m, l, to_f32(xr[c]));
    red[t] = MaxSum{m, l};
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = merge(red[t], red[t + s]);
        __syncthreads();
    }
    const MaxSum r = red[0];
    const float inv = 1.0f / r.l;

    for (unsigned c = t; c < n; c += THREADS) yr[c] = from_f32(expf(to_f32(xr[c]) - r.m) * inv);
}
