// Softmax rung 10: short contiguous rows through a shared-memory tile.
//
// Many rows of a few dozen to a few hundred elements, stored back to back
// (row pitch == cols). A tile is R = THREADS / ROW_THREADS consecutive rows,
// one contiguous run of R * cols elements; for each of its tiles a block
//   1. copies the run into shared memory with 16-byte cp.async of the
//      aligned vectors that cover it: every vector one 128-bit access
//      whatever the row length or where the run starts (only a vector that
//      crosses an end of the array goes element by element);
//   2. lets ROW_THREADS lanes per row reduce and scale the row from shared
//      memory (each lane holds ELEMS values of it, lane-strided: a lane
//      group reads consecutive words; a row whose words would crowd the
//      banks, CROWDED, is read by its lane group as 16-byte vectors);
//   3. writes the run back: y's vectors that lie wholly inside the run as
//      16-byte stores, the (at most two) partial ones element by element.
// The grid walks the tiles (block b takes tiles b, b + grid, ...; the host
// launches as many blocks as fit at once with two buffers, else one a
// tile). With two tile buffers (16-bit types, whose tiles are half the
// bytes, and fp32 rows of <= 16) the next tile's copies are issued before
// this one is reduced, so a block has bytes in flight through its reduce
// and store, not only between its barriers: measured bf16 524288 x 31 0.81
// -> 0.89 of copy, fp32 1048576 x 9 0.68 -> 0.79 (16-bit rows of 33 and 127
// did not move: their limit is not the bytes in flight).
// Why a tile: the window rung (07) reads each row through its own 16-byte
// window, whose first and last vectors are partial and go element by element;
// a row of 31 fp32 has 8 to 9 vectors, 2 of them partial (7 scalar accesses
// each), and 16-bit rows of 31 have half the vectors with the same partial
// two. Here the partial vectors are two per block of R rows.
//
// Every constant is a define the registry always passes (a missing one is a
// compile error): DTYPE, THREADS, ROW_THREADS (a power of two <= 32), ELEMS
// (cols <= MAX_COLS below), MIN_BLOCKS (__launch_bounds__), BUFFERS, CROWDED.
// Parameters: x, y are rows x cols, row-major, contiguous (y may start at
// another 16-byte phase than x: its stores are then element-wise); any
// rows, cols >= 1 that fit the config.
#include "grid_dependency.cuh"
#include "softmax_common.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ROW_THREADS
#error "ROW_THREADS must be defined (lanes per row: a power of two <= 32)"
#endif
#ifndef ELEMS
#error "ELEMS must be defined (elements of its row a lane holds: cols <= MAX_COLS)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif
#ifndef BUFFERS
#error "BUFFERS must be defined (tile buffers per block: 1, or 2 to copy the next tile in during this one)"
#endif
#ifndef CROWDED
#error "CROWDED must be defined (1: rows whose plain slots crowd the banks; see kRotateBuild, kVectors)"
#endif

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(ROW_THREADS <= 32 && (ROW_THREADS & (ROW_THREADS - 1)) == 0,
              "ROW_THREADS: a power of two <= 32 (lane groups inside a warp)");

// The 16-bit builds take the fast exp, as the window rungs' do
// (softmax_common.cuh, exp_diff): their element rate is twice fp32's at the
// same bytes, and expf's nine instructions per element would bound them.
constexpr bool kFast = DTYPE != 0;
constexpr int ROWS = THREADS / ROW_THREADS;           // rows a block owns
constexpr int SZ = static_cast<int>(sizeof(elem_t));
constexpr int VEC = 16 / SZ;                          // elements per 16-byte vector
// The longest row: ROW_THREADS * ELEMS values, and for 16-bit rows one more
// (a lane group holds ELEMS / 2 whole words a lane plus the row's lone first
// and last elements, reduce_run_words: a row of ROW_THREADS * ELEMS + 1 has at
// most ROW_THREADS * ELEMS / 2 whole words whichever half it starts on). So a
// 16-bit row of 33 takes one lane of 32 slots, not two lanes of which half
// the slots are empty. A crowded row on a lane group (kVectors below) is
// shorter: its group's vectors less up to VEC - 1 elements.
// registry.SoftmaxConfig.row_capacity says the same.
constexpr int MAX_COLS = ROW_THREADS * ELEMS + (SZ == 2 ? 1 : 0);
// The run (at most ROWS * MAX_COLS elements) lands at its byte offset inside
// its first 16-byte vector (0..15) and may end one partial vector later: 32
// bytes of slack.
constexpr int TILE_BYTES = ROWS * MAX_COLS * SZ + 32;
// Buffer b starts b * TILE_STRIDE bytes in: a whole number of 128-byte bank
// rows, so a tile meets the same banks in either buffer. The rotated slots
// (below) start from the bank a row lands on, and a lane's sum runs in its
// slot order: with buffers at different bank phases a tile's bits would
// depend on which buffer it took, i.e. on the grid (seen on the H200: bf16
// x 129 and fp16 x 65 differed between a 1- or 3-block grid and prepare's).
constexpr int TILE_STRIDE = (TILE_BYTES + 127) / 128 * 128;
static_assert(BUFFERS == 1 || (BUFFERS == 2 && 2 * TILE_STRIDE <= 48 * 1024),
              "BUFFERS: 1, or 2 where both tiles fit the 48 KB of static shared memory");

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global [%0], [g], 16; }" :: "r"(dst), "l"(src) : "memory");
}

// One tile's run of rows: where it starts in x and y and how it lies in
// the 16-byte vectors of x (the tile buffer holds those vectors).
struct Run {
    long long e0;         // first element of the run
    long long run_bytes;  // its bytes
    long long v0;         // byte offset (from x) of the vector holding its first byte
    int nrows;            // rows in the run (fewer in the last tile)
    int shift;            // the run's byte 0 is buffer byte `shift`
    int nvec;             // vectors covering the run
};

__device__ __forceinline__ Run run_of(long long tile, int rows, int cols, int xphase) {
    Run r;
    const long long row0 = tile * ROWS;
    r.nrows = static_cast<int>(min(static_cast<long long>(ROWS), rows - row0));
    r.e0 = row0 * cols;
    r.run_bytes = static_cast<long long>(r.nrows) * cols * SZ;
    const long long a0 = r.e0 * SZ;
    r.v0 = ((a0 + xphase) & ~15ll) - xphase;
    r.shift = static_cast<int>(a0 - r.v0);
    r.nvec = static_cast<int>((a0 + r.run_bytes - r.v0 + 15) >> 4);
    return r;
}

// 1. x's aligned vectors covering the run, into buf (byte offsets from x: the
// first vector may start before x; offsets, not integer addresses, keep the
// accesses in the global space: LDGSTS / LDG, not generic ones). The run lies
// inside x, so only its first vector can start before x and only its last can
// end past it: those, where they do, go element by element (partial_vector),
// one by thread 0 and one by the block's last thread; every other vector is
// one 16-byte cp.async with no bound to test (tested in the loop, the bounds
// took ~half of its 19 instructions a vector). The caller commits the
// cp.async group.
//
// The elements k of a 16-byte vector, src to dst, whose byte offset off + k *
// SZ lies in [lo, hi): a vector across an end of the array or of the run (the
// bytes outside belong to nobody, or to the neighbouring tiles' rows). Not
// inlined: two threads a tile call it, and inlined its bounds stayed live
// across the reduce (fp32 crowded rows of 40 slots spilled 92 B).
__device__ __noinline__ void partial_vector(elem_t* dst, const elem_t* src, long long off,
                                            long long lo, long long hi) {
    // its elements [ka, kb): the bounds as element counts from off, clamped to the vector
    const int ka = static_cast<int>(max(min((lo - off + SZ - 1) / SZ, static_cast<long long>(VEC)), 0ll));
    const int kb = static_cast<int>(max(min((hi - off + SZ - 1) / SZ, static_cast<long long>(VEC)), 0ll));
#pragma unroll
    for (int k = 0; k < VEC; ++k)
        if (k >= ka && k < kb) dst[k] = src[k];
}

__device__ __forceinline__ void load_run(unsigned char* buf, const Run& r,
                                         const unsigned char* xc, long long xbytes) {
    const int first = r.v0 < 0 ? 1 : 0;                              // vector 0 starts before x
    const int last = r.v0 + 16ll * r.nvec > xbytes ? r.nvec - 1 : r.nvec;   // the last ends past it
#pragma unroll 1   // unrolled (4), the fp32 crowded builds spill 8 B
    for (int v = first + static_cast<int>(threadIdx.x); v < last; v += THREADS)
        cp_async_16(smem_u32(buf + 16 * v), xc + (r.v0 + 16ll * v));
    if (first && threadIdx.x == 0)
        partial_vector(reinterpret_cast<elem_t*>(buf), reinterpret_cast<const elem_t*>(xc + r.v0),
                       r.v0, 0, xbytes);
    if (last < r.nvec && last >= first && threadIdx.x == THREADS - 1) {   // not vector 0 again
        const long long g = r.v0 + 16ll * last;
        partial_vector(reinterpret_cast<elem_t*>(buf + 16 * last), reinterpret_cast<const elem_t*>(xc + g),
                       g, 0, xbytes);
    }
}

// 2. Lane group g owns row g of the run; lanes past the last row hold
// nothing but still take part in the group's shuffles (full mask).
//
// Slots. Lane l holds the row's values l, l + ROW_THREADS, ... (fp32
// elements, or whole 32-bit words of a 16-bit row), `held` of them, in slots
// 0 .. ELEMS - 1. Plainly, slot j holds value l + j * ROW_THREADS, so one
// load of the warp reads ROW_THREADS consecutive words of each of its
// 32 / ROW_THREADS rows; where the row's length in words is near a multiple
// of 32 every row starts on about the same bank and the load serialises
// (bf16 rows of 127, 64, 32: ncu counted 3.7M conflicts for 0.57M shared
// loads at 131072 x 127, benchmarks/softmax_ncu.py). Rotated, slot j holds
// value l + ((j + rot) mod span) * ROW_THREADS (span = the row's slots),
// with `rot` chosen per group so that its first load starts at its own
// ROW_THREADS banks of the 32: at most two lanes a bank until a group wraps.
// Slots before the wrap read from `first`, the others from `late` = first -
// span * ROW_THREADS, each at a compile-time offset j * ROW_THREADS.
template <bool kRotate>
struct Slots {
    unsigned live;   // bit j: slot j holds a value of the row (kRotate)
    unsigned wrap;   // bit j: slot j is past the end of the sweep, read from `late` (kRotate)
    int held;        // plain slots: slot j holds a value when j < held
    int first;       // value index of slot 0
    int late;        // first - span * ROW_THREADS: the base of the wrapped slots

    // word0: the bank word of value 0 (fp32: element 0; 16-bit: whole word 0);
    // n values, `h` of them this lane's. Plain slots: rot = 0.
    __device__ __forceinline__ Slots(int n, int h, int lane, int group, unsigned word0) {
        held = h;
        first = lane;
        late = lane;
        live = wrap = 0;
        if constexpr (kRotate) {
            constexpr int GROUPS_PER_WARP = 32 / ROW_THREADS;
            const int span = (n + ROW_THREADS - 1) / ROW_THREADS;
            const int target = ROW_THREADS * (group % GROUPS_PER_WARP);     // this group's banks
            int rot = static_cast<int>((static_cast<unsigned>(target) - word0) & 31u) / ROW_THREADS;
            rot = span > 0 ? rot % span : 0;
            const unsigned span_bits = span >= 32 ? ~0u : (1u << span) - 1u;
            const unsigned held_bits = h <= 0 ? 0u : h >= 32 ? ~0u : (1u << h) - 1u;
            // slot j holds value (j + rot) mod span: the held mask rotated by rot within span bits
            live = rot == 0 ? held_bits : ((held_bits >> rot) | (held_bits << (span - rot))) & span_bits;
            wrap = span_bits & ~((1u << (span - rot)) - 1u);
            first = lane + rot * ROW_THREADS;
            late = first - span * ROW_THREADS;
        }
    }

    __device__ __forceinline__ bool has(int j) const {
        if constexpr (kRotate) return (live >> j) & 1u;
        return j < held;
    }

    // Slot j's value in the row: j * ROW_THREADS an offset in the instruction.
    template <typename T>
    __device__ __forceinline__ T* at(T* row, int j) const {
        if constexpr (kRotate) return row + (((wrap >> j) & 1u) ? late : first) + j * ROW_THREADS;
        return row + first + j * ROW_THREADS;
    }
};

// CROWDED: the planner's verdict (analysis.banks.row_tile_crowded) that a
// row's plain slots put three or more lanes of a warp on one bank, made once
// for the launch so that each build holds one walk (deciding in the kernel, a
// warp's __match_any_sync on its first load, lost 7% on the plain rows and
// spilled with both walks). The remedy depends on the lanes a row:
//  - a lane group (kVectors): the row read and written as 16-byte vectors
//    (reduce_run_vectors), where rotated slots had gained nothing (bf16 131072
//    x 127 0.704 -> 0.708 of copy). Measured against the rotated slots, same
//    run, of copy: bf16 131072 x 66 0.524 -> 0.636, x 96 0.644 -> 0.769, x 106
//    0.685 -> 0.830, x 127 0.711 -> 0.795, fp16 x 127 0.703 -> 0.801, 65536 x
//    129 0.809 -> 0.803; on rows whose slots spread it lost (x 72 0.753 ->
//    0.684, x 100 0.879 -> 0.795, x 120 0.940 -> 0.844), so those keep them;
//  - one 16-bit lane a row (kRotateBuild): rotated slots (Slots above; bf16
//    262144 x 32 0.522 -> 0.824, 131072 x 64 0.518 -> 0.785);
//  - one fp32 lane a row: none (its rotated slots, 32 values, two masks, two
//    bases, spill at the 64 registers of four blocks an SM).
constexpr bool kRotateBuild = CROWDED != 0 && SZ == 2 && ROW_THREADS == 1;
constexpr bool kVectors = CROWDED != 0 && ROW_THREADS > 1;
static_assert(!kVectors || ELEMS % VEC == 0, "a crowded lane group holds whole 16-byte vectors");

template <bool kRotate>
__device__ __forceinline__ void reduce_row(elem_t* row, int cols, int held, int lane, int g) {
    const Slots<kRotate> sl(cols, held, lane, g, smem_u32(row) >> 2);
    float v[ELEMS];
#pragma unroll
    for (int j = 0; j < ELEMS; ++j) v[j] = sl.has(j) ? to_f32(*sl.at(row, j)) : NEG_INF;
    const MaxSum mine = slice_exp<ELEMS, kFast>(v);
    // the lanes' pairs max first (softmax_common.cuh; same run, of copy: bf16
    // 131072 x 127 0.705 -> 0.721, 65536 x 129 0.788 -> 0.803)
    const MaxSum whole = shfl_max_first<ROW_THREADS, kFast>(mine);
    const float scale = slice_scale<kFast>(mine.m, whole);
#pragma unroll
    for (int j = 0; j < ELEMS; ++j)
        if (sl.has(j)) *sl.at(row, j) = from_f32(v[j] * scale);
}

__device__ __forceinline__ void reduce_run(unsigned char* buf, const Run& r, int cols) {
    const int g = threadIdx.x / ROW_THREADS, lane = threadIdx.x % ROW_THREADS;
    const bool live = g < r.nrows;
    elem_t* row = reinterpret_cast<elem_t*>(buf + r.shift) + static_cast<long long>(g) * cols;
    // a lane's elements: lane, lane + ROW_THREADS, ... below cols
    const int held = live ? (cols - lane + ROW_THREADS - 1) / ROW_THREADS : 0;
    reduce_row<kRotateBuild>(row, cols, held, lane, g);
}

// 2'. The same for 16-bit rows, two elements (one 32-bit word) at a time:
// half the shared-memory accesses, conversions and bound tests (a 16-bit
// row has twice fp32's elements at the same bytes, and the reduce is what
// issues them). Row g starts o = 0 or 1 elements into a word; its whole
// words (both halves its own) are t = o .. nfull - 1 counted from the word
// that holds its element 0, and lane l owns whole words o + l, o + l +
// ROW_THREADS, ... (in the slot order above). Its element 0 when o = 1 and
// its last element when that ends a word early share a word with the
// neighbouring row: lane 0 takes those two alone (16-bit accesses, which
// never touch the neighbour's half).
constexpr int WORDS = ELEMS / 2;   // whole words a lane holds: a row of <= MAX_COLS

template <bool kRotate>
__device__ __forceinline__ void reduce_words(unsigned* whole, elem_t* row, int cols, int nfull, int held,
                                             bool lead, bool tail, int lane, int g) {
    const Slots<kRotate> sl(nfull, held, lane, g, smem_u32(whole) >> 2);
    float v[2 * WORDS + 2];
#pragma unroll
    for (int j = 0; j < WORDS; ++j) {
        float pair[2] = {NEG_INF, NEG_INF};
        if (sl.has(j)) unpack_word(*sl.at(whole, j), pair);
        v[2 * j] = pair[0];
        v[2 * j + 1] = pair[1];
    }
    v[2 * WORDS] = lead ? to_f32(row[0]) : NEG_INF;
    v[2 * WORDS + 1] = tail ? to_f32(row[cols - 1]) : NEG_INF;
    const MaxSum mine = slice_exp<2 * WORDS + 2, kFast>(v);
    const MaxSum whole_row = shfl_max_first<ROW_THREADS, kFast>(mine);
    const float scale = slice_scale<kFast>(mine.m, whole_row);
#pragma unroll
    for (int j = 0; j < WORDS; ++j) {
        if (sl.has(j)) {
            const float pair[2] = {v[2 * j] * scale, v[2 * j + 1] * scale};
            *sl.at(whole, j) = pack_word(pair);
        }
    }
    if (lead) row[0] = from_f32(v[2 * WORDS] * scale);
    if (tail) row[cols - 1] = from_f32(v[2 * WORDS + 1] * scale);
}

__device__ __forceinline__ void reduce_run_words(unsigned char* buf, const Run& r, int cols) {
    const int g = threadIdx.x / ROW_THREADS, lane = threadIdx.x % ROW_THREADS;
    const bool live = g < r.nrows;
    const int s = r.shift + 2 * g * cols;          // the row's first byte in buf
    const int o = (s >> 1) & 1;                    // element 0 is the high half of a word
    elem_t* row = reinterpret_cast<elem_t*>(buf + s);
    unsigned* whole = reinterpret_cast<unsigned*>(buf + (s & ~3)) + o;
    const int nfull = (cols - o) >> 1;             // whole words
    const bool lead = live && lane == 0 && o == 1;                  // element 0 alone
    const bool tail = live && lane == 0 && ((cols - o) & 1) != 0;   // element cols - 1 alone
    const int held = live ? (nfull - lane + ROW_THREADS - 1) / ROW_THREADS : 0;
    reduce_words<kRotateBuild>(whole, row, cols, nfull, held, lead, tail, lane, g);
}

// 2''. Crowded rows on lane groups (kVectors): the row's window in the tile
// (softmax_window.cuh: the 16-byte vectors that cover it, the row being
// window elements [lo, hi)). One LDS.128 / STS.128 for four fp32 or eight
// 16-bit elements where a crowded row's slots wait on the banks: ncu counted
// 0.57M shared loads meeting 3.7M bank conflicts at bf16 131072 x 127 (four
// lanes of 32 slots), 26.6 instructions an element, the issue stalled on
// shared memory (MIO throttle, short scoreboard); fp32 x 127, 3.1 conflicts
// a load.
// The window's first and last vectors (0 and nv - 1) are shared with the
// neighbouring rows: their 2 * VEC elements are dealt out ESLOTS a lane to
// the group's first EDGE_LANES lanes (the first half of them the first
// vector, the second half the last), each reading and writing only its
// elements inside the row (element accesses; the others, -inf here, are a
// neighbour's, which its lanes may be writing: racecheck flagged
// whole-vector reads of them). The vectors between, 1 .. nv - 2, lie wholly
// inside the row: lane `lane` holds 1 + lane + j * ROW_THREADS in slot j,
// loaded and stored whole. Those per-row edges are what it costs: on rows
// whose slots spread, the slots are faster. (Lanes 0 and 1 held a whole edge
// vector each, VEC slots a lane of which the other lanes' stood empty, until
// the thirty-second round: four lanes of VEC / 2 take that many
// instructions off every lane.)
constexpr int RVECS = ELEMS / VEC - 1;   // inner slots a lane holds
constexpr int EDGE_LANES = ROW_THREADS < 4 ? ROW_THREADS : 4;
constexpr int ESLOTS = 2 * VEC / EDGE_LANES;   // edge elements a lane holds
static_assert(!kVectors || (ROW_THREADS >= 2 && ESLOTS * EDGE_LANES == 2 * VEC),
              "crowded lane groups: at least two lanes, sharing the two edge vectors evenly");
// -inf in each element of a 32-bit word: what an empty inner slot holds
constexpr unsigned NEG_INF_WORD = DTYPE == 0 ? 0xff800000u : DTYPE == 1 ? 0xff80ff80u : 0xfc00fc00u;

__device__ __forceinline__ void reduce_run_vectors(unsigned char* buf, const Run& r, int cols) {
    constexpr int EPW = ELEMS_PER_WORD;
    const int g = threadIdx.x / ROW_THREADS, lane = threadIdx.x % ROW_THREADS;
    const bool live = g < r.nrows;
    const int s = r.shift + SZ * g * cols;          // the row's first byte in buf
    unsigned char* win = buf + (s & ~15);           // its window (buf is 16-byte aligned)
    const int lo = (s & 15) / SZ, hi = lo + cols;   // the row: window elements [lo, hi)
    const int nv = (hi + VEC - 1) / VEC;            // window vectors
    // the edge slots: elements e0 .. e0 + ESLOTS - 1 of the first vector (the
    // first half of the edge lanes) or of the last (the second half, when there
    // are two vectors)
    constexpr int HALF = EDGE_LANES / 2;
    const bool edge = live && lane < EDGE_LANES && (lane < HALF || nv > 1);
    const int ev = lane < HALF ? 0 : nv - 1;
    const int e0 = (lane < HALF ? lane : lane - HALF) * ESLOTS;
    // its elements: slot k holds element e0 + k of vector ev when ea <= e0 + k < eb
    const int ea = max(lo - ev * VEC, 0), eb = min(hi - ev * VEC, VEC);
    constexpr int NF = RVECS * VEC + ESLOTS;
    float f[NF];
#if DTYPE != 0
    unsigned mw = NEG_INF_WORD;   // the inner slots' max, pair by pair (max_pairs)
#endif
#pragma unroll
    for (int j = 0; j < RVECS; ++j) {
        const int q = 1 + lane + j * ROW_THREADS;
        const uint4 w = (live && q < nv - 1) ? *reinterpret_cast<const uint4*>(win + 16 * q)
                                             : make_uint4(NEG_INF_WORD, NEG_INF_WORD, NEG_INF_WORD, NEG_INF_WORD);
#if DTYPE != 0
        mw = max_pairs_vec(mw, w);
#endif
        float* o = f + j * VEC;
        unpack_word(w.x, o);
        unpack_word(w.y, o + EPW);
        unpack_word(w.z, o + 2 * EPW);
        unpack_word(w.w, o + 3 * EPW);
    }
    const elem_t* e = reinterpret_cast<const elem_t*>(win + 16 * ev) + e0;
#pragma unroll
    for (int k = 0; k < ESLOTS; ++k)
        f[RVECS * VEC + k] = (edge && e0 + k >= ea && e0 + k < eb) ? to_f32(e[k]) : NEG_INF;
#if DTYPE != 0
    float m = max_of_pair(mw);
#pragma unroll
    for (int k = 0; k < ESLOTS; ++k) m = fmaxf(m, f[RVECS * VEC + k]);
    const MaxSum mine = slice_exp_from<NF, kFast>(f, m);
#else
    const MaxSum mine = slice_exp<NF, kFast>(f);
#endif
    const float scale = slice_scale<kFast>(mine.m, shfl_max_first<ROW_THREADS, kFast>(mine));
#pragma unroll
    for (int k = 0; k < NF; ++k) f[k] *= scale;
#pragma unroll
    for (int j = 0; j < RVECS; ++j) {
        const int q = 1 + lane + j * ROW_THREADS;
        if (live && q < nv - 1) store_vec<VEC>(reinterpret_cast<elem_t*>(win + 16 * q), f + j * VEC);
    }
    if (edge) {
        elem_t* we = reinterpret_cast<elem_t*>(win + 16 * ev) + e0;
#pragma unroll
        for (int k = 0; k < ESLOTS; ++k)
            if (e0 + k >= ea && e0 + k < eb) we[k] = from_f32(f[RVECS * VEC + k]);
    }
}

// 3. y's vectors covering the run [b0, b0 + run_bytes). Where y has x's
// phase (shift), a vector wholly inside the run is buffer bytes 16 w..:
// one 16-byte store; only the first vector (where the run starts inside it)
// and the last (where it ends inside it) are partial, element by element
// (never a byte outside the run: it belongs to the neighbouring tiles' rows),
// by thread 0 and the block's last thread, as in load_run. Otherwise element
// by element throughout.
__device__ __forceinline__ void store_run(const unsigned char* buf, const Run& r, elem_t* y) {
    const int yphase = static_cast<int>(reinterpret_cast<unsigned long long>(y) & 15);
    const long long b0 = r.e0 * SZ;                        // the run in y, from y
    const long long w0 = ((b0 + yphase) & ~15ll) - yphase;
    unsigned char* yc = reinterpret_cast<unsigned char*>(y);
    if (static_cast<int>(b0 - w0) == r.shift) {
        const long long b1 = b0 + r.run_bytes;
        const int first = w0 < b0 ? 1 : 0;                               // the run starts inside vector 0
        const int last = w0 + 16ll * r.nvec > b1 ? r.nvec - 1 : r.nvec;  // it ends inside the last
#pragma unroll 1
        for (int w = first + static_cast<int>(threadIdx.x); w < last; w += THREADS)
            *reinterpret_cast<uint4*>(yc + (w0 + 16ll * w)) = *reinterpret_cast<const uint4*>(buf + 16 * w);
        if (first && threadIdx.x == 0)
            partial_vector(reinterpret_cast<elem_t*>(yc + w0), reinterpret_cast<const elem_t*>(buf), w0, b0, b1);
        if (last < r.nvec && last >= first && threadIdx.x == THREADS - 1) {   // not vector 0 again
            const long long gy = w0 + 16ll * last;
            partial_vector(reinterpret_cast<elem_t*>(yc + gy), reinterpret_cast<const elem_t*>(buf + 16 * last),
                           gy, b0, b1);
        }
    } else {
        const elem_t* src = reinterpret_cast<const elem_t*>(buf + r.shift);
        const long long n = r.run_bytes / SZ;
        for (long long i = threadIdx.x; i < n; i += THREADS) y[r.e0 + i] = src[i];
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_10_row_tile(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
    grid_dependency_wait();   // the grid before has completed (grid_dependency.cuh)
    __shared__ __align__(16) unsigned char tiles[BUFFERS][TILE_STRIDE];
    const long long ntiles = (static_cast<long long>(rows) + ROWS - 1) / ROWS;
    long long t = blockIdx.x;
    if (t >= ntiles) return;
    const long long xbytes = static_cast<long long>(rows) * cols * SZ;
    const int xphase = static_cast<int>(reinterpret_cast<unsigned long long>(x) & 15);
    const unsigned char* xc = reinterpret_cast<const unsigned char*>(x);

    Run cur = run_of(t, rows, cols, xphase);
    load_run(tiles[0], cur, xc, xbytes);
    asm volatile("cp.async.commit_group;" ::: "memory");
    int b = 0;
    for (; t < ntiles; t += gridDim.x) {
        const long long tn = t + gridDim.x;
        Run nxt = cur;
        if (BUFFERS > 1 && tn < ntiles) {
            // the other buffer's last reader (the previous store) passed the
            // barrier that ended it
            nxt = run_of(tn, rows, cols, xphase);
            load_run(tiles[b ^ 1], nxt, xc, xbytes);
            asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        __syncthreads();                 // this tile's bytes, from every thread's copies
        if constexpr (kVectors)
            reduce_run_vectors(tiles[b], cur, cols);
        else if constexpr (SZ == 2)
            reduce_run_words(tiles[b], cur, cols);
        else
            reduce_run(tiles[b], cur, cols);
        __syncthreads();
        store_run(tiles[b], cur, y);
        __syncthreads();                 // the buffer is free again
        if (BUFFERS > 1) {
            cur = nxt;
            b ^= 1;
        } else if (tn < ntiles) {
            cur = run_of(tn, rows, cols, xphase);
            load_run(tiles[0], cur, xc, xbytes);
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
    }
}
