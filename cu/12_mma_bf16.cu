// Rung 12 (bf16) / 13 (fp16, -DUSE_FP16=1): mma.sync.m16n8k16 with fp32
// accumulators, operands fed by ldmatrix from XOR-swizzled shared memory,
// a STAGES-deep cp.async pipeline with one commit group per k-tile.
//
// Block tile BM x BN (128 x 256), k-tile BK = 32; 8 warps in a 2 x 4 grid,
// each owning a 64 x 64 piece of C: 4 x 8 mma tiles of 16 x 8, i.e. 128
// fp32 accumulators per thread. Per 16-wide k-step a warp issues 4
// ldmatrix.x4 for A, 4 ldmatrix.x4.trans for B and 32 MMAs, so shared-memory
// traffic stays well below what the tensor cores consume.
//
// Fragment placement (PTX ISA, m16n8k16, lane = 4 g + t):
//   A (16 x 16, row):  a0 = A[g][2t..2t+1]   a1 = A[g+8][2t..]
//                      a2 = A[g][2t+8..]     a3 = A[g+8][2t+8..]
//   B (16 x 8, col):   b0 = B[2t..2t+1][g]   b1 = B[2t+8..2t+9][g]
//   C (16 x 8):        c0,c1 = C[g][2t, 2t+1]   c2,c3 = C[g+8][2t, 2t+1]
// ldmatrix.x4 of the four 8x8 quadrants of A (rows 0-7/8-15 x k 0-7/8-15)
// yields a0..a3 directly; ldmatrix.x4.trans of the k-major B tile yields
// b0, b1 for two neighbouring n-tiles.
#include "mma_common.cuh"

#ifndef USE_FP16
#define USE_FP16 0
#endif
#if USE_FP16
#define ENTRY mma_fp16_gemm
#define MMA_16x8x16 mma_f16_16x8x16
#else
#define ENTRY mma_bf16_gemm
#define MMA_16x8x16 mma_bf16_16x8x16
#endif

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

constexpr int WARPS_N = BN / WN;
constexpr int THREADS = (BM / WM) * WARPS_N * 32;
constexpr int MT = WM / 16;                 // mma tiles along m per warp
constexpr int NT = WN / 8;                  // mma tiles along n per warp
constexpr int A_BYTES = BM * BK * 2;
constexpr int STAGE_BYTES = A_BYTES + BK * BN * 2;
typedef XorSwizzle<BK * 2> ALayout;         // A tile: BM rows of BK elements
typedef XorSwizzle<BN * 2> BLayout;         // B tile: BK rows of BN elements
static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "whole k16 steps, ldmatrix pairs");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ENTRY(const u16* __restrict__ A, const u16* __restrict__ B, float* __restrict__ C,
      int M, int N, int K, float alpha, float beta) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const BlockCoord blk = grouped_block_order(GROUP_M);
    const int m0 = blk.m * BM, n0 = blk.n * BN;
    const unsigned smem = smem_u32(dynamic_smem());
    const int KT = (K + BK - 1) / BK;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    auto load_stage = [&](int stage, int kt) {
        const unsigned base = smem + stage * STAGE_BYTES;
        copy_tile<BM, BK, 2, THREADS, ALayout, ALIGNED>(base, A, K, M, K, m0, kt * BK, tid);
        copy_tile<BK, BN, 2, THREADS, BLayout, ALIGNED>(base + A_BYTES, B, N, K, N, kt * BK, n0,
                                                        tid);
    };

    // Prologue: k-tiles 0 .. STAGES-2 in flight, one commit group each (empty
    // groups when K is short, so the group count below stays exact).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }

    // ldmatrix row addresses: lanes 0-15 give rows 0-15 of a 16-row slab at
    // the first 8-element chunk, lanes 16-31 the same rows at the next chunk.
    const int ld_row = lane & 15, ld_chunk = lane >> 4;

    for (int kt = 0; kt < KT; ++kt) {
        // STAGES-1 + kt groups committed so far; allowing STAGES-2 pending
        // means k-tile kt (this thread's part) has landed. The barrier makes
        // every thread's part visible, and tells everyone that the stage
        // computed in the previous iteration is free to be refilled.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int pf = kt + STAGES - 1;
        if (pf < KT) load_stage(pf % STAGES, pf);
        cp_async_commit();

        const unsigned a_tile = smem + (kt % STAGES) * STAGE_BYTES;
        const unsigned b_tile = a_tile + A_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i)
                ldmatrix_x4(af[i], a_tile + ALayout::offset(wm * WM + i * 16 + ld_row,
                                                             kk * 2 + ld_chunk));
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) {
                // Matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
                // (k 8-15, n 8-15) -> b0, b1 of n-tile 2j, then of 2j+1.
                unsigned r[4];
                ldmatrix_x4_trans(r, b_tile + BLayout::offset(kk * 16 + ld_row,
                                                              (wn * WN + j * 16) / 8 + ld_chunk));
                bf[2 * j][0] = r[0];
                bf[2 * j][1] = r[1];
                bf[2 * j + 1][0] = r[2];
                bf[2 * j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) MMA_16x8x16(acc[i][j], af[i], bf[j]);
        }
    }

    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int row = m0 + wm * WM + i * 16 + g;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int col = n0 + wn * WN + j * 8 + 2 * t;
            store_c2(C, M, N, row, col, acc[i][j][0], acc[i][j][1], alpha, beta);
            store_c2(C, M, N, row + 8, col, acc[i][j][2], acc[i][j][3], alpha, beta);
        }
    }
}
