// Rung 11: TF32 tensor cores through mma.sync.m16n8k8 (inline PTX). fp32
// inputs are rounded to tf32 in registers with cvt.rna.tf32.f32 (round to
// nearest, ties away from zero: 10 explicit mantissa bits, u = 2^-11);
// a STAGES-deep cp.async pipeline with one commit group per k-tile;
// XOR-swizzled shared memory. ptx/10_mma_tf32_ptx.ptx is its twin written
// directly in PTX: same tiles, same layouts, same pipeline.
//
// Block tile BM x BN (128 x 256), k-tile BK = 32 floats; 8 warps in a 2 x 4
// grid, each owning 64 rows x 8 n-tiles of C: 4 x 8 mma tiles of 16 x 8,
// 128 fp32 accumulators per thread.
//
// Fragment placement (PTX ISA, m16n8k8 .tf32, lane = 4 g + t):
//   A (16 x 8, row):  a0 = A[g][t]  a1 = A[g+8][t]  a2 = A[g][t+4]  a3 = A[g+8][t+4]
//   B (8 x 8, col):   b0 = B[t][g]  b1 = B[t+4][g]
//   C (16 x 8):       c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
//
// A through ldmatrix: read as 16-bit data, an 8x8 ldmatrix matrix is 8 rows
// of 16 bytes = 8 rows of 4 floats, and lane 4g+t receives 32-bit word t of
// row g -- which is A[g][t]. So ldmatrix.x4 of (rows 0-7, k 0-3), (rows
// 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7) gives a0..a3.
// B has no such trick: its fragment walks down a column of 32-bit values,
// and ldmatrix.trans transposes 16-bit elements. Each lane loads b0 and b1
// with two 4-byte loads from the swizzled tile (conflict-free, see
// Tf32BSwizzle), straight into the register pair the MMA reads.
//
// Measured on the H200 and dropped (benchmarks/NOTES.md has the numbers):
// choosing the n-tiles' columns so that one 16-byte load brings b0 of four
// n-tiles (8 instead of 20 shared loads per k8 step): 14% slower; double-
// buffered fragments: spill at 255 registers, 7% slower; rounding each
// element once in shared memory, by the thread that copied it, instead of
// on every fragment load: 18% slower. The conversions do cost 13% (CVT=0).
//
// CVT=0 (measurement only, never registered): no cvt.rna, the MMA truncates
// the raw fp32 bits.
//
// Which n-tiles a warp owns: the block's 32 n-tiles (8 columns each) are
// dealt round-robin, warp wn taking n-tiles wn, wn+4, ..., wn+28. The B
// swizzle permutes 16-byte chunks by bits 1-2 of the chunk index, which
// (two chunks per n-tile) are bits 0-1 of the n-tile index: the warp's,
// fixed per lane. So a lane's n-tiles are one base address plus multiples
// of 32 * WARPS_N bytes, and no address registers are spent per n-tile.
#include "ldmatrix.cuh"
#include "mma.cuh"
#include "mma_common.cuh"

#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
#ifndef BK
#error "BK must be defined (the registry passes it)"
#endif
#ifndef STAGES
#error "STAGES must be defined (the registry passes it)"
#endif
#ifndef GROUP_M
#error "GROUP_M must be defined (the registry passes it)"
#endif
#ifndef CVT
#error "CVT must be defined (the registry passes it)"
#endif
#ifndef WN
#error "WN must be defined (the registry passes it)"
#endif
#define BN 256
#define WM 64
// 8 warps (2 x 4) of 64 x 64, 128 accumulators each. 16 warps of 64 x 32
// (4 per scheduler, to hide the fragment loads) cost 1.5x the shared loads
// and conversions per MMA and measured 13% slower.
static_assert(WN == 64, "the n-tile dealing below is written for 4 warps along N");

enum Tile : int {
    WARPS_N = BN / WN,
    THREADS = (BM / WM) * WARPS_N * 32,
    MT = WM / 16,                       // m-tiles per warp
    NT = WN / 8,                        // n-tiles per warp
    A_ROW_BYTES = BK * 4,
    B_ROW_BYTES = BN * 4,
    A_BYTES = BM * A_ROW_BYTES,
    STAGE_BYTES = A_BYTES + BK * B_ROW_BYTES,
};
typedef XorSwizzle<A_ROW_BYTES> ALayout;     // A tile: BM rows of BK floats
typedef Tf32BSwizzle<B_ROW_BYTES> BLayout;   // B tile: BK rows of BN floats
static_assert(BK % 8 == 0 && BM % WM == 0, "whole k8 steps and warp rows");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");

// Column of C where n-tile j of warp wn starts.
DEVI int ntile_col(int wn, int j) { return 8 * (wn + WARPS_N * j); }

// An operand as the fragment load hands it to the MMA.
DEVI unsigned operand(float x) { return CVT ? to_tf32(x) : __float_as_uint(x); }

extern "C" __global__ void __launch_bounds__(THREADS, 1)
mma_tf32_gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
              int M, int N, int K, float alpha, float beta) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int g = lane >> 2, t = lane & 3;
    const BlockCoord blk = grouped_block_order(GROUP_M);
    const int m0 = blk.m * BM, n0 = blk.n * BN;
    const unsigned smem = smem_u32(dynamic_smem());
    const int KT = (K + BK - 1) / BK;

    // Per-lane fragment addresses relative to a stage. A: ldmatrix rows
    // (lanes 0-15 rows 0-15 at the k-step's first 4-float chunk, lanes 16-31
    // the same rows at its second chunk), one base per k-step because the
    // swizzle mixes the chunk index with the row. B: row t, the chunk of
    // column ntile_col(wn, 0) + g, word g % 4; the k-step (8 rows), b1 (4
    // rows further) and the n-tile (128 bytes) are plain offsets.
    unsigned a_off[BK / 8];
#pragma unroll
    for (int kk = 0; kk < BK / 8; ++kk)
        a_off[kk] = ALayout::offset(wm * WM + (lane & 15), 2 * kk + (lane >> 4));
    const unsigned b_off = A_BYTES + BLayout::offset(t, (ntile_col(wn, 0) + g) / 4) + 4 * (g & 3);

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    auto copy_stage = [&](int stage, int kt) {
        const unsigned base = smem + stage * STAGE_BYTES;
        copy_tile<BM, BK, 4, THREADS, ALayout, ALIGNED>(base, A, K, M, K, m0, kt * BK, tid);
        copy_tile<BK, BN, 4, THREADS, BLayout, ALIGNED>(base + A_BYTES, B, N, K, N, kt * BK, n0,
                                                        tid);
    };

    // Prologue: k-tiles 0 .. STAGES-2 in flight, one commit group each (an
    // empty group when K is short, so the group count below stays exact).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) copy_stage(s, s);
        cp_async_commit();
    }

    // One k8 step's operands: A fragments of the MT m-tiles through
    // ldmatrix, B fragments of the NT n-tiles through 4-byte loads, all
    // rounded to tf32 once, here.
    struct Fragments { unsigned a[MT][4], b[NT][2]; };
    auto load_fragments = [&](Fragments& f, unsigned stage, int kk) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const unsigned b = stage + b_off + kk * 8 * B_ROW_BYTES + j * 32 * WARPS_N;
            f.b[j][0] = operand(__uint_as_float(lds32(b)));
            f.b[j][1] = operand(__uint_as_float(lds32(b + 4 * B_ROW_BYTES)));
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            ldmatrix_x4(f.a[i], stage + a_off[kk] + i * 16 * A_ROW_BYTES);
#pragma unroll
            for (int r = 0; r < 4; ++r) f.a[i][r] = operand(__uint_as_float(f.a[i][r]));
        }
    };
    auto mma_fragments = [&](const Fragments& f) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j) mma_tf32_16x8x8(acc[i][j], f.a[i], f.b[j]);
    };

    for (int kt = 0; kt < KT; ++kt) {
        // STAGES-1 + kt groups are committed; with at most STAGES-2 pending,
        // this thread's part of k-tile kt has landed. The barrier makes every
        // thread's part visible, and also says that all warps are done with
        // the stage computed in the previous iteration: it is refilled next.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int pf = kt + STAGES - 1;
        if (pf < KT) copy_stage(pf % STAGES, pf);
        cp_async_commit();

        const unsigned stage = smem + (kt % STAGES) * STAGE_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 8; ++kk) {
            Fragments f;
            load_fragments(f, stage, kk);
            mma_fragments(f);
        }
    }

#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int row = m0 + wm * WM + i * 16 + g;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int col = n0 + ntile_col(wn, j) + 2 * t;
            store_c2(C, M, N, row, col, acc[i][j][0], acc[i][j][1], alpha, beta);
            store_c2(C, M, N, row + 8, col, acc[i][j][2], acc[i][j][3], alpha, beta);
        }
    }
}
