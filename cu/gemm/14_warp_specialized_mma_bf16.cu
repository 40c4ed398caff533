// Rung 14: warp specialisation. The block of rung 12 (same tile, layouts,
// stages and warp MMAs: mma_bf16_block.cuh) plus PRODUCER_WARPS copy
// warps; the 8 consumer warps never copy and the producers never compute.
// They hand the STAGES shared-memory stages to each other through named
// barriers.
//
// Hand-over protocol, two named barriers per stage s, each counting all
// THREADS threads (producers + consumers) per phase:
//   FULL(s)  = id 1 + s:          the producers arrive (barrier.arrive, no
//              wait) once stage s holds k-tile kt; the consumers
//              barrier.sync on it before reading. Its completion also makes
//              the producers' copies visible to the consumers.
//   EMPTY(s) = id 1 + STAGES + s: the consumers arrive once they are done
//              reading stage s; the producers barrier.sync on it before they
//              overwrite the stage with k-tile kt + STAGES.
// Each side waits only on the barrier the other side arrives at, so a phase
// always completes with exactly THREADS arrivals, and it cannot be joined
// early by the next phase: to arrive again at FULL(s) a producer must first
// pass EMPTY(s), which needs every consumer to have passed FULL(s). EMPTY(s)
// is only used for k-tiles that have a successor STAGES later, so no phase
// is left half-arrived when the kernel ends.
//
// A producer publishes a stage one k-tile after issuing it: it commits
// k-tile kt, waits until only that newest group is in flight (cp.async data
// is visible to other threads only after the issuing thread waited for it),
// and then arrives at FULL for k-tile kt-1. So up to two k-tiles are in
// flight while the consumers work through the ones already published.
//
// Four producer warps, not one: an SM runs its warps on 4 sub-partitions,
// each with its own issue slot and a quarter of the register file, and
// deals a block's warps out round-robin. One producer warp would put all 48
// copies per k-tile on one partition, next to two consumer warps whose MMAs
// need its issue slots; four spread them evenly. The register budget is the
// same either way: 9 or 12 warps both put 3 warps on some partition,
// 16384 / 96 -> 168 registers per thread (no setmaxnreg here: that is
// sm_90a, the wgmma world), which the consumers fit by keeping their
// addresses out of registers (see lane_offsets in mma_bf16_block.cuh).
// bf16 only (the fp16 twin never made the ladder), and no FRAG_PIPE: the
// consumers load each k16 step's fragments just before its MMAs, as two
// fragment sets next to 128 accumulators do not fit in the 168 registers
// that 12 warps per block leave. Both are properties of this rung, not knobs.
#define USE_FP16 0
#define FRAG_PIPE 0
#include "mma_bf16_block.cuh"
#include "named_barrier.cuh"

#ifndef PRODUCER_WARPS
#error "PRODUCER_WARPS must be defined (the registry passes it)"
#endif

enum WarpRoles : int {
    PRODUCER_THREADS = PRODUCER_WARPS * 32,
    THREADS = COMPUTE_THREADS + PRODUCER_THREADS,
};
static_assert(2 * STAGES + 1 <= 16, "two named barriers per stage among ids 1..15");

DEVI unsigned full_barrier(int stage) { return 1 + stage; }
DEVI unsigned empty_barrier(int stage) { return 1 + STAGES + stage; }

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ws_mma_bf16_gemm(const u16* __restrict__ A, const u16* __restrict__ B, float* __restrict__ C,
                 int M, int N, int K, float alpha, float beta) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const BlockCoord blk = grouped_block_order(GROUP_M);
    const int m0 = blk.m * BM, n0 = blk.n * BN;
    const unsigned smem = smem_u32(dynamic_smem());
    const int KT = (K + BK - 1) / BK;

    if (warp >= COMPUTE_THREADS / 32) {
        // ---- producer: copies only ----
        const int t = tid - COMPUTE_THREADS;
        for (int kt = 0; kt < KT; ++kt) {
            const int s = kt % STAGES;
            // Stage s last held k-tile kt - STAGES: wait until the consumers
            // have released it.
            if (kt >= STAGES) named_barrier_sync(empty_barrier(s), THREADS);
            copy_stage<PRODUCER_THREADS>(smem + s * STAGE_BYTES, A, B, M, N, K, m0, n0, kt, t);
            cp_async_commit();
            if (kt >= 1) {
                cp_async_wait<1>();          // k-tile kt-1 has landed
                named_barrier_arrive(full_barrier((kt - 1) % STAGES), THREADS);
            }
        }
        if (KT >= 1) {
            cp_async_wait<0>();
            named_barrier_arrive(full_barrier((KT - 1) % STAGES), THREADS);
        }
        return;
    }

    // ---- consumers: compute only ----
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const LaneOffsets lanes = lane_offsets(wm, wn, lane);
    Accumulators acc;
    zero(acc);
    for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % STAGES;
        named_barrier_sync(full_barrier(s), THREADS);
        mma_stage(acc, smem + s * STAGE_BYTES, lanes);
        // The producer refills stage s only for k-tile kt + STAGES.
        if (kt + STAGES < KT) named_barrier_arrive(empty_barrier(s), THREADS);
    }
    store_block(acc, C, M, N, m0, n0, wm, wn, lane, alpha, beta);
}
