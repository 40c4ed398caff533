// Rung 11: TF32 tensor cores through mma.sync.m16n8k8 (inline PTX), fp32
// inputs rounded to tf32 in registers with cvt.rna.tf32.f32, a STAGES-deep
// cp.async pipeline with one commit group per k-tile, XOR-swizzled shared
// memory. ptx/10_mma_tf32_ptx.ptx is its twin written directly in PTX: same
// tiles, same layouts, same pipeline.
//
// Block tile BM x BN (128 x 256), k-tile BK = 32 floats; 8 warps in a 2 x 4
// grid, each owning 64 x 64 of C: 4 x 8 mma tiles of 16 x 8, 128 fp32
// accumulators per thread.
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
//
// B has no such trick (its fragment walks down a column of 32-bit values;
// ldmatrix.trans transposes 16-bit elements). Instead the warp's 64 columns
// are renumbered: mma n-tile j, column g, stands for warp column 8g + j
// (any permutation of columns is allowed as long as B and C agree). Then a
// lane's b0 for the 8 n-tiles are B[t][8g .. 8g+7]: two 16-byte loads per
// register row, 4 per k-step, instead of 16 scalar loads. The accumulator
// c0/c1 of n-tile j hold warp columns 16t + j and 16t + 8 + j, so a lane
// owns 16 consecutive columns of each of its rows: 16-byte stores.
#include "mma_common.cuh"

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
#ifndef STAGES
#define STAGES 3
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#define WN 64   // the column renumbering above assumes 8 n-tiles per warp

enum Tile : int {
    WARPS_N = BN / WN,
    THREADS = (BM / WM) * WARPS_N * 32,
    MT = WM / 16,
    A_BYTES = BM * BK * 4,
    STAGE_BYTES = A_BYTES + BK * BN * 4,
};
typedef XorSwizzle<BK * 4> ALayout;         // A tile: BM rows of BK floats
typedef Tf32BSwizzle<BN * 4> BLayout;       // B tile: BK rows of BN floats
static_assert(BK % 8 == 0 && WM % 16 == 0, "whole k8 steps and m16 tiles");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");

DEVI void tf32x4(unsigned (&r)[4], uint4 v) {
    r[0] = to_tf32(__uint_as_float(v.x));
    r[1] = to_tf32(__uint_as_float(v.y));
    r[2] = to_tf32(__uint_as_float(v.z));
    r[3] = to_tf32(__uint_as_float(v.w));
}

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

    float acc[MT][8][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    auto load_stage = [&](int stage, int kt) {
        const unsigned base = smem + stage * STAGE_BYTES;
        copy_tile<BM, BK, 4, THREADS, ALayout, ALIGNED>(base, A, K, M, K, m0, kt * BK, tid);
        copy_tile<BK, BN, 4, THREADS, BLayout, ALIGNED>(base + A_BYTES, B, N, K, N, kt * BK, n0,
                                                        tid);
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }

    const int ld_row = lane & 15, ld_chunk = lane >> 4;   // ldmatrix row addresses
    const int b_chunk = wn * (WN / 4) + 2 * g;           // B[.][wn*64 + 8g ..] as chunks

    for (int kt = 0; kt < KT; ++kt) {
        // k-tile kt has landed (this thread's part; the barrier makes it
        // everyone's) and the stage computed last iteration may be refilled.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int pf = kt + STAGES - 1;
        if (pf < KT) load_stage(pf % STAGES, pf);
        cp_async_commit();

        const unsigned a_tile = smem + (kt % STAGES) * STAGE_BYTES;
        const unsigned b_tile = a_tile + A_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 8; ++kk) {
            unsigned af[MT][4], b0[8], b1[8];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                unsigned raw[4];
                ldmatrix_x4(raw, a_tile + ALayout::offset(wm * WM + i * 16 + ld_row,
                                                           kk * 2 + ld_chunk));
#pragma unroll
                for (int r = 0; r < 4; ++r) af[i][r] = to_tf32(__uint_as_float(raw[r]));
            }
            {
                unsigned q[4];
                tf32x4(q, lds128(b_tile + BLayout::offset(kk * 8 + t, b_chunk)));
                b0[0] = q[0]; b0[1] = q[1]; b0[2] = q[2]; b0[3] = q[3];
                tf32x4(q, lds128(b_tile + BLayout::offset(kk * 8 + t, b_chunk + 1)));
                b0[4] = q[0]; b0[5] = q[1]; b0[6] = q[2]; b0[7] = q[3];
                tf32x4(q, lds128(b_tile + BLayout::offset(kk * 8 + t + 4, b_chunk)));
                b1[0] = q[0]; b1[1] = q[1]; b1[2] = q[2]; b1[3] = q[3];
                tf32x4(q, lds128(b_tile + BLayout::offset(kk * 8 + t + 4, b_chunk + 1)));
                b1[4] = q[0]; b1[5] = q[1]; b1[6] = q[2]; b1[7] = q[3];
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const unsigned bj[2] = {b0[j], b1[j]};
                    mma_tf32_16x8x8(acc[i][j], af[i], bj);
                }
        }
    }

    // Lane (g, t) holds, for rows g and g+8 of each m-tile, the warp columns
    // 16t .. 16t+15: c0 of n-tiles 0..7, then c1 of n-tiles 0..7.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = m0 + wm * WM + i * 16 + g + 8 * h;
            const int col = n0 + wn * WN + 16 * t;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int r = 2 * h + (q >> 1);        // c0/c2 for q < 2, c1/c3 after
                const int j = (q & 1) * 4;             // n-tiles j .. j+3
                const float4 v = make_float4(acc[i][j][r], acc[i][j + 1][r], acc[i][j + 2][r],
                                             acc[i][j + 3][r]);
                store_c4(C, M, N, row, col + 4 * q, v, alpha, beta);
            }
        }
    }
}
