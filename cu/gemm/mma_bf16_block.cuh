// The 16-bit block tile shared by rung 12/13 (multistage cp.async,
// cu/gemm/12_mma_bf16_fp16.cu) and rung 14 (warp-specialised, cu/gemm/14_...): tile
// constants, shared-memory layouts, the copy of one pipeline stage, one
// k-tile of warp MMAs, and the epilogue. The two rungs differ only in who
// copies and how the stages are handed over, so timing them side by side
// measures exactly that.
//
// mma.sync.m16n8k16 with fp32 accumulators; bf16 inputs, or fp16 with
// -DUSE_FP16=1. Block tile BM x BN (128 x 256), k-tile BK = 32; 8 compute
// warps in a 2 x 4 grid, each owning 64 rows x 8 n-tiles of C (the n-tiles
// dealt round-robin, see warp_n_chunk): 4 x 8 mma tiles of 16 x 8, i.e. 128
// fp32 accumulators per thread. Per 16-wide k-step a warp issues 4
// ldmatrix.x4 for A, 4 ldmatrix.x4.trans for B and 32 MMAs.
//
// Fragment placement (PTX ISA, m16n8k16, lane = 4 g + t):
//   A (16 x 16, row):  a0 = A[g][2t..2t+1]   a1 = A[g+8][2t..]
//                      a2 = A[g][2t+8..]     a3 = A[g+8][2t+8..]
//   B (16 x 8, col):   b0 = B[2t..2t+1][g]   b1 = B[2t+8..2t+9][g]
//   C (16 x 8):        c0,c1 = C[g][2t, 2t+1]   c2,c3 = C[g+8][2t, 2t+1]
// ldmatrix.x4 of the four 8x8 quadrants of A (rows 0-7/8-15 x k 0-7/8-15)
// yields a0..a3 directly; ldmatrix.x4.trans of the k-major B tile yields
// b0, b1 for two neighbouring n-tiles.
#pragma once
#include "ldmatrix.cuh"
#include "mma.cuh"
#include "mma_common.cuh"

#ifndef USE_FP16
#error "USE_FP16 must be defined (the registry passes it)"
#endif
#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
#ifndef BN
#error "BN must be defined (the registry passes it)"
#endif
#ifndef BK
#error "BK must be defined (the registry passes it)"
#endif
#ifndef WM
#error "WM must be defined (the registry passes it)"
#endif
#ifndef WN
#error "WN must be defined (the registry passes it)"
#endif
#ifndef STAGES
#error "STAGES must be defined (the registry passes it)"
#endif
#ifndef GROUP_M
#error "GROUP_M must be defined (the registry passes it)"
#endif
// FRAG_PIPE=1: two fragment sets in registers. While the MMAs of k16 step s
// run, the ldmatrix of step s+1 are already in flight -- including across
// the k-tile boundary, where step 0 of the next stage is loaded right after
// the barrier and before the last step's MMAs, so neither the ldmatrix
// latency nor the barrier leaves the tensor pipe idle. Costs 4 MT + 2 NT =
// 32 more registers per thread.
#ifndef FRAG_PIPE
#error "FRAG_PIPE must be defined (the registry passes it)"
#endif

enum Tile : int {
    WARPS_N = BN / WN,
    COMPUTE_THREADS = (BM / WM) * WARPS_N * 32,
    MT = WM / 16,                           // mma tiles along m per warp
    NT = WN / 8,                            // mma tiles along n per warp
    A_BYTES = BM * BK * 2,
    STAGE_BYTES = A_BYTES + BK * BN * 2,
};
typedef XorSwizzle<BK * 2> ALayout;         // A tile: BM rows of BK elements
typedef XorSwizzle<BN * 2> BLayout;         // B tile: BK rows of BN elements
static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "whole k16 steps, ldmatrix pairs");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");
static_assert(!FRAG_PIPE || BK % 32 == 0,
              "an even number of k16 steps per k-tile: the two fragment sets alternate");

typedef float Accumulators[MT][NT][4];

DEVI void zero(Accumulators& acc) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
}

// Copy k-tile kt of A (BM x BK at rows m0..) and B (BK x BN at columns n0..)
// into the stage at shared address `stage`; thread t of COPY_THREADS.
template <int COPY_THREADS>
DEVI void copy_stage(unsigned stage, const u16* A, const u16* B, int M, int N, int K,
                     int m0, int n0, int kt, int t) {
    copy_tile<BM, BK, 2, COPY_THREADS, ALayout, ALIGNED>(stage, A, K, M, K, m0, kt * BK, t);
    copy_tile<BK, BN, 2, COPY_THREADS, BLayout, ALIGNED>(stage + A_BYTES, B, N, K, N, kt * BK,
                                                         n0, t);
}

// Which columns a warp owns. The B tile is BK rows of 32 chunks (8 columns
// each); the XOR swizzle permutes chunks within aligned groups of 8 by the
// row's low 3 bits. Warp wn owns chunks wn + 4m, m = 0..7: chunk bits 0-1 are
// the warp, bit 2 is chosen by the ldmatrix lane half, bits 3-4 step through
// the four ldmatrix.x4.trans of a k16 step. The swizzle only touches bits
// 0-2, all fixed per lane, so the four loads are one base address plus
// immediate offsets of 128 bytes -- no per-load address registers. (A's rows
// are 64 bytes and both k16 steps' chunks are inside the swizzled bits: two
// bases.) Keeping addresses out of registers matters for the warp-specialised
// rung: its 12 warps put 3 warps on each of the SM's 4 register-file
// partitions, 16384 / 96 threads -> at most 168 registers per thread, and
// 128 accumulators + 16 B + 4 A fragment registers are already 148.
DEVI int warp_n_chunk(int wn, int m) { return wn + 4 * m; }
static_assert(WN == 64 && BN == 4 * WN,
              "the interleaved column ownership assumes 4 warps of 8 n-tiles");

struct LaneOffsets { unsigned a[BK / 16], b; };

DEVI LaneOffsets lane_offsets(int wm, int wn, int lane) {
    // ldmatrix row addresses: lanes 0-15 give rows 0-15 of a 16-row slab,
    // lanes 16-31 the same rows at the other chunk (the next k8 for A, the
    // n-tile 4 chunks further for B).
    const int ld_row = lane & 15, half = lane >> 4;
    LaneOffsets o;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
        o.a[kk] = ALayout::offset(wm * WM + ld_row, kk * 2 + half);
    o.b = A_BYTES + BLayout::offset(ld_row, warp_n_chunk(wn, half));
    return o;
}

// One k16 step's operands of warp (wm, wn): the A fragments of its MT
// m-tiles and the B fragments of its NT n-tiles (4 MT + 2 NT registers).
struct Fragments { unsigned a[MT][4], b[NT][2]; };

// Load k16 step kk of the stage at shared address `stage`.
DEVI void load_fragments(Fragments& f, unsigned stage, const LaneOffsets& o, int kk) {
#pragma unroll
    for (int j = 0; j < NT / 2; ++j) {
        // Matrices (k 0-7, chunk c), (k 8-15, c), (k 0-7, c+4), (k 8-15,
        // c+4) with c = wn + 8j: b0, b1 of n-tile 2j (chunk wn + 4*2j), then
        // of n-tile 2j+1 (chunk wn + 4*(2j+1)).
        unsigned r[4];
        ldmatrix_x4_trans(r, stage + o.b + kk * 16 * (BN * 2) + j * 128);
        f.b[2 * j][0] = r[0];
        f.b[2 * j][1] = r[1];
        f.b[2 * j + 1][0] = r[2];
        f.b[2 * j + 1][1] = r[3];
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        // Quadrants (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7,
        // k 8-15), (rows 8-15, k 8-15) of m-tile i: a0 .. a3.
        ldmatrix_x4(f.a[i], stage + o.a[kk] + i * 16 * (BK * 2));
    }
}

// The MT x NT MMAs of one k16 step.
DEVI void mma_fragments(Accumulators& acc, const Fragments& f) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#if USE_FP16
            mma_f16_16x8x16(acc[i][j], f.a[i], f.b[j]);
#else
            mma_bf16_16x8x16(acc[i][j], f.a[i], f.b[j]);
#endif
        }
}

// One k-tile of MMAs for warp (wm, wn) on the stage at shared address
// `stage`, each k16 step's fragments loaded just before its MMAs (the
// FRAG_PIPE=0 main loops).
DEVI void mma_stage(Accumulators& acc, unsigned stage, const LaneOffsets& o) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        Fragments f;
        load_fragments(f, stage, o, kk);
        mma_fragments(acc, f);
    }
}

// C = alpha * acc + beta * C for warp (wm, wn) of the block at (m0, n0).
DEVI void store_block(const Accumulators& acc, float* C, int M, int N, int m0, int n0,
                      int wm, int wn, int lane, float alpha, float beta) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int row = m0 + wm * WM + i * 16 + g;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int col = n0 + warp_n_chunk(wn, j) * 8 + 2 * t;
            store_c2(C, M, N, row, col, acc[i][j][0], acc[i][j][1], alpha, beta);
            store_c2(C, M, N, row + 8, col, acc[i][j][2], acc[i][j][3], alpha, beta);
        }
    }
}
