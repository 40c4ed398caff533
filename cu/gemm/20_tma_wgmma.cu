// Rung 20: Hopper's own GEMM path (sm_90a). The copy engine (TMA) moves tiles
// of A and B from global to shared memory on its own, completing on mbarriers;
// warpgroup MMAs (wgmma) read them from shared memory and accumulate in
// registers asynchronously. In SASS: UTMALDG for the copies, HGMMA for the
// math, SYNCS for the barriers (and UTMASTG for the TMA-store epilogue).
//
// Kernel signature (differs from the plain GEMM rungs: A and B arrive as
// tensor maps, built on the host by drvgemm/tma.py):
//   extern "C" __global__ void gemm_tma_wgmma_{bf16,fp16,tf32}(
//       const __grid_constant__ TmaMap mapA,   // A, M x K row-major
//       const __grid_constant__ TmaMap mapB,   // B, K x N row-major
//       const __grid_constant__ TmaMap mapC,   // C, M x N fp32 (EPILOGUE 2 only)
//       void* C, int M, int N, int K, float alpha, float beta,
//       int* sched)                            // 2 ints, zero between launches (SCHED 1 only)
// C = alpha * A @ B + beta * C, C row-major M x N, fp32 -- or, built with
// OUT_16=1, the inputs' own 16-bit type (bf16 / fp16 entries; the fp32
// result rounded to nearest even, as cuBLAS writes a bf16 C); beta == 0 never
// reads C. Any M, N >= 1 (edge tiles: skipped copies + guarded or clipped stores),
// any K >= 1 (the copy engine zero-fills the part of a box past K).
//
// Block: 2 consumer warpgroups, each owning 64 rows of a 128 x 256 wgmma
// tile (m64n256 instructions, 128 fp32 accumulators per thread), plus, when
// WARP_SPECIALIZED, a producer warpgroup whose single thread keeps a
// STAGES-deep ring of shared-memory tiles full. setmaxnreg moves registers
// from the producer (40) to the consumers (232): 128*40 + 256*232 = 64512 of
// the 65536 registers of the SM, which the launch bound (384, 1) reserves.
//
// Layouts. 16-bit types: wgmma's A is our A (K-major, 64 elements = one
// 128-byte swizzled line per row), wgmma's B is our B read N-major ("transposed",
// tnsp-b = 1), loaded as four 64(k) x 64(n) boxes so each 64-column chunk is its
// own 8 KB swizzled block. TF32: wgmma cannot transpose 32-bit operands and B
// is N-major in memory, so the roles swap: the block computes C^T = B^T A^T;
// wgmma's B is our A (K-major, fine), wgmma's A is our B, which each thread
// loads from the swizzled shared tile into the register fragment itself
// (rounded to tf32 on the way). The wgmma tile is then 128 columns x 256 rows
// of C and the epilogue writes it transposed. Our A reaches the tensor cores
// through TMA unchanged, so its low 13 mantissa bits are dropped (truncation).
//
// Build steps, selected at compile time so that each can be measured:
//   WARP_SPECIALIZED=0  TMA + wgmma only: 256 threads, thread 0 also refills
//                       the ring between its own MMAs
//   WARP_SPECIALIZED=1  + producer warpgroup, setmaxnreg (default)
//   persistent grid     chosen on the host (grid = SM count); same kernel
//   CLUSTER=2           + clusters of 2 blocks along the 128-row direction that
//                       share the 256-wide operand: each block loads half of it
//                       and multicasts to both
// and tuning knobs (benchmarks/wgmma_sweep.py measures them side by side):
//   SCHED     0: block b computes units b, b + G, b + 2G, ... (G = grid size);
//             1: the producer takes the next unit from a global counter
//                (atomicAdd), so the units in flight are always the lowest
//                not yet taken (a compact window of C) and a block that runs
//                slow takes fewer of them. Needs the producer warpgroup and
//                CLUSTER=1. bf16/fp16 only: tf32 keeps the static walk.
//   GROUP, RASTER  order of the units: RASTER 0 sweeps GROUP unit rows (along
//             M) column by column; RASTER 1 sweeps GROUP tile columns (along
//             N) row by row. Either way the blocks running at one time cover a
//             compact block of C and share its A rows and B columns in L2.
//   INFLIGHT  1: a consumer keeps one stage of wgmmas in flight while issuing
//             the next (a stage is released one stage late); 0: it waits for
//             its wgmmas and releases the stage at once (one more stage of
//             look-ahead for the producer; the other warpgroup keeps the
//             tensor cores busy meanwhile).
//   TF32_FRAG 1: tf32 fragment loads with each address computed in full and
//             cvt.rna rounding; 2 (registered): 4 addresses per stage and the
//             rounding without its mask (mma_stage has the details).
//   EPILOGUE  0: 8-byte stores straight from the accumulators; 1: lane pairs
//             swap halves (shfl) so each thread stores 16 bytes; 2: each
//             consumer warpgroup stages 64 x 32 fp32 chunks in shared memory
//             (double-buffered) and the copy engine stores them (TMA store),
//             so the stores drain while the next tile's mainloop runs. 1 and 2
//             apply to bf16/fp16; 2 needs beta == 0, N % 4 == 0 and C 16-byte
//             aligned, else the kernel falls back to 0 at run time.
#include "cluster.cuh"
#include "ld_st.cuh"
#include "mbarrier.cuh"
#include "mma.cuh"
#include "named_barrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

#ifndef WARP_SPECIALIZED
#define WARP_SPECIALIZED 1
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP
#define GROUP 16     // unit rows (RASTER 0) or tile columns (RASTER 1) swept together
#endif
#ifndef RASTER
#define RASTER 0
#endif
#ifndef SCHED
#define SCHED 0
#endif
#ifndef INFLIGHT
#define INFLIGHT 1
#endif
#ifndef EPILOGUE
#define EPILOGUE 0
#endif
#ifndef OUT_16
#define OUT_16 0  // 1: the bf16 / fp16 entries write C in their input type (half the bytes)
#endif
#ifndef TF32_FRAG
#define TF32_FRAG 2  // how tf32 consumers load their register fragments (see mma_stage)
#endif
#ifndef WGMMA_ELEM
#define WGMMA_ELEM 0  // 0: compile all three entries; 1 bf16, 2 fp16, 3 tf32: only that one
#endif
// ALIGNED (passed to every rung) does not apply: loads are TMA's, and the
// epilogue checks its own alignment at run time. PERSISTENT, SM_LIMIT and
// BALANCE are read by the host only (they choose the grid).

#define ELEM_BF16 1
#define ELEM_FP16 2
#define ELEM_TF32 3

static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER must be 1 or 2");
static_assert(CLUSTER == 1 || WARP_SPECIALIZED, "clusters need the producer warpgroup");
static_assert(STAGES >= 2 && STAGES <= 4, "4 stages of 48 KB fill the 227 KB of shared memory");
static_assert(GROUP >= 1, "GROUP must be positive");
static_assert(RASTER == 0 || RASTER == 1, "RASTER must be 0 or 1");
static_assert(SCHED == 0 || (SCHED == 1 && WARP_SPECIALIZED && CLUSTER == 1),
              "the dynamic scheduler (SCHED 1) needs the producer warpgroup and CLUSTER 1");
static_assert(INFLIGHT == 0 || INFLIGHT == 1, "INFLIGHT must be 0 or 1");
static_assert(EPILOGUE >= 0 && EPILOGUE <= 2, "EPILOGUE must be 0, 1 or 2");
static_assert(OUT_16 == 0 || OUT_16 == 1, "OUT_16 must be 0 or 1");
static_assert(TF32_FRAG == 1 || TF32_FRAG == 2, "TF32_FRAG must be 1 or 2");
static_assert(!(OUT_16 && WGMMA_ELEM == 3), "tf32 writes an fp32 C: OUT_16 is for bf16 / fp16");

constexpr int CONSUMERS = 2;
constexpr int THREADS = (WARP_SPECIALIZED ? 128 : 0) + CONSUMERS * 128;
constexpr int TILE_Y = 64 * CONSUMERS;  // wgmma M: rows of A (columns of C for tf32)
constexpr int TILE_X = 256;             // wgmma N: columns of B (rows of C for tf32)

// One stage of the ring: the TILE_Y-side operand (16 KB) then the TILE_X-side
// operand (four 8 KB boxes). Every block of both starts on a 1024-byte
// boundary, as the 128-byte swizzle pattern repeats every 8 lines.
constexpr u32 Y_BYTES = 16384;
constexpr u32 X_BOX_BYTES = 8192;
constexpr u32 X_BYTES = 4 * X_BOX_BYTES;
constexpr u32 STAGE_BYTES = Y_BYTES + X_BYTES;
// EPILOGUE 2: per consumer warpgroup two 8 KB buffers, each one TMA box of
// C: 64 rows of one 128-byte swizzled line (32 fp32 or 64 16-bit columns).
constexpr u32 C_BOX_BYTES = 64 * 128;
constexpr u32 STAGING_BYTES = EPILOGUE == 2 ? CONSUMERS * 2 * C_BOX_BYTES : 0;
// Shared memory, from a 1024-aligned base: the ring, the staging buffers,
// then 16 * STAGES bytes of full/empty barriers and 64 bytes for the unit
// queue (2 full + 2 empty barriers, 2 unit slots). The host (tma.py) requests
// STAGES * STAGE_BYTES + STAGING_BYTES + 16 * STAGES + 64 + 1024 bytes (the
// last 1024: slack to align the base).
constexpr int QUEUE_SLOTS = 2;

#if WARP_SPECIALIZED
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = 232;
#endif

template <int ELEM>
struct Elem {
    static constexpr bool SWAP = ELEM == ELEM_TF32;
    static constexpr int K_TILE = SWAP ? 32 : 64;  // k per stage: one 128-byte line
    // the transposed tf32 tile stores directly; 16-byte quads are fp32 only
    static constexpr int EPI = SWAP || (OUT_16 && EPILOGUE == 1) ? 0 : EPILOGUE;
    // C's element: fp32, or with OUT_16 the input's 16-bit type
    static constexpr bool NARROW = OUT_16 && !SWAP;
    static constexpr int C_BOX_COLS = NARROW ? 64 : 32;
    // tf32 consumers hold two fragment sets besides the accumulators and have
    // no registers left for the unit queue: they keep the static walk.
    static constexpr int DYNAMIC = SWAP ? 0 : SCHED;
};

struct Ring {
    u32 base;       // stage 0 (1024-aligned shared address)
    u32 staging;    // EPILOGUE 2 buffers
    u32 full;       // STAGES barriers: the stage's bytes have landed
    u32 empty;      // STAGES barriers: every consumer is done with the stage
    u32 qfull;      // QUEUE_SLOTS barriers: the producer posted a unit (SCHED 1)
    u32 qempty;     // QUEUE_SLOTS barriers: every consumer thread read it
    u32 qunit;      // QUEUE_SLOTS ints
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

// The problem seen from the wgmma tile: the Y direction is wgmma's M
// (TILE_Y per block), X is wgmma's N (TILE_X).
struct Problem {
    int M, N, K;
    int y_ext, x_ext;        // extents along Y and X
    int tiles_x, units_y;    // units: a cluster's worth of tiles along Y
    int units, k_tiles;
};

template <int ELEM>
__device__ __forceinline__ Problem make_problem(int M, int N, int K) {
    Problem p;
    p.M = M;
    p.N = N;
    p.K = K;
    p.y_ext = Elem<ELEM>::SWAP ? N : M;
    p.x_ext = Elem<ELEM>::SWAP ? M : N;
    const int tiles_y = (p.y_ext + TILE_Y - 1) / TILE_Y;
    p.tiles_x = (p.x_ext + TILE_X - 1) / TILE_X;
    p.units_y = (tiles_y + CLUSTER - 1) / CLUSTER;
    p.units = p.units_y * p.tiles_x;
    p.k_tiles = (K + Elem<ELEM>::K_TILE - 1) / Elem<ELEM>::K_TILE;
    return p;
}

// Work unit -> tile origin. Units are numbered along a band of GROUP unit
// rows (RASTER 0) or GROUP tile columns (RASTER 1), crossing the band before
// moving along it, so consecutive units - the ones in flight together - form
// a compact block of C whose A rows and B columns stay in L2.
__device__ __forceinline__ void unit_origin(const Problem& p, int u, u32 rank, int& y0, int& x0) {
    int uy, tx;
    if constexpr (RASTER == 0) {
        const int per_group = GROUP * p.tiles_x;
        const int g = u / per_group;
        const int first = g * GROUP;
        const int rows = min(p.units_y - first, GROUP);
        const int local = u - g * per_group;
        uy = first + local % rows;
        tx = local / rows;
    } else {
        const int per_group = GROUP * p.units_y;
        const int g = u / per_group;
        const int first = g * GROUP;
        const int cols = min(p.tiles_x - first, GROUP);
        const int local = u - g * per_group;
        tx = first + local % cols;
        uy = local / cols;
    }
    y0 = (uy * CLUSTER + static_cast<int>(rank)) * TILE_Y;
    x0 = tx * TILE_X;
}

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

    u32 bytes = 0;
    if constexpr (!SWAP) {
        if (y0 < p.y_ext) bytes += Y_BYTES;  // A: one 128-row box
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)          // B: four 32-column boxes
            if (y0 + 32 * j < p.y_ext) bytes += Y_BYTES / 4;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (x0 + 64 * j < p.x_ext) bytes += X_BOX_BYTES;
    // A partially out-of-bounds box still delivers (zero-filled) its full size.
    mbar_arrive_expect_tx(full, bytes);

    if constexpr (!SWAP) {
        if (y0 < p.y_ext) tma_load_2d(ybase, mapA, k0, y0, full);
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (y0 + 32 * j < p.y_ext)
                tma_load_2d(ybase + j * (Y_BYTES / 4), mapB, y0 + 32 * j, k0, full);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (x0 + 64 * j >= p.x_ext || (j % CLUSTER) != static_cast<int>(rank)) continue;
        const TmaMap* map = SWAP ? mapA : mapB;
        const int c0 = SWAP ? k0 : x0 + 64 * j;
        const int c1 = SWAP ? x0 + 64 * j : k0;
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
template <int ELEM>
__device__ __forceinline__ void mma_stage(float (&acc)[128], u32 (&frag)[4][4], u32 stage, int c,
                                          bool first) {
    const u32 ybase = stage;
    const u32 xbase = stage + Y_BYTES;
    if constexpr (!Elem<ELEM>::SWAP) {
        (void)frag;
        const u32 a_rows = ybase + c * 64 * 128;  // this warpgroup's 64 lines of A
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            // k16 step: +32 bytes along A's line (the swizzle is a function of
            // the address, so an offset inside the atom stays consistent),
            // +16 lines of B (two 8-line atoms).
            const u64 da = smem_desc_sw128(a_rows + kk * 32, 16, 1024);
            const u64 db = smem_desc_sw128(xbase + kk * 16 * 128, X_BOX_BYTES, 1024);
            const int scale_d = (first && kk == 0) ? 0 : 1;
            if constexpr (ELEM == ELEM_BF16)
                wgmma_m64n256k16_bf16(acc, da, db, scale_d);
            else
                wgmma_m64n256k16_fp16(acc, da, db, scale_d);
        }
        wgmma_commit();
    } else {
        // Fragment of wgmma's A (= B^T, 64 columns of B for this warpgroup):
        // warp w holds columns 16w.. of them, lane (g, t) = (l/4, l%4) the
        // columns g, g+8 at k = t, t+4 of each k8 step. They live in B box
        // 2c + w/2 (32 columns x 32 k-lines of 128 bytes, swizzled: 16-byte
        // chunk q of line k sits at chunk q ^ (k % 8)).
        //
        // TF32_FRAG 1: each of the 16 addresses computed as written below,
        // rounded by cvt.rna (3 SASS instructions); 2: the swizzled chunk
        // depends on k only through k % 8 = t + 4h, so 4 offsets per thread
        // serve all four k8 steps (+1024 bytes each, an immediate of the
        // load), and the rounding skips the mask (to_tf32_operand, 2).
        const int lane = threadIdx.x & 31;
        const int w = (threadIdx.x >> 5) & 3;
        const int g = lane >> 2, t = lane & 3;
        const u32 box = ybase + (2 * c + (w >> 1)) * (Y_BYTES / 4);
        const int n0 = (w & 1) * 16 + g;
        // Per (h, v), the address of the first k8 step (TF32_FRAG 2 only).
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
                const int k = ks * 8 + t + 4 * h;
#pragma unroll
                for (int v = 0; v < 2; ++v) {    // column g, g + 8
                    const int n = n0 + 8 * v;
                    const u32 addr =
                        TF32_FRAG == 2 ? start[h][v] + ks * 1024
                                       : box + k * 128 + ((((n >> 2) ^ k) & 7) << 4) + (n & 3) * 4;
                    float x;
                    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(addr) : "memory");
                    frag[ks][2 * h + v] = TF32_FRAG == 2 ? to_tf32_operand(x) : to_tf32(x);
                }
            }
        }
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            // k8 step: +32 bytes along A's 128-byte lines (wgmma's B, K-major).
            const u64 db = smem_desc_sw128(xbase + ks * 32, 16, 1024);
            const int scale_d = (first && ks == 0) ? 0 : 1;
            wgmma_m64n256k8_tf32_rs(acc, frag[ks], db, scale_d);
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

// ---------------------------------------------------------------------------
// Epilogues: registers -> C. Accumulator i of lane (g, t) of warp w sits at
// wgmma row 16w + g + 8*((i/2)%2), column 8*(i/4) + 2t + i%2.
// ---------------------------------------------------------------------------
// C's elements: fp32, or (NARROW) bf16 / fp16 bits, converted with
// round-to-nearest-even. Two adjacent columns pack into one 32-bit word, the
// lower column in the low half.
template <int ELEM>
__device__ __forceinline__ u32 pack_pair(float lo, float hi) {
    u32 r;
    if constexpr (ELEM == ELEM_BF16)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

template <int ELEM>
__device__ __forceinline__ float narrow_to_float(unsigned short bits) {
    if constexpr (ELEM == ELEM_BF16) return __uint_as_float(static_cast<u32>(bits) << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
}

__device__ __forceinline__ void store1_f32(float* C, int N, int row, int col, float v,
                                           float alpha, float beta) {
    float* p = C + static_cast<size_t>(row) * N + col;
    *p = (beta == 0.0f) ? alpha * v : alpha * v + beta * *p;
}

template <int ELEM>
__device__ __forceinline__ void store1(void* C, int N, int row, int col, float v, float alpha,
                                       float beta) {
    const size_t i = static_cast<size_t>(row) * N + col;
    if constexpr (Elem<ELEM>::NARROW) {
        unsigned short* p = static_cast<unsigned short*>(C) + i;
        const float out = (beta == 0.0f) ? alpha * v : alpha * v + beta * narrow_to_float<ELEM>(*p);
        *p = static_cast<unsigned short>(pack_pair<ELEM>(out, 0.0f) & 0xffffu);
    } else {
        store1_f32(static_cast<float*>(C), N, row, col, v, alpha, beta);
    }
}

// Columns col, col + 1 of a row (col even), with one 8-byte (fp32) or 4-byte
// (16-bit) store; the caller checked alignment and col + 1 < N.
template <int ELEM>
__device__ __forceinline__ void store_pair(void* C, size_t i, float v0, float v1, float alpha,
                                           float beta) {
    if constexpr (Elem<ELEM>::NARROW) {
        u32* q = reinterpret_cast<u32*>(static_cast<unsigned short*>(C) + i);
        float o0 = alpha * v0, o1 = alpha * v1;
        if (beta != 0.0f) {
            const u32 old = *q;
            o0 += beta * narrow_to_float<ELEM>(static_cast<unsigned short>(old & 0xffffu));
            o1 += beta * narrow_to_float<ELEM>(static_cast<unsigned short>(old >> 16));
        }
        *q = pack_pair<ELEM>(o0, o1);
    } else {
        float2* q = reinterpret_cast<float2*>(static_cast<float*>(C) + i);
        float2 out = make_float2(alpha * v0, alpha * v1);
        if (beta != 0.0f) {
            const float2 old = *q;
            out.x += beta * old.x;
            out.y += beta * old.y;
        }
        *q = out;
    }
}

// EPILOGUE 0 (and every tf32 tile): each thread stores its own values.
// One row (H = 0) or the row 8 below (H = 1) of the thread's accumulators;
// split by H at compile time so that the only loop left is the one over
// columns, which the compiler reliably unrolls (a loop it keeps would index
// the accumulators at run time and move them all to local memory).
template <int ELEM, int H>
__device__ __forceinline__ void epilogue_direct_half(const float (&acc)[128], void* C,
                                                     const Problem& p, int r, int x0, int t,
                                                     float alpha, float beta) {
    if constexpr (!Elem<ELEM>::SWAP) {
        // Row r of C; columns in pairs (the column is even): one store per
        // pair where the row's pairs are aligned to the pair's size, which
        // with N odd is every other row.
        const int row = r;
        if (row >= p.M) return;
        constexpr size_t PAIR_BYTES = Elem<ELEM>::NARROW ? 4 : 8;
        const bool pairs = ((reinterpret_cast<size_t>(C) & (PAIR_BYTES - 1)) == 0) &&
                           ((static_cast<size_t>(row) * p.N) & 1) == 0;
        const size_t row_start = static_cast<size_t>(row) * p.N;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int col = x0 + 8 * j + 2 * t;
            const float v0 = acc[4 * j + 2 * H], v1 = acc[4 * j + 2 * H + 1];
            if (pairs && col + 1 < p.N) {
                store_pair<ELEM>(C, row_start + col, v0, v1, alpha, beta);
            } else {
                if (col < p.N) store1<ELEM>(C, p.N, row, col, v0, alpha, beta);
                if (col + 1 < p.N) store1<ELEM>(C, p.N, row, col + 1, v1, alpha, beta);
            }
        }
    } else {
        // Transposed tile: wgmma row r = column of C, wgmma column = row of C.
        // Per store, 8 lanes g write 8 consecutive floats of one row of C.
        const int col = r;
        if (col >= p.N) return;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int row = x0 + 8 * j + 2 * t;
            if (row < p.M) store1<ELEM>(C, p.N, row, col, acc[4 * j + 2 * H], alpha, beta);
            if (row + 1 < p.M)
                store1<ELEM>(C, p.N, row + 1, col, acc[4 * j + 2 * H + 1], alpha, beta);
        }
    }
}

template <int ELEM>
__device__ __forceinline__ void epilogue_direct(const float (&acc)[128], void* C,
                                                const Problem& p, int y0, int x0, int c,
                                                float alpha, float beta) {
    const int lane = threadIdx.x & 31;
    const int w = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t = lane & 3;
    const int r0 = y0 + c * 64 + w * 16 + g;  // wgmma row of acc[0]
    epilogue_direct_half<ELEM, 0>(acc, C, p, r0, x0, t, alpha, beta);
    epilogue_direct_half<ELEM, 1>(acc, C, p, r0 + 8, x0, t, alpha, beta);
}

// EPILOGUE 1: lanes t and t^1 swap one pair, so that the even lane holds
// four consecutive columns of row g and the odd lane four of row g + 8:
// 32 16-byte stores per thread instead of 64 8-byte ones. The column loop is
// unrolled by template recursion: left to the compiler it stays a loop, and
// the accumulators, indexed at run time, go to local memory.
struct QuadArgs {
    float* C;
    int M, N, row, x0, t;
    bool odd, quads;
    float alpha, beta;
};

template <int J>
__device__ __forceinline__ void quad_store(const float (&acc)[128], const QuadArgs& q) {
    const float a0 = acc[4 * J], a1 = acc[4 * J + 1];      // row g, columns 2t, 2t+1
    const float b0 = acc[4 * J + 2], b1 = acc[4 * J + 3];  // row g+8
    const float r0 = __shfl_xor_sync(0xffffffffu, q.odd ? a0 : b0, 1);
    const float r1 = __shfl_xor_sync(0xffffffffu, q.odd ? a1 : b1, 1);
    if (q.row >= q.M) return;
    const int col = q.x0 + 8 * J + 2 * (q.t & 2);
    const float4 v = q.odd ? make_float4(r0, r1, b0, b1) : make_float4(a0, a1, r0, r1);
    float* dst = q.C + static_cast<size_t>(q.row) * q.N + col;
    const float alpha = q.alpha, beta = q.beta;
    if (q.quads && col + 3 < q.N) {
        float4 out = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
        if (beta != 0.0f) {
            const float4 old = *reinterpret_cast<const float4*>(dst);
            out.x += beta * old.x;
            out.y += beta * old.y;
            out.z += beta * old.z;
            out.w += beta * old.w;
        }
        *reinterpret_cast<float4*>(dst) = out;
    } else {
        if (col < q.N) store1_f32(q.C, q.N, q.row, col, v.x, alpha, beta);
        if (col + 1 < q.N) store1_f32(q.C, q.N, q.row, col + 1, v.y, alpha, beta);
        if (col + 2 < q.N) store1_f32(q.C, q.N, q.row, col + 2, v.z, alpha, beta);
        if (col + 3 < q.N) store1_f32(q.C, q.N, q.row, col + 3, v.w, alpha, beta);
    }
}

template <int J>
struct QuadColumns {
    static __device__ __forceinline__ void run(const float (&acc)[128], const QuadArgs& q) {
        quad_store<J>(acc, q);
        QuadColumns<J + 1>::run(acc, q);
    }
};
template <>
struct QuadColumns<32> {
    static __device__ __forceinline__ void run(const float (&)[128], const QuadArgs&) {}
};

__device__ __forceinline__ void epilogue_quads(const float (&acc)[128], float* C, const Problem& p,
                                               int y0, int x0, int c, float alpha, float beta) {
    const int lane = threadIdx.x & 31;
    const int w = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t = lane & 3;
    QuadArgs q;
    q.C = C;
    q.M = p.M;
    q.N = p.N;
    q.odd = t & 1;
    q.row = y0 + c * 64 + w * 16 + g + (q.odd ? 8 : 0);
    q.x0 = x0;
    q.t = t;
    q.quads = ((p.N & 3) == 0) && ((reinterpret_cast<size_t>(C) & 15) == 0);
    q.alpha = alpha;
    q.beta = beta;
    QuadColumns<0>::run(acc, q);
}

// EPILOGUE 2: warpgroup c writes its 64 x 256 block of C through shared
// memory, one 128-byte line per row at a time (32 fp32 or 64 16-bit
// columns), into two alternating 8 KB buffers laid out as the copy engine's
// 128-byte swizzle expects (16-byte chunk q of row r at chunk q ^ (r % 8));
// one thread hands each filled buffer to a TMA store, which clips rows >= M
// and columns >= N. Whole 128-byte lines reach L2, and the stores of the
// last chunks drain while the warpgroup goes on to its next tile. Only
// beta == 0.
template <int ELEM>
__device__ __forceinline__ void epilogue_tma(const float (&acc)[128], const TmaMap* mapC,
                                             const Ring& ring, const Problem& p, int y0, int x0,
                                             int c, float alpha) {
    constexpr int BOX_COLS = Elem<ELEM>::C_BOX_COLS;
    const int tid = threadIdx.x & 127;
    const int lane = tid & 31;
    const int w = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = y0 + c * 64;
    if (row0 >= p.M) return;  // the whole warpgroup: uniform
    const u32 bufs = ring.staging + c * 2 * C_BOX_BYTES;
    const u32 bar = 1 + c;    // hardware barrier of this warpgroup
#pragma unroll
    for (int i = 0; i < TILE_X / BOX_COLS; ++i) {
        const int col0 = x0 + BOX_COLS * i;
        if (col0 >= p.N) break;  // uniform
        const u32 buf = bufs + (i & 1) * C_BOX_BYTES;
        // The store issued from this buffer two chunks ago has finished
        // reading it; chunk 0 waits for every earlier store, as the previous
        // tile may have ended on either buffer.
        if (tid == 0) {
            if (i == 0)
                bulk_wait_group_read<0>();
            else
                bulk_wait_group_read<1>();
        }
        named_barrier_sync(bar, 128);
        // Accumulator pair j (columns 8j + 2t, +1) of rows g and g + 8.
#pragma unroll
        for (int jj = 0; jj < BOX_COLS / 8; ++jj) {
            const int j = (BOX_COLS / 8) * i + jj;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = w * 16 + g + 8 * h;
                const float v0 = alpha * acc[4 * j + 2 * h], v1 = alpha * acc[4 * j + 2 * h + 1];
                if constexpr (Elem<ELEM>::NARROW) {
                    // 8 columns = one 16-byte chunk; the pair is word t of it
                    const u32 addr = buf + r * 128 + ((jj ^ (r & 7)) << 4) + t * 4;
                    asm volatile("st.shared.b32 [%0], %1;"
                                 :: "r"(addr), "r"(pack_pair<ELEM>(v0, v1)) : "memory");
                } else {
                    // 8 columns = two chunks; the pair is half t & 1 of chunk t >> 1
                    const int chunk = (2 * jj + (t >> 1)) ^ (r & 7);
                    const u32 addr = buf + r * 128 + chunk * 16 + (t & 1) * 8;
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};"
                                 :: "r"(addr), "f"(v0), "f"(v1) : "memory");
                }
            }
        }
        fence_proxy_async_smem();   // every writer: its stores, visible to the copy engine
        named_barrier_sync(bar, 128);
        if (tid == 0) {
            tma_store_2d(mapC, buf, col0, row0);
            bulk_commit_group();
        }
    }
}

template <int ELEM>
__device__ __forceinline__ void epilogue(const float (&acc)[128], const TmaMap* mapC, void* C,
                                         const Ring& ring, const Problem& p, int y0, int x0,
                                         int c, float alpha, float beta, bool c_tma) {
    if constexpr (Elem<ELEM>::EPI == 2) {
        if (c_tma) {
            epilogue_tma<ELEM>(acc, mapC, ring, p, y0, x0, c, alpha);
            return;
        }
    }
    if constexpr (Elem<ELEM>::EPI == 1)
        epilogue_quads(acc, static_cast<float*>(C), p, y0, x0, c, alpha, beta);
    else
        epilogue_direct<ELEM>(acc, C, p, y0, x0, c, alpha, beta);
}

__device__ __forceinline__ void fence_accumulators(float (&acc)[128]) {
#pragma unroll
    for (int i = 0; i < 128; ++i) fence_operand(acc[i]);
}

// ---------------------------------------------------------------------------
// The two roles
// ---------------------------------------------------------------------------
template <int ELEM>
__device__ __forceinline__ void produce_unit(const TmaMap* mapA, const TmaMap* mapB,
                                             const Ring& ring, const Problem& p, int u, u32 rank,
                                             Cursor& cur) {
    int y0, x0;
    unit_origin(p, u, rank, y0, x0);
    for (int kt = 0; kt < p.k_tiles; ++kt) {
        // Parity phase ^ 1: on the first lap the barrier is in phase 0
        // and "phase 1" counts as completed, so a fresh stage is free.
        mbar_wait(ring.empty_bar(cur.s), cur.phase ^ 1);
        fill_stage<ELEM>(mapA, mapB, ring, cur.s, p, kt * Elem<ELEM>::K_TILE, y0, x0, rank);
        cur.next();
    }
}

template <int ELEM>
__device__ __forceinline__ void producer_loop(const TmaMap* mapA, const TmaMap* mapB,
                                              const Ring& ring, const Problem& p, u32 rank,
                                              int* sched) {
    Cursor cur;
    if constexpr (Elem<ELEM>::DYNAMIC == 0) {
        (void)sched;
        for (int u = blockIdx.x / CLUSTER; u < p.units; u += gridDim.x / CLUSTER)
            produce_unit<ELEM>(mapA, mapB, ring, p, u, rank, cur);
    } else {
        // The first unit of block b is b; after that, tickets from sched[0]
        // numbered on from the grid size. Each unit is posted to the
        // consumers through a 2-slot queue; a unit >= units tells them to stop.
        Cursor q;
        int u = blockIdx.x;
        for (;;) {
            int next = p.units;
            // Take the following ticket now: the atomic's round trip hides
            // behind this unit's loads.
            if (u < p.units) next = static_cast<int>(gridDim.x) + atomicAdd(sched, 1);
            mbar_wait(ring.qempty + 8 * q.s, q.phase ^ 1);
            asm volatile("st.shared.u32 [%0], %1;" :: "r"(ring.qunit + 4 * q.s), "r"(u) : "memory");
            mbar_arrive(ring.qfull + 8 * q.s);  // release: the consumers' wait sees the unit
            q.next<QUEUE_SLOTS>();
            if (u >= p.units) break;
            produce_unit<ELEM>(mapA, mapB, ring, p, u, rank, cur);
            u = next;
        }
        // Every ticket this block will take is taken. The last block to get
        // here zeroes both counters for the next launch on the stream.
        __threadfence();
        if (atomicAdd(sched + 1, 1) == static_cast<int>(gridDim.x) - 1) {
            atomicExch(sched, 0);
            atomicExch(sched + 1, 0);
        }
    }
}

// One unit of a consumer warpgroup: the mainloop over k, then the epilogue.
template <int ELEM>
__device__ __forceinline__ void consume_unit(float (&acc)[128], u32 (&frag0)[4][4],
                                             u32 (&frag1)[4][4], const TmaMap* mapC, void* C,
                                             const Ring& ring, const Problem& p, int u, int c,
                                             u32 rank, float alpha, float beta, bool c_tma,
                                             Cursor& cur) {
    int y0, x0;
    unit_origin(p, u, rank, y0, x0);
    int prev = -1;
    for (int kt = 0; kt < p.k_tiles; ++kt) {
        mbar_wait(ring.full_bar(cur.s), cur.phase);
        // tf32 with a stage in flight: alternate fragment sets, the previous
        // one may still be read
        if (Elem<ELEM>::SWAP && INFLIGHT && (kt & 1))
            mma_stage<ELEM>(acc, frag1, ring.stage(cur.s), c, false);
        else
            mma_stage<ELEM>(acc, frag0, ring.stage(cur.s), c, kt == 0);
        if constexpr (INFLIGHT) {
            wgmma_wait<1>();
            if (prev >= 0) release_stage(ring, prev);
            prev = cur.s;
        } else {
            wgmma_wait<0>();
            release_stage(ring, cur.s);
        }
        cur.next();
    }
    if constexpr (INFLIGHT) {
        wgmma_wait<0>();
        if (prev >= 0) release_stage(ring, prev);
    }
    fence_accumulators(acc);
    if (p.k_tiles == 0) {
#pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    }
    epilogue<ELEM>(acc, mapC, C, ring, p, y0, x0, c, alpha, beta, c_tma);
}

template <int ELEM>
__device__ __forceinline__ void consumer_loop(const TmaMap* mapC, void* C, const Ring& ring,
                                              const Problem& p, int c, u32 rank, float alpha,
                                              float beta, bool c_tma) {
    float acc[128];
    u32 frag0[4][4], frag1[4][4];
    Cursor cur;
    if constexpr (Elem<ELEM>::DYNAMIC == 0) {
        for (int u = blockIdx.x / CLUSTER; u < p.units; u += gridDim.x / CLUSTER)
            consume_unit<ELEM>(acc, frag0, frag1, mapC, C, ring, p, u, c, rank, alpha, beta,
                               c_tma, cur);
    } else {
        Cursor q;
        for (;;) {
            mbar_wait(ring.qfull + 8 * q.s, q.phase);
            int u;
            asm volatile("ld.shared.u32 %0, [%1];" : "=r"(u) : "r"(ring.qunit + 4 * q.s) : "memory");
            mbar_arrive(ring.qempty + 8 * q.s);
            q.next<QUEUE_SLOTS>();
            if (u >= p.units) break;
            consume_unit<ELEM>(acc, frag0, frag1, mapC, C, ring, p, u, c, rank, alpha, beta,
                               c_tma, cur);
        }
    }
    if constexpr (Elem<ELEM>::EPI == 2) {
        // Shared memory must outlive the copy engine's reads of it.
        if ((threadIdx.x & 127) == 0) bulk_wait_group<0>();
    }
}

// No producer warpgroup: both warpgroups consume; thread 0 also refills the
// stage it just drained (after the other warpgroup has drained it too).
template <int ELEM>
__device__ __forceinline__ void single_role_loop(const TmaMap* mapA, const TmaMap* mapB,
                                                 const TmaMap* mapC, void* C, const Ring& ring,
                                                 const Problem& p, int c, float alpha, float beta,
                                                 bool c_tma) {
    float acc[128];
    u32 frag[4][4];
    Cursor cons, prod;
    const bool producer = threadIdx.x == 0;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int y0, x0;
        unit_origin(p, u, 0, y0, x0);
        if (producer) {
            for (int i = 0; i < STAGES && i < p.k_tiles; ++i) {
                mbar_wait(ring.empty_bar(prod.s), prod.phase ^ 1);
                fill_stage<ELEM>(mapA, mapB, ring, prod.s, p, i * Elem<ELEM>::K_TILE, y0, x0, 0);
                prod.next();
            }
        }
        __syncwarp();
        for (int kt = 0; kt < p.k_tiles; ++kt) {
            mbar_wait(ring.full_bar(cons.s), cons.phase);
            mma_stage<ELEM>(acc, frag, ring.stage(cons.s), c, kt == 0);
            wgmma_wait<0>();
            release_stage(ring, cons.s);
            cons.next();
            if (producer && kt + STAGES < p.k_tiles) {
                mbar_wait(ring.empty_bar(prod.s), prod.phase ^ 1);
                fill_stage<ELEM>(mapA, mapB, ring, prod.s, p, (kt + STAGES) * Elem<ELEM>::K_TILE,
                                 y0, x0, 0);
                prod.next();
            }
            __syncwarp();
        }
        fence_accumulators(acc);
        if (p.k_tiles == 0) {
#pragma unroll
            for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
        }
        epilogue<ELEM>(acc, mapC, C, ring, p, y0, x0, c, alpha, beta, c_tma);
    }
    if constexpr (Elem<ELEM>::EPI == 2) {
        if ((threadIdx.x & 127) == 0) bulk_wait_group<0>();
    }
}

template <int ELEM>
__device__ __forceinline__ void gemm_tma_wgmma(const TmaMap* mapA, const TmaMap* mapB,
                                               const TmaMap* mapC, void* C, int M, int N, int K,
                                               float alpha, float beta, int* sched) {
    extern __shared__ unsigned char smem_raw[];
    Ring ring;
    ring.base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    ring.staging = ring.base + STAGES * STAGE_BYTES;
    ring.full = ring.staging + STAGING_BYTES;
    ring.empty = ring.full + 8 * STAGES;
    ring.qfull = ring.empty + 8 * STAGES;
    ring.qempty = ring.qfull + 8 * QUEUE_SLOTS;
    ring.qunit = ring.qempty + 8 * QUEUE_SLOTS;

    const Problem p = make_problem<ELEM>(M, N, K);
    u32 rank = 0;
    if constexpr (CLUSTER > 1) {
        // Built for clusters of CLUSTER blocks: a plain launch would multicast
        // into a block that does not exist.
        if (cluster_nctarank() != CLUSTER) __trap();
        rank = cluster_ctarank();
    }
    // The TMA store path: the host encodes mapC exactly when C allows it.
    // (rows of C a multiple of 16 bytes: 4 fp32 or 8 16-bit elements)
    const bool c_tma = Elem<ELEM>::EPI == 2 && beta == 0.0f &&
                       (N & (Elem<ELEM>::NARROW ? 7 : 3)) == 0 &&
                       (reinterpret_cast<size_t>(C) & 15) == 0;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(ring.full_bar(s), 1);                        // the producer's expect_tx
            mbar_init(ring.empty_bar(s), CONSUMERS * CLUSTER);     // one per consumer warpgroup
        }
        for (int s = 0; s < QUEUE_SLOTS; ++s) {
            mbar_init(ring.qfull + 8 * s, 1);                      // the producer posts a unit
            mbar_init(ring.qempty + 8 * s, CONSUMERS * 128);       // every consumer thread read it
        }
        fence_barrier_init();
        tma_prefetch_map(mapA);
        tma_prefetch_map(mapB);
        if (c_tma) tma_prefetch_map(mapC);
    }
    // Every barrier of the cluster is initialised before anyone uses one.
    if constexpr (CLUSTER > 1)
        cluster_sync();
    else
        __syncthreads();

    const int wg = threadIdx.x / 128;
#if WARP_SPECIALIZED
    if (wg == 0) {
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) producer_loop<ELEM>(mapA, mapB, ring, p, rank, sched);
    } else {
        setmaxnreg_inc<CONSUMER_REGS>();
        consumer_loop<ELEM>(mapC, C, ring, p, wg - 1, rank, alpha, beta, c_tma);
    }
    // No block may leave while a peer can still multicast into its shared
    // memory or arrive on its barriers.
    if constexpr (CLUSTER > 1) cluster_sync();
#else
    (void)sched;
    single_role_loop<ELEM>(mapA, mapB, mapC, C, ring, p, wg, alpha, beta, c_tma);
#endif
}

// The three entries. The maps must stay parameters (never copied): the copy
// engine reads them through their parameter-space address.
#define GEMM_ENTRY(NAME, ELEM)                                                                \
    extern "C" __global__ void __launch_bounds__(THREADS, 1)                                 \
    NAME(const __grid_constant__ TmaMap mapA, const __grid_constant__ TmaMap mapB,           \
         const __grid_constant__ TmaMap mapC, void* C, int M, int N, int K, float alpha,     \
         float beta, int* sched) {                                                            \
        gemm_tma_wgmma<ELEM>(&mapA, &mapB, &mapC, C, M, N, K, alpha, beta, sched);            \
    }

#if WGMMA_ELEM == 0 || WGMMA_ELEM == ELEM_BF16
GEMM_ENTRY(gemm_tma_wgmma_bf16, ELEM_BF16)
#endif
#if WGMMA_ELEM == 0 || WGMMA_ELEM == ELEM_FP16
GEMM_ENTRY(gemm_tma_wgmma_fp16, ELEM_FP16)
#endif
#if WGMMA_ELEM == 0 || WGMMA_ELEM == ELEM_TF32
GEMM_ENTRY(gemm_tma_wgmma_tf32, ELEM_TF32)
#endif
