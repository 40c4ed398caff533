// Rung 8: warp tiling. The block tile (BM x BN) is split into warp tiles
// (WM x WN), each warp tile into a (WM/TM) x (WN/TN) grid of thread
// micro-tiles (TM x TN), and each micro-tile into 4 x 4 sub-blocks spread
// across the warp tile.
//
// Why the warp level matters: shared-memory bandwidth is spent per warp
// instruction, on the distinct data the 32 lanes ask for. With 8 x 8
// micro-tiles a warp laid out as 4 x 8 threads needs 32 distinct A values
// and 64 distinct B values per k step -- each LDS.128 asks for at most 128
// contiguous bytes, one pass through the 32 banks -- where rung 6's 2 x 16
// layout needs 16 and 128 (256 bytes per LDS.128 of B: two passes). Lanes
// that share a row or column of micro-tiles read the same address
// (broadcast); the others read consecutive 16-byte chunks: no conflicts.
//
// The loop is arranged so that the FFMA pipe never waits:
// - global loads of tile t+1 go to registers at the top of tile t (latency
//   hidden behind BK outer products), then to the other shared buffer;
//   one __syncthreads per k-tile (two buffers);
// - A/B fragments are double-buffered in registers: the LDS.128 for step
//   kk+1 are issued before the FFMAs of step kk, and the fragments of the
//   next tile's step 0 right after the barrier;
// - the partial k-tile (K % BK) is the first one, so the main loop's bounds
//   checks are loop-invariant predicates and need no per-tile zeroing;
// - all shared-memory addresses are a per-tile base plus compile-time
//   offsets, so the unrolled loop carries almost no integer work;
// - __launch_bounds__(THREADS, MIN_BLOCKS) caps registers so MIN_BLOCKS
//   blocks fit on an SM (2 x 256 threads at <= 128 registers by default).
// Tile constants are -D defines: benchmarks/autotune_warp_tiled.py sweeps them.
//
// Split-K (SPLIT_K=1, a build of its own): blockIdx.z is the piece of K, one
// of gridDim.z; piece z takes k-tiles [z * KT / S, (z + 1) * KT / S) of the
// KT = ceil(K / BK) (drvgemm/ladders/gemm/split_k.py: split_ranges), and
// writes its raw fp32 partial product to slice z of the workspace passed as
// C (slices M * N rounded up to 64 floats apart); alpha and beta are applied
// by the reduction (cu/gemm/split_reduce.cu), which adds the slices in order.
#include "simt_common.cuh"

#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
#ifndef BN
#error "BN must be defined (the registry passes it)"
#endif
#ifndef BK
#error "BK must be defined (the registry passes it)"
#endif
// WM: rows of a warp tile
#ifndef WM
#error "WM must be defined (the registry passes it)"
#endif
// WN: columns of a warp tile
#ifndef WN
#error "WN must be defined (the registry passes it)"
#endif
// TM: rows of a thread micro-tile (a multiple of 4)
#ifndef TM
#error "TM must be defined (the registry passes it)"
#endif
// TN: columns of a thread micro-tile (a multiple of 4)
#ifndef TN
#error "TN must be defined (the registry passes it)"
#endif
// APAD: floats of padding per row of the transposed A tile
#ifndef APAD
#error "APAD must be defined (the registry passes it)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (the registry passes it)"
#endif
// KT_UNROLL: k-tiles per main-loop trip: 1, or 2 (constant buffer addresses)
#ifndef KT_UNROLL
#error "KT_UNROLL must be defined (the registry passes it)"
#endif
// SPLIT_K: 1 the split-K build (above), 0 K in one piece
#ifndef SPLIT_K
#error "SPLIT_K must be defined (the registry passes it)"
#endif

constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int LANES_M = WM / TM, LANES_N = WN / TN;  // thread grid inside a warp
constexpr int SUB_M = TM / 4, SUB_N = TN / 4;        // 4 x 4 sub-blocks per thread
constexpr int SUB_STRIDE_M = WM / SUB_M;             // rows between a thread's sub-blocks
constexpr int SUB_STRIDE_N = WN / SUB_N;
constexpr int LDA = BM + APAD, LDB = BN;
constexpr int A_STAGE = BK * LDA, B_STAGE = BK * LDB;
constexpr int A_QUADS = BM * BK / 4 / THREADS;  // float4 global loads per thread per tile
constexpr int B_QUADS = BK * BN / 4 / THREADS;
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must tile the block");
static_assert(WM % TM == 0 && WN % TN == 0, "micro-tiles must tile the warp tile");
static_assert(LANES_M * LANES_N == 32, "a warp tile holds exactly 32 micro-tiles");
static_assert(TM % 4 == 0 && TN % 4 == 0, "micro-tiles are made of 4 x 4 sub-blocks");
static_assert(BK % 8 == 0, "A quads are stored in pairs along k; BK even for the fragment slots");
static_assert(BM % 16 == 0 && BN % 4 == 0, "tile shape");
static_assert(KT_UNROLL == 1 || KT_UNROLL == 2, "KT_UNROLL is 1 or 2");
static_assert(APAD % 8 == 4, "As row length == 4 mod 8 words: aligned, conflict-free transpose");
static_assert(A_QUADS * 4 * THREADS == BM * BK && B_QUADS * 4 * THREADS == BK * BN,
              "tile loads must divide evenly among threads");

template <bool V>
struct Flag {
    static constexpr bool value = V;
};

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K, float alpha, float beta) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;                // [2][BK][LDA], A transposed (k-major)
    float* Bs = smem + 2 * A_STAGE;  // [2][BK][LDB]

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int lane_m = lane / LANES_N, lane_n = lane % LANES_N;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    // ---- global -> register -> shared mapping -------------------------------
    // The k-tiles are laid out so that the partial one (K % BK != 0) comes
    // first: tile 0 covers k in [rem - BK, rem), with rem = K - (ktiles-1)*BK,
    // and only its k < 0 part is out of range. Every later tile is full, so
    // the main loop's guards are the row/column checks alone: loop-invariant
    // predicates, and out-of-range staging registers simply stay zero.
#if SPLIT_K
    // This piece's k-tiles of the whole K's; only piece 0 holds the partial one.
    const int kt_all = (K + BK - 1) / BK;
    const int kt0 = (int)((long long)blockIdx.z * kt_all / gridDim.z);
    const int ktiles = (int)((long long)(blockIdx.z + 1) * kt_all / gridDim.z) - kt0;
    const int k_first = K - kt_all * BK + kt0 * BK;
    C += (size_t)blockIdx.z * (((size_t)M * N + 63) / 64 * 64);
    alpha = 1.0f;
    beta = 0.0f;
#else
    const int ktiles = (K + BK - 1) / BK;
    const int k_first = K - ktiles * BK;  // first k of tile 0, in (-BK, 0]
#endif

    // A: a quad is 4 consecutive k of one row. Consecutive threads take the
    // two quads of a k-pair of one row (one 32-byte sector), then the next
    // row: a warp stores 16 rows x 2 quads, and with LDA == 4 mod 8 the two
    // quads' transposed stores land 16 banks apart: conflict-free STS.32.
    const float* a_src[A_QUADS];
    int a_k[A_QUADS];     // k of the quad's first element in tile 0 (may be < 0)
    int a_rows[A_QUADS];  // 4 if the quad's row exists, else 0
    int a_sts[A_QUADS];
#pragma unroll
    for (int i = 0; i < A_QUADS; ++i) {
        const int e = tid + i * THREADS;
        const int r = (e >> 1) % BM, kq = (e >> 1) / BM * 2 + (e & 1);
        a_k[i] = k_first + kq * 4;
        a_src[i] = A + (ptrdiff_t)(row0 + r) * K + a_k[i];
        a_rows[i] = row0 + r < M ? 4 : 0;
        a_sts[i] = kq * 4 * LDA + r;
    }
    // B: consecutive threads take consecutive quads of a row (up to 512
    // contiguous bytes per warp), stored unchanged with STS.128.
    const float* b_src[B_QUADS];
    int b_k[B_QUADS];     // k (row of B) of the quad in tile 0 (may be < 0)
    int b_cols[B_QUADS];  // columns of B from the quad's first column to the edge
    int b_sts[B_QUADS];
#pragma unroll
    for (int i = 0; i < B_QUADS; ++i) {
        const int e = tid + i * THREADS;
        const int k = e / (BN / 4), cq = e % (BN / 4);
        b_k[i] = k_first + k;
        b_src[i] = B + (ptrdiff_t)b_k[i] * N + col0 + cq * 4;
        b_cols[i] = N - col0 - cq * 4;
        b_sts[i] = k * LDB + cq * 4;
    }
    const size_t b_step = (size_t)BK * N;

    float4 a_stage[A_QUADS], b_stage[B_QUADS];
#pragma unroll
    for (int i = 0; i < A_QUADS; ++i) a_stage[i] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < B_QUADS; ++i) b_stage[i] = make_float4(0.f, 0.f, 0.f, 0.f);

    auto advance = [&]() {
#pragma unroll
        for (int i = 0; i < A_QUADS; ++i) a_src[i] += BK;
#pragma unroll
        for (int i = 0; i < B_QUADS; ++i) b_src[i] += b_step;
    };
    auto load_first_tile = [&]() {  // k < 0 stays zero
#pragma unroll
        for (int i = 0; i < A_QUADS; ++i) load_quad_range(a_stage[i], a_src[i], -a_k[i], a_rows[i]);
#pragma unroll
        for (int i = 0; i < B_QUADS; ++i)
            load_quad_range(b_stage[i], b_src[i], b_k[i] < 0 ? 4 : 0, b_cols[i]);
        advance();
    };
    auto load_full_tile = [&]() {
#pragma unroll
        for (int i = 0; i < A_QUADS; ++i) load_quad_range(a_stage[i], a_src[i], 0, a_rows[i]);
#pragma unroll
        for (int i = 0; i < B_QUADS; ++i) load_quad_range(b_stage[i], b_src[i], 0, b_cols[i]);
        advance();
    };
    auto store_shared = [&](float* as, float* bs) {
#pragma unroll
        for (int i = 0; i < A_QUADS; ++i) {
            as[a_sts[i] + 0 * LDA] = a_stage[i].x;
            as[a_sts[i] + 1 * LDA] = a_stage[i].y;
            as[a_sts[i] + 2 * LDA] = a_stage[i].z;
            as[a_sts[i] + 3 * LDA] = a_stage[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_QUADS; ++i) *reinterpret_cast<float4*>(bs + b_sts[i]) = b_stage[i];
    };

    // ---- fragments: this thread's TM values of A and TN of B at one k ---------
    // frag_a[s*4 + r] = As[k][warp_m*WM + s*SUB_STRIDE_M + lane_m*4 + r]
    const int a_frag = warp_m * WM + lane_m * 4;
    const int b_frag = warp_n * WN + lane_n * 4;
    float frag_a[2][TM], frag_b[2][TN];
    auto load_fragments = [&](const float* as, const float* bs, int kk, int slot) {
#pragma unroll
        for (int s = 0; s < SUB_M; ++s) {
            const float4 v = *reinterpret_cast<const float4*>(as + kk * LDA + s * SUB_STRIDE_M);
            frag_a[slot][s * 4 + 0] = v.x;
            frag_a[slot][s * 4 + 1] = v.y;
            frag_a[slot][s * 4 + 2] = v.z;
            frag_a[slot][s * 4 + 3] = v.w;
        }
#pragma unroll
        for (int s = 0; s < SUB_N; ++s) {
            const float4 v = *reinterpret_cast<const float4*>(bs + kk * LDB + s * SUB_STRIDE_N);
            frag_b[slot][s * 4 + 0] = v.x;
            frag_b[slot][s * 4 + 1] = v.y;
            frag_b[slot][s * 4 + 2] = v.z;
            frag_b[slot][s * 4 + 3] = v.w;
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    // One k-tile of outer products from shared buffer `cur`. With a next
    // tile, its global loads are issued first (they land in registers while
    // the FFMAs run) and it is published to the other buffer at the last
    // step. The last tile is a separate copy without either, so the main
    // loop carries no "is there a next tile" branches.
    auto compute_tile = [&](int cur, auto has_next) {
        constexpr bool kHasNext = decltype(has_next)::value;
        const float* as = As + cur * A_STAGE + a_frag;
        const float* bs = Bs + cur * B_STAGE + b_frag;
        if (kHasNext) load_full_tile();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk + 1 < BK) {
                load_fragments(as, bs, kk + 1, (kk + 1) & 1);
            } else if (kHasNext) {
                // The other buffer was last read during the previous tile,
                // before the previous barrier: safe to overwrite. BK is
                // even, so slot 0 is free while this step uses slot 1.
                float* as_next = As + (cur ^ 1) * A_STAGE;
                float* bs_next = Bs + (cur ^ 1) * B_STAGE;
                store_shared(as_next, bs_next);
                __syncthreads();
                load_fragments(as_next + a_frag, bs_next + b_frag, 0, 0);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += frag_a[kk & 1][i] * frag_b[kk & 1][j];
        }
    };

    if (ktiles > 0) {
        load_first_tile();
        store_shared(As, Bs);
        __syncthreads();
        load_fragments(As + a_frag, Bs + b_frag, 0, 0);
#if KT_UNROLL == 2
        // Two tiles per trip: each one's buffer is a compile-time constant, so
        // every shared-memory address is a base register plus an immediate.
        // Costs a loop body twice the size (instruction-cache pressure).
        int left = ktiles - 1;  // tiles after the current one
        for (; left >= 2; left -= 2) {
            compute_tile(0, Flag<true>());
            compute_tile(1, Flag<true>());
        }
        if (left == 1) {
            compute_tile(0, Flag<true>());
            compute_tile(1, Flag<false>());
        } else {
            compute_tile(0, Flag<false>());
        }
#else
        int cur = 0;
        for (int left = ktiles - 1; left > 0; --left) {  // a down-counter: one register
            compute_tile(cur, Flag<true>());
            cur ^= 1;
        }
        compute_tile(cur, Flag<false>());
#endif
    }

    // ---- epilogue: acc[s*4 + r][t*4 + c] -> C[row][col + c] -----------------
    // A quarter-warp writes LANES_N (or 8) consecutive 16-byte chunks of a row.
#pragma unroll
    for (int s = 0; s < SUB_M; ++s)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = row0 + warp_m * WM + s * SUB_STRIDE_M + lane_m * 4 + r;
            const int i = s * 4 + r;
#pragma unroll
            for (int t = 0; t < SUB_N; ++t) {
                const int col = col0 + warp_n * WN + t * SUB_STRIDE_N + lane_n * 4;
                const int j = t * 4;
                store_c_quad(C, row, col, M, N,
                             make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]),
                             alpha, beta);
            }
        }
}
