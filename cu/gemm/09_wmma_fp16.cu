// Rung 09: the first tensor-core rung. WMMA (warp matrix multiply-
// accumulate): each warp multiplies 16 x 16 x 16 fp16 fragments into fp32
// accumulators with wmma.mma, loading fragments from shared memory with
// wmma.load and storing results with wmma.store. Which lane holds which
// element is deliberately hidden (the fragment is 8 opaque registers), so
// the kernel never touches an accumulator element directly: the epilogue
// goes through shared memory to apply alpha, beta and the edge guards.
//
// Block tile 128 x 128, k-tile 32; 8 warps in a 2 x 4 grid, each owning
// 64 x 32 of C = 4 x 2 fragments. Two shared-memory stages filled by
// cp.async (load k-tile kt+1 while computing kt). Rows are padded rather
// than swizzled (wmma.load takes a plain stride), with strides that are
// multiples of 32 bytes because wmma.load wants every fragment row to start
// on a 32-byte boundary.
#include "mma_common.cuh"
#include "wmma.cuh"

#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
#ifndef BN
#error "BN must be defined (the registry passes it)"
#endif
#ifndef WM
#error "WM must be defined (the registry passes it)"
#endif
#ifndef WN
#error "WN must be defined (the registry passes it)"
#endif
#ifndef GROUP_M
#error "GROUP_M must be defined (the registry passes it)"
#endif
#if !defined(BK) || !defined(STAGES)
#error "BK and STAGES must be defined (the registry passes them)"
#endif
static_assert(BK == 32, "two k16 steps; the padded A row below assumes it");
static_assert(STAGES == 2, "the loop below is written for double buffering");

enum Tile : int {
    WARPS_N = BN / WN,
    THREADS = (BM / WM) * WARPS_N * 32,
    FM = WM / 16,                     // fragments along m per warp
    FN = WN / 16,                     // fragments along n per warp
    A_LD = BK + 16,                   // padded row lengths in elements:
    B_LD = BN + 16,                   //   96 and 288 bytes
    A_BYTES = BM * A_LD * 2,
    STAGE_BYTES = A_BYTES + BK * B_LD * 2,
    STAGING_LD = 16,                  // fp32 staging tile for one fragment
};
typedef PaddedRows<A_LD * 2> ALayout;
typedef PaddedRows<B_LD * 2> BLayout;
static_assert((A_LD * 2) % 32 == 0 && (B_LD * 2) % 32 == 0, "wmma rows start 32-byte aligned");
static_assert(STAGES * STAGE_BYTES >= THREADS / 32 * 16 * STAGING_LD * 4,
              "the epilogue staging fits in the stage buffers");

extern "C" __global__ void __launch_bounds__(THREADS)
wmma_fp16_gemm(const u16* __restrict__ A, const u16* __restrict__ B, float* __restrict__ C,
               int M, int N, int K, float alpha, float beta) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const BlockCoord blk = grouped_block_order(GROUP_M);
    const int m0 = blk.m * BM, n0 = blk.n * BN;
    const unsigned smem = smem_u32(dynamic_smem());
    const int KT = (K + BK - 1) / BK;

    float acc[FM][FN][8];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int r = 0; r < 8; ++r) acc[i][j][r] = 0.0f;

    auto copy_stage = [&](int stage, int kt) {
        const unsigned base = smem + stage * STAGE_BYTES;
        copy_tile<BM, BK, 2, THREADS, ALayout, ALIGNED>(base, A, K, M, K, m0, kt * BK, tid);
        copy_tile<BK, BN, 2, THREADS, BLayout, ALIGNED>(base + A_BYTES, B, N, K, N, kt * BK, n0,
                                                        tid);
    };

    if (KT > 0) copy_stage(0, 0);
    cp_async_commit();
    for (int kt = 0; kt < KT; ++kt) {
        // k-tile kt has landed for this thread; after the barrier, for all,
        // and every warp is done with the other stage, which is refilled.
        cp_async_wait<0>();
        __syncthreads();
        if (kt + 1 < KT) copy_stage((kt + 1) % STAGES, kt + 1);
        cp_async_commit();

        const unsigned a_tile = smem + (kt % STAGES) * STAGE_BYTES;
        const unsigned b_tile = a_tile + A_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned af[FM][8], bf[FN][8];
#pragma unroll
            for (int i = 0; i < FM; ++i)
                wmma_load_a_f16(af[i], a_tile + ALayout::offset(wm * WM + i * 16, 0) + kk * 32,
                                A_LD);
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma_load_b_f16(bf[j], b_tile + BLayout::offset(kk * 16, 0) +
                                           (wn * WN + j * 16) * 2, B_LD);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma_mma_f16_f32(acc[i][j], af[i], bf[j]);
        }
    }

    // Epilogue: each warp stores one fragment at a time into its own 16 x 16
    // fp32 staging tile (reusing the stage buffers once every warp is done
    // with them), then each lane applies alpha/beta to 8 consecutive
    // elements of one row and writes the ones inside C.
    __syncthreads();
    const unsigned staging = smem + warp * (16 * STAGING_LD * 4);
    const int srow = lane >> 1, scol = (lane & 1) * 8;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma_store_f32(staging, acc[i][j], STAGING_LD);
            __syncwarp();
            const unsigned src = staging + (srow * STAGING_LD + scol) * 4;
            const uint4 lo = lds128(src), hi = lds128(src + 16);
            const int row = m0 + wm * WM + i * 16 + srow;
            const int col = n0 + wn * WN + j * 16 + scol;
            store_c4(C, M, N, row, col,
                     make_float4(__uint_as_float(lo.x), __uint_as_float(lo.y),
                                 __uint_as_float(lo.z), __uint_as_float(lo.w)), alpha, beta);
            store_c4(C, M, N, row, col + 4,
                     make_float4(__uint_as_float(hi.x), __uint_as_float(hi.y),
                                 __uint_as_float(hi.z), __uint_as_float(hi.w)), alpha, beta);
            __syncwarp();   // the next fragment overwrites the staging tile
        }
}
