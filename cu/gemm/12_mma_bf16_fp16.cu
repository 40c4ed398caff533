// Rung 12 (bf16) / rung 13 (fp16, -DUSE_FP16=1): mma.sync.m16n8k16 with
// fp32 accumulators, operands fed by ldmatrix from XOR-swizzled shared
// memory, and a STAGES-deep cp.async pipeline with one commit group per
// k-tile. Every warp both copies and computes. The block tile, layouts and
// warp MMAs are in mma_bf16_block.cuh; rung 14 uses the same ones with
// dedicated copy warps.
#include "mma_bf16_block.cuh"

#if USE_FP16
extern "C" __global__ void __launch_bounds__(COMPUTE_THREADS, 1)
mma_fp16_gemm(const u16* __restrict__ A, const u16* __restrict__ B, float* __restrict__ C,
              int M, int N, int K, float alpha, float beta)
#else
extern "C" __global__ void __launch_bounds__(COMPUTE_THREADS, 1)
mma_bf16_gemm(const u16* __restrict__ A, const u16* __restrict__ B, float* __restrict__ C,
              int M, int N, int K, float alpha, float beta)
#endif
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const BlockCoord blk = grouped_block_order(GROUP_M);
    const int m0 = blk.m * BM, n0 = blk.n * BN;
    const unsigned smem = smem_u32(dynamic_smem());
    const int KT = (K + BK - 1) / BK;

    const LaneOffsets lanes = lane_offsets(wm, wn, lane);
    Accumulators acc;
    zero(acc);

    // Prologue: k-tiles 0 .. STAGES-2 in flight, one commit group each (an
    // empty group when K is short, so the group count below stays exact).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT)
            copy_stage<COMPUTE_THREADS>(smem + s * STAGE_BYTES, A, B, M, N, K, m0, n0, s, tid);
        cp_async_commit();
    }

#if FRAG_PIPE
    // Fragment double buffering (see FRAG_PIPE in mma_bf16_block.cuh). The
    // barrier moves to the last k16 step of a k-tile: it still comes after
    // this thread's last read of the stage refilled at the next k-tile's
    // first step (those reads were issued one step earlier), and after the
    // wait that lands k-tile kt+1, whose first fragments are loaded right
    // behind it, before the last step's MMAs.
    constexpr int KSTEPS = BK / 16;
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    Fragments frag[2];
    if (KT > 0) load_fragments(frag[0], smem, lanes, 0);
    for (int kt = 0; kt < KT; ++kt) {
        const unsigned stage = smem + (kt % STAGES) * STAGE_BYTES;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            if (kk < KSTEPS - 1) {
                load_fragments(frag[(kk + 1) & 1], stage, lanes, kk + 1);
            } else {
                // STAGES + kt groups are committed; at most STAGES-2 pending
                // means k-tile kt+1 has landed (for this thread; the barrier
                // publishes every thread's part).
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                if (kt + 1 < KT)
                    load_fragments(frag[0], smem + ((kt + 1) % STAGES) * STAGE_BYTES, lanes, 0);
            }
            if (kk == 0) {
                // The stage of k-tile kt-1: every warp finished reading it
                // before the barrier of the previous k-tile.
                const int pf = kt + STAGES - 1;
                if (pf < KT)
                    copy_stage<COMPUTE_THREADS>(smem + (pf % STAGES) * STAGE_BYTES, A, B, M, N,
                                                K, m0, n0, pf, tid);
                cp_async_commit();
            }
            mma_fragments(acc, frag[kk & 1]);
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
        if (pf < KT)
            copy_stage<COMPUTE_THREADS>(smem + (pf % STAGES) * STAGE_BYTES, A, B, M, N, K, m0, n0,
                                        pf, tid);
        cp_async_commit();
        mma_stage(acc, smem + (kt % STAGES) * STAGE_BYTES, lanes);
    }

#endif

    store_block(acc, C, M, N, m0, n0, wm, wn, lane, alpha, beta);
}
