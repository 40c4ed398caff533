// Rung 20's split-K reduction: C = alpha * (P[0] + P[1] + ... + P[S-1]) + beta * C.
//
// With split-K, each work unit of 20_tma_wgmma.cu computes one piece of K for
// one tile and writes its raw fp32 partial product into its split's slice of
// a workspace: slice s holds an M x N row-major matrix at P + s * stride. This
// kernel sums the slices element by element in split order 0, 1, ..., S - 1,
// always the same order whatever the grid, so a result is the same bits on
// every run (no atomics), then applies alpha and beta and writes C in its own
// type. beta == 0 never reads C (NaN there cannot reach the result).
//
//   extern "C" __global__ void split_reduce_{f32,bf16,fp16}(
//       const float* P, void* C, long long count, long long stride, int splits,
//       float alpha, float beta)
// count = M * N; stride (elements between slices) a multiple of 4 and P
// 16-byte aligned (the host's workspace layout), so each thread reads its
// four consecutive elements of a slice with one 16-byte load; C is stored
// with one 16-byte (fp32) or 8-byte (16-bit) store where it is aligned for
// it, element by element otherwise and in the last, partial group.
#include "grid_dependency.cuh"
#include "half_bits.cuh"

// C's element type
#define OUT_F32 0
#define OUT_BF16 1
#define OUT_FP16 2

template <int OUT>
__device__ __forceinline__ float load_c(const void* C, long long i) {
    if constexpr (OUT == OUT_F32)
        return static_cast<const float*>(C)[i];
    else
        return half_bits_to_f32<OUT == OUT_BF16>(static_cast<const unsigned short*>(C)[i]);
}

template <int OUT>
__device__ __forceinline__ void store_c(void* C, long long i, float v) {
    if constexpr (OUT == OUT_F32)
        static_cast<float*>(C)[i] = v;
    else
        static_cast<unsigned short*>(C)[i] =
            static_cast<unsigned short>(pack_half2_rn<OUT == OUT_BF16>(v, 0.0f));
}

// The deep entries' slices in flight: their chunks of DEEP_SLICES loads are
// issued before the chunk's adds (predicated past the last split), which
// stay in split order, so the result is the plain entries' to the bit.
constexpr int DEEP_SLICES = 16;

template <int OUT, bool DEEP>
__device__ __forceinline__ void split_reduce(const float* __restrict__ P, void* C,
                                             long long count, long long stride, int splits,
                                             float alpha, float beta) {
    grid_dependency_wait();   // the partials' writer has completed
    constexpr size_t C_VEC = OUT == OUT_F32 ? 16 : 8;   // bytes of four elements of C
    const bool c_vec = (reinterpret_cast<size_t>(C) & (C_VEC - 1)) == 0;
    const long long groups = (count + 3) / 4;
    for (long long g = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
         g < groups; g += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long i = 4 * g;
        float v[4];
        const float* q = P + i;
        if (DEEP && i + 4 <= count) {
            float4 sum = *reinterpret_cast<const float4*>(q);
            for (int s0 = 1; s0 < splits; s0 += DEEP_SLICES) {
                float4 x[DEEP_SLICES];
#pragma unroll
                for (int u = 0; u < DEEP_SLICES; ++u)
                    if (s0 + u < splits)
                        x[u] = *reinterpret_cast<const float4*>(q + (s0 + u) * stride);
#pragma unroll
                for (int u = 0; u < DEEP_SLICES; ++u) {
                    if (s0 + u < splits) {
                        sum.x += x[u].x;
                        sum.y += x[u].y;
                        sum.z += x[u].z;
                        sum.w += x[u].w;
                    }
                }
            }
            v[0] = sum.x;
            v[1] = sum.y;
            v[2] = sum.z;
            v[3] = sum.w;
        } else if (i + 4 <= count) {
            float4 sum = *reinterpret_cast<const float4*>(q);
            for (int s = 1; s < splits; ++s) {
                q += stride;
                const float4 x = *reinterpret_cast<const float4*>(q);
                sum.x += x.x;
                sum.y += x.y;
                sum.z += x.z;
                sum.w += x.w;
            }
            v[0] = sum.x;
            v[1] = sum.y;
            v[2] = sum.z;
            v[3] = sum.w;
        } else {
            const int live = static_cast<int>(count - i);   // 1..3
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] = e < live ? q[e] : 0.0f;
            for (int s = 1; s < splits; ++s) {
                q += stride;
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (e < live) v[e] += q[e];
            }
        }
        // the same expression as the GEMM kernel's own epilogue
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (beta == 0.0f)
                v[e] = alpha * v[e];
            else if (i + e < count)
                v[e] = alpha * v[e] + beta * load_c<OUT>(C, i + e);
        }
        if (c_vec && i + 4 <= count) {
            if constexpr (OUT == OUT_F32)
                *reinterpret_cast<float4*>(static_cast<float*>(C) + i) =
                    make_float4(v[0], v[1], v[2], v[3]);
            else
                *reinterpret_cast<uint2*>(static_cast<unsigned short*>(C) + i) =
                    make_uint2(pack_half2_rn<OUT == OUT_BF16>(v[0], v[1]),
                               pack_half2_rn<OUT == OUT_BF16>(v[2], v[3]));
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (i + e < count) store_c<OUT>(C, i + e, v[e]);
        }
    }
}

// The plain entries: many threads (8 blocks an SM), each with a few slices'
// loads in flight, for a C with elements enough to fill the GPU. The deep
// entries: a C of fewer elements than that (a long K split many times over
// a small C) is a chain of L2 round trips per thread, splits / (slices in
// flight) long; one block an SM lets ptxas keep DEEP_SLICES loads in flight
// (at 8 blocks it interleaves them with the adds, ~4 in flight).
#define REDUCE_ENTRY(NAME, OUT, DEEP, BOUNDS)                                                \
    extern "C" __global__ void BOUNDS                                                        \
    NAME(const float* __restrict__ P, void* C, long long count, long long stride,           \
         int splits, float alpha, float beta) {                                              \
        split_reduce<OUT, DEEP>(P, C, count, stride, splits, alpha, beta);                   \
    }

REDUCE_ENTRY(split_reduce_f32, OUT_F32, false, __launch_bounds__(256))
REDUCE_ENTRY(split_reduce_bf16, OUT_BF16, false, __launch_bounds__(256))
REDUCE_ENTRY(split_reduce_fp16, OUT_FP16, false, __launch_bounds__(256))
REDUCE_ENTRY(split_reduce_deep_f32, OUT_F32, true, __launch_bounds__(256, 1))
REDUCE_ENTRY(split_reduce_deep_bf16, OUT_BF16, true, __launch_bounds__(256, 1))
REDUCE_ENTRY(split_reduce_deep_fp16, OUT_FP16, true, __launch_bounds__(256, 1))
