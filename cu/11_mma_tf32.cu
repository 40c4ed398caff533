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
// and ldmatrix.trans transposes 16-bit elements. But which column of C an
// n-tile's column nn stands for is ours to choose, as long as the epilogue
// agrees. B_VEC=1: warp wn owns columns 64 wn .. 64 wn + 63 as two
// groups of 32, and in group q n-tile 4q + jj's column nn is column
// 64 wn + 32 q + 4 nn + jj. Lane (g, t) then finds b0 of the group's four
// n-tiles side by side, B[t][64 wn + 32 q + 4 g + 0..3]: one 16-byte load
// (and b1 one more, 4 rows down), so a k8 step takes 4 loads for B instead
// of 16. Conflict-free: of the 8 lanes one 16-byte load phase serves (g in
// {0, 1}, t = 0..3), Tf32BSwizzle puts chunk g of row t at slot g ^ 2t, 8
// different slots. In the accumulators lane (g, t) then holds columns
// 8t .. 8t+7 of the group (c0 of the 4 n-tiles, then c1 of them): the
// epilogue writes them with two 16-byte stores per row.
// B_VEC=0 (default; 14% faster on the H200 than B_VEC=1, measured side by
// side in benchmarks/mma_sweep.py): n-tile j of warp wn is columns 8 (wn + 4j) .. (dealt round-robin)
// and each lane loads b0, b1 of each n-tile with two 4-byte loads.
#include "mma_common.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef B_VEC
#define B_VEC 0
#endif
// CVT=1: cvt.rna.tf32.f32 (in SASS a finiteness test and a predicated add of
// half an ulp; the mask of the low 13 bits is left out, as the MMA ignores
// them). CVT=0 (measurement only, never registered): the raw bits, truncated
// by the MMA -- shows what the 32 conversions per k8 step cost.
#ifndef CVT
#define CVT 1
#endif
// FRAG_PIPE=1: two fragment sets in registers, the next k8 step's loads in
// flight during this step's MMAs (32 more registers per thread).
#ifndef FRAG_PIPE
#define FRAG_PIPE 0
#endif
#define BN 256    // the n-tile dealing below assumes 4 warps x 8 n-tiles
#define WM 64
#define WN 64

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

DEVI unsigned operand(float x) { return CVT ? to_tf32(x) : __float_as_uint(x); }

// B_VEC=0: column of C where n-tile j of warp wn starts.
DEVI int ntile_col(int wn, int j) { return 8 * (wn + WARPS_N * j); }

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
    // swizzle mixes the chunk index with the row: k-step kk's chunk 2 kk + h
    // lands at (2 kk + h) ^ x = (h ^ x) ^ 2 kk, so its offset is step 0's
    // XOR (kk << 5) -- one instruction per k-step instead of a register each.
    // B: the k-step (8 rows), b1 (4 rows further) and the n-tile are plain
    // offsets from one base.
    const unsigned a_off0 = ALayout::offset(wm * WM + (lane & 15), lane >> 4);
    // B_VEC: row t, chunk 16 wn + g (+8 for group 1: 128 bytes, untouched by
    // the swizzle, which only flips chunk bits 1-2). Otherwise row t, the
    // chunk of column ntile_col(wn, 0) + g, word g % 4.
    const unsigned b_off = B_VEC ? A_BYTES + BLayout::offset(t, 16 * wn + g)
                                 : A_BYTES + BLayout::offset(t, (ntile_col(wn, 0) + g) / 4) +
                                       4 * (g & 3);

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
        if (B_VEC) {
#pragma unroll
            for (int q = 0; q < NT / 4; ++q) {
                const unsigned b = stage + b_off + kk * 8 * B_ROW_BYTES + q * 128;
                const uint4 b0 = lds128(b), b1 = lds128(b + 4 * B_ROW_BYTES);
                const unsigned v0[4] = {b0.x, b0.y, b0.z, b0.w}, v1[4] = {b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                for (int jj = 0; jj < 4; ++jj) {
                    f.b[4 * q + jj][0] = operand(__uint_as_float(v0[jj]));
                    f.b[4 * q + jj][1] = operand(__uint_as_float(v1[jj]));
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const unsigned b = stage + b_off + kk * 8 * B_ROW_BYTES + j * 128;
                f.b[j][0] = operand(__uint_as_float(lds32(b)));
                f.b[j][1] = operand(__uint_as_float(lds32(b + 4 * B_ROW_BYTES)));
            }
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            ldmatrix_x4(f.a[i], stage + (a_off0 ^ (kk << 5)) + i * 16 * A_ROW_BYTES);
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

#if FRAG_PIPE
    // Fragment double buffering, as in rung 12: while the MMAs of k8 step s
    // run, the loads of step s+1 are in flight, across the k-tile boundary
    // too (the barrier moves to the last step of a k-tile; see 12_mma_bf16.cu
    // for why that order is safe).
    constexpr int KSTEPS = BK / 8;
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    Fragments frag[2];
    if (KT > 0) load_fragments(frag[0], smem, 0);
    for (int kt = 0; kt < KT; ++kt) {
        const unsigned stage = smem + (kt % STAGES) * STAGE_BYTES;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            if (kk < KSTEPS - 1) {
                load_fragments(frag[(kk + 1) & 1], stage, kk + 1);
            } else {
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                if (kt + 1 < KT) load_fragments(frag[0], smem + ((kt + 1) % STAGES) * STAGE_BYTES, 0);
            }
            if (kk == 0) {
                const int pf = kt + STAGES - 1;
                if (pf < KT) copy_stage(pf % STAGES, pf);
                cp_async_commit();
            }
            mma_fragments(frag[kk & 1]);
        }
    }
#else
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
#endif

#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int row = m0 + wm * WM + i * 16 + g;
        if (B_VEC) {
#pragma unroll
            for (int q = 0; q < NT / 4; ++q) {
                const int col = n0 + 64 * wn + 32 * q + 8 * t;
#pragma unroll
                for (int h = 0; h < 2; ++h) {  // rows g (c0, c1) and g + 8 (c2, c3)
                    const float (*a)[4] = &acc[i][4 * q];
                    store_c4(C, M, N, row + 8 * h, col,
                             make_float4(a[0][2 * h], a[1][2 * h], a[2][2 * h], a[3][2 * h]),
                             alpha, beta);
                    store_c4(C, M, N, row + 8 * h, col + 4,
                             make_float4(a[0][2 * h + 1], a[1][2 * h + 1], a[2][2 * h + 1],
                                         a[3][2 * h + 1]),
                             alpha, beta);
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int col = n0 + ntile_col(wn, j) + 2 * t;
                store_c2(C, M, N, row, col, acc[i][j][0], acc[i][j][1], alpha, beta);
                store_c2(C, M, N, row + 8, col, acc[i][j][2], acc[i][j][3], alpha, beta);
            }
        }
    }
}
