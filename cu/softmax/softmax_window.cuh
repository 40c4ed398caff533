// The 16-byte window: how rungs 07..09 and 11 (cu/softmax/softmax_07..09_*.cu,
// softmax_11_*.cu) read and write rows of any length at any alignment with
// 128-bit accesses.
// Element types, conversions and the (max, sum) algebra are those of the
// ladder (softmax_common.cuh); all arithmetic is fp32.
//
// THE WINDOW. A row [xr, xr + cols) sits inside the aligned window that starts
// at xw = xr rounded down to 16 bytes. In window coordinates the row is the
// element range [lo, hi) with lo = (xr - xw) in elements (0 .. WVEC - 1) and
// hi = lo + cols. Window vector i covers elements [i * WVEC, (i + 1) * WVEC):
//   * fully inside [lo, hi)  -> one LDG.128 / STG.128;
//   * straddling lo or hi    -> element-wise loads / stores of the elements
//                               inside (the peel and the tail: at most the
//                               first and the last vector of a row);
//   * outside                -> -inf, nothing stored.
// So an odd row length (50257, 12345), an odd row pitch or an offset view
// costs two partial vectors per row instead of the whole array falling back to
// scalar accesses (rungs 04..06 must: their vectors start at column 0), and
// no byte outside the row is ever read or written.
// The output row uses the same window when (yr - xr) is a multiple of 16 bytes
// ("same phase": always so for two fresh contiguous buffers); otherwise its
// stores are element-wise (correct, slower; the planner knows).
//
// Rows are addressed by pitch: row r of x starts at x + r * ldx (elements),
// 64-bit offsets throughout, so views with a pitch above cols (a column slice
// of a wider array) need no copy.
#pragma once
#include "softmax_common.cuh"

// Elements per 16-byte vector: 4 fp32 or 8 bf16/fp16.
constexpr int WVEC = 16 / static_cast<int>(sizeof(elem_t));

// A 16-byte vector of x: by the read-only path, or (kEvictFirst) with the .cs
// operator, evict first in L2 (LDG.E.EF), for x read once by a pass that
// holds every row at once (rung 09, softmax_09_split_row.cu says why).
template <bool kEvictFirst = false>
__device__ __forceinline__ uint4 window_ld16(const elem_t* p) {
    if constexpr (kEvictFirst) return __ldcs(reinterpret_cast<const uint4*>(p));
    else return __ldg(reinterpret_cast<const uint4*>(p));
}

// One 16-byte vector. The read-only path is right: x and y never overlap.
template <bool kEvictFirst = false>
__device__ __forceinline__ void load16(const elem_t* p, float* out) {
    const uint4 r = window_ld16<kEvictFirst>(p);
    unpack_word(r.x, out);
    unpack_word(r.y, out + ELEMS_PER_WORD);
    unpack_word(r.z, out + 2 * ELEMS_PER_WORD);
    unpack_word(r.w, out + 3 * ELEMS_PER_WORD);
}

// An explicit st.global.v4: written as a uint4 assignment, the compiler is free
// to (and, next to the element-wise tail path storing the same values, does)
// split it into four 32-bit stores shared with that path -- STG.E x 4 instead
// of one STG.E.128 for every vector of the row.
__device__ __forceinline__ void store_words16(void* p, const unsigned* v) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
}

// A window vector as stored: its elements packed into four 32-bit words.
__device__ __forceinline__ void pack_vector(const float* o, unsigned* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = pack_word(o + j * ELEMS_PER_WORD);
}

// The outputs in, packed, by one st.global.v4 (packed in the asm's operands:
// through pack_vector the 16-bit rung 11 builds schedule differently).
__device__ __forceinline__ void store16(elem_t* p, const float* in) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(pack_word(in)), "r"(pack_word(in + ELEMS_PER_WORD)),
                    "r"(pack_word(in + 2 * ELEMS_PER_WORD)), "r"(pack_word(in + 3 * ELEMS_PER_WORD))
                 : "memory");
}

// The 16-bit builds take the fast exp (exp_diff<true>, softmax_common.cuh)
// for the elements, the merges and the scale. A 16-bit output rounds to 2^-9
// (bf16) / 2^-11 (fp16) anyway, and expf's nine instructions an element were
// most of what those kernels issue (~40 instructions an element against
// fp32's ~20 for the same bytes: issue-bound, not memory-bound). The element
// exps of the packed paths take an FFMA and an FADD, one form for any
// reference (ExpByFma, softmax_common.cuh); the unpacked values' exps, taken
// in place, a thread's choice of the FFMA alone or subtract-first
// (with_exp_in_place).
// ex2.approx.ftz flushes results below 2^-126 to 0: an output moves by less
// than the tests' absolute floor (FLT_MIN; fp16 2^-24). fp32 keeps expf (its
// outputs are held to a few ulp of fp32), so its machine code is unchanged.
// A rung may keep expf for every type by defining WINDOW_FAST_EXP 0 first.
#ifndef WINDOW_FAST_EXP
#define WINDOW_FAST_EXP (DTYPE != 0)
#endif
constexpr bool FAST_EXP = WINDOW_FAST_EXP;

__device__ __forceinline__ float exp_shifted(float x, float ref) { return exp_diff<FAST_EXP>(x, ref); }

// slice_exp (softmax_common.cuh) with the window's exp.
template <int N>
__device__ __forceinline__ MaxSum window_exp(float* v) { return slice_exp<N, FAST_EXP>(v); }

// The sum's exps fast, the stored ones accurate (fp32 rows whose exps sit on
// the critical path: rung 09's grid-wide wait). Between a chunk's loads and
// its row's wait, window_exp's expf (nine instructions an element) ran while
// DRAM idled; here that phase takes only the max and a sum of fast exps (two
// instructions an element past the max), and each stored element is
// expf(x - M) / L against the row's own max, computed as the stores drain.
// The fast sum moves L by some ulp (each term's error grows with x - max but
// the term shrinks faster: sum |err| <= L * (4 + the terms' weighted mean gap)
// * 2^-24; measured on the H200, the outputs' largest relative error against
// float64 went from 1.2-2.1e-6 to 2.0-2.2e-6 on six split shapes); each output
// keeps expf's rounding, one step instead of two (expf(x - m_thread) *
// expf(m_thread - M) / L before). The values stay as loaded.
template <int N>
__device__ __forceinline__ MaxSum window_sum_fast(float* v) { return slice_exp<N, true, true>(v); }

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
__device__ __forceinline__ int window_vectors(const RowWindow& w) { return (w.hi + WVEC - 1) / WVEC; }

// Load kItems window vectors: vector first + it * kStride + lane for it < kItems
// (kStride threads share the slice, so each `it` is one coalesced sweep).
// (kEvictFirst: window_ld16's)
template <int kItems, int kStride, bool kEvictFirst = false>
__device__ __forceinline__ void window_load(const RowWindow& w, int first, int lane, bool live, float* v) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * WVEC;
        float* o = v + it * WVEC;
        if (live && e0 >= w.lo && e0 + WVEC <= w.hi) {
            load16<kEvictFirst>(w.xw + e0, o);
        } else if (live && e0 < w.hi && e0 + WVEC > w.lo) {
            // peel / tail: the first or last vector of the row, element by element
#pragma unroll
            for (int k = 0; k < WVEC; ++k) {
                const int e = e0 + k;
                o[k] = (e >= w.lo && e < w.hi) ? to_f32(w.xw[e]) : NEG_INF;
            }
        } else {
#pragma unroll
            for (int k = 0; k < WVEC; ++k) o[k] = NEG_INF;
        }
    }
}

#if DTYPE == 0
// An fp32 vector's 16 bytes at an address 16-byte vectors cannot take (y at
// another phase than x: a column slice into a fresh array), in the widest
// naturally aligned pieces: two of 8 bytes 8 bytes past 16, else 4 + 8 + 4.
// Shifting fp32 vectors across lanes as the 16-bit ones are (store_vector_warp)
// measured slower: 0.62 of copy against these pieces' 0.84 (fp32 1024 x 50257
// slice->contiguous, H200, forty-second round).
__device__ __forceinline__ void store16_shifted(elem_t* p, const float* in) {
    const unsigned w0 = pack_word(in), w1 = pack_word(in + ELEMS_PER_WORD),
                   w2 = pack_word(in + 2 * ELEMS_PER_WORD), w3 = pack_word(in + 3 * ELEMS_PER_WORD);
    char* b = reinterpret_cast<char*>(p);
    const unsigned phase = static_cast<unsigned>(reinterpret_cast<unsigned long long>(b)) & 7u;
    if (phase == 0) {
        *reinterpret_cast<uint2*>(b) = make_uint2(w0, w1);
        *reinterpret_cast<uint2*>(b + 8) = make_uint2(w2, w3);
    } else if (phase == 4) {
        *reinterpret_cast<unsigned*>(b) = w0;
        *reinterpret_cast<uint2*>(b + 4) = make_uint2(w1, w2);
        *reinterpret_cast<unsigned*>(b + 12) = w3;
    }
}

// Window vector e0 / WVEC of an fp32 output: inside the row, one STG.128 when y
// has x's phase, else the pieces; the row's edge vectors element by element
// (the elements inside).
__device__ __forceinline__ void store_vector(const RowWindow& w, int e0, const float* o) {
    if (e0 >= w.lo && e0 + WVEC <= w.hi) {
        if (w.same_phase) store16(w.yw + e0, o);
        else store16_shifted(w.yw + e0, o);
    } else {
#pragma unroll
        for (int k = 0; k < WVEC; ++k) {
            const int e = e0 + k;
            if (e >= w.lo && e < w.hi) w.yw[e] = from_f32(o[k]);
        }
    }
}
#else
// Element k of packed vector v, stored at p.
__device__ __forceinline__ void store_element(elem_t* p, const unsigned* v, int k) {
    *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(v[k >> 1] >> (16 * (k & 1)));
}

// Window vector e0 / WVEC of a 16-bit output (packed), a lane alone: one
// STG.128 when it lies inside the row and y has x's phase, else element by
// element (the elements inside). Rows off x's phase take store_vector_warp.
__device__ __forceinline__ void store_words(const RowWindow& w, int e0, const unsigned* v) {
    if (w.same_phase && e0 >= w.lo && e0 + WVEC <= w.hi) {
        store_words16(w.yw + e0, v);
    } else {
#pragma unroll
        for (int k = 0; k < WVEC; ++k) {
            const int e = e0 + k;
            if (e >= w.lo && e < w.hi) store_element(w.yw + e, v, k);
        }
    }
}

// store_words of the outputs o.
__device__ __forceinline__ void store_vector(const RowWindow& w, int e0, const float* o) {
    unsigned v[4];
    pack_vector(o, v);
    store_words(w, e0, v);
}

// Window vector e0 / WVEC of a 16-bit output, stored by the lanes of a warp
// together: every lane of the warp calls it in the same step (in: the vector
// has elements inside this lane's row; kGroup: lanes a row group holds within
// a warp, the groups warp-aligned). Where y has x's phase, store_words. Where
// it does not (a column slice into a fresh array: y's vectors d bytes past 16,
// d uniform along a row), each lane stores the 16-byte-aligned block that
// begins inside its vector -- its last d bytes and the next lane's first 16 - d,
// handed over by four shuffles -- so a vector costs one STG.128, as in the
// aligned case; a vector whose neighbour is not whole in the row (the row's
// edges, a group's or warp's last lane) stores its uncovered elements one by
// one. The bytes are store_vector's. (The fortieth round's element-wise stores
// ran bf16 8192 x 50257 slice->contiguous at 0.22 of copy on the H100; pieces
// of 2 + 4 + 8 + 2 bytes a lane at 0.39 on the H200, forty-first round; these
// blocks 0.57 on the same machine as the pieces' 0.39, forty-second round.)
// warp_shifted: some lane of the warp has a row off x's phase
// (shifted_rows_in_warp, once a slice), the same in every lane.
template <int kGroup>
__device__ __forceinline__ void store_vector_warp(const RowWindow& w, int e0, const unsigned* own, bool in,
                                                  bool warp_shifted) {
    constexpr unsigned FULL = 0xffffffffu;
    if (!warp_shifted) {                              // the warp's rows all at x's phase
        if (in) store_words(w, e0, own);
        return;
    }
    const bool whole = in && e0 >= w.lo && e0 + WVEC <= w.hi;
    const bool shifted = in && !w.same_phase;
    const unsigned lane = threadIdx.x & 31u;
    const bool next_whole = __shfl_down_sync(FULL, whole, 1) && (lane + 1) % kGroup != 0;
    const bool prev_whole = __shfl_up_sync(FULL, whole, 1) && lane % kGroup != 0;
    char* a = reinterpret_cast<char*>(w.yw + e0);
    const int d = shifted ? static_cast<int>(reinterpret_cast<unsigned long long>(a) & 15ull) : 0;
    const bool block = shifted && whole && next_whole;          // this lane's block
    const bool head_done = shifted && whole && prev_whole;      // the previous lane's block
    if (in && whole && !shifted) store_words16(a, own);   // a row at x's phase beside shifted ones
    // The elements no block covers, as a mask (bit k: element k): [0, split)
    // the head, the previous lane's block's; the rest the tail, this lane's.
    // Predicated stores on the mask's bits -- a branch an element, on a split
    // the compiler cannot see, put a convergence barrier round each store and
    // every lane of a warp paid for its edge lanes' (bf16 slice->contiguous
    // 0.44 of copy, forty-second round).
    {
        constexpr unsigned ALL = (1u << WVEC) - 1u;
        const int split = (16 - d) / static_cast<int>(sizeof(elem_t));
        const unsigned head = (1u << split) - 1u;
        const unsigned covered = (head_done ? head : 0u) | (block ? ALL & ~head : 0u);
        const int from = max(w.lo - e0, 0), to = min(w.hi - e0, WVEC);   // inside the row
        const unsigned inside = to > from ? ((ALL >> (WVEC - (to - from))) << from) : 0u;
        const unsigned todo = (in && !(whole && !shifted)) ? inside & ~covered : 0u;
#pragma unroll
        for (int k = 0; k < WVEC; ++k)
            if (todo & (1u << k)) store_element(w.yw + e0 + k, own, k);
    }
    // The block at a + 16 - d: own's bytes rotated to start at byte 16 - d (its
    // last d bytes first), the next lane's rotated the same way behind them:
    // bytes [0, d) of a word from this lane, the rest from the next. Rotated
    // in place, so four words are held, not eight.
    const int s = (16 - d) & 15;
    // words rotated by s >> 2 (by two, then by one: selects on four words
    // with one held aside, not a pick of any of four for each)
    unsigned rot[4] = {own[0], own[1], own[2], own[3]};
    if (s & 8) {
        const unsigned t0 = rot[0], t1 = rot[1];
        rot[0] = rot[2]; rot[1] = rot[3]; rot[2] = t0; rot[3] = t1;
    }
    if (s & 4) {
        const unsigned t0 = rot[0];
        rot[0] = rot[1]; rot[1] = rot[2]; rot[2] = rot[3]; rot[3] = t0;
    }
    {                                                            // then by s & 3 bytes
        const unsigned sh = 8u * static_cast<unsigned>(s & 3), t0 = rot[0];
        rot[0] = __funnelshift_r(rot[0], rot[1], sh);
        rot[1] = __funnelshift_r(rot[1], rot[2], sh);
        rot[2] = __funnelshift_r(rot[2], rot[3], sh);
        rot[3] = __funnelshift_r(rot[3], t0, sh);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const unsigned from_next = __shfl_down_sync(FULL, rot[j], 1);
        const int kept = min(max(d - 4 * j, 0), 4);                 // bytes of word j from this lane
        const unsigned mask = kept == 4 ? 0xffffffffu : (1u << (8 * kept)) - 1u;
        rot[j] = (rot[j] & mask) | (from_next & ~mask);
    }
    if (block) store_words16(a + 16 - d, rot);
}

// A build may keep each lane's own stores for rows off x's phase (element by
// element: correct, slower) by defining WINDOW_SHIFTED_BLOCKS 0 first -- rung
// 09's phase-clock probe, whose stamps and the blocks' words do not fit its 64
// registers together.
#ifndef WINDOW_SHIFTED_BLOCKS
#define WINDOW_SHIFTED_BLOCKS 1
#endif

// store_vector_warp's warp_shifted, from every lane of the warp.
__device__ __forceinline__ bool shifted_rows_in_warp(const RowWindow& w, bool live) {
    return WINDOW_SHIFTED_BLOCKS && __any_sync(0xffffffffu, live && !w.same_phase);
}

// Lanes a row group of kStride threads holds within one warp.
template <int kStride>
constexpr int warp_group() { return kStride < 32 ? kStride : 32; }
#endif  // DTYPE

// Scale the held values and store the ones inside the row (16-bit: every lane
// of the warp calls the store, for the blocks shifted across lanes).
template <int kItems, int kStride>
__device__ __forceinline__ void window_store(const RowWindow& w, int first, int lane, bool live, float* v,
                                             float scale) {
#if DTYPE == 0
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * WVEC;
        float* o = v + it * WVEC;
        if (!live || e0 >= w.hi || e0 + WVEC <= w.lo) continue;
#pragma unroll
        for (int k = 0; k < WVEC; ++k) o[k] *= scale;
        store_vector(w, e0, o);
    }
#else
    const bool warp_shifted = shifted_rows_in_warp(w, live);
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * WVEC;
        float* o = v + it * WVEC;
        const bool in = live && e0 < w.hi && e0 + WVEC > w.lo;
#pragma unroll
        for (int k = 0; k < WVEC; ++k) o[k] *= scale;
        unsigned words[4];
        pack_vector(o, words);
        store_vector_warp<warp_group<kStride>()>(w, e0, words, in, warp_shifted);
    }
#endif
}

// The window vectors of a slice that lie in the row, each stored from
// value(it, k), the output of element k of item it (window_store's walk, for
// outputs computed at the store).
template <int kItems, int kStride, class Value>
__device__ __forceinline__ void window_store_each(const RowWindow& w, int first, int lane, bool live,
                                                  Value value) {
#if DTYPE == 0
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * WVEC;
        if (!live || e0 >= w.hi || e0 + WVEC <= w.lo) continue;
        float o[WVEC];
#pragma unroll
        for (int k = 0; k < WVEC; ++k) o[k] = value(it, k);
        store_vector(w, e0, o);
    }
#else
    const bool warp_shifted = shifted_rows_in_warp(w, live);
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * WVEC;
        const bool in = live && e0 < w.hi && e0 + WVEC > w.lo;
        float o[WVEC];
#pragma unroll
        for (int k = 0; k < WVEC; ++k) o[k] = value(it, k);
        unsigned words[4];
        pack_vector(o, words);
        store_vector_warp<warp_group<kStride>()>(w, e0, words, in, warp_shifted);
    }
#endif
}

// The output of a value held as loaded (window_sum_fast): expf(x - M) times
// inv_sum = 1 / L. An all -inf row has M = -inf: -inf - -inf = NaN, as the
// semantics require; a row holding +inf has a NaN L, so NaN everywhere.
__device__ __forceinline__ float exp_out(float x, float row_max, float inv_sum) {
    return exp_diff<false>(x, row_max) * inv_sum;
}

// window_store for values held as loaded: exp_out of each.
template <int kItems, int kStride>
__device__ __forceinline__ void window_store_exp(const RowWindow& w, int first, int lane, bool live,
                                                 const float* v, float row_max, float inv_sum) {
    window_store_each<kItems, kStride>(w, first, lane, live, [&](int it, int k) {
        return exp_out(v[it * WVEC + k], row_max, inv_sum);
    });
}

// ---------------------------------------------------------------------------
// Packed rows (16-bit builds, PACKED=1): the held values stay as loaded, two
// elements a 32-bit register, so a thread holds 64 elements in the 32
// registers that hold 32 fp32 values. A 16-bit row then needs half the
// threads (half the blocks of a cluster) of the unpacked form: the rows in
// flight double for the same bytes a thread keeps outstanding. The cost is
// arithmetic, which a bandwidth-bound row has to spare: each element is
// widened twice and its exp computed twice (for the sum, then for the store).
// Bit for bit the unpacked result: the store computes the same
// exp_shifted(x, ref) the unpacked exp pass keeps, times the same scale.
// ---------------------------------------------------------------------------
#if DTYPE != 0
// -inf of the element type, as stored: bf16 0xff80, fp16 0xfc00.
constexpr unsigned short NEG_INF_BITS = DTYPE == 1 ? 0xff80u : 0xfc00u;
// ... in both halves of a word.
constexpr unsigned NEG_INF_PAIR = NEG_INF_BITS | (static_cast<unsigned>(NEG_INF_BITS) << 16);

// Element k (0..7) of a held vector, widened straight from its 32-bit word
// (a 16-bit temporary per element would double the registers held).
__device__ __forceinline__ float held_f32(const uint4& r, int k) {
    const unsigned w = k < 2 ? r.x : k < 4 ? r.y : k < 6 ? r.z : r.w;
#if DTYPE == 1
    return __uint_as_float((k & 1) ? (w & 0xffff0000u) : (w << 16));
#else
    float f;
    if (k & 1) asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "r"(w));
    else asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l; }" : "=f"(f) : "r"(w));
    return f;
#endif
}

// The larger of a word's two 16-bit elements, widened (the end of a max taken
// on packed pairs).
__device__ __forceinline__ float pairs_max(unsigned mm) {
    const uint4 mv = make_uint4(mm, 0u, 0u, 0u);
    return fmaxf(held_f32(mv, 0), held_f32(mv, 1));
}

// Make the held words opaque between passes: without it the compiler keeps
// the first pass's widened values for the next one (the same expressions),
// 64 fp32 values live instead of 32 packed words, and spills them.
template <int kItems>
__device__ __forceinline__ void packed_fence(uint4* r) {
#pragma unroll
    for (int it = 0; it < kItems; ++it)
        asm volatile("" : "+r"(r[it].x), "+r"(r[it].y), "+r"(r[it].z), "+r"(r[it].w));
}

// Window vector e0 / WVEC as stored, element by element: the elements inside
// the row, -inf (as stored) outside it or where !live (a row's first and
// last vectors, a lane past the rows).
__device__ __forceinline__ uint4 window_words(const RowWindow& w, int e0, bool live) {
    unsigned h[WVEC];
#pragma unroll
    for (int k = 0; k < WVEC; ++k) {
        const int e = e0 + k;
        h[k] = (live && e >= w.lo && e < w.hi) ? w.xw[e] : NEG_INF_BITS;
    }
    return make_uint4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16),
                      h[6] | (h[7] << 16));
}

// window_load, keeping each vector's 16 bytes as they are.
template <int kItems, int kStride, bool kEvictFirst = false>
__device__ __forceinline__ void window_load_packed(const RowWindow& w, int first, int lane, bool live,
                                                   uint4* r) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
        const int e0 = (first + it * kStride + lane) * WVEC;
        if (live && e0 >= w.lo && e0 + WVEC <= w.hi) {
            r[it] = window_ld16<kEvictFirst>(w.xw + e0);
        } else {
            r[it] = window_words(w, e0, live);
        }
    }
}

// window_exp over packed values: the same (m, l) in the same order, the
// exps not kept.
// The max is taken on the packed pairs (max_pairs, softmax_common.cuh);
// widening all 64 first would hold them all at once.
template <int kItems>
__device__ __forceinline__ MaxSum window_exp_packed(uint4* r) {
    // From -inf, as slice_exp's chain: a thread of NaNs alone gets m = -inf.
    unsigned mm = NEG_INF_PAIR;
#pragma unroll
    for (int it = 0; it < kItems; ++it) mm = max_pairs_vec(mm, r[it]);
    const float m = pairs_max(mm);
    packed_fence<kItems>(r);
    float l = 0.0f;
    with_exp<FAST_EXP>(m, [&](auto exp_of) {
#pragma unroll
        for (int it = 0; it < kItems; ++it)
#pragma unroll
            for (int k = 0; k < WVEC; ++k) l += exp_of(held_f32(r[it], k));
    });
    return MaxSum{m, l};
}

// window_store over packed values: exp(x - ref) * scale, ref = exp_ref(m_thread)
// as in slice_exp, by the same exp (with_exp, softmax_common.cuh).
template <int kItems, int kStride>
__device__ __forceinline__ void window_store_packed(const RowWindow& w, int first, int lane, bool live,
                                                    uint4* r, float m_thread, float scale) {
    packed_fence<kItems>(r);
    with_exp<FAST_EXP>(m_thread, [&](auto exp_of) {
        window_store_each<kItems, kStride>(w, first, lane, live, [&](int it, int k) {
            return exp_of(held_f32(r[it], k)) * scale;
        });
    });
}
#endif

// Block-wide max (kMax) or sum of one value a thread: a butterfly in each
// warp, the warps' results through shared memory (kThreads / 32 floats), then
// the same butterfly over them in every warp (an XOR butterfly leaves the same
// bits in every lane, and every block adds in the same order).
template <int kThreads, bool kMax>
__device__ __forceinline__ float block_reduce(float x, float* red) {
    x = kMax ? shfl_max<32>(x) : shfl_sum<32>(x);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const float part = lane < kThreads / 32 ? red[lane] : (kMax ? NEG_INF : 0.0f);
    return kMax ? shfl_max<32>(part) : shfl_sum<32>(part);
}

template <int kThreads>
__device__ __forceinline__ float block_max(float m, float* red) {
    return block_reduce<kThreads, true>(m, red);
}

template <int kThreads>
__device__ __forceinline__ float block_sum(float l, float* red) {
    return block_reduce<kThreads, false>(l, red);
}

// The (max, sum) pair of a whole block, max first (as shfl_max_first): the
// block's max, each thread's sum rescaled to it (one exp a thread), the
// block's sum; two barriers, where merging pairs by butterflies took one
// barrier and a chain of up to two exps a step.
// `red` holds 2 * kThreads / 32 floats (the bytes of kThreads / 32 pairs):
// the max's and the sum's partials apart, so a thread still reading the
// max's cannot see the sum's written over them.
template <int kThreads>
__device__ __forceinline__ MaxSum block_pair_max_first(MaxSum v, float* red) {
    const float M = block_max<kThreads>(v.m, red);
    return MaxSum{M, block_sum<kThreads>(rescaled<FAST_EXP>(v, M), red + kThreads / 32)};
}

// slice_scale (softmax_common.cuh) with the window's exp. The division stays
// IEEE (once a thread): a row with one finite entry must come out exactly 1.
__device__ __forceinline__ float window_scale(float m_thread, MaxSum row) {
    return slice_scale<FAST_EXP>(m_thread, row);
}
