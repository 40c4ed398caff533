// Softmax rung 05: a row split across a thread-block cluster (sm_90).
//
// A row too long for one block's registers (64 KiB per block at 512 threads x
// 32 fp32) is split into CLUSTER contiguous slices, one per block of a
// cluster, each held in registers as in rung 04. Each block reduces its slice
// to one (max, sum) pair and publishes it in its own shared memory; after a
// cluster barrier every thread reads the CLUSTER pairs through distributed
// shared memory (mapa + ld.shared::cluster) and merges them in rank order, so
// all blocks of the row agree on (M, L) bit for bit. The row is read once and
// written once: the minimum traffic even for rows of 512 KiB, where a single
// block would have to read the row twice.
//
// The cluster shape is compiled in (__cluster_dims__), so a plain launch
// works; the grid is rows * CLUSTER blocks, block b of cluster r owning slice
// b of row r. VEC as in rung 04.
// Parameters: x, y are rows x cols, row-major, contiguous; any rows >= 1,
// 1 <= cols <= CLUSTER * THREADS * ELEMS.
#include "cluster.cuh"
#include "ld_st.cuh"
#include "softmax_common.cuh"

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
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM (1: no register cap))"
#endif

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(ELEMS % VEC == 0, "ELEMS must be a multiple of VEC");
static_assert(CLUSTER >= 1 && CLUSTER <= 8, "CLUSTER: 1..8 (portable cluster sizes)");

__device__ __forceinline__ MaxSum load_remote_pair(const MaxSum* local, unsigned rank) {
    const float2 v = ld_shared_cluster_f32x2(mapa_shared(smem_addr(local), rank));
    MaxSum p;
    p.m = v.x;
    p.l = v.y;
    return p;
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_05_cluster(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    constexpr int ITEMS = ELEMS / VEC;
    constexpr int SLICE = THREADS * ELEMS;
    __shared__ MaxSum part[THREADS / 32];
    __shared__ __align__(8) MaxSum block_pair;

    const unsigned rank = cluster_ctarank();
    const long long row = blockIdx.x / CLUSTER;
    // Every block of a launched cluster belongs to a real row (grid = rows * CLUSTER);
    // the guard only keeps a wrong grid from reading out of bounds.
    const bool live = row < rows;
    const long long base = live ? row * cols : 0;
    const int first = static_cast<int>(rank) * SLICE;

    float v[ELEMS];
    slice_load<ITEMS, VEC, THREADS>(x + base, first, cols, live, threadIdx.x, v);
    const MaxSum mine = slice_exp<ELEMS>(v);
    const MaxSum blk = block_merge<THREADS>(mine, part);
    if (threadIdx.x == 0) block_pair = blk;
    cluster_sync_aligned();

    MaxSum r = load_remote_pair(&block_pair, 0);
#pragma unroll
    for (unsigned b = 1; b < CLUSTER; ++b) r = merge(r, load_remote_pair(&block_pair, b));
    cluster_arrive_release_aligned();   // the remote loads are done

    slice_store<ITEMS, VEC, THREADS>(y + base, first, cols, live, threadIdx.x, v, slice_scale(mine.m, r));
    cluster_wait_aligned();
}
