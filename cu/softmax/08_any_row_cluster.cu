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
// row are element-wise. Rung 05 fell back to scalar loads for the whole array
// when cols % 4 != 0 (8192 x 50257 at 0.68 of copy): that is what this fixes.
//
// Why a cluster and not one big block: 64 registers a thread is the most
// that lets two 512-thread blocks share an SM (so one block's loads overlap
// the other's reduction and stores); 32 fp32 a thread = 64 KiB a block. Rows
// past that take CLUSTER blocks on CLUSTER SMs of one GPC, and the exchange is
// one cluster barrier, not a trip through global memory.
//
// Grid: rows * CLUSTER blocks (the cluster shape is compiled in with
// __cluster_dims__, so a plain launch works; CLUSTER > 8 needs the
// non-portable-size attribute set on the function first).
// Parameters: x, y rows x cols with row pitches ldx, ldy (elements);
// rows >= 1, 1 <= cols, cols + VEC - 1 <= CLUSTER * THREADS * ITEMS * VEC.
#include "any_row.cuh"

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

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(CLUSTER >= 2 && CLUSTER <= 16, "CLUSTER: 2..16 (above 8 is a non-portable size)");
static_assert(ITEMS >= 1 && ITEMS * VEC <= 64, "ITEMS: 1 .. 64 / VEC values a thread");

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Release/acquire: each block's pair, written before, is visible to all.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Split exit barrier: "done reading the peers' shared memory" now, wait for
// everyone's at the very end (a block's shared memory vanishes when it exits).
__device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

__device__ __forceinline__ MaxSum load_remote_pair(const MaxSum* local, unsigned rank) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    MaxSum p;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(p.m), "=f"(p.l) : "r"(remote) : "memory");
    return p;
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_08_any_row_cluster(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols,
                           long long ldx, long long ldy) {
    constexpr int N = ITEMS * VEC;
    constexpr int SLICE = THREADS * ITEMS;   // window vectors per block
    __shared__ MaxSum part[THREADS / 32];
    __shared__ __align__(8) MaxSum block_pair;

    const unsigned rank = cluster_rank();
    const long long row = blockIdx.x / CLUSTER;
    const bool live = row < rows;   // always, with grid = rows * CLUSTER; keeps a wrong grid in bounds
    const RowWindow w = row_window(x, y, live ? row : 0, cols, ldx, ldy);
    const int first = static_cast<int>(rank) * SLICE;

    float v[N];
    window_load<ITEMS, THREADS>(w, first, threadIdx.x, live, v);
    const MaxSum mine = slice_exp<N>(v);
    const MaxSum blk = block_merge<THREADS>(mine, part);
    if (threadIdx.x == 0) block_pair = blk;
    cluster_sync();

    // The CLUSTER pairs, lane j of every warp taking pair j, merged by the same
    // butterfly everywhere: identical (M, L) in every thread of the cluster.
    const int lane = threadIdx.x & 31;
    constexpr int W = CLUSTER <= 2 ? 2 : CLUSTER <= 4 ? 4 : CLUSTER <= 8 ? 8 : 16;
    const int j = lane & (W - 1);
    const MaxSum pj = j < CLUSTER ? load_remote_pair(&block_pair, j) : MaxSum{NEG_INF, 0.0f};
    const MaxSum r = shfl_merge<W>(pj);
    cluster_arrive_relaxed();

    window_store<ITEMS, THREADS>(w, first, threadIdx.x, live, v, slice_scale(mine.m, r));
    cluster_wait();
}
