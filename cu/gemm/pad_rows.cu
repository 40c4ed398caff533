// Rung 20's staging copy: rows of an operand whose row length in bytes is not
// a multiple of 16 (or whose base is not 16-byte aligned), copied into rows of
// a 16-byte multiple pitch, which is what a TMA tensor map needs.
//
// One launch copies both operands (blockIdx.y: 0 = the first, 1 = the second;
// an operand with rows == 0 is skipped), so a GEMM whose A and B both need
// padding costs one launch, not two driver copies. Each thread writes one
// 16-byte chunk of a destination row at a time (a grid-stride loop over
// rows * pitch / 16 chunks) and gathers it from the source element by
// element: the source is only element-aligned, so nothing wider than one
// element may be read. A warp's chunks are consecutive, so its loads of
// each element position cover one contiguous stretch of the source row.
// Bytes of a chunk past the row's width (the padding) are written as zero:
// the map never reads them, but a buffer never holds stale data either.
//
//   extern "C" __global__ void pad_rows_{2,4}(
//       const void* src0, void* dst0, long long rows0, long long width0, long long pitch0,
//       const void* src1, void* dst1, long long rows1, long long width1, long long pitch1)
// width: bytes of one source row (the source is dense: row r starts at
// src + r * width); pitch: bytes of one destination row, a multiple of 16
// and >= width; dst 16-byte aligned. The suffix is the element size in bytes.

#include "grid_dependency.cuh"

template <typename T>
__device__ __forceinline__ void pad_rows(const T* __restrict__ src, uint4* __restrict__ dst,
                                         long long rows, long long width, long long pitch) {
    constexpr int PER_CHUNK = 16 / sizeof(T);
    const long long row_chunks = pitch / 16;
    const long long row_elems = width / sizeof(T);
    const long long chunks = rows * row_chunks;
    for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < chunks;
         q += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long row = q / row_chunks;
        const long long col = (q - row * row_chunks) * PER_CHUNK;  // first element of the chunk
        const T* s = src + row * row_elems + col;
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if constexpr (sizeof(T) == 4) {
                w[i] = col + i < row_elems ? s[i] : 0u;
            } else {
                const unsigned lo = col + 2 * i < row_elems ? s[2 * i] : 0u;
                const unsigned hi = col + 2 * i + 1 < row_elems ? s[2 * i + 1] : 0u;
                w[i] = lo | hi << 16;
            }
        }
        dst[q] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

#define PAD_ENTRY(NAME, T)                                                                  \
    extern "C" __global__ void NAME(const void* src0, void* dst0, long long rows0,         \
                                    long long width0, long long pitch0, const void* src1,   \
                                    void* dst1, long long rows1, long long width1,          \
                                    long long pitch1) {                                     \
        grid_dependency_wait();   /* the operands' writer has completed */                  \
        if (blockIdx.y == 0)                                                                \
            pad_rows<T>(static_cast<const T*>(src0), static_cast<uint4*>(dst0), rows0,      \
                        width0, pitch0);                                                    \
        else                                                                                \
            pad_rows<T>(static_cast<const T*>(src1), static_cast<uint4*>(dst1), rows1,      \
                        width1, pitch1);                                                    \
    }

PAD_ENTRY(pad_rows_2, unsigned short)
PAD_ENTRY(pad_rows_4, unsigned int)
