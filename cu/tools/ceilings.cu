// Register-only loops that measure how fast an SM can issue one kind of math
// instruction: FFMA, and mma.sync in the shapes the tensor-core rungs use
// (m16n8k8 tf32, m16n8k16 bf16 and fp16, fp32 accumulators). No memory
// traffic inside the loop, so the time is the instruction's throughput.
//
// Each warp keeps CHAINS independent accumulator chains: an instruction's
// result is only needed again CHAINS instructions later, so the pipeline
// latency is covered and the issue rate is the limit. Launched as 8 blocks
// of 256 threads per SM (2048 threads, the SM's maximum), so
// __launch_bounds__(256, 8) caps each thread at 32 registers and all blocks
// are resident at once: one wave, no tail.
//
// The loop count and operands are kernel arguments and the result is only
// stored when `store` is non-zero (the launcher passes 0): the compiler can
// neither fold the arithmetic nor drop it.
#include "mma.cuh"

#define CHAINS 4

// FFMA: CHAINS * 4 independent chains, 16 FMAs (32 FLOP) per chain and
// iteration.
extern "C" __global__ void __launch_bounds__(256, 8)
ffma_peak(float* out, int iters, float a, float b, int store) {
    float x[CHAINS * 4];
#pragma unroll
    for (int c = 0; c < CHAINS * 4; ++c) x[c] = a * (threadIdx.x + c);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 16; ++u)
#pragma unroll
            for (int c = 0; c < CHAINS * 4; ++c) x[c] = fmaf(x[c], a, b);
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS * 4; ++c) s += x[c];
    if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// mma.sync: CHAINS MMAs per warp and iteration, each on its own accumulator.
// The operands are arbitrary finite values; their contents do not change the
// instruction's speed.
template <int KIND>   // 0: tf32 m16n8k8, 1: bf16 m16n8k16, 2: fp16 m16n8k16
__device__ __forceinline__ void mma_peak(float* out, int iters, float a, int store) {
    const unsigned lane = threadIdx.x & 31;
    // Six different operand registers: with one value in all of them the
    // compiler would keep one register and copy it into the aligned quads
    // and pairs the instruction reads, inside the loop.
    unsigned f[6];
#pragma unroll
    for (int r = 0; r < 6; ++r) {
        const float x = a * (1.0f + lane * 0.0078125f + r * 0.0625f);
        if (KIND == 0) {
            f[r] = to_tf32(x);
        } else {
            // Two 16-bit values per register: bf16 keeps the top half of an
            // fp32; for fp16, 0x3c00 is 1.0. Only finiteness matters.
            const unsigned h = KIND == 1 ? __float_as_uint(x) >> 16 : 0x3c00u + (lane & 7u) + r;
            f[r] = h | (h << 16);
        }
    }
    const unsigned fa[4] = {f[0], f[1], f[2], f[3]};
    const unsigned fb[2] = {f[4], f[5]};
    float d[CHAINS][4];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int r = 0; r < 4; ++r) d[c][r] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) {
            if (KIND == 0) mma_tf32_16x8x8(d[c], fa, fb);
            else if (KIND == 1) mma_bf16_16x8x16(d[c], fa, fb);
            else mma_f16_16x8x16(d[c], fa, fb);
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int r = 0; r < 4; ++r) s += d[c][r];
    if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(256, 8)
mma_tf32_peak(float* out, int iters, float a, int store) { mma_peak<0>(out, iters, a, store); }

extern "C" __global__ void __launch_bounds__(256, 8)
mma_bf16_peak(float* out, int iters, float a, int store) { mma_peak<1>(out, iters, a, store); }

extern "C" __global__ void __launch_bounds__(256, 8)
mma_fp16_peak(float* out, int iters, float a, int store) { mma_peak<2>(out, iters, a, store); }
