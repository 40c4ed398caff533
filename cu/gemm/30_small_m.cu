// Rung 30: small M (1 <= M <= 64), any N, any K. C = alpha * A @ B + beta * C,
// A is M x K, B is K x N, C is M x N, all row-major and contiguous.
//
// Why a rung of its own: with M this small the product is a stream over B.
// B has K*N elements and is read exactly once; A (M*K) and C (M*N) are tiny
// next to it. The bound is DRAM bandwidth (H200: ~4.27 TB/s for a copy), so
// everything here is about keeping enough bytes of B in flight on every SM,
// all the time, at the lowest instruction and register cost:
//
// * Little's law: 4.27 TB/s x ~1 us of loaded DRAM latency is ~4 MB in
//   flight over 132 SMs, ~32 KB per SM. Registers cannot hold that cheaply,
//   shared memory can: every lane streams B through a private STAGES-deep
//   cp.async ring in shared memory (16-byte LDGSTS, bypassing L1), so
//   (STAGES - 1) steps of 2 KB per warp are always in the air and cost no
//   registers. A lane reads back only the bytes it copied itself, so the
//   ring needs cp.async.wait_group and no barrier at all (fp32 shares its A
//   rows across the warp: one __syncwarp per step).
// * Split K: N / strip is often small (N = 4096 is 64 strips of 64 columns),
//   so the host also splits K (drvgemm/ladders/gemm/small_m.py); the warps of a
//   block split their block's K range step by step (warp w takes steps
//   w, w + WARPS, ...: at any moment a block reads one contiguous band of
//   rows), and their partial sums are added in shared memory in warp order.
// * Deterministic split-K reduction: each block of a split writes its
//   partial strip to its own fp32 workspace tile (ROWS x STRIP, contiguous,
//   so the reduction reads whole float4s); the block that
//   arrives last at its strip's counter adds the splits in the fixed order
//   0, 1, ..., S-1 (the same bits whichever block is last), applies alpha /
//   beta, writes C, and resets the counter to 0 for the next call. Many
//   splits (long K over a few strips) go through two such levels: groups of
//   consecutive splits, each summed by its last block, then the groups.
// * bf16 / fp16 (PREC 1 / 2): mma.sync.m16n8k16 with fp32 accumulators,
//   M padded to 16 per m-tile. FFMA could not keep up: at M = 16 streaming
//   bf16 B at 4.27 TB/s needs 68 TFLOP/s, above the 60 TFLOP/s FFMA ceiling,
//   while the tensor cores need < 11% of their mma.sync rate. The fragments
//   come straight from the row-major B rows thanks to a permutation of k
//   inside each 16-step (a dot product does not care about the order of k,
//   as long as A and B agree): mma k-slots {2t, 2t+1, 2t+8, 2t+9} of lane
//   (g = lane/4, t = lane%4) are the physical rows 4t .. 4t+3. Lane (g, t)
//   copies rows 4t .. 4t+3, columns 8g .. 8g+7 of the warp's 64-column strip
//   (four 16-byte chunks; eight lanes cover one 128-byte row segment), and
//   one PRMT per register pairs two rows into a B fragment: column 8g + j is
//   the mma's column g of n-tile j. Its A fragment is then A[g][4t .. 4t+3]
//   (8 contiguous bytes, one 8-byte cp.async) and the same for row g + 8.
// * fp32 (PREC 0): FFMA, fp32 all the way. At M <= 16 streaming fp32 B needs
//   <= 34 TFLOP/s, within the FFMA ceiling. A warp covers 128 columns (one
//   16-byte chunk per lane, 512 contiguous bytes per row) and 4 rows per
//   step; ROWS rows of M per block, more rows are more blocks along the
//   grid's z part, adjacent in launch order so that they share B in L2.
//
// Alignment: ALIGNED=1 needs (host-checked) B 16-byte aligned and
// N % (16 / sizeof(T)) == 0, A aligned to its copy size (8 B for 16-bit,
// 16 B for fp32) and K % 4 == 0; then every chunk is either wholly inside B
// or wholly outside (zero-filled by cp.async with src-size 0). ALIGNED=0
// is correct for any N, K and pointers aligned to one element. fp32 still
// streams B in 16-byte cp.async: row k's columns c0 .. c0+127 (a warp's)
// start `shift` elements into a 16-byte block, shift = (B/4 + k*N + c0) % 4,
// which steps of 4 rows leave unchanged (computed once per thread); the
// warp copies the 33 aligned blocks that cover them (one more than the
// aligned 32), clipped at B's end, and each lane reads its words back from
// the row's shift on (see fill_stage and compute_stage for why that is
// safe and conflict-free). A (tiny) takes one 4-byte cp.async per element,
// zero-filled with src-size 0 outside A. 16-bit cannot: cp.async copies 4,
// 8 or 16 bytes, and with an odd N or K (or a pointer 2 bytes off) an
// element pair need not lie in one aligned 4-byte word, so it reads element
// by element with plain loads and stores the packed words to the same ring
// (st.shared). C is written element by element in both: no alignment
// needed, nothing is ever written outside C, and C is read only when
// beta != 0.
//
// No header is included, on purpose: the rung compiles on its own whatever
// the layout of the shared headers.

#ifndef PREC
#error "PREC must be defined: 0 = fp32 (FFMA), 1 = bf16, 2 = fp16 (mma.sync, fp32 accumulate)"
#endif
#ifndef ALIGNED
#error "ALIGNED must be defined: 1 = 16-byte chunks (see the host's alignment test), 0 = any shape"
#endif
#ifndef WARPS
#error "WARPS (warps per block, splitting the block's K range) must be defined"
#endif
#ifndef STAGES
#error "STAGES (depth of each lane's cp.async ring) must be defined"
#endif
#ifndef ROWS
#error "ROWS (rows of M per block: 16, 32 or 64 for bf16/fp16; 1 .. 32 for fp32) must be defined"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS (blocks per SM promised by __launch_bounds__) must be defined"
#endif
#ifndef OUT_16
#error "OUT_16 must be defined: 1 = C in the inputs' 16-bit type, 0 = C is float32"
#endif

// NWARPS: warps of a block side by side along N (each on its own strip of
// WARP_STRIP columns, all at the same K step); the other WARPS / NWARPS warps
// take turns along K. Side by side, a block reads NWARPS x 128 (16-bit) or
// x 512 (fp32) contiguous bytes of every B row it touches at the same time.
#ifndef NWARPS
#define NWARPS 1
#endif
// COALESCED (16-bit): the lane that copies a chunk of B is not the lane that
// reads it. Copy: lane L of instruction r takes row 4 (L / 8) + r, chunk L % 8,
// so each quarter-warp (8 lanes, the unit the LSU coalesces 16-byte accesses
// in) asks for one whole 128-byte line. The reader keeps the fragment mapping
// (lane (g, t): rows 4t + r, chunk g). Slots are XOR-swizzled so both sides
// are free of bank conflicts; a __syncwarp per step makes the other lanes'
// cp.async bytes visible. COALESCED 0: every lane copies its own fragment
// (a quarter-warp then touches 4 lines with 32 bytes each).
#ifndef COALESCED
#define COALESCED 1
#endif
#if PREC < 0 || PREC > 2
#error "PREC must be 0, 1 or 2"
#endif
#if PREC == 0 && OUT_16
#error "OUT_16 applies to bf16 / fp16 inputs only"
#endif
#if PREC != 0 && (ROWS % 16 != 0 || ROWS > 64)
#error "bf16 / fp16: ROWS is a multiple of 16 (one mma m-tile each), at most 64"
#endif
#if PREC == 0 && (ROWS < 1 || ROWS > 32)
#error "fp32: ROWS is 1 .. 32 (accumulators: 4 x ROWS registers per lane)"
#endif
#if STAGES < 2
#error "STAGES >= 2"
#endif
#if WARPS < 1 || WARPS > 32
#error "WARPS is 1 .. 32"
#endif

#if WARPS % NWARPS != 0
#error "NWARPS divides WARPS"
#endif
#define DEVI __device__ __forceinline__

typedef unsigned short u16;

constexpr int THREADS = WARPS * 32;
constexpr int KWARPS = WARPS / NWARPS;     // warps taking turns along K
#if PREC == 0
typedef float Elem;
constexpr int WARP_STRIP = 128;   // columns per warp: 32 lanes x 4 floats
constexpr int KSTEP = 4;       // rows of B per warp step (4 x 512 B)
constexpr int A_STAGE = ROWS * 16;          // A[ROWS][4 k] floats, shared by the warp
#else
typedef u16 Elem;
constexpr int WARP_STRIP = 64;    // columns per warp: 8 lanes x 8 halves
constexpr int KSTEP = 16;      // rows of B per warp step (one mma k-block)
constexpr int M_TILES = ROWS / 16;
constexpr int A_STAGE = M_TILES * 2 * 32 * 8;  // per lane: rows g, g+8 of each m-tile, 8 B each
#endif
constexpr int STRIP = WARP_STRIP * NWARPS;     // columns per block
#if PREC == 0 && !ALIGNED
// fp32, any alignment: a B row's 128 columns start anywhere inside a 16-byte
// block, so the warp copies the 33 aligned blocks that cover them; each row
// of a step is one contiguous 528-byte segment of the stage.
constexpr int SEG_BYTES = 33 * 16;
constexpr int B_STAGE = 4 * SEG_BYTES;         // 4 rows; 2112 B per warp
#else
constexpr int B_STAGE = 4 * 32 * 16;           // per lane: 4 chunks of 16 B; 2 KB per warp
#endif
constexpr int WARP_STAGE = B_STAGE + A_STAGE;
constexpr int PIPE_BYTES = WARPS * STAGES * WARP_STAGE;
// Cross-warp reduction buffer, aliased on the (drained) ring. Rows padded by
// 4 floats: 16-byte aligned rows with fewer bank conflicts on the 16-bit
// path's float4 stores (a one-off per block, next to streaming >= 32 KB).
constexpr int RED_LD = STRIP + 4;
constexpr int RED_BYTES = KWARPS * ROWS * RED_LD * 4;
constexpr int SMEM_BYTES = PIPE_BYTES > RED_BYTES ? PIPE_BYTES : RED_BYTES;
// The host declares the dynamic shared memory it launches with (it is the
// one that computes it, from the same constants); a mismatch fails here.
#ifdef SMEM_BYTES_HOST
static_assert(SMEM_BYTES_HOST == SMEM_BYTES, "host and kernel disagree on dynamic shared memory");
#endif

#if OUT_16
typedef u16 OutT;
#else
typedef float OutT;
#endif

// ---------------------------------------------------------------------------
// Instruction wrappers (the same contracts as cu/include/).
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
DEVI uint4 lds128(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
DEVI unsigned lds32(unsigned addr) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}
DEVI uint2 lds64(unsigned addr) {
    uint2 v;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
    return v;
}
DEVI void sts128(unsigned addr, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
DEVI void sts64(unsigned addr, uint2 v) {
    asm volatile("st.shared.v2.b32 [%0], {%1, %2};" :: "r"(addr), "r"(v.x), "r"(v.y) : "memory");
}

// B is read exactly once: evict-first in L2, so the stream does not push out
// A (re-read by every strip), the workspace and C.
DEVI unsigned long long evict_first_policy() {
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
// src_bytes == 0 reads nothing and zero-fills the 16 bytes; the address must
// still be a valid, aligned global address (the callers pass B itself).
DEVI void cp_async_16_stream(unsigned dst, const void* src, unsigned src_bytes,
                             unsigned long long policy) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global.L2::cache_hint [%0], [g], 16, %2, %3; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes), "l"(policy) : "memory");
}
DEVI void cp_async_16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global [%0], [g], 16, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
DEVI void cp_async_8(unsigned dst, const void* src, unsigned src_bytes) {
    // .ca: .cg takes only 16-byte copies. A is re-read by every strip, so
    // L1 does no harm.
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.ca.shared.global [%0], [g], 8, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
DEVI void cp_async_4(unsigned dst, const void* src, unsigned src_bytes) {
    // One fp32 element (ALIGNED=0). .ca, as for cp_async_8.
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.ca.shared.global [%0], [g], 4, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
DEVI void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
DEVI void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }


DEVI unsigned prmt(unsigned a, unsigned b, unsigned sel) {
    unsigned r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

#if PREC != 0
DEVI void mma_16x8x16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if PREC == 1
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#endif
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

DEVI float to_f32(float x) { return x; }
DEVI float to_f32(u16 x) {
#if PREC == 2
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(x));
    return v;
#else
    return __uint_as_float(static_cast<unsigned>(x) << 16);
#endif
}
DEVI void from_f32(float* p, float v) { *p = v; }
DEVI void from_f32(u16* p, float v) {
    u16 out;
#if PREC == 2
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out) : "f"(v));
#else
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(packed) : "f"(v));
    out = static_cast<u16>(packed & 0xffffu);
#endif
    *p = out;
}

// ---------------------------------------------------------------------------
// One warp step into one stage of the ring: this lane's four 16-byte chunks
// of B and (16-bit) its A fragments / (fp32) the warp's A rows.
// ---------------------------------------------------------------------------
struct Geometry {
    const Elem* A;
    const Elem* B;
    int M, N, K;
    int m0;          // first row of M of this block
    int rows;        // rows of M this block owns: min(ROWS, M - m0)
    int col;         // first column of this lane's chunk
    int lane;
#if PREC == 0 && !ALIGNED
    // The shifted stream (set_up_shifts). Row j of a step, k = 4s + j, holds
    // column c at element k*N + c of B, misaligned in its 16-byte block by
    // shift_j = (B / 4 + k*N + c0) % 4 elements at the warp's first column
    // c0. Steps start at multiples of 4 rows, so 4s*N drops out: shift_j
    // is the same for every step and computed once.
    // Offsets are int, as the aligned path's r * N: a B row of 2^29 floats
    // or more is outside what either path supports.
    const Elem* end;       // &B[K*N]: every copy is clipped there (zero-filled beyond)
    int row_off[4];        // elements from cur.b to this lane's block of row j: j*N - shift_j
    int tail_off;          // lanes 0..3: to block 32 of row `lane`
    int whole_kb;          // steps with kb <= whole_kb copy inside B only (no clipping)
    unsigned rd[4];        // stage bytes to row j's element of this lane's column c0 + lane
#endif
};

#if PREC == 0 && !ALIGNED
DEVI void set_up_shifts(Geometry& G, int c0) {
    const unsigned b_words = static_cast<unsigned>(reinterpret_cast<unsigned long long>(G.B) >> 2);
    unsigned shift[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        // mod 4 survives the unsigned wrap-around (4 divides 2^32)
        shift[j] = (b_words + static_cast<unsigned>(j) * static_cast<unsigned>(G.N) +
                    static_cast<unsigned>(c0)) & 3u;
        G.row_off[j] = j * G.N - static_cast<int>(shift[j]);
        G.rd[j] = j * SEG_BYTES + 4 * shift[j] + 4 * G.lane;
    }
    const int t = G.lane & 3;                      // lanes 0..3 use it
    const unsigned shift_t = (b_words + static_cast<unsigned>(t) * static_cast<unsigned>(G.N) +
                              static_cast<unsigned>(c0)) & 3u;
    G.tail_off = t * G.N - static_cast<int>(shift_t) + 128 - 4 * G.lane;
    // A step copies elements up to (kb + 3) * N + y, y = c0 - shift_3 + 132
    // (the end of block 32 of row 3): inside B while that is <= K * N, that
    // is kb + 3 <= K - ceil(y / N).
    const long long y = (long long)c0 - shift[3] + 132;
    G.whole_kb = G.K - 3 - static_cast<int>((y + G.N - 1) / G.N);
    G.end = G.B + (long long)G.K * G.N;
}

// Bytes of the 16-byte block at src that lie inside B: 16, fewer for the
// block that holds B's last element, 0 past it (cp.async zero-fills the rest).
DEVI unsigned bytes_inside(const Elem* src, const Elem* end) {
    const long long left = reinterpret_cast<const char*>(end) - reinterpret_cast<const char*>(src);
    return left >= 16 ? 16u : left > 0 ? static_cast<unsigned>(left) : 0u;
}

#if PREC == 0 && !ALIGNED
// One 16-byte block of B's stream, clipped at B's end: whole, empty (zero
// fill from `head`, an aligned address inside B), or -- the one block that
// holds B's last element -- element by element, so that no byte past B's
// end is named by a copy (a 16-byte cp.async with a shorter src-size still
// names 16 bytes: compute-sanitizer flags it past the end of B).
DEVI void copy_block_clipped(unsigned dst, const Elem* src, const Elem* end, const void* head,
                             unsigned long long policy) {
    const unsigned n = bytes_inside(src, end);
    if (n == 16u || n == 0u) {
        cp_async_16_stream(dst, n ? (const void*)src : head, n, policy);
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const bool in = 4u * j < n;
        cp_async_4(dst + 4 * j, in ? (const void*)(src + j) : head, in ? 4u : 0u);
    }
}
#endif
#endif

// Where the next step to be copied starts, for this lane. The main loop
// moves it by WARPS steps per trip with three adds, instead of redoing the
// 64-bit row * N products of every chunk (they were most of the loop).
//   k: the B row of this lane's first chunk, which is also the first A
//      column it copies (16-bit: step * 16 + 4t; fp32: step * 4);
//   b: &B[k][col];  a: &A[m0 + g][k] (16-bit) or &A[m0 + lane][k] (fp32).
struct Cursor {
    const Elem* b;
    const Elem* a;
    int k;
    int kb;      // the B row of this lane's first copied chunk
};

DEVI Cursor cursor_at(const Geometry& G, int step) {
    Cursor c;
#if PREC == 0
    c.k = step * KSTEP;
    c.a = G.A + (long long)(G.m0 + G.lane) * G.K + c.k;
#else
    c.k = step * KSTEP + 4 * (G.lane & 3);
    c.a = G.A + (long long)(G.m0 + (G.lane >> 2)) * G.K + c.k;
#endif
#if PREC != 0 && COALESCED
    c.kb = step * KSTEP + 4 * (G.lane >> 3);
#else
    c.kb = c.k;
#endif
    c.b = G.B + (long long)c.kb * G.N + G.col;
    return c;
}

DEVI void fill_stage(unsigned stage, const Geometry& G, const Cursor& cur,
                     unsigned long long policy) {
    const int lane = G.lane;
#if PREC == 0
    constexpr int VEC = 4;
#else
    constexpr int VEC = 8;
#endif
#if PREC == 0 && !ALIGNED
    // B: the 33 aligned blocks that cover columns c0 .. c0 + 127 of each row
    // (lane l: block l of every row; lanes 0..3 also block 32 of row `lane`),
    // 16-byte copies at any alignment. The first block of a row may start up
    // to 12 bytes before &B[k][c0]: those bytes are never read back (the
    // lanes read from the shift on). Such a block lies before B itself only
    // when it is B's own first block, &B[0] rounded down to 16 bytes: inside
    // B's allocation (device allocations start on 256-byte boundaries, and B
    // points into one), and in any case inside the page of B[0], so the read
    // is harmless. Nothing past B's end is read: each copy is clipped at
    // &B[K*N], and rows k >= K read as zeros. Past column N a segment holds
    // the next rows' elements (or zeros at the end): they only reach
    // accumulators of columns >= N, which are never stored to C.
    // Warp-uniform: the step's last block (block 32 of row 3) ends inside B,
    // so every copy is whole; only the last steps of B take the clipped copies.
    if (cur.kb <= G.whole_kb) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
            cp_async_16_stream(stage + r * SEG_BYTES + lane * 16, cur.b + G.row_off[r], 16u, policy);
        if (lane < 4)
            cp_async_16_stream(stage + lane * SEG_BYTES + 32 * 16, cur.b + G.tail_off, 16u, policy);
    } else {
        // An empty copy still takes an aligned address: B's own first block.
        const void* head = reinterpret_cast<const void*>(
            reinterpret_cast<unsigned long long>(G.B) & ~15ull);
#pragma unroll
        for (int r = 0; r < 4; ++r)
            copy_block_clipped(stage + r * SEG_BYTES + lane * 16, cur.b + G.row_off[r], G.end,
                               head, policy);
        if (lane < 4)
            copy_block_clipped(stage + lane * SEG_BYTES + 32 * 16, cur.b + G.tail_off, G.end,
                               head, policy);
    }
#else
    // B: rows cur.k + r (r = 0..3), columns col .. col + VEC - 1.
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int k = cur.kb + r;
#if PREC != 0 && COALESCED
        // slot of (row 4t + r, chunk g) is r*32 + 8t + (g ^ 2t); here t = L/8, g = L%8
        const unsigned dst = stage + (r * 32 + (lane & 24) + ((lane & 7) ^ ((lane >> 2) & 6))) * 16;
#else
        const unsigned dst = stage + (r * 32 + lane) * 16;
#endif
        const Elem* src = cur.b + r * G.N;
#if ALIGNED
        // N % VEC == 0: a chunk is wholly inside B or wholly outside.
        const bool in = k < G.K && G.col < G.N;
#ifdef NO_HINT
        (void)policy;
        cp_async_16(dst, in ? (const void*)src : (const void*)G.B, in ? 16u : 0u);
#else
        cp_async_16_stream(dst, in ? (const void*)src : (const void*)G.B, in ? 16u : 0u, policy);
#endif
#else
        unsigned w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned lo = (k < G.K && G.col + 2 * j < G.N) ? src[2 * j] : 0u;
            const unsigned hi = (k < G.K && G.col + 2 * j + 1 < G.N) ? src[2 * j + 1] : 0u;
            w[j] = lo | (hi << 16);
        }
        sts128(dst, make_uint4(w[0], w[1], w[2], w[3]));
#endif
    }
#endif
    (void)VEC;
#if PREC == 0
    // A: lane l < ROWS copies A[m0 + l][k .. k+3] for the whole warp.
    if (lane < ROWS) {
        const unsigned dst = stage + B_STAGE + lane * 16;
        const Elem* src = cur.a;
#if ALIGNED
        const bool in = lane < G.rows && cur.k < G.K;   // K % 4 == 0: all four or none
        cp_async_16(dst, in ? (const void*)src : (const void*)G.A, in ? 16u : 0u);
#else
        // Any K: element by element, each zero-filled outside A (source A itself).
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const bool in = lane < G.rows && cur.k + j < G.K;
            cp_async_4(dst + 4 * j, in ? (const void*)(src + j) : (const void*)G.A, in ? 4u : 0u);
        }
#endif
    }
#else
    // A: rows 16 tm + 8 h + g of the block, columns k .. k+3 (8 bytes).
    const int g = lane >> 2;
#pragma unroll
    for (int tm = 0; tm < M_TILES; ++tm) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = 16 * tm + 8 * h;           // first row of this half-tile
            if (row >= G.rows) continue;               // warp-uniform: never read
            const unsigned dst = stage + B_STAGE + ((tm * 2 + h) * 32 + lane) * 8;
            const int m = row + g;
            const Elem* src = cur.a + row * G.K;
#if ALIGNED
            const bool in = m < G.rows && cur.k < G.K;  // K % 4 == 0: all four or none
            cp_async_8(dst, in ? (const void*)src : (const void*)G.A, in ? 8u : 0u);
#else
            unsigned w[2];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int k = cur.k + 2 * j;
                const unsigned lo = (m < G.rows && k < G.K) ? src[2 * j] : 0u;
                const unsigned hi = (m < G.rows && k + 1 < G.K) ? src[2 * j + 1] : 0u;
                w[j] = lo | (hi << 16);
            }
            sts64(dst, make_uint2(w[0], w[1]));
#endif
        }
    }
#endif
}

DEVI void advance(Cursor& c, long long b_stride) {
    c.b += b_stride;
    c.a += KWARPS * KSTEP;
    c.k += KWARPS * KSTEP;
    c.kb += KWARPS * KSTEP;
}

// ---------------------------------------------------------------------------
// The math of one step, from one stage of the ring into the accumulators.
// ---------------------------------------------------------------------------
#if PREC == 0
struct Acc { float v[ROWS][4]; };

DEVI void zero(Acc& acc) {
#pragma unroll
    for (int m = 0; m < ROWS; ++m)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc.v[m][j] = 0.0f;
}

#if ALIGNED
DEVI void compute_stage(Acc& acc, unsigned stage, int lane, int rows) {
    float b[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const uint4 q = lds128(stage + (r * 32 + lane) * 16);
        b[r][0] = __uint_as_float(q.x); b[r][1] = __uint_as_float(q.y);
        b[r][2] = __uint_as_float(q.z); b[r][3] = __uint_as_float(q.w);
    }
#else
// The shifted stream: column c0 + c of row r is word shift_r + c of the
// row's segment, 4-byte aligned only, so a lane reads words, and takes the
// columns l, l + 32, l + 64, l + 96 (b[r][q] and acc.v[m][q]: column
// c0 + l + 32q): each of the four LDS.32 of a row is then 32 consecutive
// words, 128 bytes, one wavefront with no bank conflict (four adjacent
// columns per lane would put 4 lanes on each bank), and its address is the
// row's register plus an immediate. stash_partials puts the columns back in
// order. The lanes read their neighbours' copies: the __syncwarp of the
// main loop.
DEVI void compute_stage(Acc& acc, unsigned stage, const Geometry& G) {
    const int rows = G.rows;
    float b[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int q = 0; q < 4; ++q) b[r][q] = __uint_as_float(lds32(stage + G.rd[r] + 128 * q));
#endif
#pragma unroll
    for (int m = 0; m < ROWS; ++m) {
        if (m >= rows) break;                          // warp-uniform
        // Every lane reads the same 16 bytes: one broadcast wavefront.
        const uint4 q = lds128(stage + B_STAGE + m * 16);
        const float a[4] = {__uint_as_float(q.x), __uint_as_float(q.y),
                            __uint_as_float(q.z), __uint_as_float(q.w)};
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                acc.v[m][j] = fmaf(a[r], b[r][j], acc.v[m][j]);
    }
}

#else
struct Acc { float v[M_TILES][8][4]; };   // [m-tile][n-tile j][mma C fragment]

DEVI void zero(Acc& acc) {
#pragma unroll
    for (int tm = 0; tm < M_TILES; ++tm)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc.v[tm][j][c] = 0.0f;
}

DEVI void compute_stage(Acc& acc, unsigned stage, int lane, int rows) {
    uint4 q[4];
#if COALESCED
    const int rslot = 8 * (lane & 3) + ((lane >> 2) ^ (2 * (lane & 3)));   // (g, t) = (lane/4, lane%4)
#else
    const int rslot = lane;
#endif
#pragma unroll
    for (int r = 0; r < 4; ++r) q[r] = lds128(stage + (r * 32 + rslot) * 16);
    // Pair rows (0, 1) and (2, 3) column by column: b0 / b1 of n-tile j.
    const unsigned w01[2][4] = {{q[0].x, q[0].y, q[0].z, q[0].w}, {q[1].x, q[1].y, q[1].z, q[1].w}};
    const unsigned w23[2][4] = {{q[2].x, q[2].y, q[2].z, q[2].w}, {q[3].x, q[3].y, q[3].z, q[3].w}};
    unsigned b0[8], b1[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        b0[2 * i] = prmt(w01[0][i], w01[1][i], 0x5410);      // low halves: column 2i
        b0[2 * i + 1] = prmt(w01[0][i], w01[1][i], 0x7632);  // high halves: column 2i+1
        b1[2 * i] = prmt(w23[0][i], w23[1][i], 0x5410);
        b1[2 * i + 1] = prmt(w23[0][i], w23[1][i], 0x7632);
    }
#ifdef SKIP_MATH
    // Diagnostic only (wrong results): the loads stay live, no mma.
    acc.v[0][0][0] += __uint_as_float((b0[0] ^ b1[1] ^ b0[2] ^ b1[3] ^ b0[4] ^ b1[5] ^ b0[6] ^ b1[7]) & 0x3f800000u);
    return;
#endif
#pragma unroll
    for (int tm = 0; tm < M_TILES; ++tm) {
        if (16 * tm >= rows) break;                    // warp-uniform
        unsigned a[4];
        const uint2 lo = lds64(stage + B_STAGE + ((tm * 2) * 32 + lane) * 8);
        a[0] = lo.x; a[2] = lo.y;                      // row g: k-slots 2t,2t+1 | 2t+8,2t+9
        if (16 * tm + 8 < rows) {                      // warp-uniform
            const uint2 hi = lds64(stage + B_STAGE + ((tm * 2 + 1) * 32 + lane) * 8);
            a[1] = hi.x; a[3] = hi.y;                  // row g + 8
        } else {
            a[1] = 0u; a[3] = 0u;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) mma_16x8x16(acc.v[tm][j], a, b0[j], b1[j]);
    }
}
#endif

// This lane's partial sums into the block's reduction buffer (slot `warp`),
// rows < rows only.
DEVI void stash_partials(const Acc& acc, float* red, int lane, int rows) {
#if PREC == 0 && !ALIGNED
    // columns lane + 32q (compute_stage): 32 consecutive floats per store
#pragma unroll
    for (int m = 0; m < ROWS; ++m) {
        if (m >= rows) break;
#pragma unroll
        for (int q = 0; q < 4; ++q) red[m * RED_LD + lane + 32 * q] = acc.v[m][q];
    }
#elif PREC == 0
#pragma unroll
    for (int m = 0; m < ROWS; ++m) {
        if (m >= rows) break;
        *reinterpret_cast<float4*>(red + m * RED_LD + 4 * lane) =
            make_float4(acc.v[m][0], acc.v[m][1], acc.v[m][2], acc.v[m][3]);
    }
#else
    // C fragment of n-tile j: c0, c1 at row g, mma columns 2t, 2t+1, i.e.
    // strip columns 16t + j and 16t + 8 + j; c2, c3 the same at row g + 8.
    // So lane (g, t) holds 16 contiguous columns 16t .. 16t+15 of rows g, g+8.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int tm = 0; tm < M_TILES; ++tm) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = 16 * tm + 8 * h + g;
            if (m < rows) {
                float* p = red + m * RED_LD + 16 * t;
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    *reinterpret_cast<float4*>(p + 4 * q) =
                        make_float4(acc.v[tm][4 * q][2 * h], acc.v[tm][4 * q + 1][2 * h],
                                    acc.v[tm][4 * q + 2][2 * h], acc.v[tm][4 * q + 3][2 * h]);
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    *reinterpret_cast<float4*>(p + 8 + 4 * q) =
                        make_float4(acc.v[tm][4 * q][2 * h + 1], acc.v[tm][4 * q + 1][2 * h + 1],
                                    acc.v[tm][4 * q + 2][2 * h + 1],
                                    acc.v[tm][4 * q + 3][2 * h + 1]);
            }
        }
    }
#endif
}

// Four columns n .. n+3 of row m of C (those < N): alpha * sum + beta * C.
DEVI void store_c4(OutT* C, int N, int m, int n, float4 sum, float alpha, float beta) {
    const float v[4] = {sum.x, sum.y, sum.z, sum.w};
    OutT* row = C + (long long)m * N;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (n + j >= N) break;
        float out = alpha * v[j];
        if (beta != 0.0f) out = fmaf(beta, to_f32(row[n + j]), out);  // beta == 0: C never read
        from_f32(row + n + j, out);
    }
}

DEVI float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
// Workspace reads in the last block bypass L1: the partials were written by
// other SMs, and only L2 is coherent between them.
DEVI float4 ldcg_f32x4(const float* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
// The last block clears each partial it has read (same thread, same address,
// after the load), so a launch leaves the whole workspace as it found it: all
// zero. The workspace is kept per stream and reused by launches of any shape
// and any rung-30 entry, and the tiles' offset (after the counters, rounded
// to 256 bytes) depends on strips x zchunks: bytes that held one launch's
// partials can be a later launch's counters, which must read 0.
DEVI void stcg_zero_f32x4(float* p) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %1, %1, %1};" :: "l"(p), "f"(0.0f) : "memory");
}
DEVI void stcg_f32x4(float* p, float4 v) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}
// The sums of `count` workspace float4s `stride` floats apart, from p and
// from q (two items of a thread, so that one L2 round trip serves both), in
// that fixed order, each cleared once read. The loads of eight terms of both
// are issued before their adds (in order). q may be p (one item left): the
// second sum is then a copy, and clearing twice is harmless.
DEVI void sum_and_clear(float* p, float* q, int count, long long stride, float4& sp_out,
                        float4& sq_out) {
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f), t = s;
    int sp = 0;
    for (; sp + 8 <= count; sp += 8) {
        float4 v[8], w[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = ldcg_f32x4(p + (sp + u) * stride);
#pragma unroll
        for (int u = 0; u < 8; ++u) w[u] = ldcg_f32x4(q + (sp + u) * stride);
#pragma unroll
        for (int u = 0; u < 8; ++u) { s = add4(s, v[u]); t = add4(t, w[u]); }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            stcg_zero_f32x4(p + (sp + u) * stride);
            stcg_zero_f32x4(q + (sp + u) * stride);
        }
    }
    for (; sp < count; ++sp) {
        const float4 v = ldcg_f32x4(p + sp * stride), w = ldcg_f32x4(q + sp * stride);
        s = add4(s, v);
        t = add4(t, w);
        stcg_zero_f32x4(p + sp * stride);
        stcg_zero_f32x4(q + sp * stride);
    }
    sp_out = s;
    sq_out = t;
}

// ---------------------------------------------------------------------------
// The kernel. A 1-D grid of strips x zchunks x splits blocks, decoded with
// the z chunk fastest (blocks that need the same B rows run side by side and
// share them in L2), then the strip (neighbouring strips read neighbouring
// 128-byte pieces of the same rows at the same time), then the split.
//   work:     fp32 tiles [zchunks * strips][splits][ROWS][STRIP], only
//             touched when splits > 1;
//   counters: int [zchunks * strips] (one a strip), then, when the splits
//             form more than one group, int [zchunks * strips][ngroups] (one
//             a group); all 0 before the first call, back to 0 when the
//             kernel ends.
// steps_per_split: KSTEP-row steps per split; split s owns the steps
// [s * steps_per_split, min((s+1) * steps_per_split, ceil(K / KSTEP))),
// never empty (the host makes splits = ceil(steps / steps_per_split)).
// group: splits per reduction group (1 .. splits; splits: one level).
// ---------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
small_m_gemm(const Elem* __restrict__ A, const Elem* __restrict__ B, OutT* __restrict__ C,
             float* __restrict__ work, int* __restrict__ counters,
             int M, int N, int K, float alpha, float beta,
             int strips, int zchunks, int splits, int steps_per_split, int group)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nw = warp % NWARPS, kw = warp / NWARPS;
    int bid = blockIdx.x;
    const int z = bid % zchunks;
    bid /= zchunks;
    const int strip = bid % strips;
    const int split = bid / strips;

    Geometry G;
    G.A = A; G.B = B; G.M = M; G.N = N; G.K = K;
    G.m0 = z * ROWS;
    G.rows = min(ROWS, M - G.m0);
    G.lane = lane;
    const int n0 = strip * STRIP;
#if PREC == 0
    G.col = n0 + nw * WARP_STRIP + 4 * lane;
#if !ALIGNED
    set_up_shifts(G, n0 + nw * WARP_STRIP);
#endif
#else
    G.col = n0 + nw * WARP_STRIP + 8 * (COALESCED ? (lane & 7) : (lane >> 2));   // copier's column
#endif

    const int total_steps = (K + KSTEP - 1) / KSTEP;
    const int q0 = split * steps_per_split;
    const int q1 = min(total_steps, q0 + steps_per_split);
    const int mine = q1 - q0 > kw ? (q1 - q0 - kw + KWARPS - 1) / KWARPS : 0;

    unsigned char* smem = dynamic_smem();
    const unsigned ring = smem_u32(smem) + warp * STAGES * WARP_STAGE;
    const unsigned long long policy = evict_first_policy();
    // Programmatic dependent launch (cu/include/grid_dependency.cuh, written
    // out here as this file includes no header): the grid before this one in
    // the stream has completed before the first global-memory access.
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

    Acc acc;
    zero(acc);

    // Prologue: steps 0 .. STAGES-2 in flight, one commit group each (empty
    // when this warp has fewer steps, so the group count stays exact).
    Cursor cur = cursor_at(G, q0 + kw);
    const long long b_stride = (long long)KWARPS * KSTEP * N;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < mine) fill_stage(ring + s * WARP_STAGE, G, cur, policy);
        cp_async_commit();
        advance(cur, b_stride);
    }
    int read_slot = 0, write_slot = STAGES - 1;
    for (int i = 0; i < mine; ++i) {
        // STAGES-1+i groups committed; at most STAGES-2 pending: step i landed.
        cp_async_wait<STAGES - 2>();
#if PREC == 0 || COALESCED
        // The A rows of the stage were copied by lanes 0 .. ROWS-1; this also
        // says every lane is done with the slot refilled just below (it was
        // read in the previous trip).
        __syncwarp();
#endif
        const unsigned stage = ring + read_slot * WARP_STAGE;
        // Refill the slot read in the previous trip (this lane's own B bytes
        // went to its registers then; fp32's shared A rows: see above).
        if (i + STAGES - 1 < mine) fill_stage(ring + write_slot * WARP_STAGE, G, cur, policy);
        cp_async_commit();
        advance(cur, b_stride);
#if PREC == 0 && !ALIGNED
        compute_stage(acc, stage, G);
#else
        compute_stage(acc, stage, lane, G.rows);
#endif
        read_slot = read_slot == STAGES - 1 ? 0 : read_slot + 1;
        write_slot = write_slot == STAGES - 1 ? 0 : write_slot + 1;
    }
    cp_async_wait<0>();
    __syncthreads();   // every warp is out of the ring: it becomes the reduction buffer

    float* red = reinterpret_cast<float*>(smem);
    stash_partials(acc, red + kw * ROWS * RED_LD + nw * WARP_STRIP, lane, G.rows);
    __syncthreads();

    // Sum over the warps in warp order, four columns per item (the buffer's
    // rows are 16-byte aligned). items: this block's rows x STRIP / 4.
    constexpr int Q = STRIP / 4;
    const int items = G.rows * Q;
    if (splits == 1) {
        for (int it = tid; it < items; it += THREADS) {
            const int m = it / Q, c = 4 * (it % Q);
            float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int w = 0; w < KWARPS; ++w)
                s = add4(s, *reinterpret_cast<const float4*>(red + (w * ROWS + m) * RED_LD + c));
            if (n0 + c < N) store_c4(C, N, G.m0 + m, n0 + c, s, alpha, beta);
        }
        return;
    }

    // Split K: this block's partial strip goes to its own tile of the
    // workspace, ROWS x STRIP floats, contiguous: tile (strip, z, split) at
    // ((z * strips + strip) * splits + split) * ROWS * STRIP. Only the
    // float4s that hold a column < N are written, read and cleared (the
    // rest of a tile stays 0): with N narrower than the strip (N = 32 of 64
    // columns) the reduction moves half the bytes.
    const int cid = z * strips + strip;
    const int qn = (min(STRIP, N - n0) + 3) / 4;    // float4s of a tile row inside N
    const int tile_items = G.rows * qn;
    float* tiles = work + (long long)cid * splits * (ROWS * STRIP);
    {
        float* mine_tile = tiles + (long long)split * (ROWS * STRIP);
        for (int it = tid; it < tile_items; it += THREADS) {
            const int m = it / qn, c = 4 * (it % qn);
            float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int w = 0; w < KWARPS; ++w)
                s = add4(s, *reinterpret_cast<const float4*>(red + (w * ROWS + m) * RED_LD + c));
            *reinterpret_cast<float4*>(mine_tile + m * STRIP + c) = s;
        }
    }
    // Two levels when there are many splits: the splits form groups of
    // `group` consecutive ones (the host's choice, about sqrt(splits)); the
    // last block of a group to finish adds the group's tiles into the
    // group's first tile, and the last group to finish adds the groups'
    // tiles and writes C. One level (group == splits) is the plain scheme:
    // the last block of the strip adds every tile. Either way the order of
    // the additions is fixed (tiles in split order within a group, groups in
    // order), so C has the same bits whichever blocks come last, and the
    // chain of dependent L2 round trips is about 2 sqrt(splits) / 8 instead
    // of splits / 8.
    //   counters[cid]: groups (or splits, with one level) done on this strip;
    //   counters[strips * zchunks + cid * ngroups + g]: splits done in group g.
    const int ngroups = (splits + group - 1) / group;
    __shared__ int is_last;
    if (ngroups > 1) {
        const int g = split / group;
        const int first = g * group, count = min(group, splits - first);
        // Publish this block's partials before it is counted (the classic
        // threadFenceReduction order: store, fence, barrier, one atomic).
        __threadfence();
        __syncthreads();
        int* group_counter = counters + strips * zchunks + cid * ngroups + g;
        if (tid == 0) is_last = atomicAdd(group_counter, 1) == count - 1;
        __syncthreads();
        if (!is_last) return;
        __threadfence();   // the group's other partials, counted before us, are visible
        float* head = tiles + (long long)first * (ROWS * STRIP);
        for (int it = tid; it < tile_items; it += 2 * THREADS) {
            const int it2 = it + THREADS < tile_items ? it + THREADS : it;
            float* p = head + (it / qn) * STRIP + 4 * (it % qn);
            float* q = head + (it2 / qn) * STRIP + 4 * (it2 % qn);
            float4 s, t;
            sum_and_clear(p, q, count, ROWS * STRIP, s, t);
            // same thread, same addresses: after their clears
            stcg_f32x4(p, s);
            if (q != p) stcg_f32x4(q, t);
        }
        if (tid == 0) *group_counter = 0;
        __threadfence();
        __syncthreads();
    } else {
        __threadfence();
        __syncthreads();
    }
    // arrivals at the strip's counter: its groups, or (one level) its splits
    const int arrivals = ngroups > 1 ? ngroups : splits;
    if (tid == 0) is_last = atomicAdd(&counters[cid], 1) == arrivals - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();   // the other partials (or group sums), counted before us, are visible

    // the terms: the group sums (first tile of each group) or every split's tile
    const int stride = ngroups > 1 ? group : 1;
    for (int it = tid; it < tile_items; it += 2 * THREADS) {
        const int it2 = it + THREADS < tile_items ? it + THREADS : it;
        const int m = it / qn, c = 4 * (it % qn), m2 = it2 / qn, c2 = 4 * (it2 % qn);
        float4 s, t;
        sum_and_clear(tiles + m * STRIP + c, tiles + m2 * STRIP + c2, arrivals,
                      (long long)stride * (ROWS * STRIP), s, t);
        store_c4(C, N, G.m0 + m, n0 + c, s, alpha, beta);
        if (it2 != it) store_c4(C, N, G.m0 + m2, n0 + c2, t, alpha, beta);
    }
    // Ready for the next call on this workspace, whatever its shape: the
    // counters back to 0 and (above) every partial of this strip cleared (the
    // kernel boundary orders it).
    if (tid == 0) counters[cid] = 0;
}
