// Shared pieces of the any-row-length softmax kernels (cu/softmax/07..09).
//
// Self-contained on purpose: the older ladder header (cu/softmax_common.cuh)
// gives DTYPE a default, and these kernels must fail to compile when a define
// is missing. Element type by -DDTYPE: 0 = fp32, 1 = bf16, 2 = fp16 (the same
// codes as the ladder); 16-bit values travel as raw bits and are converted
// with one cvt each way (NVRTC has no cuda_fp16.h). All arithmetic is fp32.
//
// Semantics (as the ladder, and as torch.softmax):
//   y = exp(x - max) / sum(exp(x - max)) per row; -inf entries give 0; a row
//   of only -inf gives NaN (0/0); a NaN poisons its row; large values are safe
//   (only x - max <= 0 is exponentiated); a one-element row gives 1.
//
// THE WINDOW. Every kernel here reads a row as whole, 16-byte aligned vectors,
// whatever the row's alignment: the row [xr, xr + cols) sits inside the
// aligned window that starts at xw = xr rounded down to 16 bytes. In window
// coordinates the row is the element range [lo, hi) with lo = (xr - xw) in
// elements (0 .. VEC-1) and hi = lo + cols. Window vector i covers elements
// [i*VEC, i*VEC + VEC):
//   * fully inside [lo, hi)  -> one LDG.128 / STG.128;
//   * straddling lo or hi    -> element-wise loads/stores of the elements
//                               inside (the peel and the tail: at most the
//                               first and the last vector of a row);
//   * outside                -> -inf, nothing stored.
// So an odd row length (50257, 12345) or an odd offset costs two partial
// vectors per row instead of the whole row falling back to scalar accesses,
// and no byte outside the row is ever read or written.
// The output row uses the same window when (yr - xr) is a multiple of 16
// bytes ("same phase": always so for two fresh contiguous buffers); otherwise
// the stores are element-wise (correct, slower; the planner says so).
#pragma once

#ifndef DTYPE
#error "DTYPE must be defined: 0 (fp32), 1 (bf16) or 2 (fp16)"
#endif

#if DTYPE == 0
typedef float elem_t;
#elif DTYPE == 1 || DTYPE == 2
typedef unsigned short elem_t;
#else
#error "DTYPE must be 0 (fp32), 1 (bf16) or 2 (fp16)"
#endif

// Elements per 16-byte vector: 4 fp32 or 8 bf16/fp16.
constexpr int VEC = 16 / static_cast<int>(sizeof(elem_t));
constexpr int ELEMS_PER_WORD = 4 / static_cast<int>(sizeof(elem_t));

#define NEG_INF __int_as_float(0xff800000u)

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(unsigned short v) {
#if DTYPE == 1
    return __uint_as_float(static_cast<unsigned>(v) << 16);   // bf16 widening is exact
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
#endif
}

__device__ __forceinline__ elem_t from_f32(float f) {
#if DTYPE == 0
    return f;
#elif DTYPE == 1
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
}

__device__ __forceinline__ void unpack_word(unsigned w, float* out) {
#if DTYPE == 0
    out[0] = __uint_as_float(w);
#else
    out[0] = to_f32(static_cast<unsigned short>(w & 0xffffu));
    out[1] = to_f32(static_cast<unsigned short>(w >> 16));
#endif
}

__device__ __forceinline__ unsigned pack_word(const float* in) {
#if DTYPE == 0
    return __float_as_uint(in[0]);
#else
    return static_cast<unsigned>(from_f32(in[0])) | (static_cast<unsigned>(from_f32(in[1])) << 16);
#endif
}

// One 16-byte vector. The read-only path is right: x and y never overlap.
__device__ __forceinline__ void load16(const elem_t* p, float* out) {
    const uint4 r = __ldg(reinterpret_cast<const uint4*>(p));
    unpack_word(r.x, out);
    unpack_word(r.y, out + ELEMS_PER_WORD);
    unpack_word(r.z, out + 2 * ELEMS_PER_WORD);
    unpack_word(r.w, out + 3 * ELEMS_PER_WORD);
}

// An explicit st.global.v4: written as a uint4 assignment, the compiler is free
// to (and, next to the element-wise tail path storing the same values, does)
// split it into four 32-bit stores shared with that path -- STG.E x 4 instead
// of one STG.E.128 for every vector of the row.
__device__ __forceinline__ void store16(elem_t* p, const float* in) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(pack_word(in)), "r"(pack_word(in + ELEMS_PER_WORD)),
                    "r"(pack_word(in + 2 * ELEMS_PER_WORD)), "r"(pack_word(in + 3 * ELEMS_PER_WORD))
                 : "memory");
}

// ---------------------------------------------------------------------------
// A row in window coordinates.
// ---------------------------------------------------------------------------
struct RowWindow {
    const elem_t* xw;   // x row start rounded down to 16 bytes
    elem_t* yw;         // y row start minus lo (aligned when same_phase)
    int lo, hi;         // the row is window elements [lo, hi)
    bool same_phase;    // y row has x row's alignment: vector stores too
};

__device__ __forceinline__ RowWindow row_window(const elem_t* __restrict__ x, elem_t* __restrict__ y,
                                                long long row, int cols, long long ldx, long long ldy) {
    const elem_t* xr = x + row * ldx;
    elem_t* yr = y + row * ldy;
    const unsigned long long ax = reinterpret_cast<unsigned long long>(xr);
    const unsigned long long ay = reinterpret_cast<unsigned long long>(yr);
    RowWindow w;
    w.lo = static_cast<int>((ax & 15ull) / sizeof(elem_t));
    w.hi = w.lo + cols;
    w.xw = xr - w.lo;
    w.yw = yr - w.lo;
    w.same_phase = ((ay - ax) & 15ull) == 0;
    return w;
}

// Window vectors a row spans: what the planner sizes a slice for.
__device__ __forceinline__ int window_vectors(const RowWindow& w) { return (w.hi + VEC - 1) / VEC; }

// Load kItems window vectors: vector first + it * kStride + lane for it < kItems
// (kStride threads share the slice, so each `it` is one coalesced sweep).
template <int kItems, int kStride>
__device__ __forceinline__ void window_load(const RowWindow& w, int first, int lane, bool live, float* v) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * VEC;
        float* o = v + it * VEC;
        if (live && e0 >= w.lo && e0 + VEC <= w.hi) {
            load16(w.xw + e0, o);
        } else if (live && e0 < w.hi && e0 + VEC > w.lo) {
            // peel / tail: the first or last vector of the row, element by element
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const int e = e0 + k;
                o[k] = (e >= w.lo && e < w.hi) ? to_f32(w.xw[e]) : NEG_INF;
            }
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = NEG_INF;
        }
    }
}

// Scale the held values and store the ones inside the row.
template <int kItems, int kStride>
__device__ __forceinline__ void window_store(const RowWindow& w, int first, int lane, bool live, float* v,
                                             float scale) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * VEC;
        float* o = v + it * VEC;
        if (!live || e0 >= w.hi || e0 + VEC <= w.lo) continue;
#pragma unroll
        for (int k = 0; k < VEC; ++k) o[k] *= scale;
        if (w.same_phase && e0 >= w.lo && e0 + VEC <= w.hi) {
            store16(w.yw + e0, o);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const int e = e0 + k;
                if (e >= w.lo && e < w.hi) w.yw[e] = from_f32(o[k]);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// (max, sum) pairs
// ---------------------------------------------------------------------------
struct MaxSum {
    float m;
    float l;
};

// Commutative bit for bit (the two products are rounded separately), so a
// butterfly leaves the same pair in every lane and every block of a row
// computes the same (M, L). Both sides empty (-inf, 0): m = -inf, l = 0.
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    const float sa = (a.m == m) ? 1.0f : expf(a.m - m);
    const float sb = (b.m == m) ? 1.0f : expf(b.m - m);
    return MaxSum{m, __fmul_rn(a.l, sa) + __fmul_rn(b.l, sb)};
}

template <int WIDTH>
__device__ __forceinline__ MaxSum shfl_merge(MaxSum v) {
    static_assert(WIDTH >= 1 && WIDTH <= 32 && (WIDTH & (WIDTH - 1)) == 0, "WIDTH: power of two <= 32");
#pragma unroll
    for (int off = WIDTH / 2; off > 0; off >>= 1) {
        MaxSum o;
        o.m = __shfl_xor_sync(0xffffffffu, v.m, off);
        o.l = __shfl_xor_sync(0xffffffffu, v.l, off);
        v = merge(v, o);
    }
    return v;
}

// Exponentiate the held values in place relative to the thread's own max and
// return (m_thread, sum). Branch-free so the N exps overlap: only a thread
// holding nothing but -inf needs a finite reference point (exp(-inf) = 0).
template <int N>
__device__ __forceinline__ MaxSum slice_exp(float* v) {
    float m = NEG_INF;
#pragma unroll
    for (int k = 0; k < N; ++k) m = fmaxf(m, v[k]);
    const float ref = (m == NEG_INF) ? 0.0f : m;
    float l = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
        v[k] = expf(v[k] - ref);
        l += v[k];
    }
    return MaxSum{m, l};
}

// exp(x - m_thread) * exp(m_thread - M) / L. All -inf row: M = -inf, L = 0,
// scale = inf and 0 * inf = NaN, as the semantics require.
__device__ __forceinline__ float slice_scale(float m_thread, MaxSum row) {
    return ((m_thread == row.m) ? 1.0f : expf(m_thread - row.m)) / row.l;
}

// Merge N <= 32 pairs held in shared memory identically in every thread that
// calls it (lane j takes pair j; a butterfly combines them in log2 steps).
template <int N>
__device__ __forceinline__ MaxSum fold_pairs(const MaxSum* p, int lane) {
    static_assert(N >= 1 && N <= 32, "N: 1..32");
    constexpr int W = N <= 1 ? 1 : N <= 2 ? 2 : N <= 4 ? 4 : N <= 8 ? 8 : N <= 16 ? 16 : 32;
    const int j = lane & (W - 1);
    const MaxSum v = j < N ? p[j] : MaxSum{NEG_INF, 0.0f};
    return shfl_merge<W>(v);
}

// Whole-block merge: butterfly per warp, one pair per warp in shared memory,
// one barrier, then the same butterfly over the warps' pairs in every thread.
template <int kThreads>
__device__ __forceinline__ MaxSum block_merge(MaxSum v, MaxSum* part) {
    v = shfl_merge<32>(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    return fold_pairs<kThreads / 32>(part, threadIdx.x & 31);
}
