// Shared pieces of the softmax ladder (cu/softmax_0*.cu).
//
// Element type, chosen with -DDTYPE: 0 = fp32, 1 = bf16, 2 = fp16. The 16-bit
// types are carried as raw bits (unsigned short) and converted with one cvt
// instruction each way, so no toolkit header is needed: NVRTC ships without
// cuda_fp16.h / cuda_bf16.h. All arithmetic is fp32 whatever the storage type.
//
// Semantics every rung follows (the float64 reference in drvgemm/ladders/softmax/dispatch.py
// computes the same thing):
//   y[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r)
//   * -inf entries contribute exp(-inf) = 0 and come out as 0;
//   * a row that is all -inf has max_r = -inf and 0/0 for every entry: NaN,
//     as torch.softmax gives (no special case: it falls out of the formula);
//   * a NaN anywhere in a row makes the row NaN.
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

#define NEG_INF __int_as_float(0xff800000u)

__device__ __forceinline__ float to_f32(float v) { return v; }

__device__ __forceinline__ float to_f32(unsigned short v) {
#if DTYPE == 1
    // bf16 is the top half of an fp32: widening is a shift, exact.
    return __uint_as_float(static_cast<unsigned>(v) << 16);
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

// A 32-bit word holds one fp32 or two 16-bit elements (element 0 in the low half).
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

constexpr int ELEMS_PER_WORD = 4 / static_cast<int>(sizeof(elem_t));

#if DTYPE != 0
// The max of two words of 16-bit pairs, pair by pair (max.bf16x2 / max.f16x2:
// like fmaxf, a NaN loses to a number): exact in the element type, so the max
// of a run of words, widened, is the max of its widened elements, in half
// the instructions (and a tree, not a chain).
__device__ __forceinline__ unsigned max_pairs(unsigned a, unsigned b) {
    unsigned d;
#if DTYPE == 1
    asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
    asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#endif
    return d;
}

// max_pairs of m and the four words of a 16-byte vector (a tree of three, then m).
__device__ __forceinline__ unsigned max_pairs_vec(unsigned m, uint4 q) {
    return max_pairs(m, max_pairs(max_pairs(q.x, q.y), max_pairs(q.z, q.w)));
}

// The larger element of a word of two, widened.
__device__ __forceinline__ float max_of_pair(unsigned w) {
    float f[2];
    unpack_word(w, f);
    return fmaxf(f[0], f[1]);
}
#endif

// Load N consecutive elements as floats. N * sizeof(elem_t) is 2, 4, 8 or 16
// bytes and p is aligned to that size: one LDG of that width (LDG.E.128 at 16 B,
// a quarter of the instructions of scalar loads for the same bytes). The
// read-only path (__ldg) is right because x and y never alias.
template <int N>
__device__ __forceinline__ void load_vec(const elem_t* p, float* out) {
    constexpr int BYTES = N * static_cast<int>(sizeof(elem_t));
    static_assert(BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "vector of 2, 4, 8 or 16 bytes");
    if constexpr (BYTES == 16) {
        const uint4 r = __ldg(reinterpret_cast<const uint4*>(p));
        unpack_word(r.x, out);
        unpack_word(r.y, out + ELEMS_PER_WORD);
        unpack_word(r.z, out + 2 * ELEMS_PER_WORD);
        unpack_word(r.w, out + 3 * ELEMS_PER_WORD);
    } else if constexpr (BYTES == 8) {
        const uint2 r = __ldg(reinterpret_cast<const uint2*>(p));
        unpack_word(r.x, out);
        unpack_word(r.y, out + ELEMS_PER_WORD);
    } else if constexpr (BYTES == 4) {
        unpack_word(__ldg(reinterpret_cast<const unsigned*>(p)), out);
    } else {
        out[0] = to_f32(__ldg(p));
    }
}

template <int N>
__device__ __forceinline__ void store_vec(elem_t* p, const float* in) {
    constexpr int BYTES = N * static_cast<int>(sizeof(elem_t));
    static_assert(BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "vector of 2, 4, 8 or 16 bytes");
    if constexpr (BYTES == 16) {
        *reinterpret_cast<uint4*>(p) = make_uint4(pack_word(in), pack_word(in + ELEMS_PER_WORD),
                                                  pack_word(in + 2 * ELEMS_PER_WORD),
                                                  pack_word(in + 3 * ELEMS_PER_WORD));
    } else if constexpr (BYTES == 8) {
        *reinterpret_cast<uint2*>(p) = make_uint2(pack_word(in), pack_word(in + ELEMS_PER_WORD));
    } else if constexpr (BYTES == 4) {
        *reinterpret_cast<unsigned*>(p) = pack_word(in);
    } else {
        *p = from_f32(in[0]);
    }
}

// ---------------------------------------------------------------------------
// The online (max, sum) pair: l is the sum of exp(x - m) over what was seen.
// ---------------------------------------------------------------------------
struct MaxSum {
    float m;
    float l;
};

// Fold one element into (m, l): the seed's update, with -inf skipped so that
// exp(-inf - -inf) = NaN never enters a row that is merely masked.
__device__ __forceinline__ void online_add(float& m, float& l, float x) {
    if (x > m) {
        l = l * expf(m - x) + 1.0f;  // m = -inf: expf(-inf) = 0, and l is 0 (or NaN, kept)
        m = x;
    } else if (x != NEG_INF) {
        l += expf(x - m);             // NaN x lands here and poisons l, as it must
    }
}

// exp(x - ref). kFast (the window rungs' 16-bit builds, softmax_window.cuh
// says why): one FADD, one FMUL and one MUFU.EX2 (ex2.approx.ftz, ~2 ulp of
// fp32) instead of expf's nine instructions. Subtracting first keeps the
// error relative to |x - ref| (exact for x near ref), so large inputs lose
// nothing. exp(-inf) = 0 and NaN stays NaN either way.
constexpr float LOG2E = 1.4426950408889634f;

// 2^a by MUFU.EX2 (ex2.approx.ftz: ~2 ulp of fp32, results below 2^-126 flushed to 0).
__device__ __forceinline__ float ex2_approx(float a) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}

template <bool kFast = false>
__device__ __forceinline__ float exp_diff(float x, float ref) {
    if constexpr (kFast) {
        return ex2_approx(__fmul_rn(__fsub_rn(x, ref), LOG2E));
    } else {
        return expf(x - ref);
    }
}

// The 16-bit outputs' element exps in one form for any reference, an FFMA
// and an FADD: exp(x - ref) = 2^((x * log2(e) + b_hi) + b_lo), b_hi = -ref *
// log2(e) rounded once, b_lo its rounding error (exact, by an FMA). The
// FFMA's exact sum is (x - ref) * log2(e) - b_lo, small where x is near ref,
// so its rounding is relative to the exponent, as the subtract-first form's
// is (exp_diff<true>: FADD, FMUL); adding b_lo back leaves the exponent's
// error at ~2 roundings of itself, whatever |ref|. Where |ref| <=
// FMA_EXP_REF_LIMIT b_lo is taken as 0: the bias's rounding costs at most a
// relative |ref| * 2^-24 <= 2^-16 there, under 1/64 of an fp16 output's
// rounding (2^-11) and 1/256 of a bf16 one's, and those threads' bits are
// those of the FFMA form alone (the thirty-sixth round's, which measured).
// Past it (16-bit logits near 6e4: 0.2% without b_lo) b_lo is kept. One form,
// not a thread's choice between two, wherever the exps are taken in a long
// loop (the packed paths' sums and stores): a choice made each such loop
// compile twice (rung 07's 128 x 5 packed block 1,768 SASS instructions
// against 1,176 with one form; with the shifted stores 4,288 against 1,744).
// The short in-place loop keeps the choice (with_exp_in_place, below). fp32
// outputs never take either: they are held to a few ulp of fp32 (expf).
constexpr float FMA_EXP_REF_LIMIT = 256.0f;

// bf16 reaches 3.4e38, past FLT_MAX / log2(e) = 2.4e38, where -ref * log2(e)
// overflows: b_hi is clamped to +-FLT_MAX, and b_lo = -(ref * log2(e) + b_hi)
// rounded (the same FMA as the rounding error it is elsewhere) takes the
// rest. At x == ref the two cancel exactly (2^0 = 1); any bf16 value below a
// reference that large is >= 2^120 below it, which the FFMA's rounding there
// (2^103) keeps, so 2^(...) = 0, as exp's. The scale stays an immediate.
constexpr float FLOAT_MAX = 3.40282347e38f;

struct ExpByFma {
    float hi, lo;
    __device__ __forceinline__ float operator()(float x) const {
        return ex2_approx(fmaf(x, LOG2E, hi) + lo);
    }
};

__device__ __forceinline__ ExpByFma exp_fma_of(float ref) {
    const float hi = fminf(fmaxf(__fmul_rn(-ref, LOG2E), -FLOAT_MAX), FLOAT_MAX);
    return ExpByFma{hi, fabsf(ref) <= FMA_EXP_REF_LIMIT ? 0.0f : -fmaf(ref, LOG2E, hi)};
}

// The element exp of a thread whose max is m: ExpByFma against exp_ref(m)
// where kFast and the output is 16-bit, else exp_diff<kFast>.
// with_exp<kFast>(m, f) runs f(exp_of) with that exp, so every path that
// exponentiates a thread's values against it (its sum, its stores) takes the
// same one.
template <bool kFast>
struct ExpDiff {
    float ref;
    __device__ __forceinline__ float operator()(float x) const { return exp_diff<kFast>(x, ref); }
};
// The reference a thread's exps are taken against: its max m. Branch-free:
// exp(-inf - m) is already 0 for any m > -inf, so only a thread holding
// nothing but -inf (m = -inf, where -inf - -inf would be NaN) needs a
// different reference point, and any finite one gives exp(-inf) = 0. A
// per-element test instead makes the compiler branch around each exp, which
// serialises them; without it the exps of all N values overlap.
__device__ __forceinline__ float exp_ref(float m) { return (m == NEG_INF) ? 0.0f : m; }

template <bool kFast, class F>
__device__ __forceinline__ void with_exp(float m, F&& f) {
    const float ref = exp_ref(m);
    if constexpr (kFast && DTYPE != 0) f(exp_fma_of(ref));
    else f(ExpDiff<kFast>{ref});
}

// slice_exp_from's exps (taken once, in place, summed and kept) in a short
// loop, so a thread may pick its form there: the FFMA alone where |ref| <=
// FMA_EXP_REF_LIMIT (ExpByFma's bits: its lo is 0 there), the subtract-first
// form past it. The loop compiles twice, but each copy holds one register
// for its exp where ExpByFma holds two (hi, lo): rung 09's 512 x 4 unpacked
// 16-bit chunks hold 32 values at 64 registers, and the second register put
// 8 B on their stack. The long loops (the stores) keep the one form.
struct ExpByFmaAlone {
    float hi;
    __device__ __forceinline__ float operator()(float x) const { return ex2_approx(fmaf(x, LOG2E, hi)); }
};

template <bool kFast, class F>
__device__ __forceinline__ void with_exp_in_place(float m, F&& f) {
    const float ref = exp_ref(m);
    if (kFast && DTYPE != 0 && fabsf(ref) <= FMA_EXP_REF_LIMIT) f(ExpByFmaAlone{__fmul_rn(-ref, LOG2E)});
    else f(ExpDiff<kFast>{ref});
}

// Merge two partial pairs. Comparing with the new max before exponentiating
// keeps -inf - -inf out (both empty: l = la + lb = 0, or NaN if either is NaN),
// and saves an exp on the side that holds the max. Commutative bit for bit
// (the products are rounded separately, never contracted into one FMA whose
// operand order would matter), so a butterfly leaves the same pair in every lane.
template <bool kFast = false>
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    const float sa = (a.m == m) ? 1.0f : exp_diff<kFast>(a.m, m);
    const float sb = (b.m == m) ? 1.0f : exp_diff<kFast>(b.m, m);
    return MaxSum{m, __fmul_rn(a.l, sa) + __fmul_rn(b.l, sb)};
}

// Butterfly over aligned groups of WIDTH lanes (WIDTH a power of two <= 32):
// after log2(WIDTH) exchanges every lane of a group holds the group's pair.
// Registers only, no shared memory and no barrier.
template <int WIDTH, bool kFast = false>
__device__ __forceinline__ MaxSum shfl_merge(MaxSum v) {
    static_assert(WIDTH >= 1 && WIDTH <= 32 && (WIDTH & (WIDTH - 1)) == 0, "WIDTH: power of two <= 32");
#pragma unroll
    for (int off = WIDTH / 2; off > 0; off >>= 1) {
        MaxSum o;
        o.m = __shfl_xor_sync(0xffffffffu, v.m, off);
        o.l = __shfl_xor_sync(0xffffffffu, v.l, off);
        v = merge<kFast>(v, o);
    }
    return v;
}

// Max and sum over aligned groups of WIDTH lanes by XOR butterflies: every
// lane of a group ends with the same bits (fmaxf and + are commutative bit
// for bit, and each step pairs equal partial results).
template <int WIDTH>
__device__ __forceinline__ float shfl_max(float m) {
#pragma unroll
    for (int off = WIDTH / 2; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    return m;
}

template <int WIDTH>
__device__ __forceinline__ float shfl_sum(float l) {
#pragma unroll
    for (int off = WIDTH / 2; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    return l;
}

// A pair's sum rescaled from its max to M >= its max: one exp, none where its
// max is M (which keeps -inf - -inf out: an empty pair stays (-inf, 0)).
template <bool kFast = false>
__device__ __forceinline__ float rescaled(MaxSum p, float M) {
    return p.m == M ? p.l : __fmul_rn(p.l, exp_diff<kFast>(p.m, M));
}

// shfl_merge's result taken max first: the group's max by a butterfly, each
// lane's sum rescaled to it, the sums by a butterfly. One exp a lane where
// shfl_merge's chain of log2(WIDTH) merges takes up to two each (fp32 expf:
// ~20 instructions a merge, every one waiting on the last); the same bits in
// every lane of a group.
template <int WIDTH, bool kFast = false>
__device__ __forceinline__ MaxSum shfl_max_first(MaxSum v) {
    const float M = shfl_max<WIDTH>(v.m);
    return MaxSum{M, shfl_sum<WIDTH>(rescaled<kFast>(v, M))};
}

// Whole-block merge for a block that owns one row: butterfly inside each warp,
// one pair per warp through shared memory, then every thread folds the warps'
// pairs in the same order (so all threads agree bit for bit). One barrier.
// `part` holds kThreads / 32 pairs and must not be reused without a barrier.
template <int kThreads>
__device__ __forceinline__ MaxSum block_merge(MaxSum v, MaxSum* part) {
    v = shfl_merge<32>(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    MaxSum r = part[0];
#pragma unroll
    for (int w = 1; w < kThreads / 32; ++w) r = merge(r, part[w]);
    return r;
}

// Fold N <= 32 pairs from shared memory into one, identically in every
// thread: lane j takes pair j (lanes past N the empty pair (-inf, 0), which
// changes neither the max nor the sum) and shfl_max_first combines them in
// log2 steps, instead of a chain of N - 1 dependent merges. Every warp runs
// the same butterflies on the same pairs, so all threads of all blocks of a
// cluster hold the same bits.
template <int N, bool kFast = false>
__device__ __forceinline__ MaxSum fold_pairs_max_first(const MaxSum* p, int lane) {
    static_assert(N >= 1 && N <= 32, "N: 1..32");
    constexpr int W = N <= 1 ? 1 : N <= 2 ? 2 : N <= 4 ? 4 : N <= 8 ? 8 : N <= 16 ? 16 : 32;
    const int j = lane & (W - 1);
    return shfl_max_first<W, kFast>(j < N ? p[j] : MaxSum{NEG_INF, 0.0f});
}

// ---------------------------------------------------------------------------
// A row slice held in registers (rungs 04 and 05).
//
// Thread `lane` of the kRowThreads threads sharing a slice holds kItems
// vectors of kVec elements: vector i covers columns
// first_col + (i * kRowThreads + lane) * kVec .. + kVec - 1, so for each i the
// threads read kRowThreads * kVec * sizeof(elem_t) contiguous bytes
// (coalesced). Columns at or past `cols` read as -inf and are not stored.
// kVec > 1 requires cols % kVec == 0 and a row start aligned to kVec elements
// (the dispatcher guarantees both, else it picks kVec = 1).
// ---------------------------------------------------------------------------
template <int kItems, int kVec, int kRowThreads>
__device__ __forceinline__ void slice_load(const elem_t* __restrict__ row, int first_col, int cols,
                                           bool live, int lane, float* v) {
    // One 64-bit base per thread; item i is a compile-time offset from it
    // (an immediate in the load), not 32 separately computed addresses.
    const int c0 = first_col + lane * kVec;
    const elem_t* p = row + c0;
    asm("" : "+l"(p));  // opaque to the optimiser, so it cannot re-expand p into x + 64-bit index per item
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
        if (live && c0 + i * kRowThreads * kVec < cols) {
            load_vec<kVec>(p + i * kRowThreads * kVec, v + i * kVec);
        } else {
#pragma unroll
            for (int k = 0; k < kVec; ++k) v[i * kVec + k] = NEG_INF;
        }
    }
}

// Turn the held values into exp(x - m_thread) in place and return
// (m_thread, sum). One exp per element: the rescale to the row's max is a
// single multiply at store time. The reference is exp_ref(m_thread) (above).
// kFast: exp_diff's fast form, with 16-bit outputs the FFMA where the
// reference allows (with_exp_in_place).
// kKeep: the values stay as they are, only (m_thread, sum) comes back.
// slice_exp_from: the same with the thread's max m already known.
template <int N, bool kFast = false, bool kKeep = false>
__device__ __forceinline__ MaxSum slice_exp_from(float* v, float m) {
    float l = 0.0f;
    with_exp_in_place<kFast>(m, [&](auto exp_of) {
#pragma unroll
        for (int k = 0; k < N; ++k) {
            const float e = exp_of(v[k]);
            if constexpr (!kKeep) v[k] = e;
            l += e;
        }
    });
    return MaxSum{m, l};
}

template <int N, bool kFast = false, bool kKeep = false>
__device__ __forceinline__ MaxSum slice_exp(float* v) {
    float m = NEG_INF;
#pragma unroll
    for (int k = 0; k < N; ++k) m = fmaxf(m, v[k]);
    return slice_exp_from<N, kFast, kKeep>(v, m);
}

// exp(x - m_thread) * exp(m_thread - M) / L = softmax. An all -inf row has
// M = -inf = m_thread and L = 0: scale = 1/0 = inf, 0 * inf = NaN, as the
// semantics above require.
template <bool kFast = false>
__device__ __forceinline__ float slice_scale(float m_thread, MaxSum row) {
    return ((m_thread == row.m) ? 1.0f : exp_diff<kFast>(m_thread, row.m)) / row.l;
}

template <int kItems, int kVec, int kRowThreads>
__device__ __forceinline__ void slice_store(elem_t* __restrict__ row, int first_col, int cols, bool live,
                                            int lane, float* v, float scale) {
    const int c0 = first_col + lane * kVec;
    elem_t* p = row + c0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
        if (live && c0 + i * kRowThreads * kVec < cols) {
#pragma unroll
            for (int k = 0; k < kVec; ++k) v[i * kVec + k] *= scale;
            store_vec<kVec>(p + i * kRowThreads * kVec, v + i * kVec);
        }
    }
}
