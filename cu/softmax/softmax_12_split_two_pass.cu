// Softmax rung 12: a few long rows in two launches, the second reading the
// rows back from L2.
//
// Rung 09 holds every chunk of a row on chip until the row's (max, sum) is
// known, so a pass reads all of its bytes, waits, then writes them all: the
// whole GPU alternates between reading and writing in lockstep. Measured with
// the softmax taken out (benchmarks/read_write_phases.py --resident: a
// resident grid that loads its chunks into registers, then stores them) that
// pattern alone moves bytes at 0.65-0.71 of a device copy, which is where
// rung 09 sits. Here nothing waits for anything inside a launch:
//   softmax_12_stats: block b reads chunk b % chunks of row b / chunks
//     (THREADS * ITEMS window vectors of softmax_window.cuh: any length, any
//     alignment) and writes its (max, sum) pair to pairs[b];
//   softmax_12_apply: block b folds its row's `chunks` pairs (every block of
//     the row the same pairs in the same order: the same (M, L) bit for bit),
//     reads its chunk again and writes exp(x - M) / L.
// Each launch is a plain stream of independent blocks (a new block starts
// wherever one finished), and where the rows fit in L2 with room to spare the
// second read comes from L2: DRAM sees one read and one write of every
// element, as for a copy. Rows much larger than L2 are read twice from DRAM
// (the planner keeps rung 09 for those).
//
// Every constant is a define the registry passes: DTYPE, THREADS, ITEMS
// (16-byte window vectors a thread reads per chunk), MIN_BLOCKS.
// Parameters: x, y rows x cols with row pitches ldx, ldy (elements); pairs:
// rows * chunks (max, sum) pairs, chunks = ceil(window vectors of a row /
// (THREADS * ITEMS)); grid = rows * chunks blocks for both launches.
#include "softmax_window.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ITEMS
#error "ITEMS must be defined (16-byte vectors a thread reads per chunk)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif

static_assert(THREADS % 32 == 0 && THREADS >= 64 && THREADS <= 1024, "THREADS: a multiple of 32, 64..1024");
static_assert(ITEMS >= 1 && ITEMS * WVEC <= 32, "ITEMS: at most 32 values a thread");

constexpr int N = ITEMS * WVEC;            // values a thread holds
constexpr int SLICE = THREADS * ITEMS;     // window vectors per chunk

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_12_stats(const elem_t* __restrict__ x, int cols, long long ldx, MaxSum* __restrict__ pairs,
                 int chunks) {
    __shared__ MaxSum part[THREADS / 32];
    const long long row = blockIdx.x / chunks;
    const int chunk = static_cast<int>(blockIdx.x % chunks);
    // only x's side of the window is used (no stores)
    const RowWindow w = row_window(x, const_cast<elem_t*>(x), row, cols, ldx, ldx);
    float v[N];
    window_load<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v);
    const MaxSum blk = block_merge_butterfly<THREADS>(window_exp<N>(v), part);
    if (threadIdx.x == 0) pairs[blockIdx.x] = blk;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_12_apply(const elem_t* __restrict__ x, elem_t* __restrict__ y, int cols, long long ldx,
                 long long ldy, const MaxSum* __restrict__ pairs, int chunks) {
    __shared__ float red[2 * (THREADS / 32)];
    const long long row = blockIdx.x / chunks;
    const int chunk = static_cast<int>(blockIdx.x % chunks);
    const RowWindow w = row_window(x, y, row, cols, ldx, ldy);
    float v[N];
    // the chunk's loads first: they are in flight while the pairs are folded
    window_load<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v);
    const MaxSum r = fold_pairs_max_first<THREADS>(pairs + row * chunks, chunks, red);
#pragma unroll
    for (int e = 0; e < N; ++e) v[e] = exp_shifted(v[e], r.m);   // -inf - -inf: NaN row, as it must
    window_store<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v, 1.0f / r.l);
}
