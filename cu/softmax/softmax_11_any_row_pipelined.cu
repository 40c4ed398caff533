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
// between the rows of a pitched view): they are copied with the rest and
// masked to -inf when the values are read out of shared memory. Only a
// vector reaching outside the array itself -- before x[0] when x does not
// start on 16 bytes, past the last row's end -- is not copied: its owner
// reads the elements of the row inside it from global memory, element by
// element (at most one vector at each end of the whole array).
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

// Window vector e0 / WVEC of a row out of the landing buffer `buf` (vector
// `slot`), or, when the copy did not bring it, from global memory; elements
// outside the row as -inf.
__device__ __forceinline__ void read_vector(const RowWindow& w, const uint4* buf, int slot, int e0,
                                            bool copied, held_t* out) {
    const bool whole = e0 >= w.lo && e0 + WVEC <= w.hi;
#if PACKED
    if (whole) {
        out[0] = buf[slot];
        return;
    }
    unsigned h[WVEC];
    if (copied) {
        const uint4 r = buf[slot];
        const unsigned words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int k = 0; k < WVEC; ++k)
            h[k] = inside(w, e0 + k) ? (words[k / 2] >> (16 * (k & 1))) & 0xffffu : NEG_INF_BITS;
    } else {
#pragma unroll
        for (int k = 0; k < WVEC; ++k) h[k] = inside(w, e0 + k) ? w.xw[e0 + k] : NEG_INF_BITS;
    }
    out[0] = make_uint4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16),
                        h[6] | (h[7] << 16));
#else
    if (whole || copied) {
        const uint4 r = buf[slot];
        unpack_word(r.x, out);
        unpack_word(r.y, out + ELEMS_PER_WORD);
        unpack_word(r.z, out + 2 * ELEMS_PER_WORD);
        unpack_word(r.w, out + 3 * ELEMS_PER_WORD);
        if (whole) return;
#pragma unroll
        for (int k = 0; k < WVEC; ++k)
            if (!inside(w, e0 + k)) out[k] = NEG_INF;
    } else {
#pragma unroll
        for (int k = 0; k < WVEC; ++k) out[k] = inside(w, e0 + k) ? to_f32(w.xw[e0 + k]) : NEG_INF;
    }
#endif
}

// This block's slice of a row into registers: vector first + it * THREADS +
// lane for it < ITEMS (conflict-free LDS.128: consecutive lanes, consecutive
// 16 bytes), -inf past the row.
__device__ __forceinline__ void slice_read(const RowWindow& w, const Copied& c, const uint4* buf,
                                           int first, int lane, held_t* v) {
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
        const int vi = first + it * THREADS + lane;
        const int e0 = vi * WVEC;
        held_t* o = v + (PACKED ? it : it * WVEC);
        if (e0 < w.hi && e0 + WVEC > w.lo) {
            read_vector(w, buf, vi - first, e0, vi >= c.begin && vi < c.end, o);
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
        slice_read(w, copied_vectors(w, x, x_end), landing + stage * SLICE, first, lane, v);
#if PACKED
        const MaxSum mine = window_exp_packed<ITEMS>(v);
#else
        const MaxSum mine = window_exp<HELD>(v);
#endif
        const MaxSum wp = shfl_merge<32, FAST_EXP>(mine);
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
        MaxSum r = fold_pairs<WARPS, FAST_EXP>(part[set], lane & 31);

        const unsigned bar = smem_addr(&pairs_in[set]);
        if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, CLUSTER * sizeof(MaxSum));
        if (threadIdx.x < CLUSTER) st_async_peer_f32x2(threadIdx.x, smem_addr(&pairs[set][rank]), bar, r.m, r.l);
        mbar_wait_cluster_pairs(bar, (k >> 1) & 1);
        r = fold_pairs<CLUSTER, FAST_EXP>(pairs[set], lane & 31);
#if PACKED
        window_store_packed<ITEMS, THREADS>(w, first, lane, true, v, mine.m, window_scale(mine.m, r));
#else
        window_store<ITEMS, THREADS>(w, first, lane, true, v, window_scale(mine.m, r));
#endif
    }

    // Every st.async aimed at a block lands before that block passes its last
    // wait; exit only once all blocks have passed theirs.
    cluster_arrive_relaxed_aligned();
    cluster_wait_aligned();
}
