// Softmax rung 06: persistent clusters that prefetch the next rows with bulk
// copies (sm_90).
//
// Rung 05 holds a row in the registers of a cluster, but each cluster handles
// one row and exits: between its loads and its stores the cluster waits for
// the slowest block, merges (max, sum) across the cluster, and is replaced by
// a freshly launched cluster whose loads start from nothing. Every block
// therefore alternates a read phase and a write phase with idle gaps, and the
// DRAM queue drains in those gaps.
//
// Here the grid holds only as many clusters as fit on the GPU at once; each
// walks its rows (cluster c takes rows c, c + nclusters, ...). Block `rank`
// owns columns [rank * SLICE, (rank + 1) * SLICE) of every row, as in 05.
// Shared memory is a ring of STAGES landing buffers, one slice each: one
// thread issues a cp.async.bulk copy (the TMA unit, no registers, no
// per-thread instructions) of the slices of the next STAGES rows, each
// completing on its own mbarrier. A row is copied from its buffer into
// registers, and as soon as every thread has done so the buffer is refilled
// with the row STAGES ahead, so while the block reduces, exchanges (max, sum)
// and stores row r, the reads of rows r + 1 .. r + STAGES are in flight: the
// memory system always has work queued.
//
// The (max, sum) exchange avoids barrier.cluster: with release semantics it
// compiles to MEMBAR.ALL.GPU, which would stall every row until the previous
// row's stores had all been acknowledged. Instead each block pushes its pair
// into slot [rank] of every peer's shared memory with st.async, whose
// completion is counted in bytes on the receiver's mbarrier; a block waits on
// its own mbarrier for all CLUSTER pairs and merges them in rank order, so
// every block agrees on (M, L) bit for bit. Slots, mbarriers and the per-warp
// partials alternate between two sets by row parity; the block barrier of
// row r + 1 separates the last read of a set (row r) from its next write
// (row r + 2).
//
// VEC = 16 / sizeof(elem_t) (16-byte vectors: the dispatcher checked
// cols % VEC == 0 and 16-byte aligned pointers) enables the bulk copies,
// which need 16-byte aligned addresses and sizes. Any other VEC reads
// straight from global memory into registers (no prefetch, still correct for
// any shape). Dynamic shared memory: STAGES * SLICE * sizeof(elem_t) bytes
// with bulk copies, 0 without.
// Parameters: x, y are rows x cols, row-major, contiguous; any rows >= 1,
// 1 <= cols <= CLUSTER * THREADS * ELEMS; grid = nclusters * CLUSTER blocks
// for any nclusters >= 1 (the dispatcher uses the number that fit at once).
#include "grid_dependency.cuh"
#include "cluster.cuh"
#include "ld_st.cuh"
#include "mbarrier.cuh"
#include "softmax_common.cuh"
#include "tma.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ELEMS
#error "ELEMS must be defined (elements a thread holds in registers (0: no register-resident entry))"
#endif
#ifndef VEC
#error "VEC must be defined (elements per load: 16 / sizeof(element) when aligned, else 1)"
#endif
#ifndef CLUSTER
#error "CLUSTER must be defined (blocks per row)"
#endif
#ifndef STAGES
#error "STAGES must be defined (landing buffers per block)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM (1: no register cap))"
#endif
// 1: the bulk copies carry an L2 evict-first hint (every byte is read once).
#ifndef EVICT_FIRST
#error "EVICT_FIRST must be defined (1: L2 evict-first hint on the bulk copies, else 0)"
#endif
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(ELEMS % VEC == 0, "ELEMS must be a multiple of VEC");
static_assert(CLUSTER >= 1 && CLUSTER <= 16, "CLUSTER: 1..16 (above 8 is a non-portable size)");
static_assert(STAGES >= 1, "STAGES >= 1");

// Clusters of more than one block are compiled in, so a plain launch runs
// them; a cluster of one is an ordinary block with no cluster instruction.
#if CLUSTER > 1
#define CLUSTER_SHAPE __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_SHAPE
#endif

constexpr int SLICE = THREADS * ELEMS;
constexpr int ITEMS = ELEMS / VEC;
constexpr int WARPS = THREADS / 32;
constexpr bool BULK = VEC * sizeof(elem_t) == 16;
// An mbarrier phase counts at most 2^20 - 1 bytes in flight.
static_assert(!BULK || SLICE * sizeof(elem_t) < (1u << 20), "slice too large for one mbarrier phase");

// ---------------------------------------------------------------------------
// mbarrier waits: a phase completes when its pending arrivals and its
// transaction count (bytes announced by expect_tx, retired by the copies)
// both reach 0. A wait longer than MBAR_WATCHDOG_NS (mbarrier.cuh) traps.
// ---------------------------------------------------------------------------
__device__ __forceinline__ void watchdog(unsigned long long& start) {
    if constexpr (MBAR_WATCHDOG_NS != 0) {
        const unsigned long long now = globaltimer_ns();
        if (start == 0) {
            start = now;
        } else if (now - start > MBAR_WATCHDOG_NS) {
            __trap();
        }
    }
}

// Wait for the phase of the given parity. Default (CTA-scope acquire) suits
// the bulk copies this block issued into its own shared memory.
__device__ __forceinline__ void wait_phase(unsigned bar, unsigned parity) {
    unsigned long long start = 0;
    while (!mbar_try_wait(bar, parity)) watchdog(start);
}

// The same at cluster scope: the bytes were stored by other blocks.
__device__ __forceinline__ void wait_phase_cluster(unsigned bar, unsigned parity) {
    unsigned long long start = 0;
    while (!mbar_try_wait_cluster(bar, parity)) watchdog(start);
}

// One row slice, global -> this block's shared memory, completing `bytes` on
// `bar` (announced by the same thread just before).
__device__ __forceinline__ void load_slice(unsigned dst, const elem_t* src, unsigned bytes,
                                           unsigned bar) {
#if EVICT_FIRST
    bulk_load_evict_first(dst, src, bytes, bar);
#else
    bulk_load(dst, src, bytes, bar);
#endif
}

// Store a (max, sum) pair at `slot` in block `peer`'s shared memory and count
// its 8 bytes on that block's mbarrier at the offset of `bar`.
__device__ __forceinline__ void send_pair(unsigned peer, unsigned slot, unsigned bar, MaxSum p) {
    st_async_peer_f32x2(peer, slot, bar, p.m, p.l);
}

// The slice of one row from a landing buffer into registers, in the layout of
// slice_load (vector i of thread `lane` at element (i * THREADS + lane) * VEC);
// elements at or past `count` (the slice's length in this row) read as -inf.
// Consecutive lanes read consecutive 16 bytes: conflict-free LDS.128.
__device__ __forceinline__ void buffer_load(const elem_t* buf, int count, int lane, float* v) {
    const elem_t* p = buf + lane * VEC;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (lane * VEC + i * THREADS * VEC < count) {
            const uint4 r = *reinterpret_cast<const uint4*>(p + i * THREADS * VEC);
            float* o = v + i * VEC;
            unpack_word(r.x, o);
            unpack_word(r.y, o + ELEMS_PER_WORD);
            unpack_word(r.z, o + 2 * ELEMS_PER_WORD);
            unpack_word(r.w, o + 3 * ELEMS_PER_WORD);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[i * VEC + k] = NEG_INF;
        }
    }
}

extern "C" __global__ void CLUSTER_SHAPE __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_06_pipelined(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    extern __shared__ __align__(128) unsigned char landing[];   // STAGES slices (BULK only)
    __shared__ __align__(8) unsigned long long full[STAGES];    // one per landing buffer
    __shared__ __align__(8) unsigned long long pairs_in[2];     // peers' pairs, by row parity
    __shared__ __align__(8) MaxSum pairs[2][CLUSTER];
    __shared__ MaxSum part[2][WARPS];

    const int lane = threadIdx.x;
    const unsigned rank = CLUSTER > 1 ? cluster_ctarank() : 0u;
    const long long first_row = blockIdx.x / CLUSTER;
    const long long row_step = gridDim.x / CLUSTER;
    const int first = static_cast<int>(rank) * SLICE;
    // Columns of this block's slice in every row (0 when the row is shorter
    // than rank * SLICE: the block still takes part in the exchange).
    const int count = cols > first ? min(cols - first, SLICE) : 0;
    const unsigned slice_bytes = static_cast<unsigned>(count) * sizeof(elem_t);
    const elem_t* buffers = reinterpret_cast<const elem_t*>(landing);

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full[s]), 1);
        mbar_init(smem_addr(&pairs_in[0]), 1);
        mbar_init(smem_addr(&pairs_in[1]), 1);
        // Visible to the copy engine and to the peers' st.async. A cluster of
        // one must not use cluster-scope instructions at all: the driver then
        // insists on a cluster launch and refuses every shape of it.
        if constexpr (CLUSTER > 1) {
            fence_barrier_init();
        } else {
            fence_proxy_async_smem();
        }
    }
    if constexpr (CLUSTER > 1) {
        // No block may send a pair before every peer has initialised its barriers.
        cluster_sync_aligned();
    } else {
        __syncthreads();
    }

    // Refill landing buffer s with this block's slice of `row` (thread 0 only).
    auto fill = [&](int s, long long row) {
        const unsigned bar = smem_addr(&full[s]);
        mbar_arrive_expect_tx(bar, slice_bytes);
        if (slice_bytes) {
            load_slice(smem_addr(buffers + s * SLICE), x + row * cols + first, slice_bytes, bar);
        }
    };
    if constexpr (BULK) {
        if (threadIdx.x == 0) {
#pragma unroll
            for (int s = 0; s < STAGES; ++s) {
                const long long row = first_row + s * row_step;
                if (row < rows) fill(s, row);
            }
        }
    }

    int stage = 0;
    unsigned phase = 0;
    unsigned k = 0;   // rows done by this block
    for (long long row = first_row; row < rows; row += row_step, ++k) {
        const int set = k & 1;
        float v[ELEMS];
        if constexpr (BULK) {
            wait_phase(smem_addr(&full[stage]), phase);
            buffer_load(buffers + stage * SLICE, count, lane, v);
        } else {
            slice_load<ITEMS, VEC, THREADS>(x + row * cols, first, cols, true, lane, v);
        }
        const MaxSum mine = slice_exp<ELEMS>(v);
        const MaxSum w = shfl_max_first<32>(mine);
        if ((lane & 31) == 0) part[set][lane >> 5] = w;
        __syncthreads();   // partials complete, and every thread is done with buffer `stage`
        if constexpr (BULK) {
            if (threadIdx.x == 0) {
                const long long ahead = row + STAGES * row_step;
                if (ahead < rows) fill(stage, ahead);
            }
            if (++stage == STAGES) {
                stage = 0;
                phase ^= 1;
            }
        }
        MaxSum r = fold_pairs_max_first<WARPS>(part[set], lane & 31);

        if constexpr (CLUSTER > 1) {
            const unsigned bar = smem_addr(&pairs_in[set]);
            if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, CLUSTER * sizeof(MaxSum));
            if (threadIdx.x < CLUSTER) send_pair(threadIdx.x, smem_addr(&pairs[set][rank]), bar, r);
            wait_phase_cluster(bar, (k >> 1) & 1);
            r = fold_pairs_max_first<CLUSTER>(pairs[set], lane & 31);
        }
        slice_store<ITEMS, VEC, THREADS>(y + row * cols, first, cols, true, lane, v,
                                         slice_scale(mine.m, r));
    }

    if constexpr (CLUSTER > 1) {
        // Every st.async aimed at a block lands before that block passes its
        // last wait; exit only once all blocks have passed theirs.
        cluster_arrive_relaxed_aligned();
        cluster_wait_aligned();
    }
}
