// A memory-bound copy whose occupancy is chosen from the host: the launch
// asks for dynamic shared memory that the kernel never touches, only so
// that fewer blocks fit on an SM (benchmarks/occupancy_sweep.py). With the
// grid set to blocks-per-SM x SM count, every block is resident at once and
// the number of loads in flight is exactly what the occupancy allows.
//
// UNROLL: 16-byte loads each thread issues before its first store. The
// loads are independent, so a thread keeps UNROLL of them in flight; this is
// the instruction-level parallelism that lets fewer warps hide DRAM latency.
#ifndef UNROLL
#define UNROLL 1
#endif

extern "C" __global__ void copy_occupancy(const float4* __restrict__ src,
                                          float4* __restrict__ dst, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    // Full groups: UNROLL independent loads, then UNROLL stores.
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) __stcs(dst + i + u * stride, v[u]);
    }
    // The tail: fewer than UNROLL strides left for this thread.
    for (; i < n; i += stride) dst[i] = src[i];
}

// One thread follows a chain of dependent loads: each address comes from the
// previous load, so nothing overlaps and the time per hop is the load-to-use
// latency of memory. Loads are cached in L2 only (.cg), so a chain over a
// region larger than L2, started after a flush, measures DRAM.
extern "C" __global__ void chase_latency(const unsigned* __restrict__ next, unsigned start,
                                         int hops, unsigned* __restrict__ sink,
                                         long long* __restrict__ cycles)
{
    unsigned p = start;
    const long long t0 = clock64();
    for (int h = 0; h < hops; ++h) p = __ldcg(next + p);
    const long long t1 = clock64();
    sink[0] = p;
    cycles[0] = t1 - t0;
}
