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
// every row, as in rung 08, and they arrive by one bulk copy into a landing
// buffer (softmax_landing.cuh: the window's whole vectors, the peel and the
// tail patched in shared memory by the thread that reads them).
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
#include "softmax_landing.cuh"

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
        slice_fill(w, copied_vectors(w, x, x_end), landing + s * SLICE, first, smem_addr(&full[s]));
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
        slice_write(w, sp, first, lane, v, mine.m, window_scale(mine.m, r));
    }

    // Every st.async aimed at a block lands before that block passes its last
    // wait; exit only once all blocks have passed theirs.
    cluster_arrive_relaxed_aligned();
    cluster_wait_aligned();
}
