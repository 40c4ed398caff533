// Rung 15: TF32 mma.sync.m16n8k8 with the operand path rebuilt around the
// tensor pipe. Rung 11 (cu/11_mma_tf32.cu) reaches 0.54 of the mma.sync
// TF32 ceiling; its SASS spends, per 8-deep k-step and warp, 32 HMMA next
// to 4 LDSM + 16 LDS + 32 cvt.rna (each one FSETP + a predicated IADD: 64
// instructions), and every k-step's first HMMA waits on that step's loads.
// This rung changes three things (benchmarks/notes/tf32-mma.md has the
// instruction counts and the predictions):
//
//  1. Register rotation instead of a second fragment set. A warp's 32 MMAs
//     of a k-step run m-tile by m-tile (i outer, j inner). A fragment
//     register is dead right after the last MMA that reads it: a[i] after
//     m-tile i's 8 MMAs, b[j] after the MMA (MT-1, j). The next k-step's
//     value is loaded into it right there. So the next step's operands are
//     in flight behind 8 to 32 MMAs of this one -- the latency hiding of
//     fragment double buffering (the bf16 rung's FRAG_PIPE) with one
//     fragment set, 32 registers instead of 64 (rung 11's double-buffered
//     variant spilled at 255).
//  2. One instruction, or none, of rounding per operand register (ROUND).
//  3. B fragments of BVEC n-tiles from one LDS.32 / LDS.64 / LDS.128: the
//     n-tiles' columns are interleaved (see "Columns" below), so a lane's
//     b0 of BVEC neighbouring n-tiles are adjacent words in shared memory.
//
// Block tile BM x BN, k-tile BK floats; (BM/WM) x (BN/WN) warps, each
// owning WM x WN of C: MT = WM/16 m-tiles x NT = WN/8 n-tiles of 16 x 8.
// Every warp copies (cp.async) and computes. Self-contained on purpose:
// nothing here depends on headers elsewhere in cu/.
//
// Fragment placement (PTX ISA, m16n8k8 .tf32, lane = 4 g + t):
//   A (16 x 8, row):  a0 = A[g][t]  a1 = A[g+8][t]  a2 = A[g][t+4]  a3 = A[g+8][t+4]
//   B (8 x 8, col):   b0 = B[t][g]  b1 = B[t+4][g]
//   C (16 x 8):       c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
//
// Pipeline: STAGES shared-memory stages, one cp.async commit group per
// k-tile. The barrier of k-tile kt sits in its last k-step, after m-tile
// 0's MMAs (so the tensor pipe has 8 MMAs queued while the warp waits) and
// before the first load from k-tile kt+1's stage. After it nobody reads
// k-tile kt's stage any more (its last fragments were loaded during the
// k-step before), so it is refilled right there with k-tile kt + STAGES:
// all STAGES stages hold tiles in flight, one barrier per k-tile.
//
// Every define below is required (drvgemm_tf32_rung.py derives them and the
// launch shape from one set of tile constants).
#if !defined(BM)
#error "BM (rows of C per block) must be defined"
#endif
#if !defined(BN)
#error "BN (columns of C per block) must be defined"
#endif
#if !defined(BK)
#error "BK (k-tile depth in floats) must be defined"
#endif
#if !defined(WM)
#error "WM (rows of C per warp) must be defined"
#endif
#if !defined(WN)
#error "WN (columns of C per warp) must be defined"
#endif
#if !defined(STAGES)
#error "STAGES (shared-memory pipeline depth) must be defined"
#endif
#if !defined(GROUP_M)
#error "GROUP_M (block-rows per group of the block order) must be defined"
#endif
#if !defined(BVEC)
#error "BVEC (n-tiles whose B fragments one shared load brings: 1, 2 or 4) must be defined"
#endif
#if !defined(ROUND)
#error "ROUND (0: truncation by the tensor core, 1: add half an ulp, 2: same, NaN-safe) must be defined"
#endif
#if !defined(MINB)
#error "MINB (blocks per SM the register budget is made for: __launch_bounds__ minimum) must be defined"
#endif
#if !defined(ALIGNED)
#error "ALIGNED (1: K % 4 == N % 4 == 0 and 16-byte pointers; 0: any shape) must be defined"
#endif

#define DEVI __device__ __forceinline__

enum Tile : int {
    WARPS_M = BM / WM,
    WARPS_N = BN / WN,
    THREADS = WARPS_M * WARPS_N * 32,
    MT = WM / 16,                 // m-tiles per warp
    NT = WN / 8,                  // n-tiles per warp
    NG = NT / BVEC,               // B load groups per warp (BVEC n-tiles each)
    KSTEPS = BK / 8,              // k8 steps per k-tile
    A_ROW_BYTES = BK * 4,
    B_ROW_BYTES = BN * 4,
    A_BYTES = BM * A_ROW_BYTES,
    STAGE_BYTES = A_BYTES + BK * B_ROW_BYTES,
    GROUP_COLS = 8 * BVEC,        // columns of one B load group
};
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "whole warps, tiles");
static_assert(BK % 8 == 0 && A_ROW_BYTES % 128 == 0, "whole k8 steps; A rows of whole 128-B lines");
static_assert(B_ROW_BYTES % 128 == 0, "B rows of whole 128-byte lines");
static_assert(BVEC == 1 || BVEC == 2 || BVEC == 4, "LDS.32, LDS.64 or LDS.128 B loads");
static_assert(NT % BVEC == 0, "whole B load groups per warp");
// The B swizzle (below) XORs chunk bits 1-2 with the row. A warp's load
// groups must all sit at the same value of those bits, so that a lane's
// swizzled offset is one base plus immediates: group G = wn + WARPS_N * jg
// starts at chunk 2 * BVEC * G, so 2 * BVEC * WARPS_N must be a multiple of 8.
static_assert((2 * BVEC * WARPS_N) % 8 == 0, "warp column groups 8 chunks apart");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");
static_assert(ROUND == 0 || ROUND == 1 || ROUND == 2, "ROUND is 0, 1 or 2");

// ---------------------------------------------------------------------------
// Instructions (PTX): each wrapper states its contract once.
// ---------------------------------------------------------------------------
DEVI unsigned smem_u32(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
DEVI unsigned char* dynamic_smem() {
    extern __shared__ __align__(128) unsigned char drvgemm_dynamic_smem[];
    return drvgemm_dynamic_smem;
}

// cp.async global -> shared; src_bytes < size zero-fills the rest, 0 reads
// nothing (src must still be a valid address). .cg for 16 bytes: L2 only,
// each tile is read once per block.
DEVI void cp_async_16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global [%0], [g], 16, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
DEVI void cp_async_4(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.ca.shared.global [%0], [g], 4, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
DEVI void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
DEVI void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

// ldmatrix.x4: lanes 8q..8q+7 give the 16-byte row addresses of matrix q;
// lane 4g+t receives 32-bit word t of row g of each matrix -- for fp32 data
// that is element (g, t) of an 8 x 4 block: an A fragment register.
DEVI void ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// BVEC consecutive 32-bit words from shared memory (LDS.32 / .64 / .128).
DEVI void lds_vec(unsigned (&r)[BVEC], unsigned addr) {
#if BVEC == 1
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r[0]) : "r"(addr));
#elif BVEC == 2
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
#else
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}

// fp32 bits -> the operand the MMA reads. The tensor core uses the top 19
// bits of a .tf32 register (sign, exponent, 10 mantissa bits) and ignores
// the low 13, i.e. it truncates. So:
//  ROUND=0  raw fp32 bits: truncation toward zero, u = 2^-10 (what rung 20
//           and cuBLAS's TF32 path do). No instruction.
//  ROUND=1  bits + 0x1000 (half a tf32 ulp) then the unit's truncation:
//           round to nearest, ties away -- cvt.rna.tf32.f32 for every finite
//           value, overflow to Inf included; u = 2^-11. One IADD. cvt.rna is
//           this add guarded by an isfinite test (FSETP + predicated IADD):
//           without the guard a NaN whose payload is in the top 2^12 codes
//           wraps: 0x7fffffff (the GPU's canonical NaN) would become -0.
//  ROUND=2  max_s32(bits + 0x1000, bits): the same rounding, and where the
//           add wraps a positive NaN into the sign bit the signed max keeps
//           the NaN. One VIADDMNMX on sm_90 (IADD + IMNMX before). Negative
//           NaNs 0xfffff000.. still wrap (to +0); x86 and numpy make
//           0xffc00000 / 0x7fc00000, the GPU 0x7fffffff, all kept NaN.
// Inf: 0x7f800000 + 0x1000 truncates back to Inf in 1 and 2.
DEVI unsigned operand(unsigned x) {
#if ROUND == 0
    return x;
#elif ROUND == 1
    return x + 0x1000u;
#else
    const int y = (int)(x + 0x1000u);
    return (unsigned)max(y, (int)x);
#endif
}

DEVI void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------------------
// Shared-memory layouts. 32 banks of 4 bytes = one 128-byte line of eight
// 16-byte slots. cp.async writes 16-byte chunks along rows (8 lanes, 8
// consecutive chunks: conflict-free as long as a row's chunks are only
// permuted within aligned groups of eight).
// ---------------------------------------------------------------------------
// A tile: BM rows of BK floats. ldmatrix reads 8 consecutive rows at one
// chunk; XOR-ing the chunk with row % 8 puts them on 8 different slots.
DEVI unsigned a_offset(int row, int chunk) {
    return row * A_ROW_BYTES + ((chunk ^ (row & 7)) << 4);
}
// B tile: BK rows of BN floats. A B-fragment load reads, per lane (g, t),
// row t (+4, +8 kk) at word BVEC*g of a group of 8*BVEC columns: rows 0-3
// times 32 contiguous bytes for LDS.32 (one phase of 32 lanes), LDS.64 (a
// half-warp phase: lanes 0-15 are g 0-3) and LDS.128 (a quarter-warp phase:
// g 0-1). In every case a phase touches chunks {c, c+1} (c even) of rows
// 0-3; XOR-ing the chunk with 2 * (row % 4) moves them to {c, c+1},
// {c^2, ..}, {c^4, ..}, {c^6, ..}: 8 different slots, no conflict.
DEVI unsigned b_offset(int row, int chunk) {
    return row * B_ROW_BYTES + ((chunk ^ ((row & 3) << 1)) << 4);
}

// Columns. Warp wn owns load groups G = wn + WARPS_N * jg (jg < NG) of
// GROUP_COLS columns; n-tile j = BVEC * jg + s (s < BVEC) of the warp has
// its local column c (0-7) at block column GROUP_COLS * G + BVEC * c + s. So
// lane g's b0 of n-tiles BVEC*jg .. BVEC*jg + BVEC-1 are the BVEC adjacent
// words at GROUP_COLS * G + BVEC * g, and a thread's outputs of one group
// and row (local columns 2t, 2t+1 of each n-tile) are the 2 * BVEC adjacent
// columns GROUP_COLS * G + 2 * BVEC * t + e, e = BVEC * cc + s.
DEVI int group_col(int wn, int jg) { return GROUP_COLS * (wn + WARPS_N * jg); }

// ---------------------------------------------------------------------------
// Block order: GROUP_M block-rows walked down one block-column before moving
// right, so the blocks resident together share A and B panels in L2.
// ---------------------------------------------------------------------------
DEVI int imin(int a, int b) { return a < b ? a : b; }
struct BlockCoord { int m, n; };
DEVI BlockCoord grouped_block_order() {
    const int grid_n = gridDim.x, grid_m = gridDim.y;
    const int id = blockIdx.y * grid_n + blockIdx.x;
    const int per_group = GROUP_M * grid_n;
    const int first_m = (id / per_group) * GROUP_M;
    const int rows = imin(grid_m - first_m, GROUP_M);
    const int r = id % per_group;
    BlockCoord b;
    b.m = first_m + r % rows;
    b.n = r / rows;
    return b;
}

// ---------------------------------------------------------------------------
// Global -> shared copy of k-tile kt: A rows m0.. (BM x BK), B columns n0..
// (BK x BN). Elements outside the matrices become zeros, so edge tiles need
// no guards in the MMAs.
// ---------------------------------------------------------------------------
#if ALIGNED
// 16-byte cp.async: thread `tid` always copies the same chunk column of
// rows r0, r0 + ROW_STEP, ...; with K % 4 == N % 4 == 0 a chunk is wholly
// inside or wholly outside. The row (A) or column (B) tests that do not
// depend on the k-tile are done once, here; per k-tile a copy costs one
// 64-bit address per chunk, its test and the LDGSTS.
template <int ROWS, int COLS, bool IS_A>
struct TileCopy {
    static constexpr int CPR = COLS / 4;          // chunks per row
    static constexpr int ROW_STEP = THREADS / CPR;
    static constexpr int N_CHUNKS = ROWS / ROW_STEP;
    static_assert(THREADS % CPR == 0 && ROWS % ROW_STEP == 0, "whole rows per pass");
    const float* src;        // this thread's first chunk of k-tile 0
    long long row_stride;    // floats between its chunks (ROW_STEP rows)
    long long tile_stride;   // floats between k-tiles
    unsigned dst;            // its first chunk's offset in the tile
    int k_first;             // A: its first column; B: its first row (k-tile 0)
    int k_limit;             // K
    unsigned fixed_ok;       // A: bit i = chunk i's row exists; B: all bits = column exists

    DEVI TileCopy(const float* matrix, int ld, int row0, int col0, int nrows, int ncols,
                  int K, int tid) {
        const int c = tid % CPR, r0 = tid / CPR;
        src = matrix + (long long)(row0 + r0) * ld + col0 + 4 * c;
        row_stride = (long long)ROW_STEP * ld;
        tile_stride = IS_A ? BK : (long long)BK * ld;
        dst = IS_A ? a_offset(r0, c) : b_offset(r0, c);
        k_first = IS_A ? col0 + 4 * c : row0 + r0;
        k_limit = K;
        fixed_ok = 0;
#pragma unroll
        for (int i = 0; i < N_CHUNKS; ++i) {
            const bool ok = IS_A ? row0 + r0 + i * ROW_STEP < nrows : col0 + 4 * c < ncols;
            fixed_ok |= (ok ? 1u : 0u) << i;
        }
    }
    // k-tile kt into the tile at shared address `tile`. A k-tile past the
    // end (kt >= KT) fails every k test and zero-fills: no branch needed.
    DEVI void copy(unsigned tile, const float* matrix, int kt) const {
        const float* p = src + kt * tile_stride;
        const int k0 = k_first + kt * BK;
#pragma unroll
        for (int i = 0; i < N_CHUNKS; ++i) {
            const bool inside = ((fixed_ok >> i) & 1) &&
                                (IS_A ? k0 < k_limit : k0 + i * ROW_STEP < k_limit);
            // Row r0 + i*ROW_STEP keeps r0's swizzle bits (ROW_STEP is a
            // multiple of 8 for A, of 4 for B): an immediate offset.
            const unsigned d = tile + dst + i * ROW_STEP * (IS_A ? A_ROW_BYTES : B_ROW_BYTES);
            cp_async_16(d, inside ? p + i * row_stride : matrix, inside ? 16u : 0u);
        }
    }
};
static_assert(TileCopy<BM, BK, true>::ROW_STEP % 8 == 0, "A chunk rows keep row % 8");
static_assert(TileCopy<BK, BN, false>::ROW_STEP % 4 == 0, "B chunk rows keep row % 4");
#else
// Any shape: element by element with 4-byte cp.async (fp32 is always 4-byte
// aligned). A rolled loop: unrolled, its hoisted addresses would cost more
// registers than the accumulators leave. The slow, always-correct path.
template <int ROWS, int COLS, bool IS_A>
struct TileCopy {
    static constexpr int CPR = COLS / 4;
    static_assert((ROWS * CPR) % THREADS == 0, "every thread copies the same number of chunks");
    int ld, row0, col0, nrows, ncols, tid;

    DEVI TileCopy(const float*, int ld_, int row0_, int col0_, int nrows_, int ncols_, int,
                  int tid_)
        : ld(ld_), row0(row0_), col0(col0_), nrows(nrows_), ncols(ncols_), tid(tid_) {}
    DEVI void copy(unsigned tile, const float* matrix, int kt) const {
        const int r_base = IS_A ? row0 : row0 + kt * BK;
        const int c_base = IS_A ? col0 + kt * BK : col0;
#pragma unroll 1
        for (int q = tid; q < ROWS * CPR; q += THREADS) {
            const int r = q / CPR, c = q % CPR;
            const int grow = r_base + r, gcol = c_base + 4 * c;
            const unsigned dst = tile + (IS_A ? a_offset(r, c) : b_offset(r, c));
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const bool inside = grow < nrows && gcol + e < ncols;
                cp_async_4(dst + 4 * e, inside ? matrix + (long long)grow * ld + gcol + e : matrix,
                           inside ? 4u : 0u);
            }
        }
    }
};
#endif

// ---------------------------------------------------------------------------
// Epilogue: C = alpha * acc + beta * C; beta == 0 never reads C (it may
// hold NaN). beta is uniform, so the branch is too.
// ---------------------------------------------------------------------------
DEVI float blend(float acc, float alpha, float beta, const float* c) {
    return beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

// The 2 * BVEC adjacent outputs v[0..] of one row starting at (row, col);
// col is a multiple of 2 * BVEC.
DEVI void store_row(float* C, int M, int N, int row, int col, const float (&v)[2 * BVEC],
                    float alpha, float beta) {
    if (row >= M) return;
    float* p = C + (long long)row * N + col;
#if ALIGNED
    // N % 4 == 0 and col % (2 BVEC) == 0: a float2 / float4 piece is wholly
    // inside or wholly outside the row.
#pragma unroll
    for (int q = 0; q < 2 * BVEC; q += (BVEC == 1 ? 2 : 4)) {
        if (col + q >= N) return;
        if (BVEC == 1) {
            float2 o = make_float2(alpha * v[q], alpha * v[q + 1]);
            if (beta != 0.0f) {
                const float2 old = *reinterpret_cast<const float2*>(p + q);
                o.x += beta * old.x;
                o.y += beta * old.y;
            }
            *reinterpret_cast<float2*>(p + q) = o;
        } else {
            float4 o = make_float4(alpha * v[q], alpha * v[q + 1], alpha * v[q + 2],
                                   alpha * v[q + 3]);
            if (beta != 0.0f) {
                const float4 old = *reinterpret_cast<const float4*>(p + q);
                o.x += beta * old.x;
                o.y += beta * old.y;
                o.z += beta * old.z;
                o.w += beta * old.w;
            }
            *reinterpret_cast<float4*>(p + q) = o;
        }
    }
#else
#pragma unroll
    for (int e = 0; e < 2 * BVEC; ++e)
        if (col + e < N) p[e] = blend(v[e], alpha, beta, p + e);
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
mma_tf32_rotating_gemm(const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C, int M, int N, int K, float alpha, float beta) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int g = lane >> 2, t = lane & 3;
    const BlockCoord blk = grouped_block_order();
    const int m0 = blk.m * BM, n0 = blk.n * BN;
    const unsigned smem = smem_u32(dynamic_smem());
    const int KT = (K + BK - 1) / BK;

    // Per-lane fragment offsets inside a stage. A (ldmatrix): lanes 0-15
    // address rows 0-15 of the m-tile at the k-step's first chunk, lanes
    // 16-31 the same rows at its second: matrices a0, a1, a2, a3. The
    // swizzle mixes chunk and row, so each k-step has its own base; the
    // m-tile is an immediate (16 rows keep row % 8). B: row t at word
    // BVEC * g of the warp's first group; k-step (8 rows), b1 (4 rows) and
    // group are immediates, because none changes row % 4 or chunk bits 1-2.
    unsigned a_off[KSTEPS];
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
        a_off[kk] = a_offset(wm * WM + (lane & 15), 2 * kk + (lane >> 4));
    const int b_word = group_col(wn, 0) + BVEC * g;
    const unsigned b_off = A_BYTES + b_offset(t, b_word / 4) + 4 * (b_word % 4);

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    // A: BM x BK at rows m0.., columns kt*BK..; B: BK x BN at rows kt*BK..,
    // columns n0.. (matrix, ld, row0, col0 of k-tile 0, rows, columns).
    const TileCopy<BM, BK, true> copy_a(A, K, m0, 0, M, K, K, tid);
    const TileCopy<BK, BN, false> copy_b(B, N, 0, n0, K, N, K, tid);
    auto copy_stage = [&](unsigned stage, int kt) {
        copy_a.copy(stage, A, kt);
        copy_b.copy(stage + A_BYTES, B, kt);
    };

    // The one fragment set: operands of the k-step whose MMAs come next.
    unsigned a[MT][4], b[NT][2];
    auto load_a = [&](int i, unsigned stage, int kk) {
        ldsm_x4(a[i], stage + a_off[kk] + i * 16 * A_ROW_BYTES);
#pragma unroll
        for (int r = 0; r < 4; ++r) a[i][r] = operand(a[i][r]);
    };
    auto load_b = [&](int jg, unsigned stage, int kk) {
        const unsigned p = stage + b_off + kk * 8 * B_ROW_BYTES + jg * GROUP_COLS * WARPS_N * 4;
        unsigned r0[BVEC], r1[BVEC];
        lds_vec(r0, p);                       // rows t:   b0 of n-tiles BVEC*jg + s
        lds_vec(r1, p + 4 * B_ROW_BYTES);     // rows t+4: b1
#pragma unroll
        for (int s = 0; s < BVEC; ++s) {
            b[BVEC * jg + s][0] = operand(r0[s]);
            b[BVEC * jg + s][1] = operand(r1[s]);
        }
    };

    // Prologue: k-tiles 0 .. STAGES-1 in flight, one commit group each (an
    // empty group when K is short, so the group count below stays exact);
    // then the first k-step's fragments.
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        if (s < KT) copy_stage(smem + s * STAGE_BYTES, s);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();              // k-tile 0 (this thread's part)
    __syncthreads();                          // everybody's part
#pragma unroll
    for (int i = 0; i < MT; ++i) load_a(i, smem, 0);
#pragma unroll
    for (int jg = 0; jg < NG; ++jg) load_b(jg, smem, 0);

    unsigned cur = 0;                         // stage offset of k-tile kt
    for (int kt = 0; kt < KT; ++kt) {
        const unsigned nxt = cur + STAGE_BYTES == STAGES * STAGE_BYTES ? 0 : cur + STAGE_BYTES;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            // Where the next k-step's operands come from: this stage, or at
            // the last k-step the first k-step of k-tile kt+1. In the last
            // iteration that stage holds no tile (never written, or an old
            // one): harmless reads whose values are never used.
            const bool last = kk == KSTEPS - 1;
            const unsigned src = smem + (last ? nxt : cur);
            const int nk = last ? 0 : kk + 1;
#pragma unroll
            for (int i = 0; i < MT; ++i) {
#pragma unroll
                for (int jg = 0; jg < NG; ++jg) {
#pragma unroll
                    for (int s = 0; s < BVEC; ++s) {
                        const int j = BVEC * jg + s;
                        mma_tf32(acc[i][j], a[i], b[j][0], b[j][1]);
                    }
                    // The last m-tile's MMAs of group jg have read its b
                    // registers: reload them with the next k-step's.
                    if (i == MT - 1 && !(last && i == 0)) load_b(jg, src, nk);
                }
                if (last && i == 0) {
                    // STAGES + kt groups committed; at most STAGES-2 pending
                    // means k-tile kt+1 has landed for this thread, and the
                    // barrier publishes every thread's part. It also says
                    // that every warp has loaded its last fragments from
                    // k-tile kt's stage (during the k-step before this
                    // one): refill that stage with k-tile kt + STAGES.
                    // No `if (kt + STAGES < KT)`: past the end the copy
                    // zero-fills a stage nobody reads again, and without
                    // the branch the copy stays in the basic block of the
                    // MMAs, which ptxas interleaves it with (a separate
                    // block ran its ~200 instructions with no MMA issued,
                    // all warps at once, right after the barrier).
                    cp_async_wait<STAGES - 2>();
                    __syncthreads();
                    copy_stage(smem + cur, kt + STAGES);
                    cp_async_commit();
                    if (MT == 1) {
                        // (MT == 1 only: the b reloads skipped above.)
#pragma unroll
                        for (int jg = 0; jg < NG; ++jg) load_b(jg, src, nk);
                    }
                }
                load_a(i, src, nk);           // m-tile i is done with a[i]
            }
        }
        cur = nxt;
    }
    // The last STAGES refills were zero-fills past the end; let them land
    // before the block retires and its shared memory is handed on.
    cp_async_wait<0>();

    // Epilogue: per m-tile, row half and group, the 2*BVEC adjacent outputs.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int row = m0 + wm * WM + i * 16 + g;
#pragma unroll
        for (int jg = 0; jg < NG; ++jg) {
            const int col = n0 + group_col(wn, jg) + 2 * BVEC * t;
#pragma unroll
            for (int h = 0; h < 2; ++h) {     // rows g and g + 8: c0,c1 / c2,c3
                float v[2 * BVEC];
#pragma unroll
                for (int e = 0; e < 2 * BVEC; ++e)
                    v[e] = acc[i][BVEC * jg + e % BVEC][2 * h + e / BVEC];
                store_row(C, M, N, row + 8 * h, col, v, alpha, beta);
            }
        }
    }
}
