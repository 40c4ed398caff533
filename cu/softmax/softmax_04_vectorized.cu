// Softmax rung 04: 128-bit loads, and the row kept in registers when it fits.
//
// softmax_04_vectorized_rows: the row is read once into registers (ELEMS per
//   thread), exponentiated in place, reduced, scaled and written: exactly the
//   minimum traffic, 1 read + 1 write. ROW_THREADS threads share a row:
//   ROW_THREADS <= 32 puts THREADS / ROW_THREADS rows in a block and reduces
//   with shuffles alone (short rows); ROW_THREADS == THREADS gives a block per
//   row (rows up to THREADS * ELEMS). Fits when cols <= ROW_THREADS * ELEMS.
// softmax_04_vectorized_stream: the general fallback for rows of any length:
//   an online pass with UNROLL vectors in flight per thread, then a second
//   pass that writes (2 reads + 1 write; the second read often hits L2).
// softmax_04_vectorized_packed: contiguous rows of PACKED_COLS elements, fewer
//   than a 16-byte vector holds and dividing it (rows of 1 or 2 fp32; 1, 2 or 4
//   16-bit), both pointers 16-byte aligned: a vector holds VEC / PACKED_COLS
//   whole rows, so each thread reads ELEMS / VEC vectors as a copy would
//   (consecutive threads on consecutive vectors) and reduces each row within
//   its own registers. The rows entry gives such a row a lane and reads it
//   element by element: 4-byte loads, a quarter of a copy's bytes in flight.
//
// Every constant is a define the registry always passes (a missing one is a
// compile error). The three entries are compiled together, so a config of one
// also names the others' constants (ladders/softmax/registry.py: RUNG04_COMPANION).
//
// VEC elements per load: 16 bytes (float4, or 8 x bf16/fp16) when the
// dispatcher has checked cols % VEC == 0 and both pointers are 16-byte
// aligned; VEC = 1 otherwise, which is correct for any shape.
// Parameters: x, y are rows x cols, row-major, contiguous; any rows, cols >= 1.
#include "grid_dependency.cuh"
#include "softmax_common.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ROW_THREADS
#error "ROW_THREADS must be defined (threads per row: a power of two <= 32, or THREADS)"
#endif
#ifndef ELEMS
#error "ELEMS must be defined (elements a thread holds in registers, rows entry)"
#endif
#ifndef VEC
#error "VEC must be defined (elements per load: 16 / sizeof(element) when aligned, else 1)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM (1: no register cap))"
#endif
#ifndef UNROLL
#error "UNROLL must be defined (vectors in flight per thread, stream entry)"
#endif
#ifndef PACKED_COLS
#error "PACKED_COLS must be defined (the row length the packed entry is built for)"
#endif

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(ROW_THREADS == THREADS || (ROW_THREADS <= 32 && (ROW_THREADS & (ROW_THREADS - 1)) == 0),
              "ROW_THREADS: a power of two <= 32 (several rows per block) or THREADS (block per row)");
static_assert(ELEMS % VEC == 0, "ELEMS must be a multiple of VEC");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_04_vectorized_rows(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    constexpr int ROWS_PER_BLOCK = THREADS / ROW_THREADS;
    constexpr int ITEMS = ELEMS / VEC;
    const int lane = threadIdx.x % ROW_THREADS;
    const long long row = static_cast<long long>(blockIdx.x) * ROWS_PER_BLOCK + threadIdx.x / ROW_THREADS;
    // Threads past the last row stay to the end with no loads or stores:
    // their warp-mates still need them in the full-mask shuffles.
    const bool live = row < rows;
    const long long base = live ? row * cols : 0;

    float v[ELEMS];
    slice_load<ITEMS, VEC, ROW_THREADS>(x + base, 0, cols, live, lane, v);
    const MaxSum mine = slice_exp<ELEMS>(v);
    MaxSum r;
    if constexpr (ROW_THREADS <= 32) {
        r = shfl_merge<ROW_THREADS>(mine);
    } else {
        __shared__ MaxSum part[THREADS / 32];
        r = block_merge<THREADS>(mine, part);
    }
    slice_store<ITEMS, VEC, ROW_THREADS>(y + base, 0, cols, live, lane, v, slice_scale(mine.m, r));
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_04_vectorized_stream(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    __shared__ MaxSum part[THREADS / 32];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const elem_t* xr = x + row * cols;
    elem_t* yr = y + row * cols;
    const unsigned nvec = static_cast<unsigned>(cols) / VEC;  // cols % VEC == 0 when VEC > 1
    constexpr unsigned STEP = UNROLL * THREADS;

    // Pass 1: UNROLL independent loads in flight per thread before any use;
    // one rescale per chunk (by the chunk's max) instead of one per element.
    float m = NEG_INF, l = 0.0f;
    for (unsigned b = 0; b < nvec; b += STEP) {
        float v[UNROLL * VEC];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned i = b + u * THREADS + threadIdx.x;
            if (i < nvec) {
                load_vec<VEC>(xr + static_cast<size_t>(i) * VEC, v + u * VEC);
            } else {
#pragma unroll
                for (int k = 0; k < VEC; ++k) v[u * VEC + k] = NEG_INF;
            }
        }
        float mc = NEG_INF;
#pragma unroll
        for (int k = 0; k < UNROLL * VEC; ++k) mc = fmaxf(mc, v[k]);
        if (mc > m) {
            l *= expf(m - mc);  // m = -inf: l is 0 (or NaN) and stays so
            m = mc;
        }
#pragma unroll
        for (int k = 0; k < UNROLL * VEC; ++k) l += (v[k] == NEG_INF) ? 0.0f : expf(v[k] - m);
    }
    const MaxSum r = block_merge<THREADS>(MaxSum{m, l}, part);
    const float inv = 1.0f / r.l;

    // Pass 2: re-read, normalise, write.
    for (unsigned b = 0; b < nvec; b += STEP) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned i = b + u * THREADS + threadIdx.x;
            if (i < nvec) {
                float v[VEC];
                load_vec<VEC>(xr + static_cast<size_t>(i) * VEC, v);
#pragma unroll
                for (int k = 0; k < VEC; ++k) v[k] = expf(v[k] - r.m) * inv;
                store_vec<VEC>(yr + static_cast<size_t>(i) * VEC, v);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_04_vectorized_packed(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    static_assert(VEC % PACKED_COLS == 0, "PACKED_COLS must divide the vector");
    constexpr int ITEMS = ELEMS / VEC;
    (void)cols;  // == PACKED_COLS: the dispatcher checks it
    // rows * cols elements in whole vectors, then a tail of whole rows
    // (PACKED_COLS divides VEC) that a partial vector holds
    const long long total = static_cast<long long>(rows) * PACKED_COLS;
    const long long whole = total / VEC;
    const int tail = static_cast<int>(total - whole * VEC);
    const long long first = static_cast<long long>(blockIdx.x) * (THREADS * ITEMS) + threadIdx.x;

    // Elements past the tail read as 0: whole padding rows, computed and never stored.
    float v[ELEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const long long j = first + static_cast<long long>(i) * THREADS;
        if (j < whole) {
            load_vec<VEC>(x + j * VEC, v + i * VEC);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                v[i * VEC + k] = (j == whole && k < tail) ? to_f32(x[j * VEC + k]) : 0.0f;
        }
    }
#pragma unroll
    for (int r = 0; r < ELEMS / PACKED_COLS; ++r) {
        float* row = v + r * PACKED_COLS;
        const MaxSum s = slice_exp<PACKED_COLS>(row);
        const float scale = slice_scale(s.m, s);
#pragma unroll
        for (int k = 0; k < PACKED_COLS; ++k) row[k] *= scale;
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const long long j = first + static_cast<long long>(i) * THREADS;
        if (j < whole) {
            store_vec<VEC>(y + j * VEC, v + i * VEC);
        } else if (j == whole) {
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                if (k < tail) y[j * VEC + k] = from_f32(v[i * VEC + k]);
        }
    }
}
