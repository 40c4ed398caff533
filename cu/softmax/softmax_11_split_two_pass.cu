// Softmax rung 11: a few very long rows, each split across many blocks, in two
// launches, the second reading the rows again from L2.
//
// Rung 09 holds a row's chunks in the registers of co-resident blocks and
// waits for the row's (max, sum) pairs inside the kernel: every block of the
// GPU loads, then exponentiates, then waits, then stores, all in the same
// phase, so the exponentials (~20 instructions an element in fp32) run while
// DRAM is idle and DRAM runs while the SMs are idle (measured: 4 x 1048576
// fp32 at 0.67 of copy, the SMs 40% busy). Here the grid is not resident:
// many small blocks, each in its own phase, overlap one another's memory and
// arithmetic like any streaming kernel.
//
//   softmax_11_split_partials: block (c, r) reduces chunk c of row row0 + r to
//     one (max, sum) pair, written to pairs[r * split + c] (split = gridDim.x).
//     One read of x.
//   softmax_11_split_scale: block (c, r) folds the row's `split` pairs in
//     order (every block of a row the same pairs in the same order: the same
//     (M, L) bit for bit, whatever the order the blocks ran in), reads its chunk
//     again, exponentiates it as the first launch did, scales and stores.
//     The second read hits L2 when the host keeps a launch pair's rows within
//     a share of L2 (the planner's group of rows), so DRAM sees one read and
//     one write of every element, like a copy.
//
// The arithmetic is rung 09's (the window's exp against the thread's max, the
// block's butterfly, the row's fold, slice_scale), so is its error bound.
// Chunks are THREADS * ITEMS window vectors (softmax_window.cuh: any length,
// any alignment, any row pitch). Grid of both launches: (split, rows in the
// group); split = ceil(window vectors of a row / (THREADS * ITEMS)).
// Parameters: x, y with row pitches ldx, ldy (elements); row0 the group's first
// row; pairs: rows in the group x split pairs (8 bytes each).
#include "softmax_window.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ITEMS
#error "ITEMS must be defined (16-byte vectors per thread)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif

static_assert(THREADS % 32 == 0 && THREADS >= 64 && THREADS <= 1024, "THREADS: a multiple of 32, 64..1024");
static_assert(ITEMS >= 1 && ITEMS * WVEC <= 64, "ITEMS: 1 .. 64 / WVEC values a thread");

constexpr int N = ITEMS * WVEC;        // values a thread holds
constexpr int SLICE = THREADS * ITEMS; // window vectors a chunk

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_11_split_partials(const elem_t* __restrict__ x, long long row0, int cols, long long ldx,
                          MaxSum* __restrict__ pairs) {
    __shared__ MaxSum part[THREADS / 32];
    const long long row = row0 + blockIdx.y;
    // No output here: x stands in for it in the window (nothing is stored).
    const RowWindow w = row_window(x, const_cast<elem_t*>(x), row, cols, ldx, ldx);
    float v[N];
    window_load<ITEMS, THREADS>(w, blockIdx.x * SLICE, threadIdx.x, true, v);
    const MaxSum blk = block_merge_butterfly<THREADS>(window_exp<N>(v), part);
    if (threadIdx.x == 0) pairs[static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x] = blk;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_11_split_scale(const elem_t* __restrict__ x, elem_t* __restrict__ y, long long row0, int cols,
                       long long ldx, long long ldy, const MaxSum* __restrict__ pairs) {
    __shared__ MaxSum part[THREADS / 32];
    const long long row = row0 + blockIdx.y;
    const RowWindow w = row_window(x, y, row, cols, ldx, ldy);
    float v[N];
    window_load<ITEMS, THREADS>(w, blockIdx.x * SLICE, threadIdx.x, true, v);
    // The row's pairs, folded while the chunk's loads are in flight: thread t
    // takes pairs t, t + THREADS, ... in order, then the block's butterfly.
    const int split = gridDim.x;
    const MaxSum* rp = pairs + static_cast<long long>(blockIdx.y) * split;
    MaxSum acc{NEG_INF, 0.0f};
    for (int j = threadIdx.x; j < split; j += THREADS) acc = merge<FAST_EXP>(acc, rp[j]);
    const MaxSum r = block_merge_butterfly<THREADS>(acc, part);
    const MaxSum th = window_exp<N>(v);
    window_store<ITEMS, THREADS>(w, blockIdx.x * SLICE, threadIdx.x, true, v, window_scale(th.m, r));
}
