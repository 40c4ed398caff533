// What the tensor-core rungs (cu/gemm/09 .. 14) share: the block-index order,
// the shared-memory layouts (XOR swizzles), the guarded global -> shared
// tile copy, and the epilogue. The PTX rung ptx/10_mma_tf32_ptx.ptx spells
// out the same pieces by hand. The instructions themselves are wrapped in
// cu/include/, one header per instruction family.
#pragma once
#include "cp_async.cuh"
#include "ld_st.cuh"

// ALIGNED=1 is only compiled in when K and N are multiples of the rung's
// vector width (16 bytes of input elements) and A, B, C are 16-byte aligned:
// a 16-byte chunk that starts at a multiple of the vector width inside a row
// is then entirely inside the matrix or entirely outside it.
#ifndef ALIGNED
#error "ALIGNED must be defined (the registry passes it)"
#endif

DEVI int imin(int a, int b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// Block order. The grid is (ceil(N/BN), ceil(M/BM)) and blocks start in
// linear order; walking GROUP_M block-rows down one block-column before
// moving right means the blocks resident at the same time share a few A
// row-panels and B column-panels, which stay in L2.
// ---------------------------------------------------------------------------
struct BlockCoord { int m, n; };

DEVI BlockCoord grouped_block_order(int group_m) {
    const int grid_n = gridDim.x, grid_m = gridDim.y;
    const int id = blockIdx.y * grid_n + blockIdx.x;
    const int per_group = group_m * grid_n;
    const int first_m = (id / per_group) * group_m;
    const int rows = imin(grid_m - first_m, group_m);
    const int r = id % per_group;
    BlockCoord b;
    b.m = first_m + r % rows;
    b.n = r / rows;
    return b;
}

// ---------------------------------------------------------------------------
// Shared-memory layouts: (row, 16-byte chunk) -> byte offset inside a tile.
//
// Shared memory has 32 banks of 4 bytes: a 128-byte line. ldmatrix, a
// 16-byte load or a 16-byte cp.async is served 8 lanes at a time, each lane
// taking a 16-byte slot of that line; 8 lanes hitting 8 different slots is
// conflict-free. Tiles are read down a column of chunks (8 rows, same chunk)
// but written along rows, so the chunk index is XOR-ed with a few bits of
// the row: rows that would land on one slot are spread over all eight, and a
// row's chunks are only permuted within aligned groups of eight, so writes
// along a row stay conflict-free too. No padding, no wasted bytes.
// ---------------------------------------------------------------------------
template <int ROW_BYTES>
struct XorSwizzle {
    static_assert(ROW_BYTES == 64 || ROW_BYTES % 128 == 0,
                  "rows of 64 bytes or of a multiple of 128 bytes");
    static DEVI unsigned offset(int row, int chunk) {
        // 64-byte rows: two rows share a line, so rows r and r+1 already use
        // different halves; XOR with bits 1-2 of the row separates the four
        // pairs. Longer rows: XOR with bits 0-2 of the row.
        const int x = ROW_BYTES == 64 ? (row >> 1) & 3 : row & 7;
        return row * ROW_BYTES + ((chunk ^ x) << 4);
    }
};

// The TF32 B tile (k rows of fp32, n contiguous) is read with 4-byte loads
// straight into the mma B fragment: lane (g = lane/4, t = lane%4) reads
// B[t][8j + g], so one load touches rows 0-3 at 8 consecutive columns, i.e.
// two chunks c, c+1 (c even) per row. XOR-ing the chunk with 2 * (row % 4)
// moves the four rows' chunk pairs to {c, c+1}, {c^2, ..}, {c^4, ..},
// {c^6, ..}: 8 different 16-byte slots, 32 different banks.
template <int ROW_BYTES>
struct Tf32BSwizzle {
    static_assert(ROW_BYTES % 128 == 0, "rows of a multiple of 128 bytes");
    static DEVI unsigned offset(int row, int chunk) {
        const int x = (row & 3) << 1;
        return row * ROW_BYTES + ((chunk ^ x) << 4);
    }
};

// Plain rows with a stride (the WMMA rung: wmma.load takes a stride, not a
// swizzle).
template <int ROW_BYTES>
struct PaddedRows {
    static DEVI unsigned offset(int row, int chunk) { return row * ROW_BYTES + (chunk << 4); }
};

// ---------------------------------------------------------------------------
// Global -> shared copy of one ROWS x COLS tile of a row-major matrix with
// `ld` elements per row, of which rows < nrows and columns < ncols exist; the
// tile starts at (row0, col0). Elements outside the matrix become zeros, so
// the MMAs on an edge tile need no guards. `t` is this thread's index among
// the THREADS copying threads.
//
// VEC: one 16-byte cp.async per chunk (needs the ALIGNED=1 guarantees).
// Otherwise fp32 goes element by element with 4-byte cp.async (fp32 is
// always 4-byte aligned), and 16-bit inputs, whose rows may start at any
// 2-byte boundary where cp.async (4 bytes minimum) cannot follow, go through
// registers with plain loads and stores -- the slow, always-correct path.
// ---------------------------------------------------------------------------
template <int ROWS, int COLS, int ELEM, int THREADS, class Layout, bool VEC>
DEVI void copy_tile(unsigned tile, const void* matrix, int ld, int nrows, int ncols,
                    int row0, int col0, int t) {
    constexpr int PER_CHUNK = 16 / ELEM;
    constexpr int CHUNKS_PER_ROW = COLS / PER_CHUNK;
    constexpr int CHUNKS = ROWS * CHUNKS_PER_ROW;
    static_assert(COLS % PER_CHUNK == 0, "tile width must be whole 16-byte chunks");
    static_assert(CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
    const char* base = static_cast<const char*>(matrix);
    if constexpr (VEC) {
        // Each thread always copies the same chunk column c of rows r0,
        // r0 + ROW_STEP, ...: one address computation per tile, then a
        // constant stride.
        static_assert(THREADS % CHUNKS_PER_ROW == 0, "whole rows per pass of the copying threads");
        constexpr int ROW_STEP = THREADS / CHUNKS_PER_ROW;
        const int c = t % CHUNKS_PER_ROW, r0 = t / CHUNKS_PER_ROW;
        const int gcol = col0 + c * PER_CHUNK;
        const bool col_inside = gcol < ncols;
        const char* src = base + ((long long)(row0 + r0) * ld + gcol) * ELEM;
        const long long step = (long long)ROW_STEP * ld * ELEM;
        auto copy_chunk = [&](int i, const char* p) {
            const int r = r0 + i * ROW_STEP;
            const bool inside = col_inside && row0 + r < nrows;
            cp_async_16(tile + Layout::offset(r, c), inside ? p : base, inside ? 16u : 0u);
        };
        if constexpr (CHUNKS / THREADS <= 8) {
#pragma unroll
            for (int i = 0; i < CHUNKS / THREADS; ++i) copy_chunk(i, src + i * step);
        } else {
            // Few copying threads (a lone producer warp): a partly rolled
            // loop, so the compiler does not keep dozens of chunk addresses
            // live across k-tiles.
#pragma unroll 4
            for (int i = 0; i < CHUNKS / THREADS; ++i, src += step) copy_chunk(i, src);
        }
    } else {
        // The element-wise paths stay rolled: unrolled, their hoisted
        // addresses would cost more registers than the accumulators leave.
#pragma unroll 1
        for (int i = 0; i < CHUNKS / THREADS; ++i) {
            const int q = t + i * THREADS;
            const int r = q / CHUNKS_PER_ROW, c = q % CHUNKS_PER_ROW;
            const int grow = row0 + r, gcol = col0 + c * PER_CHUNK;
            const unsigned dst = tile + Layout::offset(r, c);
            if (ELEM == 4) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const bool inside = grow < nrows && gcol + e < ncols;
                    const char* src = inside ? base + ((long long)grow * ld + gcol + e) * 4 : base;
                    cp_async_4(dst + 4 * e, src, inside ? 4u : 0u);
                }
            } else {
                const u16* m16 = static_cast<const u16*>(matrix);
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const bool inside = grow < nrows && gcol + e < ncols;
                    const u16 v = inside ? ldg16(m16 + (long long)grow * ld + gcol + e) : u16(0);
                    sts16(dst + 2 * e, v);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Epilogue: C = alpha * acc + beta * C for outputs that exist. beta == 0
// never reads C (it may hold NaN); beta is uniform, so the branch is too.
// ---------------------------------------------------------------------------
DEVI float blend(float acc, float alpha, float beta, const float* c) {
    return beta == 0.0f ? alpha * acc : alpha * acc + beta * ldg_f32(c);
}

// Two adjacent outputs (row, col), (row, col+1); col is even.
DEVI void store_c2(float* C, int M, int N, int row, int col, float v0, float v1,
                   float alpha, float beta) {
    if (row >= M) return;
    float* p = C + (long long)row * N + col;
    if (ALIGNED) {
        // N is a multiple of the vector width (even), so col < N covers col+1.
        if (col >= N) return;
        float2 out = make_float2(alpha * v0, alpha * v1);
        if (beta != 0.0f) {
            const float2 old = ldg_f32x2(p);
            out.x += beta * old.x;
            out.y += beta * old.y;
        }
        stg_f32x2(p, out);
    } else {
        if (col < N) stg_f32(p, blend(v0, alpha, beta, p));
        if (col + 1 < N) stg_f32(p + 1, blend(v1, alpha, beta, p + 1));
    }
}

// Four adjacent outputs (row, col .. col+3); col is a multiple of 4.
DEVI void store_c4(float* C, int M, int N, int row, int col, float4 v, float alpha, float beta) {
    if (row >= M) return;
    float* p = C + (long long)row * N + col;
    if (ALIGNED) {
        if (col >= N) return;
        float4 out = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
        if (beta != 0.0f) {
            const float4 old = ldg_f32x4(p);
            out.x += beta * old.x;
            out.y += beta * old.y;
            out.z += beta * old.z;
            out.w += beta * old.w;
        }
        stg_f32x4(p, out);
    } else {
        if (col < N) stg_f32(p, blend(v.x, alpha, beta, p));
        if (col + 1 < N) stg_f32(p + 1, blend(v.y, alpha, beta, p + 1));
        if (col + 2 < N) stg_f32(p + 2, blend(v.z, alpha, beta, p + 2));
        if (col + 3 < N) stg_f32(p + 3, blend(v.w, alpha, beta, p + 3));
    }
}
