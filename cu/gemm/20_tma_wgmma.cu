// Rung 20: Hopper's own GEMM path (sm_90a). The copy engine (TMA) moves tiles
// of A and B from global to shared memory on its own, completing on mbarriers;
// warpgroup MMAs (wgmma) read them from shared memory and accumulate in
// registers asynchronously. In SASS: UTMALDG for the copies, HGMMA for the
// math, SYNCS for the barriers (and UTMASTG for the TMA-store epilogue).
//
// Kernel signature (differs from the plain GEMM rungs: A and B arrive as
// tensor maps, built on the host by drvgemm/ladders/gemm/hopper.py):
//   extern "C" __global__ void gemm_tma_wgmma_{bf16,fp16,tf32}(
//       const __grid_constant__ TmaMap mapA,   // A, M x K row-major
//       const __grid_constant__ TmaMap mapB,   // B, K x N row-major
//       const __grid_constant__ TmaMap mapC,   // C, M x N (EPILOGUE 2 only)
//       void* C, int M, int N, int K, float alpha, float beta,
//       float* partials, long long split_stride, int splits, unsigned* fold)
// C = alpha * A @ B + beta * C, C row-major M x N, fp32 -- or, built with
// OUT_16=1, the inputs' own 16-bit type (bf16 / fp16 entries; the fp32
// result rounded to nearest even, as cuBLAS writes a bf16 C); beta == 0 never
// reads C. Any M, N >= 1 (edge tiles: skipped copies + guarded or clipped stores),
// any K >= 1 (the copy engine zero-fills the part of a box past K).
//
// Split-K (splits > 1): the work units are tiles x splits; unit (tile, s)
// accumulates k-tiles [s * KT / S, (s + 1) * KT / S) (an empty piece counts
// as zeros). Two ways to add the pieces, chosen by the host per launch:
// - fold == 0: every unit writes its raw fp32 partial product to partials +
//   s * split_stride (an M x N row-major slice) instead of C, and
//   split_reduce.cu then sums the slices in split order and writes C;
// - fold != 0 (folded in the kernel): units s < S - 1 write their partials
//   in the accumulators' own order (a slice of whole tiles, partials + s *
//   split_stride) and count themselves in the tile's counter (fold, one per
//   tile and consumer warpgroup, zero at the start of the launch); unit S - 1
//   waits for the count, adds slices 0, 1, ..., S - 2 to its accumulators in
//   that order, sets the counter back to zero and writes C. No second launch.
//   Units run split by split, so a unit waits only for units numbered below
//   its own, which the resident persistent grid reaches first: no deadlock.
// Either way the order of the additions is fixed: the same bits every run.
// For splits == 1 the host passes partials = 0, split_stride = 0, fold = 0.
//
// Block: 2 consumer warpgroups, each owning 64 rows of a 128 x TILE_X wgmma
// tile (m64nNk16 / m64nNk8 instructions with N = TILE_X = 128, 192 or 256:
// the member's BN, or BM for tf32; N / 2 fp32 accumulators per thread), plus, when
// WARP_SPECIALIZED, a producer warpgroup whose single thread keeps a
// STAGES-deep ring of shared-memory tiles full. setmaxnreg moves registers
// from the producer (40) to the consumers (232): 128*40 + 256*232 = 64512 of
// the 65536 registers of the SM, which the launch bound (384, 1) reserves.
// The 64-row members (bf16 / fp16 BM = 64; tf32 BN = 64, 64 columns of C^T)
// have one consumer warpgroup: 256 threads, no register move.
//
// Layouts. 16-bit types: wgmma's A is our A (K-major, 64 elements = one
// 128-byte swizzled line per row), wgmma's B is our B read N-major ("transposed",
// tnsp-b = 1), loaded as TILE_X / 64 boxes of 64(k) x 64(n) so each 64-column chunk is its
// own 8 KB swizzled block. TF32: wgmma cannot transpose 32-bit operands and B
// is N-major in memory, so the roles swap: the block computes C^T = B^T A^T;
// wgmma's B is our A (K-major, fine), wgmma's A is our B, which each thread
// loads from the swizzled shared tile into the register fragment itself
// (rounded to tf32 on the way). The wgmma tile is then 128 columns x TILE_X rows
// of C and the epilogue writes it transposed. Our A reaches the tensor cores
// through TMA unchanged, so its low 13 mantissa bits are dropped (truncation).
// Swapped 16-bit (SWAP_AB=1, the few-row members BM x 64): the same C^T, but
// wgmma's A is our B read from shared memory MN-major (tnsp-a = 1: one 8 KB
// box of 64(k) x 64(n), the box the plain tile loads), wgmma's B our A
// K-major (tnsp-b = 0: one box of BM rows x 64 k); wgmma N = BM = 8, 16 or 32.
// Each stage is 8 KB of B and 1-4 KB of A, and the math per byte of B is
// BM / 64 of the plain 64-row tile's: a product of M <= 32 rows streams B.
//
// Build steps, selected at compile time so that each can be measured:
//   WARP_SPECIALIZED=0  TMA + wgmma only: 256 threads, thread 0 also refills
//                       the ring between its own MMAs
//   WARP_SPECIALIZED=1  + producer warpgroup, setmaxnreg (default)
//   persistent grid     chosen on the host (grid = SM count); same kernel
//   CLUSTER=2           + clusters of 2 blocks along the 128-row direction that
//                       share the TILE_X-wide operand: each block loads part of it
//                       and multicasts to both
// and two choices benchmarks/wgmma_sweep.py measures side by side:
//   GROUP     tile order: GROUP unit rows (along M) are swept column by
//             column, so the blocks running at one time cover a compact block
//             of C and share its A rows and B columns in L2.
//   EPILOGUE  0: 8-byte stores straight from the accumulators; 2: each
//             consumer warpgroup stages 64 x 32 fp32 chunks in shared memory
//             (double-buffered) and the copy engine stores them (TMA store),
//             so the stores drain while the next tile's mainloop runs. 2
//             applies to bf16/fp16 and needs beta == 0, N % 4 == 0 and C
//             16-byte aligned, else the kernel falls back to 0 at run time.
// A consumer keeps one stage of wgmmas in flight while issuing the next (a
// stage is released one stage late), and tf32 consumers load their register
// fragments from 4 addresses per stage, rounded without cvt.rna's mask
// (mma_stage). The experiments these replaced are in
// benchmarks/notes/removed-knobs.md.
#include "cluster.cuh"
#include "grid_dependency.cuh"
#include "grid_flags.cuh"
#include "half_bits.cuh"
#include "ld_st.cuh"
#include "mbarrier.cuh"
#include "named_barrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

#ifndef WARP_SPECIALIZED
#error "WARP_SPECIALIZED must be defined (the registry passes it)"
#endif
#ifndef CLUSTER
#error "CLUSTER must be defined (the registry passes it)"
#endif
#ifndef STAGES
#error "STAGES must be defined (the registry passes it)"
#endif
// GROUP: unit rows swept together
#ifndef GROUP
#error "GROUP must be defined (the registry passes it)"
#endif
#ifndef EPILOGUE
#error "EPILOGUE must be defined (the registry passes it)"
#endif
// OUT_16: 1: the bf16 / fp16 entries write C in their input type (half the bytes)
#ifndef OUT_16
#error "OUT_16 must be defined (the registry passes it)"
#endif
// WGMMA_ELEM: the entry to build, 1 bf16, 2 fp16, 3 tf32 (one per
// instantiation: BM, BN and BK below are that entry's)
#ifndef WGMMA_ELEM
#error "WGMMA_ELEM must be defined (the registry passes it)"
#endif
// BM x BN: the block's tile of C; BK: k per stage. The host derives its
// tensor-map boxes from the same registered values.
#if !defined(BM) || !defined(BN) || !defined(BK)
#error "BM, BN and BK must be defined (the registry passes them)"
#endif
// SPLIT_K: 1: the split-K instantiation (work units = tiles x splits, each
// unit's k-range computed from its split, the fp32 partial epilogue); 0: K in
// one piece, none of that code (the host launches it for splits == 1 only and
// passes partials, split_stride, splits = 0, 0, 1, which it then ignores).
#ifndef SPLIT_K
#error "SPLIT_K must be defined (the registry passes it)"
#endif
// SWAP_AB: 1: the block computes C^T = B^T A^T, wgmma's M running along N and
// its N along M: always for tf32 (see Layouts), and for the few-row bf16 / fp16
// members (BM = 8, 16 or 32 rows of A as wgmma's N, a 64-column strip of B as
// its M): a product of a few rows then streams B through 64-column strips
// without computing 64 rows of padding per tile. 0: the plain 16-bit tile.
#ifndef SWAP_AB
#error "SWAP_AB must be defined (the registry passes it)"
#endif
// ALIGNED (passed to every rung) does not apply: loads are TMA's, and the
// epilogue checks its own alignment at run time. PERSISTENT, SM_LIMIT and
// BALANCE are read by the host only (they choose the grid).

#define ELEM_BF16 1
#define ELEM_FP16 2
#define ELEM_TF32 3

static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER must be 1 or 2");
static_assert(CLUSTER == 1 || WARP_SPECIALIZED, "clusters need the producer warpgroup");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES: 2 to 8 (the ring must fit shared memory, below)");
static_assert(GROUP >= 1, "GROUP must be positive");
static_assert(EPILOGUE == 0 || EPILOGUE == 2, "EPILOGUE must be 0 (direct) or 2 (TMA store)");
static_assert(WGMMA_ELEM >= 1 && WGMMA_ELEM <= 3, "WGMMA_ELEM must be 1, 2 or 3");
static_assert(OUT_16 == 0 || OUT_16 == 1, "OUT_16 must be 0 or 1");
static_assert(!(OUT_16 && WGMMA_ELEM == 3), "tf32 writes an fp32 C: OUT_16 is for bf16 / fp16");
static_assert(SWAP_AB == 1 || WGMMA_ELEM != ELEM_TF32, "tf32 tiles are always swapped");
static_assert(SWAP_AB == 0 || SWAP_AB == 1, "SWAP_AB must be 0 or 1");
// The swapped 16-bit tile: wgmma's A is B's 64-column strip read MN-major
// (tnsp-a), its B the rows of A, K-major.
constexpr bool SWAP_16 = SWAP_AB && WGMMA_ELEM != ELEM_TF32;

// wgmma M: rows of A (columns of C when swapped): BM, or BN. One
// consumer warpgroup per 64 of them: 128 (two consumers), or for 16-bit
// inputs 64 (one consumer: the small-M members, whose rows would otherwise
// be half padding, and the swapped ones' 64-column strips).
constexpr int TILE_Y = SWAP_AB ? BN : BM;
constexpr int CONSUMERS = TILE_Y / 64;
static_assert(TILE_Y == 128 || TILE_Y == 64,
              "wgmma M (BM, or BN when swapped) must be 128 (two consumers) or 64 (one)");
constexpr int THREADS = (WARP_SPECIALIZED ? 128 : 0) + CONSUMERS * 128;
// wgmma N: columns of B (rows of C when swapped): the entry's BN (BM when
// swapped). One value per instantiation; the family's members differ in it.
constexpr int TILE_X = SWAP_AB ? BM : BN;
static_assert(SWAP_16 ? (TILE_X == 8 || TILE_X == 16 || TILE_X == 32)
                      : (TILE_X % 64 == 0 && TILE_X >= 64 && TILE_X <= 256),
              "wgmma N (BN, or BM when swapped): 64, 128, 192 or 256 (whole 64-wide boxes); "
              "8, 16 or 32 rows of A for the swapped 16-bit tile");
constexpr int ACC = WgmmaN<TILE_X>::ACC;   // fp32 accumulators per consumer thread
// The TILE_X-side operand arrives in boxes of 64 lines of 128 bytes (64
// columns of B, or 64 rows of A for tf32), or, swapped 16-bit, in one box of
// its TILE_X rows of A.
constexpr int X_BOX_LINES = TILE_X < 64 ? TILE_X : 64;
constexpr int X_BOXES = TILE_X / X_BOX_LINES;

// One stage of the ring: the TILE_Y-side operand (TILE_Y lines of 128 bytes:
// 16 or 8 KB) then the TILE_X-side operand (X_BOXES boxes of X_BOX_LINES
// lines: 8 KB, or 1-4 KB swapped 16-bit). Every block of both starts on a 1024-byte
// boundary, as the 128-byte swizzle pattern repeats every 8 lines.
constexpr u32 Y_BYTES = TILE_Y * 128;
constexpr u32 X_BOX_BYTES = X_BOX_LINES * 128;
constexpr u32 X_BYTES = X_BOXES * X_BOX_BYTES;
constexpr u32 STAGE_BYTES = Y_BYTES + X_BYTES;
// EPILOGUE 2: per consumer warpgroup two 8 KB buffers, each one TMA box of
// C: 64 rows of one 128-byte swizzled line (32 fp32 or 64 16-bit columns).
constexpr u32 C_BOX_BYTES = 64 * 128;
constexpr u32 STAGING_BYTES = EPILOGUE == 2 ? CONSUMERS * 2 * C_BOX_BYTES : 0;
// Shared memory, from a 1024-aligned base: the ring, the staging buffers,
// then 16 * STAGES bytes of full/empty barriers. The host
// (hopper.wgmma_smem_bytes) requests STAGES * STAGE_BYTES + STAGING_BYTES +
// 16 * STAGES + 1024 bytes (the last 1024: slack to align the base), which
// must fit the opt-in limit of a block on sm_90 (227 KB).
static_assert(STAGES * STAGE_BYTES + STAGING_BYTES + 16 * STAGES + 1024 <= 232448,
              "STAGES stages of this tile (and the C staging) exceed 227 KB of shared memory");

#if WARP_SPECIALIZED
// Two consumers: setmaxnreg moves registers from the producer to them (the
// launch bound leaves 168 a thread at entry). One consumer (256 threads, one
// block an SM) has all it needs at entry (up to 255): no move.
constexpr bool MOVE_REGS = CONSUMERS > 1;
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = 232;
#endif

template <int ELEM>
struct Elem {
    static constexpr bool SWAP = SWAP_AB;
    // wgmma's A from registers: tf32 (each thread loads B^T's fragment itself)
    static constexpr bool A_FRAG = ELEM == ELEM_TF32;
    static constexpr int K_TILE = BK;  // k per stage
    // One 128-byte swizzled line of k per row of a stage, and the wgmma tile
    // (TILE_Y along wgmma M, TILE_X along N) is the block's tile of C, seen
    // transposed when swapped.
    static_assert(BK * (ELEM == ELEM_TF32 ? 4 : 2) == 128, "BK: one 128-byte line of k");
    // a transposed tile stores directly
    static constexpr int EPI = SWAP ? 0 : EPILOGUE;
    // C's element: fp32, or with OUT_16 the input's 16-bit type
    static constexpr bool NARROW = OUT_16 && ELEM != ELEM_TF32;
    static constexpr int C_BOX_COLS = NARROW ? 64 : 32;
};

struct Ring {
    u32 base;       // stage 0 (1024-aligned shared address)
    u32 staging;    // EPILOGUE 2 buffers
    u32 full;       // STAGES barriers: the stage's bytes have landed
    u32 empty;      // STAGES barriers: every consumer is done with the stage
    __device__ u32 stage(int s) const { return base + s * STAGE_BYTES; }
    __device__ u32 full_bar(int s) const { return full + 8 * s; }
    __device__ u32 empty_bar(int s) const { return empty + 8 * s; }
};

struct Cursor {  // position in a ring: slot index and the parity of its current phase
    int s = 0;
    u32 phase = 0;
    template <int SLOTS = STAGES>
    __device__ void next() {
        if (++s == SLOTS) {
            s = 0;
            phase ^= 1;
        }
    }
};

#include "20_tma_wgmma/scheduler.cuh"

// ---------------------------------------------------------------------------
// Producer: one thread fills one stage. Boxes that lie wholly outside the
// matrix are not issued (and not counted): their part of the tile keeps stale
// data, which only reaches rows/columns of C the epilogue does not store.
// ---------------------------------------------------------------------------
template <int ELEM>
__device__ __forceinline__ void fill_stage(const TmaMap* mapA, const TmaMap* mapB, const Ring& ring,
                                           int s, const Problem& p, int k0, int y0, int x0,
                                           u32 rank) {
    constexpr bool SWAP = Elem<ELEM>::SWAP;
    const u32 ybase = ring.stage(s);
    const u32 xbase = ybase + Y_BYTES;
    const u32 full = ring.full_bar(s);

    // Swapped, B arrives in boxes of Y_COLS columns (32 fp32 or 64 16-bit:
    // one 128-byte line of a k-row each).
    constexpr int Y_COLS = Elem<ELEM>::A_FRAG ? 32 : 64;
    constexpr int Y_BOXES = TILE_Y / Y_COLS;
    u32 bytes = 0;
    if constexpr (!SWAP) {
        if (y0 < p.y_ext) bytes += Y_BYTES;  // A: one box of TILE_Y rows
    } else {
#pragma unroll
        for (int j = 0; j < Y_BOXES; ++j)    // B: column boxes
            if (y0 + Y_COLS * j < p.y_ext) bytes += Y_BYTES / Y_BOXES;
    }
#pragma unroll
    for (int j = 0; j < X_BOXES; ++j)
        if (x0 + X_BOX_LINES * j < p.x_ext) bytes += X_BOX_BYTES;
    // A partially out-of-bounds box still delivers (zero-filled) its full size.
    mbar_arrive_expect_tx(full, bytes);

    if constexpr (!SWAP) {
        if (y0 < p.y_ext) tma_load_2d(ybase, mapA, k0, y0, full);
    } else {
#pragma unroll
        for (int j = 0; j < Y_BOXES; ++j)
            if (y0 + Y_COLS * j < p.y_ext)
                tma_load_2d(ybase + j * (Y_BYTES / Y_BOXES), mapB, y0 + Y_COLS * j, k0, full);
    }
#pragma unroll
    for (int j = 0; j < X_BOXES; ++j) {
        if (x0 + X_BOX_LINES * j >= p.x_ext || (j % CLUSTER) != static_cast<int>(rank)) continue;
        const TmaMap* map = SWAP ? mapA : mapB;
        const int c0 = SWAP ? k0 : x0 + X_BOX_LINES * j;
        const int c1 = SWAP ? x0 + X_BOX_LINES * j : k0;
        if constexpr (CLUSTER > 1)
            tma_load_2d_multicast(xbase + j * X_BOX_BYTES, map, c0, c1, full,
                                  static_cast<unsigned short>((1u << CLUSTER) - 1));
        else
            tma_load_2d(xbase + j * X_BOX_BYTES, map, c0, c1, full);
    }
}

// ---------------------------------------------------------------------------
// Consumer: issue the wgmmas of one stage for warpgroup c (rows 64c..64c+63 of
// the wgmma tile). Leaves them in flight as one committed group.
// ---------------------------------------------------------------------------
// A 16-bit stage: four k16 steps, both operands from shared memory. Per step
// the K-major operand moves 32 bytes along its 128-byte lines (the swizzle is a
// function of the address, so an offset inside the atom stays consistent),
// the MN-major one 16 k-lines (two 8-line atoms); ``mn_lbo``: the MN-major
// operand's distance to its next 64-element chunk. MN_A: wgmma's A is the
// MN-major one (the swapped tile), else its B.
template <int ELEM, bool MN_A>
__device__ __forceinline__ void mma_stage_16(float (&acc)[ACC], u32 k_major, u32 mn_major,
                                             u32 mn_lbo, bool first) {
    // The first step's descriptors; step kk adds its offset to their address
    // field (16-byte units, the low 14 bits: a block's shared addresses stay
    // below 2^18 bytes, so the add never carries out of the field).
    const u64 k0 = smem_desc_sw128(k_major, 16, 1024);
    const u64 mn0 = smem_desc_sw128(mn_major, mn_lbo, 1024);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        const u64 dk = k0 + (kk * 32 >> 4);
        const u64 dmn = mn0 + (kk * 16 * 128 >> 4);
        // wgmma's A descriptor, then its B
        const u64 da = MN_A ? dmn : dk;
        const u64 db = MN_A ? dk : dmn;
        const int scale_d = (first && kk == 0) ? 0 : 1;
        if constexpr (MN_A && ELEM == ELEM_BF16)
            wgmma_m64nNk16_bf16_mn_a<TILE_X>(acc, da, db, scale_d);
        else if constexpr (MN_A)
            wgmma_m64nNk16_fp16_mn_a<TILE_X>(acc, da, db, scale_d);
        else if constexpr (ELEM == ELEM_BF16)
            wgmma_m64nNk16_bf16<TILE_X>(acc, da, db, scale_d);
        else
            wgmma_m64nNk16_fp16<TILE_X>(acc, da, db, scale_d);
    }
    wgmma_commit();
}

template <int ELEM>
__device__ __forceinline__ void mma_stage(float (&acc)[ACC], u32 (&frag)[4][4], u32 stage, int c,
                                          bool first) {
    const u32 ybase = stage;
    const u32 xbase = stage + Y_BYTES;
    if constexpr (!Elem<ELEM>::SWAP) {
        (void)frag;
        // wgmma's A: this warpgroup's 64 lines of A; its B: the X_BOXES boxes of B
        mma_stage_16<ELEM, false>(acc, ybase + c * 64 * 128, xbase, X_BOX_BYTES, first);
    } else if constexpr (!Elem<ELEM>::A_FRAG) {
        (void)frag;
        // Swapped 16-bit: wgmma's A is this warpgroup's 64 columns of B (one
        // 8 KB box: one 64-wide chunk, so the leading offset is never used),
        // its B the TILE_X rows of A.
        mma_stage_16<ELEM, true>(acc, xbase, ybase + c * 64 * 128, 64 * 128, first);
    } else {
        // Fragment of wgmma's A (= B^T, 64 columns of B for this warpgroup):
        // warp w holds columns 16w.. of them, lane (g, t) = (l/4, l%4) the
        // columns g, g+8 at k = t, t+4 of each k8 step. They live in B box
        // 2c + w/2 (32 columns x 32 k-lines of 128 bytes, 4 KB, swizzled:
        // 16-byte chunk q of line k sits at chunk q ^ (k % 8)).
        //
        // The swizzled chunk depends on k only through k % 8 = t + 4h, so 4
        // offsets per thread serve all four k8 steps (+1024 bytes each, an
        // immediate of the load): the 168-register budget has no room to keep
        // 16 addresses, and recomputing them cost ~50 instructions per stage.
        // The rounding skips cvt.rna's mask (to_tf32_operand: 2 SASS
        // instructions instead of 3), as the tensor cores ignore those bits.
        const int lane = threadIdx.x & 31;
        const int w = (threadIdx.x >> 5) & 3;
        const int g = lane >> 2, t = lane & 3;
        const u32 box = ybase + (2 * c + (w >> 1)) * (32 * 128);
        const int n0 = (w & 1) * 16 + g;
        // Per (h, v), the address of the first k8 step.
        u32 start[2][2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int v = 0; v < 2; ++v) {
                const int k8 = t + 4 * h, n = n0 + 8 * v;
                start[h][v] = box + k8 * 128 + ((((n >> 2) ^ k8) & 7) << 4) + (n & 3) * 4;
            }
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {        // k = t, t + 4
#pragma unroll
                for (int v = 0; v < 2; ++v) {    // column g, g + 8
                    const u32 addr = start[h][v] + ks * 1024;
                    float x;
                    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(addr) : "memory");
                    frag[ks][2 * h + v] = to_tf32_operand(x);
                }
            }
        }
        const u64 b0 = smem_desc_sw128(xbase, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            // k8 step: +32 bytes along A's 128-byte lines (wgmma's B, K-major),
            // added to the address field as in mma_stage_16.
            const u64 db = b0 + (ks * 32 >> 4);
            const int scale_d = (first && ks == 0) ? 0 : 1;
            wgmma_m64nNk8_tf32_rs<TILE_X>(acc, frag[ks], db, scale_d);
        }
        wgmma_commit();
    }
}

// The consumer warpgroup is done reading stage s (its wgmmas completed):
// one thread tells every block whose producer writes into this block's copy
// of the stage (with multicast, all blocks of the cluster).
__device__ __forceinline__ void release_stage(const Ring& ring, int s) {
    if ((threadIdx.x & 127) == 0) {
        if constexpr (CLUSTER > 1) {
#pragma unroll
            for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(ring.empty_bar(s), r);
        } else {
            mbar_arrive(ring.empty_bar(s));
        }
    }
}

#include "20_tma_wgmma/epilogue.cuh"
#include "20_tma_wgmma/split_fold.cuh"

__device__ __forceinline__ void fence_accumulators(float (&acc)[ACC]) {
#pragma unroll
    for (int i = 0; i < ACC; ++i) fence_operand(acc[i]);
}

// ---------------------------------------------------------------------------
// The two roles
// ---------------------------------------------------------------------------
template <int ELEM>
__device__ __forceinline__ void produce_unit(const TmaMap* mapA, const TmaMap* mapB,
                                             const Ring& ring, const Problem& p, int u, u32 rank,
                                             Cursor& cur) {
    const Work w = unit_work(p, u, rank);
    for (int kt = w.kt0; kt < w.kt1; ++kt) {
        // Parity phase ^ 1: on the first lap the barrier is in phase 0
        // and "phase 1" counts as completed, so a fresh stage is free.
        mbar_wait(ring.empty_bar(cur.s), cur.phase ^ 1);
        fill_stage<ELEM>(mapA, mapB, ring, cur.s, p, kt * Elem<ELEM>::K_TILE, w.y0, w.x0, rank);
        cur.next();
    }
}

// Block b walks units b, b + G, b + 2G, ... (G = grid size, in clusters):
// the same walk in the producer and the consumers, with no communication.
template <int ELEM>
__device__ __forceinline__ void producer_loop(const TmaMap* mapA, const TmaMap* mapB,
                                              const Ring& ring, const Problem& p, u32 rank) {
    Cursor cur;
    for (int u = first_unit(); u < p.units; u += unit_stride())
        produce_unit<ELEM>(mapA, mapB, ring, p, u, rank, cur);
}

// Where a finished unit goes: C (alpha, beta, the TMA store where usable),
// or with split-K the unit's partial product, raw fp32, into its split's
// slice of the workspace (split s at partials + s * split_stride): for the
// reduce kernel (20_tma_wgmma/split_reduce.cu) an M x N row-major slice; for
// the fold in the kernel (fold != 0) whole tiles in the accumulators' order,
// which the last piece of the tile adds to its own (fold_partials).
struct Output {
    void* C;
    float alpha, beta;
    float* partials;
    long long split_stride;
    u32* fold;

    // The TMA store path: the host encodes mapC exactly when C allows it
    // (rows of C a multiple of 16 bytes: 4 fp32 or 8 16-bit elements).
    // Split-K units reduced by a second launch write raw partials and never
    // store C; a folded split's last piece stores it like a whole tile.
    // (Evaluated where it is used: kept in a register across the mainloop,
    // the flag spilled in the two-consumer split-K builds.)
    template <int ELEM>
    __device__ __forceinline__ bool c_tma(const Problem& p) const {
        return Elem<ELEM>::EPI == 2 && beta == 0.0f &&
               (!SPLIT_K || p.splits == 1 || fold != nullptr) &&
               (p.N & (Elem<ELEM>::NARROW ? 7 : 3)) == 0 &&
               (reinterpret_cast<size_t>(C) & 15) == 0;
    }
};

template <int ELEM>
__device__ __forceinline__ void store_unit(float (&acc)[ACC], const TmaMap* mapC,
                                           const Ring& ring, const Problem& p, const Work& w,
                                           int c, const Output& out) {
    if (SPLIT_K && p.splits > 1) {
        if (out.fold == nullptr) {
            epilogue_direct<ELEM, false>(acc, out.partials + w.split * out.split_stride, p,
                                         w.y0, w.x0, c, 1.0f, 0.0f);
            return;
        }
        const int block = fold_block(p, w, c);
        if (w.split < p.splits - 1) {
            store_fold_partial(acc, out.partials + w.split * out.split_stride, block);
            fold_arrive(out.fold + block, c);
            return;
        }
        fold_partials(acc, out.partials, out.split_stride, p.splits, out.fold + block, block, c);
    }
    epilogue<ELEM>(acc, mapC, out.C, ring, p, w.y0, w.x0, c, out.alpha, out.beta,
                   out.template c_tma<ELEM>(p));
}

// One unit of a consumer warpgroup: the mainloop over its k-tiles, then the epilogue.
template <int ELEM>
__device__ __forceinline__ void consume_unit(float (&acc)[ACC], u32 (&frag0)[4][4],
                                             u32 (&frag1)[4][4], const TmaMap* mapC,
                                             const Ring& ring, const Problem& p, int u, int c,
                                             u32 rank, const Output& out, Cursor& cur) {
    const Work w = unit_work(p, u, rank);
    int prev = -1;
    for (int kt = w.kt0; kt < w.kt1; ++kt) {
        mbar_wait(ring.full_bar(cur.s), cur.phase);
        // tf32 with a stage in flight: alternate fragment sets, the previous
        // one may still be read (counted from the unit's first k-tile, which
        // must take the set that starts the accumulation)
        if (Elem<ELEM>::A_FRAG && ((kt - w.kt0) & 1))
            mma_stage<ELEM>(acc, frag1, ring.stage(cur.s), c, false);
        else
            mma_stage<ELEM>(acc, frag0, ring.stage(cur.s), c, kt == w.kt0);
        // Keep this stage's wgmmas in flight while the next is issued; the
        // stage before it is done and goes back to the producer.
        wgmma_wait<1>();
        if (prev >= 0) release_stage(ring, prev);
        prev = cur.s;
        cur.next();
    }
    wgmma_wait<0>();
    if (prev >= 0) release_stage(ring, prev);
    fence_accumulators(acc);
    if (w.kt1 == w.kt0) {   // an empty piece of K: its partial (or C = beta * C) is zero
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
    }
    store_unit<ELEM>(acc, mapC, ring, p, w, c, out);
}

template <int ELEM>
__device__ __forceinline__ void consumer_loop(const TmaMap* mapC, const Ring& ring,
                                              const Problem& p, int c, u32 rank,
                                              const Output& out) {
    float acc[ACC];
    u32 frag0[4][4], frag1[4][4];
    Cursor cur;
    for (int u = first_unit(); u < p.units; u += unit_stride())
        consume_unit<ELEM>(acc, frag0, frag1, mapC, ring, p, u, c, rank, out, cur);
    if constexpr (Elem<ELEM>::EPI == 2) {
        // Shared memory must outlive the copy engine's reads of it.
        if ((threadIdx.x & 127) == 0) bulk_wait_group<0>();
    }
}

// No producer warpgroup: both warpgroups consume; thread 0 also refills the
// stage it just drained (after the other warpgroup has drained it too).
template <int ELEM>
__device__ __forceinline__ void single_role_loop(const TmaMap* mapA, const TmaMap* mapB,
                                                 const TmaMap* mapC, const Ring& ring,
                                                 const Problem& p, int c, const Output& out) {
    float acc[ACC];
    u32 frag[4][4];
    Cursor cons, prod;
    const bool producer = threadIdx.x == 0;
    for (int u = first_unit(); u < p.units; u += unit_stride()) {
        const Work w = unit_work(p, u, 0);
        if (producer) {
            for (int kt = w.kt0; kt < w.kt0 + STAGES && kt < w.kt1; ++kt) {
                mbar_wait(ring.empty_bar(prod.s), prod.phase ^ 1);
                fill_stage<ELEM>(mapA, mapB, ring, prod.s, p, kt * Elem<ELEM>::K_TILE, w.y0,
                                 w.x0, 0);
                prod.next();
            }
        }
        __syncwarp();
        for (int kt = w.kt0; kt < w.kt1; ++kt) {
            mbar_wait(ring.full_bar(cons.s), cons.phase);
            mma_stage<ELEM>(acc, frag, ring.stage(cons.s), c, kt == w.kt0);
            wgmma_wait<0>();
            release_stage(ring, cons.s);
            cons.next();
            if (producer && kt + STAGES < w.kt1) {
                mbar_wait(ring.empty_bar(prod.s), prod.phase ^ 1);
                fill_stage<ELEM>(mapA, mapB, ring, prod.s, p, (kt + STAGES) * Elem<ELEM>::K_TILE,
                                 w.y0, w.x0, 0);
                prod.next();
            }
            __syncwarp();
        }
        fence_accumulators(acc);
        if (w.kt1 == w.kt0) {
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
        }
        store_unit<ELEM>(acc, mapC, ring, p, w, c, out);
    }
    if constexpr (Elem<ELEM>::EPI == 2) {
        if ((threadIdx.x & 127) == 0) bulk_wait_group<0>();
    }
}

template <int ELEM>
__device__ __forceinline__ void gemm_tma_wgmma(const TmaMap* mapA, const TmaMap* mapB,
                                               const TmaMap* mapC, void* C, int M, int N, int K,
                                               float alpha, float beta, float* partials,
                                               long long split_stride, int splits, u32* fold) {
    extern __shared__ unsigned char smem_raw[];
    Ring ring;
    ring.base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    ring.staging = ring.base + STAGES * STAGE_BYTES;
    ring.full = ring.staging + STAGING_BYTES;
    ring.empty = ring.full + 8 * STAGES;

    const Problem p = make_problem<ELEM>(M, N, K, splits);
    u32 rank = 0;
    if constexpr (CLUSTER > 1) {
        // Built for clusters of CLUSTER blocks: a plain launch would multicast
        // into a block that does not exist.
        if (cluster_nctarank() != CLUSTER) __trap();
        rank = cluster_ctarank();
    }
    const Output out{C, alpha, beta, partials, split_stride, fold};

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(ring.full_bar(s), 1);                        // the producer's expect_tx
            mbar_init(ring.empty_bar(s), CONSUMERS * CLUSTER);     // one per consumer warpgroup
        }
        fence_barrier_init();
        tma_prefetch_map(mapA);
        tma_prefetch_map(mapB);
        if (out.template c_tma<ELEM>(p)) tma_prefetch_map(mapC);
    }
    // Every barrier of the cluster is initialised before anyone uses one.
    if constexpr (CLUSTER > 1)
        cluster_sync();
    else
        __syncthreads();

    // Read back from lane 0, the warpgroup index is uniform to the compiler,
    // and with it each consumer's stage addresses and wgmma descriptors: they
    // stay in uniform registers, where HGMMA reads them (from threadIdx.x
    // directly they were built in ordinary registers, four R2UR a wgmma).
    const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
    // Barriers set up, maps prefetched: from here on global memory is read
    // and written, after the grid before has completed (grid_dependency.cuh).
    grid_dependency_wait();
#if WARP_SPECIALIZED
    if (wg == 0) {
        if constexpr (MOVE_REGS) setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) producer_loop<ELEM>(mapA, mapB, ring, p, rank);
    } else {
        if constexpr (MOVE_REGS) setmaxnreg_inc<CONSUMER_REGS>();
        consumer_loop<ELEM>(mapC, ring, p, wg - 1, rank, out);
    }
    // No block may leave while a peer can still multicast into its shared
    // memory or arrive on its barriers.
    if constexpr (CLUSTER > 1) cluster_sync();
#else
    single_role_loop<ELEM>(mapA, mapB, mapC, ring, p, wg, out);
#endif
}

// The three entries. The maps must stay parameters (never copied): the copy
// engine reads them through their parameter-space address.
#define GEMM_ENTRY(NAME, ELEM)                                                                \
    extern "C" __global__ void __launch_bounds__(THREADS, 1)                                 \
    NAME(const __grid_constant__ TmaMap mapA, const __grid_constant__ TmaMap mapB,           \
         const __grid_constant__ TmaMap mapC, void* C, int M, int N, int K, float alpha,     \
         float beta, float* partials, long long split_stride, int splits, u32* fold) {       \
        gemm_tma_wgmma<ELEM>(&mapA, &mapB, &mapC, C, M, N, K, alpha, beta, partials,          \
                             split_stride, splits, fold);                                     \
    }

#if WGMMA_ELEM == ELEM_BF16
GEMM_ENTRY(gemm_tma_wgmma_bf16, ELEM_BF16)
#elif WGMMA_ELEM == ELEM_FP16
GEMM_ENTRY(gemm_tma_wgmma_fp16, ELEM_FP16)
#elif WGMMA_ELEM == ELEM_TF32
GEMM_ENTRY(gemm_tma_wgmma_tf32, ELEM_TF32)
#endif
