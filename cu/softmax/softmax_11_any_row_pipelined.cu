// Softmax rung 11: rung 06's pipeline over rung 08's window -- persistent
// clusters whose next rows arrive by bulk copies, for rows of any length,
// alignment and pitch (sm_90).
//
// Rung 08 holds a row of any length in the registers of a cluster, but each
// cluster loads its row, waits at the cluster barrier and stores, with
// nothing of the next row in flight: the vocabulary rows (50257, 128256,
// 151936 columns) stayed at 0.73-0.80 of copy. Rung 06 keeps the next rows
// arriving while one is reduced and written, but its bulk copies need rows of
// whole 16-byte vectors from 16-byte starts, so an odd row length (50257) or
// an offset view takes its scalar path.
//
// Here block `rank` owns window vectors [rank * SLICE, (rank + 1) * SLICE) of
// every row, as in rung 08 (softmax_window.cuh: the row is the element range
// [lo, hi) of the 16-byte aligned window that covers it), and the bulk copy
// of its slice brings those vectors whole: the window starts on 16 bytes and
// is whole vectors, which is what the copy engine needs. The first and last
// vector of a row also hold bytes of the neighbouring rows (or of the gap
// between the rows of a pitched view): they are copied with the rest, and
// the thread that reads them patches them in shared memory first (elements
// outside the row -> -inf), so that every vector of a row is then one
// LDS.128 with no test of its own -- a per-vector whole / partial test cost
// ~20 instructions a vector, 0.73 against rung 06's 0.88 of copy on the same
// rows (benchmarks/notes/softmax.md, sixteenth round). Only a vector reaching
// outside the array itself -- before x[0] when x does not start on 16 bytes,
// past the last row's end -- is not copied: its patch fills the row's elements
// from global memory (at most one vector at each end of the whole array).
//
// The rest is rung 06: STAGES landing buffers of one slice each, refilled as
// soon as every thread has read a row out of them; (max, sum) pairs pushed
// into the peers' shared memory with st.async and counted on their
// mbarriers, merged in the same order everywhere so the cluster agrees bit
// for bit; stores straight from registers (16-byte where y has x's phase).
// PACKED=1 (16-bit) holds the values as loaded, two a register, as rung 08.
//
// Parameters: x, y rows x cols with row pitches ldx, ldy (elements); any
// rows >= 1 and 1 <= cols with window_vectors(row) <= CLUSTER * SLICE;
// grid = nclusters * CLUSTER blocks for any nclusters >= 1 (the dispatcher
// launches as many as fit at once). Dynamic shared memory: STAGES * SLICE *
// 16 bytes.
#include "grid_dependency.cuh"
#include "cluster.cuh"
#include "ld_st.cuh"
#include "mbarrier.cuh"
#include "softmax_window.cuh"
#include "tma.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ITEMS
#error "ITEMS must be defined (16-byte vectors per thread)"
#endif
#ifndef CLUSTER
#error "CLUSTER must be defined (blocks per row, 2..16)"
#endif
#ifndef STAGES
#error "STAGES must be defined (landing buffers per block)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif
#ifndef PACKED
#error "PACKED must be defined (1: 16-bit values held two a register, softmax_window.cuh)"
#endif

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(CLUSTER >= 2 && CLUSTER <= 16, "CLUSTER: 2..16 (above 8 is a non-portable size)");
static_assert(STAGES >= 1, "STAGES >= 1");
static_assert(PACKED == 0 || DTYPE != 0, "PACKED: 16-bit elements only");

#ifndef INT_MAX
#define INT_MAX 2147483647
#endif

constexpr int SLICE = THREADS * ITEMS;   // window vectors per block and row
constexpr int WARPS = THREADS / 32;
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
            o[0] = make_uint4(NEG_INF_PAIR, NEG_INF_PAIR, NEG_INF_PAIR, NEG_INF_PAIR);
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
    const int b = first + lane;
    elem_t* dst = w.yw + static_cast<long long>(b) * WVEC;
    asm("" : "+l"(dst));   // one base address, the items at immediate offsets from it
    // Item it (window vector b + it * THREADS) is in the row iff it * THREADS <
    // live, one 16-byte store iff fast_lo <= it * THREADS < fast_hi: bounds
    // against the compile-time offsets, not per-item arithmetic.
    const int live = sp.nv - b;
    const int fast_lo = w.same_phase ? sp.whole_begin - b : INT_MAX;
    const int fast_hi = sp.whole_end - b;
    // out(it, k): element k of item it, as stored
    auto write = [&](auto out) {
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {
            const int vi = b + it * THREADS;
#if DTYPE == 0
            if (it * THREADS >= live) continue;
            float o[WVEC];
#pragma unroll
            for (int k = 0; k < WVEC; ++k) o[k] = out(it, k);
            if (it * THREADS >= fast_lo && it * THREADS < fast_hi) {
                store16(dst + it * THREADS * WVEC, o);
            } else {
                store_vector(w, vi * WVEC, o);
            }
#else
            const bool in = it * THREADS < live;
            float o[WVEC];
#pragma unroll
            for (int k = 0; k < WVEC; ++k) o[k] = out(it, k);
            if (w.same_phase) {                  // the block's row: every lane alike
                if (!in) continue;
                if (it * THREADS >= fast_lo && it * THREADS < fast_hi) {
                    store16(dst + it * THREADS * WVEC, o);
                } else {
                    store_vector(w, vi * WVEC, o);
                }
            } else {                             // 16-bit off x's phase: the warp's blocks
                unsigned words[4];
                pack_vector(o, words);
                store_vector_warp<32>(w, vi * WVEC, words, in, true);
            }
#endif
        }
    };
#if PACKED
    packed_fence<ITEMS>(v);
    with_exp<FAST_EXP>(m_thread, [&](auto exp_of) {
        write([&](int it, int k) { return exp_of(held_f32(v[it], k)) * scale; });
    });
#else
    write([&](int it, int k) { return v[it * WVEC + k] * scale; });
#endif
}

// Block until the pairs of the peers (stored by st.async) have landed.
__device__ __forceinline__ void mbar_wait_cluster_pairs(unsigned bar, unsigned parity) {
    if (mbar_try_wait_cluster(bar, parity)) return;
#if MBAR_WATCHDOG_NS
    const unsigned long long start = globaltimer_ns();
    while (!mbar_try_wait_cluster(bar, parity))
        if (globaltimer_ns() - start > MBAR_WATCHDOG_NS) __trap();
#else
    while (!mbar_try_wait_cluster(bar, parity)) {
    }
#endif
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_11_any_row_pipelined(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols,
                             long long ldx, long long ldy) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    extern __shared__ __align__(128) uint4 landing[];            // STAGES x SLICE vectors
    __shared__ __align__(8) unsigned long long full[STAGES];      // one per landing buffer
    __shared__ __align__(8) unsigned long long pairs_in[2];       // peers' pairs, by row parity
    __shared__ __align__(8) MaxSum pairs[2][CLUSTER];
    __shared__ MaxSum part[2][WARPS];

    const int lane = threadIdx.x;
    const unsigned rank = cluster_ctarank();
    const long long first_row = blockIdx.x / CLUSTER;
    const long long row_step = gridDim.x / CLUSTER;
    const int first = static_cast<int>(rank) * SLICE;
    const elem_t* x_end = x + (rows - 1) * ldx + cols;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full[s]), 1);
        mbar_init(smem_addr(&pairs_in[0]), 1);
        mbar_init(smem_addr(&pairs_in[1]), 1);
        fence_barrier_init();   // visible to the copy engine and to the peers' st.async
    }
    cluster_sync_aligned();     // no pair is sent before every peer has its barriers

    // Refill landing buffer s with this block's slice of `row` (thread 0 only):
    // the copied vectors of the window that fall in the slice, at their slot.
    auto fill = [&](int s, long long row) {
        const RowWindow w = row_window(x, y, row, cols, ldx, ldy);
        const Copied c = copied_vectors(w, x, x_end);
        const int v0 = max(c.begin, first), v1 = min(c.end, first + SLICE);
        const unsigned bytes = v1 > v0 ? static_cast<unsigned>(v1 - v0) * 16u : 0u;
        const unsigned bar = smem_addr(&full[s]);
        fence_proxy_async_smem();   // after the patches of the buffer's last row (generic writes)
        mbar_arrive_expect_tx(bar, bytes);
        if (bytes) bulk_load(smem_addr(landing + s * SLICE + (v0 - first)), w.xw + v0 * WVEC, bytes, bar);
    };
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            const long long row = first_row + s * row_step;
            if (row < rows) fill(s, row);
        }
    }

    int stage = 0;
    unsigned phase = 0;
    unsigned k = 0;   // rows done by this block
    for (long long row = first_row; row < rows; row += row_step, ++k) {
        const int set = k & 1;
        const RowWindow w = row_window(x, y, row, cols, ldx, ldy);
        held_t v[HELD];
        mbar_wait(smem_addr(&full[stage]), phase);
        const Span sp = row_span(w);
        slice_read(w, sp, copied_vectors(w, x, x_end), landing + stage * SLICE, first, lane, v);
#if PACKED
        const MaxSum mine = window_exp_packed<ITEMS>(v);
#else
        const MaxSum mine = window_exp<HELD>(v);
#endif
        const MaxSum wp = shfl_max_first<32, FAST_EXP>(mine);
        if ((lane & 31) == 0) part[set][lane >> 5] = wp;
        __syncthreads();   // partials complete, and every thread is done with buffer `stage`
        if (threadIdx.x == 0) {
            const long long ahead = row + STAGES * row_step;
            if (ahead < rows) fill(stage, ahead);
        }
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
        }
        MaxSum r = fold_pairs_max_first<WARPS, FAST_EXP>(part[set], lane & 31);

        const unsigned bar = smem_addr(&pairs_in[set]);
        if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, CLUSTER * sizeof(MaxSum));
        if (threadIdx.x < CLUSTER) st_async_peer_f32x2(threadIdx.x, smem_addr(&pairs[set][rank]), bar, r.m, r.l);
        mbar_wait_cluster_pairs(bar, (k >> 1) & 1);
        r = fold_pairs_max_first<CLUSTER, FAST_EXP>(pairs[set], lane & 31);
        slice_write(w, sp, first, lane, v, mine.m, window_scale(mine.m, r));
    }

    // Every st.async aimed at a block lands before that block passes its last
    // wait; exit only once all blocks have passed theirs.
    cluster_arrive_relaxed_aligned();
    cluster_wait_aligned();
}
