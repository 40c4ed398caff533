// The landing buffer: a row's slice of window vectors brought whole by one
// bulk copy into shared memory, read into registers, written from them. How
// rungs 11 (cu/softmax/softmax_11_any_row_pipelined.cu) and 09's pipelined
// build (softmax_09_split_row.cu, STAGES > 0) keep the next rows arriving
// while one is reduced and written, for rows of any length, alignment and
// pitch (softmax_window.cuh: the row is the element range [lo, hi) of the
// 16-byte aligned window that covers it).
//
// A block owns window vectors [first, first + SLICE) of a row, and the bulk
// copy of its slice brings those vectors whole: the window starts on 16
// bytes and is whole vectors, which is what the copy engine needs. The first
// and last vector of a row also hold bytes of the neighbouring rows (or of
// the gap between the rows of a pitched view): they are copied with the
// rest, and the thread that reads them patches them in shared memory first
// (elements outside the row -> -inf), so that every vector of a row is then
// one LDS.128 with no test of its own -- a per-vector whole / partial test
// cost ~20 instructions a vector, 0.73 against rung 06's 0.88 of copy on the
// same rows (benchmarks/notes/softmax.md, sixteenth round). Only a vector
// reaching outside the array itself -- before x[0] when x does not start on
// 16 bytes, past the last row's end -- is not copied: its patch fills the
// row's elements from global memory (at most one vector at each end of the
// whole array).
//
// The including rung defines THREADS, ITEMS and PACKED, and SLICE (window
// vectors a block holds of a row: THREADS * ITEMS) before including this.
#pragma once
#include "mbarrier.cuh"
#include "softmax_window.cuh"
#include "tma.cuh"

#ifndef INT_MAX
#define INT_MAX 2147483647
#endif

// An mbarrier phase counts at most 2^20 - 1 bytes in flight.
static_assert(SLICE * 16 < (1 << 20), "slice too large for one mbarrier phase");

// The window vectors [begin, end) of a row that lie inside the array's span
// [x, x_end): the ones its bulk copies bring. Every vector of the window but
// possibly the first of the array (x not on 16 bytes) and the last.
struct Copied {
    int begin, end;
};

__device__ __forceinline__ Copied copied_vectors(const RowWindow& w, const elem_t* x,
                                                 const elem_t* x_end) {
    const int nv = window_vectors(w);
    return Copied{w.xw >= x ? 0 : 1, w.xw + nv * WVEC <= x_end ? nv : nv - 1};
}

__device__ __forceinline__ bool inside(const RowWindow& w, int e) { return e >= w.lo && e < w.hi; }

#if PACKED
typedef uint4 held_t;   // a vector as loaded, two 16-bit values a register
#else
typedef float held_t;   // WVEC fp32 values a vector
#endif
constexpr int HELD = PACKED ? ITEMS : ITEMS * WVEC;
constexpr int PER_VECTOR = PACKED ? 1 : WVEC;   // held_t slots a vector

// A row's window vectors by kind: [whole_begin, whole_end) lie inside the row
// (the common case: one LDS.128 out of the landing buffer, one STG.128 where y
// has x's phase); vector 0 when the row starts past it and vector whole_end
// when the row ends inside it are partial (the peel and the tail); from nv on
// the slice is past the row.
struct Span {
    int whole_begin, whole_end, nv;
};

__device__ __forceinline__ Span row_span(const RowWindow& w) {
    const unsigned hi = static_cast<unsigned>(w.hi);   // >= 1: shifts, not signed divisions
    return Span{w.lo > 0 ? 1 : 0, static_cast<int>(hi / WVEC), static_cast<int>((hi + WVEC - 1) / WVEC)};
}

// -inf as stored in an element.
#if DTYPE == 0
#define NEG_INF_ELEM NEG_INF
#else
#define NEG_INF_ELEM NEG_INF_BITS
#endif

// Refill landing buffer `buf` with this block's slice of a row (one thread):
// the copied vectors of the window that fall in [first, first + SLICE), at
// their slot, completing on the buffer's mbarrier `bar`.
__device__ __forceinline__ void slice_fill(const RowWindow& w, const Copied& c, uint4* buf,
                                           int first, unsigned bar) {
    const int v0 = max(c.begin, first), v1 = min(c.end, first + SLICE);
    const unsigned bytes = v1 > v0 ? static_cast<unsigned>(v1 - v0) * 16u : 0u;
    fence_proxy_async_smem();   // after the patches of the buffer's last row (generic writes)
    mbar_arrive_expect_tx(bar, bytes);
    if (bytes) bulk_load(smem_addr(buf + (v0 - first)), w.xw + v0 * WVEC, bytes, bar);
}

// Make window vector v of a row whole in this block's landing buffer: its
// elements outside the row become -inf and, when the copy did not bring it
// (it reaches outside the array), its elements inside the row are read from
// global memory. Done by the thread that reads the vector out of the buffer,
// so that thread's own loads see it with no barrier; the buffer's next bulk
// copy is ordered after these generic writes by the block barrier and the
// proxy fence in front of it. Called for the row's peel and tail only.
__device__ __forceinline__ void patch_vector(const RowWindow& w, const Copied& c, uint4* buf,
                                             int first, int lane, int v) {
    const int slot = v - first;
    if (slot < 0 || slot >= SLICE || slot % THREADS != lane) return;
    elem_t* e = reinterpret_cast<elem_t*>(buf + slot);
    const bool copied = v >= c.begin && v < c.end;
#pragma unroll
    for (int k = 0; k < WVEC; ++k) {
        const int i = v * WVEC + k;
        if (!inside(w, i)) {
            e[k] = NEG_INF_ELEM;
        } else if (!copied) {
            e[k] = w.xw[i];
        }
    }
}

// This block's slice of a row into registers: item `it` of thread `lane` is
// window vector first + it * THREADS + lane, slot it * THREADS + lane of the
// buffer (conflict-free LDS.128: consecutive lanes, consecutive 16 bytes;
// one base address, the items at immediate offsets); -inf past the row. The
// peel and the tail are made whole first (patch_vector), so every vector of
// the row is one LDS.128.
__device__ __forceinline__ void slice_read(const RowWindow& w, const Span& sp, const Copied& c,
                                           uint4* buf, int first, int lane, held_t* v) {
    if (sp.whole_begin > 0) patch_vector(w, c, buf, first, lane, 0);
    if (sp.whole_end < sp.nv && sp.whole_end >= sp.whole_begin)
        patch_vector(w, c, buf, first, lane, sp.whole_end);
    const uint4* src = buf + lane;
    const int live = sp.nv - (first + lane);   // item it is in the row iff it * THREADS < live
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        held_t* o = v + it * PER_VECTOR;
        if (it * THREADS < live) {
            const uint4 r = src[it * THREADS];
#if PACKED
            o[0] = r;
#else
            unpack_word(r.x, o);
            unpack_word(r.y, o + ELEMS_PER_WORD);
            unpack_word(r.z, o + 2 * ELEMS_PER_WORD);
            unpack_word(r.w, o + 3 * ELEMS_PER_WORD);
#endif
        } else {
#if PACKED
            constexpr unsigned kNegInf2 = NEG_INF_BITS | (static_cast<unsigned>(NEG_INF_BITS) << 16);
            o[0] = make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
#else
#pragma unroll
            for (int k = 0; k < WVEC; ++k) o[k] = NEG_INF;
#endif
        }
    }
}

// The slice's outputs: softmax = exp(x - m_thread) * scale (the fp32 values
// already hold exp(x - m_thread); the packed ones are exponentiated here, as
// rung 08 does), whole vectors as one STG.128 at an immediate offset from one
// base address when y has x's phase, the rest element by element inside the row.
__device__ __forceinline__ void slice_write(const RowWindow& w, const Span& sp, int first, int lane,
                                            held_t* v, float m_thread, float scale) {
#if PACKED
    packed_fence<ITEMS>(v);
    const float ref = exp_ref(m_thread);
#endif
    const int b = first + lane;
    elem_t* dst = w.yw + static_cast<long long>(b) * WVEC;
    asm("" : "+l"(dst));   // one base address, the items at immediate offsets from it
    // Item it (window vector b + it * THREADS) is in the row iff it * THREADS <
    // live, one 16-byte store iff fast_lo <= it * THREADS < fast_hi: bounds
    // against the compile-time offsets, not per-item arithmetic.
    const int live = sp.nv - b;
    const int fast_lo = w.same_phase ? sp.whole_begin - b : INT_MAX;
    const int fast_hi = sp.whole_end - b;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int vi = b + it * THREADS;
        if (it * THREADS >= live) continue;
        float o[WVEC];
#pragma unroll
        for (int k = 0; k < WVEC; ++k) {
#if PACKED
            o[k] = exp_shifted(held_f32(v[it], k), ref) * scale;
#else
            o[k] = v[it * WVEC + k] * scale;
#endif
        }
        if (it * THREADS >= fast_lo && it * THREADS < fast_hi) {
            store16(dst + it * THREADS * WVEC, o);
        } else {
            store_vector(w, vi * WVEC, o);
        }
    }
}
