// Softmax rung 07: any row length, any row alignment, any row pitch, held in
// registers.
//
// ROW_THREADS threads share a row and hold it in registers (one read, one
// write: the minimum traffic), as in rung 04, but every row is read through
// its 16-byte window (softmax_window.cuh): LDG.128 for every vector that lies
// inside the row, element-wise accesses only for the first and last vector.
// Rung 04 drops to scalar loads for the whole array as soon as cols % 4 != 0
// (50257, 12345) or a pointer is off by one element; here only the two
// partial vectors of each row are scalar.
//
//   ROW_THREADS <= 32 (a power of two): THREADS / ROW_THREADS rows at a time in
//     a block, reduced with sub-warp shuffles alone (no shared memory, no
//     barrier). RPT rows per thread group, all loaded before any is reduced:
//     short rows give a thread only ITEMS vectors, and RPT multiplies the
//     bytes each thread keeps in flight (Little's law: ~32 KB per SM of reads
//     outstanding are needed to cover DRAM latency at full bandwidth).
//   ROW_THREADS == THREADS: a block per row (rows up to THREADS * ITEMS
//     vectors), one shared-memory hop for the per-warp pairs; RPT must be 1.
//
// A group covers a window of ROW_THREADS * ITEMS vectors: the planner picks
// the config with cols + WVEC - 1 <= ROW_THREADS * ITEMS * WVEC (any alignment).
// Parameters: x, y rows x cols with row pitches ldx, ldy (elements; equal to
// cols for contiguous arrays); rows, cols >= 1; 64-bit offsets throughout.
// PACKED=1 (16-bit only): the values held as loaded, two a register
// (softmax_window.cuh), so a thread holds twice the elements.
// Grid: ceil(rows / (THREADS / ROW_THREADS * RPT)) blocks.
#include "grid_dependency.cuh"
#include "softmax_window.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ROW_THREADS
#error "ROW_THREADS must be defined (threads per row: a power of two <= 32, or THREADS)"
#endif
#ifndef ITEMS
#error "ITEMS must be defined (16-byte vectors per thread per row)"
#endif
#ifndef RPT
#error "RPT must be defined (rows per thread group, loaded together)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM; 1 = no register cap)"
#endif
#ifndef PACKED
#error "PACKED must be defined (1: 16-bit values held two a register, softmax_window.cuh)"
#endif

static_assert(THREADS % 32 == 0 && THREADS >= 32 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(ROW_THREADS == THREADS || (ROW_THREADS <= 32 && (ROW_THREADS & (ROW_THREADS - 1)) == 0),
              "ROW_THREADS: a power of two <= 32 or THREADS");
static_assert(ROW_THREADS < THREADS || RPT == 1, "a block per row holds one row");
static_assert(ITEMS >= 1 && RPT >= 1 && ITEMS * RPT * WVEC <= 128, "too many values per thread");
static_assert(PACKED == 0 || DTYPE != 0, "PACKED: 16-bit elements only");

// fp32 rows on lane groups of 16 or 32 take the max first (below); measured
// against the merges, same run (benchmarks/softmax_before_after.py, of copy):
// fp32 65536 x 129 (16 lanes) 0.860 -> 0.914, 16384 x 1024 (32) 0.986 -> 0.999,
// but 262144 x 33 (4) 0.805 -> 0.797, 100000 x 128 (8) 0.976 -> 0.969, and the
// 16-bit rows, whose merges take the fast exp, 0.629 -> 0.610 (bf16 65536 x
// 129, 8 lanes), 0.913 -> 0.901 (100000 x 128, 4): there the second
// butterfly's wait costs more than the merges' exps.
constexpr bool kMaxFirst = DTYPE == 0 && ROW_THREADS >= 16 && ROW_THREADS <= 32;

// A row of a lane group, its values held unpacked: the row's max first (a
// max butterfly over the group), then every lane exponentiates against it
// and the sums meet in a sum butterfly; the scale is 1 / sum. Merging
// (max, sum) pairs instead costs two exps a butterfly step and one more for
// the scale, which short rows pay for few elements a lane: ncu counted 62.6
// instructions an element at fp32 65536 x 129 (16 lanes a row, 4 steps) with
// the issue slots 82% busy. XOR butterflies leave the same bits in every
// lane (shfl_max / shfl_sum); fmaxf passes a NaN by, and the exps then carry it into the sum, so a
// NaN row, a -inf row (ref 0: sum 0, scale inf, 0 * inf = NaN) and a row with
// +inf come out as the window_exp path's do.
template <int N>
__device__ __forceinline__ void group_max_first(const RowWindow& w, int lane, bool live, float* v) {
    float m = NEG_INF;
#pragma unroll
    for (int k = 0; k < N; ++k) m = fmaxf(m, v[k]);
    const float ref = exp_ref(shfl_max<ROW_THREADS>(m));
    float l = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
        v[k] = exp_shifted(v[k], ref);
        l += v[k];
    }
    window_store<ITEMS, ROW_THREADS>(w, 0, lane, live, v, 1.0f / shfl_sum<ROW_THREADS>(l));
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_07_any_row(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols,
                   long long ldx, long long ldy) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    constexpr int GROUPS = THREADS / ROW_THREADS;        // row groups per block
    constexpr int N = ITEMS * WVEC;                       // values per thread per row
    const int lane = threadIdx.x % ROW_THREADS;
    const int group = threadIdx.x / ROW_THREADS;
    // Rows of a block: RPT sweeps of GROUPS consecutive rows, so that in every
    // sweep a warp's groups touch consecutive rows (contiguous memory).
    const long long base = static_cast<long long>(blockIdx.x) * (GROUPS * RPT) + group;

#if PACKED
    uint4 v[RPT][ITEMS];
#else
    float v[RPT][N];
#endif
    RowWindow w[RPT];
    bool live[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
        const long long row = base + static_cast<long long>(r) * GROUPS;
        // Threads past the last row stay, with no memory access: their
        // warp-mates need them in the full-mask shuffles.
        live[r] = row < rows;
        w[r] = row_window(x, y, live[r] ? row : 0, cols, ldx, ldy);
#if PACKED
        window_load_packed<ITEMS, ROW_THREADS>(w[r], 0, lane, live[r], v[r]);
#else
        window_load<ITEMS, ROW_THREADS>(w[r], 0, lane, live[r], v[r]);
#endif
    }
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
#if !PACKED
        if constexpr (kMaxFirst) {
            group_max_first<N>(w[r], lane, live[r], v[r]);
            continue;
        }
#endif
#if PACKED
        const MaxSum mine = window_exp_packed<ITEMS>(v[r]);
#else
        const MaxSum mine = window_exp<N>(v[r]);
#endif
        MaxSum tot;
        if constexpr (ROW_THREADS <= 32) {
            // the lanes' pairs max first (softmax_common.cuh): one exp a lane
            // instead of a chain of two a butterfly step
            tot = shfl_max_first<ROW_THREADS, FAST_EXP>(mine);
        } else {
            // A block a row: its threads' pairs max first (softmax_window.cuh), one
            // exp a thread instead of a butterfly's chain of merges (same run, of
            // copy: fp32 4096 x 4097 0.895 -> 0.979, bf16 8192 x 4096 0.977 -> 0.994).
            __shared__ MaxSum part[THREADS / 32];
            tot = block_pair_max_first<THREADS>(mine, reinterpret_cast<float*>(part));
        }
#if PACKED
        window_store_packed<ITEMS, ROW_THREADS>(w[r], 0, lane, live[r], v[r], mine.m,
                                                window_scale(mine.m, tot));
#else
        window_store<ITEMS, ROW_THREADS>(w[r], 0, lane, live[r], v[r], window_scale(mine.m, tot));
#endif
    }
}
