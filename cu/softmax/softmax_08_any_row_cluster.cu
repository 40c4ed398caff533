// Softmax rung 08: a row of any length and alignment split over a
// thread-block cluster (sm_90), held in registers.
//
// Rung 05's scheme (CLUSTER blocks own consecutive slices of one row, each
// reduces its slice to a (max, sum) pair, the pairs are exchanged through
// distributed shared memory and merged in rank order, so every block of the
// row agrees on (M, L) bit for bit; one read, one write) with rung 07's
// 16-byte window: block `rank` owns window vectors
// [rank * THREADS * ITEMS, (rank + 1) * THREADS * ITEMS), every vector inside
// the row is one LDG.128 / STG.128 and only the first and last vector of the
// row are element-wise. Rung 05 falls back to scalar loads for the whole array
// when cols % 4 != 0 (8192 x 50257 fp32 measured 0.68 of copy through auto):
// that is what this fixes.
//
// Block shapes: 512 threads at two blocks an SM (64 registers a thread, 32
// fp32 values: one block's loads overlap the other's reduction and stores),
// or 256 threads at four an SM (the same registers a thread, twice the
// blocks to interleave: measured better on ~50257-element rows), or 512 at
// one an SM with more values a thread for the longest rows. PACKED=1 (16-bit
// only) holds the values as loaded, two a register: twice the elements a
// thread, so half the blocks a row.
//
// Grid: rows * CLUSTER blocks (the cluster shape is compiled in with
// __cluster_dims__, so a plain launch works; CLUSTER > 8 needs the
// non-portable-size attribute set on the function first).
// Parameters: x, y rows x cols with row pitches ldx, ldy (elements);
// rows >= 1, 1 <= cols, cols + WVEC - 1 <= CLUSTER * THREADS * ITEMS * WVEC.
#include "grid_dependency.cuh"
#include "cluster.cuh"
#include "ld_st.cuh"
#include "softmax_window.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ITEMS
#error "ITEMS must be defined (16-byte vectors per thread)"
#endif
#ifndef CLUSTER
#error "CLUSTER must be defined (blocks per row, 2..16)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif
#ifndef PACKED
#error "PACKED must be defined (1: 16-bit values held two a register, softmax_window.cuh)"
#endif

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(CLUSTER >= 2 && CLUSTER <= 16, "CLUSTER: 2..16 (above 8 is a non-portable size)");
static_assert(ITEMS >= 1 && ITEMS * WVEC <= (PACKED ? 128 : 64), "ITEMS: too many values a thread");
static_assert(PACKED == 0 || DTYPE != 0, "PACKED: 16-bit elements only");

__device__ __forceinline__ MaxSum load_remote_pair(const MaxSum* local, unsigned rank) {
    const float2 v = ld_shared_cluster_f32x2(mapa_shared(smem_addr(local), rank));
    return MaxSum{v.x, v.y};
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_08_any_row_cluster(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols,
                           long long ldx, long long ldy) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    constexpr int N = ITEMS * WVEC;
    constexpr int SLICE = THREADS * ITEMS;   // window vectors per block
    __shared__ MaxSum part[THREADS / 32];
    __shared__ __align__(8) MaxSum block_pair;

    const unsigned rank = cluster_ctarank();
    const long long row = blockIdx.x / CLUSTER;
    const bool live = row < rows;   // always, with grid = rows * CLUSTER; keeps a wrong grid in bounds
    const RowWindow w = row_window(x, y, live ? row : 0, cols, ldx, ldy);
    const int first = static_cast<int>(rank) * SLICE;

#if PACKED
    uint4 v[ITEMS];
    window_load_packed<ITEMS, THREADS>(w, first, threadIdx.x, live, v);
    const MaxSum mine = window_exp_packed<ITEMS>(v);
#else
    float v[N];
    window_load<ITEMS, THREADS>(w, first, threadIdx.x, live, v);
    const MaxSum mine = window_exp<N>(v);
#endif
    // The block's pair and the cluster's fold max first (softmax_window.cuh /
    // softmax_common.cuh; same run, of copy: fp32 32 x 50257 0.944 -> 1.050, bf16
    // 64 x 262144 0.715 -> 0.728).
    const MaxSum blk = block_pair_max_first<THREADS>(mine, reinterpret_cast<float*>(part));
    if (threadIdx.x == 0) block_pair = blk;
    cluster_sync_aligned();

    // The CLUSTER pairs, lane j of every warp taking pair j, merged by the same
    // butterfly everywhere: identical (M, L) in every thread of the cluster.
    const int lane = threadIdx.x & 31;
    constexpr int W = CLUSTER <= 2 ? 2 : CLUSTER <= 4 ? 4 : CLUSTER <= 8 ? 8 : 16;
    const int j = lane & (W - 1);
    const MaxSum pj = j < CLUSTER ? load_remote_pair(&block_pair, j) : MaxSum{NEG_INF, 0.0f};
    const MaxSum r = shfl_max_first<W, FAST_EXP>(pj);
    cluster_arrive_release_aligned();   // the remote loads are done

#if PACKED
    window_store_packed<ITEMS, THREADS>(w, first, threadIdx.x, live, v, mine.m, window_scale(mine.m, r));
#else
    window_store<ITEMS, THREADS>(w, first, threadIdx.x, live, v, window_scale(mine.m, r));
#endif
    cluster_wait_aligned();
}
