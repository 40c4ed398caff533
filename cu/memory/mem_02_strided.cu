// Memory lesson 2: coalesced versus strided access.
//
// Element i of `count` is copied from src[i * stride] to dst[i * stride].
// stride = 1: the 32 threads of a warp touch 128 contiguous bytes, four
// 32-byte sectors, every byte of which is used. stride = s: the warp's 32
// floats are spread over 32 * s floats, and each 4-byte access drags in a
// whole 32-byte sector, so from s = 8 on only 1/8 of the bytes moved are used
// (and the useful bandwidth falls accordingly).
// Grid: ceil(count / (THREADS * UNROLL)) blocks; arrays of count * stride floats.
#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef UNROLL
#error "UNROLL must be defined (items each thread moves, all loads before any store)"
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
mem_copy_strided(const float* __restrict__ src, float* __restrict__ dst, long long count, int stride) {
    const long long first = static_cast<long long>(blockIdx.x) * (THREADS * UNROLL) + threadIdx.x;
    float v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = first + u * THREADS;
        if (i < count) v[u] = __ldg(src + i * stride);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = first + u * THREADS;
        if (i < count) dst[i * stride] = v[u];
    }
}
