// Softmax rung 10: short contiguous rows through a shared-memory tile.
//
// Many rows of a few dozen to a few hundred elements, stored back to back
// (row pitch == cols). A block owns R = THREADS / ROW_THREADS consecutive
// rows, which are one contiguous run of R * cols elements, and
//   1. copies the run into shared memory with 16-byte cp.async of the
//      aligned vectors that cover it: every vector one 128-bit access
//      whatever the row length or where the run starts (only a vector that
//      crosses an end of the array goes element by element);
//   2. lets ROW_THREADS lanes per row reduce and scale the row from shared
//      memory (each lane holds ELEMS values of it, lane-strided: a lane
//      group reads consecutive words);
//   3. writes the run back: y's vectors that lie wholly inside the run as
//      16-byte stores, the (at most two) partial ones element by element.
// Why a tile: the window rung (07) reads each row through its own 16-byte
// window, whose first and last vectors are partial and go element by element;
// a row of 31 fp32 has 8 to 9 vectors, 2 of them partial (7 scalar accesses
// each), and 16-bit rows of 31 have half the vectors with the same partial
// two. Here the partial vectors are two per block of R rows.
//
// Every constant is a define the registry always passes (a missing one is a
// compile error): DTYPE, THREADS, ROW_THREADS (a power of two <= 32), ELEMS
// (cols <= ROW_THREADS * ELEMS), MIN_BLOCKS (__launch_bounds__).
// Parameters: x, y are rows x cols, row-major, contiguous (y may start at
// another 16-byte phase than x: its stores are then element-wise); any
// rows, cols >= 1 that fit the config.
#include "softmax_common.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ROW_THREADS
#error "ROW_THREADS must be defined (lanes per row: a power of two <= 32)"
#endif
#ifndef ELEMS
#error "ELEMS must be defined (elements of its row a lane holds: cols <= ROW_THREADS * ELEMS)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(ROW_THREADS <= 32 && (ROW_THREADS & (ROW_THREADS - 1)) == 0,
              "ROW_THREADS: a power of two <= 32 (lane groups inside a warp)");

// The 16-bit builds take the fast exp, as the window rungs' do
// (softmax_common.cuh, exp_diff): their element rate is twice fp32's at the
// same bytes, and expf's nine instructions per element would bound them.
constexpr bool kFast = DTYPE != 0;
constexpr int ROWS = THREADS / ROW_THREADS;           // rows a block owns
constexpr int SZ = static_cast<int>(sizeof(elem_t));
constexpr int VEC = 16 / SZ;                          // elements per 16-byte vector
// The run (at most ROWS * ROW_THREADS * ELEMS elements) lands at its byte
// offset inside its first 16-byte vector (0..15) and may end one partial
// vector later: 32 bytes of slack.
constexpr int TILE_BYTES = ROWS * ROW_THREADS * ELEMS * SZ + 32;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global [%0], [g], 16; }" :: "r"(dst), "l"(src) : "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_10_row_tile(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    __shared__ __align__(16) unsigned char tile[TILE_BYTES];
    const long long row0 = static_cast<long long>(blockIdx.x) * ROWS;
    const int nrows = static_cast<int>(min(static_cast<long long>(ROWS), rows - row0));
    const long long e0 = row0 * cols;                     // first element of the run
    const long long run_bytes = static_cast<long long>(nrows) * cols * SZ;

    // 1. x's aligned vectors covering the run: byte offsets from x (the
    // first vector may start before x; offsets, not integer addresses, keep
    // the accesses in the global space: LDGSTS / LDG / STG, not generic ones).
    const long long xbytes = static_cast<long long>(rows) * cols * SZ;
    const long long a0 = e0 * SZ;                          // the run's first byte
    const int xphase = static_cast<int>(reinterpret_cast<unsigned long long>(x) & 15);
    const long long v0 = ((a0 + xphase) & ~15ll) - xphase; // its vector's first byte
    const int shift = static_cast<int>(a0 - v0);          // the run's byte 0 is tile[shift]
    const int nvec = static_cast<int>((a0 + run_bytes - v0 + 15) >> 4);
    const unsigned char* xc = reinterpret_cast<const unsigned char*>(x);
    for (int v = threadIdx.x; v < nvec; v += THREADS) {
        const long long g = v0 + 16ll * v;
        if (g >= 0 && g + 16 <= xbytes) {
            cp_async_16(smem_u32(tile + 16 * v), xc + g);
        } else {
            // a vector across an end of the array: only its elements inside
            // (the bytes outside belong to nobody; their tile slots stay unused)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const long long ge = g + static_cast<long long>(k) * SZ;
                if (ge >= 0 && ge < xbytes)
                    reinterpret_cast<elem_t*>(tile + 16 * v)[k] =
                        __ldg(reinterpret_cast<const elem_t*>(xc + ge));
            }
        }
    }
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
    __syncthreads();

    // 2. Lane group g owns row g of the run; lanes past the last row hold
    // nothing but still take part in the group's shuffles (full mask).
    const int g = threadIdx.x / ROW_THREADS, lane = threadIdx.x % ROW_THREADS;
    const bool live = g < nrows;
    elem_t* row = reinterpret_cast<elem_t*>(tile + shift) + static_cast<long long>(g) * cols;
    float v[ELEMS];
#pragma unroll
    for (int j = 0; j < ELEMS; ++j) {
        const int c = lane + j * ROW_THREADS;
        v[j] = (live && c < cols) ? to_f32(row[c]) : NEG_INF;
    }
    const MaxSum mine = slice_exp<ELEMS, kFast>(v);
    const MaxSum whole = shfl_merge<ROW_THREADS, kFast>(mine);
    const float scale = slice_scale<kFast>(mine.m, whole);
#pragma unroll
    for (int j = 0; j < ELEMS; ++j) {
        const int c = lane + j * ROW_THREADS;
        if (live && c < cols) row[c] = from_f32(v[j] * scale);
    }
    __syncthreads();

    // 3. y's vectors covering the run [b0, b0 + run_bytes). Where y has x's
    // phase (shift), a vector wholly inside the run is tile bytes 16 w..:
    // one 16-byte store. Otherwise, and for the partial first and last
    // vectors, element by element (never a byte outside the run: it belongs
    // to the neighbouring blocks' rows).
    const int yphase = static_cast<int>(reinterpret_cast<unsigned long long>(y) & 15);
    const long long b0 = e0 * SZ;                          // the run in y, from y
    const long long w0 = ((b0 + yphase) & ~15ll) - yphase;
    unsigned char* yc = reinterpret_cast<unsigned char*>(y);
    if (static_cast<int>(b0 - w0) == shift) {
        for (int w = threadIdx.x; w < nvec; w += THREADS) {
            const long long gy = w0 + 16ll * w;
            if (gy >= b0 && gy + 16 <= b0 + run_bytes) {
                *reinterpret_cast<uint4*>(yc + gy) = *reinterpret_cast<const uint4*>(tile + 16 * w);
            } else {
#pragma unroll
                for (int k = 0; k < VEC; ++k) {
                    const long long ge = gy + static_cast<long long>(k) * SZ;
                    if (ge >= b0 && ge < b0 + run_bytes)
                        *reinterpret_cast<elem_t*>(yc + ge) =
                            reinterpret_cast<const elem_t*>(tile + 16 * w)[k];
                }
            }
        }
    } else {
        const elem_t* src = reinterpret_cast<const elem_t*>(tile + shift);
        const long long n = static_cast<long long>(nrows) * cols;
        for (long long i = threadIdx.x; i < n; i += THREADS) y[e0 + i] = src[i];
    }
}
