// Memory lesson 1: the same copy with 4-byte and with 16-byte accesses.
//
// Both kernels move n floats; each thread copies UNROLL items, all loads
// issued before any store so that UNROLL requests per thread are in flight
// (DRAM latency is hidden by bytes in flight, not by threads alone). An item
// is one float in mem_copy_scalar and one float4 in mem_copy_float4: the same
// bytes in a quarter of the load/store instructions (LDG.E.128 / STG.E.128).
//
// mem_copy_float4 needs src and dst 16-byte aligned; the n % 4 tail floats are
// copied by block 0. Grids: ceil(n / (THREADS * UNROLL)) blocks for scalar,
// ceil(n / 4 / (THREADS * UNROLL)) (at least 1) for float4. n is 64-bit.
#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef UNROLL
#error "UNROLL must be defined (items each thread moves, all loads before any store)"
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
mem_copy_scalar(const float* __restrict__ src, float* __restrict__ dst, long long n) {
    const long long first = static_cast<long long>(blockIdx.x) * (THREADS * UNROLL) + threadIdx.x;
    float v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = first + u * THREADS;
        if (i < n) v[u] = __ldg(src + i);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = first + u * THREADS;
        if (i < n) dst[i] = v[u];
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
mem_copy_float4(const float* __restrict__ src, float* __restrict__ dst, long long n) {
    const long long nvec = n / 4;
    const float4* s4 = reinterpret_cast<const float4*>(src);
    float4* d4 = reinterpret_cast<float4*>(dst);
    const long long first = static_cast<long long>(blockIdx.x) * (THREADS * UNROLL) + threadIdx.x;
    float4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = first + u * THREADS;
        if (i < nvec) v[u] = __ldg(s4 + i);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = first + u * THREADS;
        if (i < nvec) d4[i] = v[u];
    }
    if (blockIdx.x == 0 && threadIdx.x < (n & 3)) {
        const long long i = nvec * 4 + threadIdx.x;
        dst[i] = src[i];
    }
}
