// Softmax rung 09: a few very long rows, each split across many blocks of the
// whole GPU, synchronised through global memory.
//
// 4 rows x 1,048,576 columns gives the other rungs 4 blocks (or 4 clusters of
// at most 16 SMs) for a GPU of 132 SMs: 0.02 of copy bandwidth. Here every
// row is cut into `split` chunks of THREADS * ITEMS window vectors (the
// 16-byte window of softmax_window.cuh: any length, any alignment), one chunk per
// block, held in registers. A block reduces its chunk to one (max, sum) pair,
// publishes it in a workspace, and bumps its row slot's arrival counter; when
// all `split` pairs of the row have arrived, every block of the row merges the
// same pairs in the same order (so all agree on (M, L) bit for bit, and the
// result does not depend on arrival order: deterministic), scales its
// registers (fp32: exponentiates them against the row's max, EXP_AT_STORE)
// and writes. One read and one write of every element, like a copy.
//
// The grid is persistent: `slots` row slots of `split` blocks each
// (grid = slots * split), slot s taking rows s, s + slots, ...; waiting on
// peers is only safe when every block is resident at once, so the host
// launches it as a cooperative launch (the driver refuses a grid that cannot
// be co-resident instead of letting it hang), and a watchdog traps after
// WATCHDOG_NS rather than spinning forever if that guarantee is ever broken.
//
// PACKED=1 (16-bit only) holds a chunk as loaded, two elements a register
// (softmax_window.cuh): a thread keeps 64 elements in the registers that hold
// 32 fp32 values, so the resident grid holds twice the row at once, and rows
// that took four passes take two (bf16 16 x 1048576: 8 rows a pass instead
// of 4). Its build has no streamed entry (the streamed configs are unpacked).
//
// SITEMS > 0 keeps SITEMS more window vectors a thread in shared memory,
// copied there by cp.async (no registers held while they fly): a chunk is
// THREADS * (ITEMS + SITEMS) vectors, so the resident grid holds a row part
// in registers and a part in shared memory, and fp32 16 x 1048576 takes two
// passes instead of four, 16-bit (packed) 16 x 1048576 and 64 x 262144 one
// instead of two. The shared part stays as loaded and is exponentiated at the
// store against the row's own max. Its builds have no streamed entry.
//
// Rows longer than split * THREADS * (ITEMS + SITEMS) vectors (past what the resident
// blocks' registers hold) take softmax_09_split_row_stream instead: each block
// walks chunks chunk, chunk + split, ... twice (online (max, sum), then
// exp / write): 2 reads + 1 write, correct for any length up to 2^31 - 16.
//
// Workspace (zeroed once by the host, left zeroed by every launch that
// completes): a fixed head of counters, unsigned arrive[WS_MAX_SLOTS] then
// leave[WS_MAX_SLOTS], then pairs[slots][2][split] (row parity
// double-buffers them: a block can be at most one row ahead of the slowest
// block of its slot). The counters sit at the same offsets for every plan:
// one buffer serves plans of different (slots, split), and were the counters
// placed after the pairs (offset slots * 2 * split), one plan's pairs would
// land on another plan's counters and its next launch would start with
// "arrived" counts and fold stale pairs. arrive[s] only grows during a launch
// (row j of a slot is complete at (j + 1) * split); the last block to leave
// resets both counters for the next launch. Pairs are always written before
// they are read in a launch, so they need no reset.
//
// Parameters: x, y rows x cols with row pitches ldx, ldy (elements);
// grid = slots * split (slots >= 1); split >= 1.
#include "cp_async.cuh"
#include "grid_dependency.cuh"
#include "grid_flags.cuh"
#include "ld_st.cuh"
// the phase-clock probe (below) times aligned rows; its stamps leave no
// registers for the shifted rows' blocks (softmax_window.cuh)
#ifdef PHASE_CLOCKS
#define WINDOW_SHIFTED_BLOCKS 0
#endif
#include "softmax_window.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ITEMS
#error "ITEMS must be defined (16-byte vectors per thread)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif
#ifndef WATCHDOG_NS
#error "WATCHDOG_NS must be defined (ns a wait may take before it traps; 0 = never)"
#endif
#ifndef WS_MAX_SLOTS
#error "WS_MAX_SLOTS must be defined (row slots the workspace's counter head has room for)"
#endif
#ifndef PACKED
#error "PACKED must be defined (1: 16-bit values held two a register, softmax_window.cuh)"
#endif
#ifndef SITEMS
#error "SITEMS must be defined (window vectors a thread keeps in shared memory; 0: none)"
#endif

static_assert(THREADS % 32 == 0 && THREADS >= 64 && THREADS <= 1024, "THREADS: a multiple of 32, 64..1024");
static_assert(ITEMS >= 1 && ITEMS * WVEC <= (PACKED ? 128 : 64), "ITEMS: too many values a thread");
static_assert(PACKED == 0 || DTYPE != 0, "PACKED: 16-bit elements only");
static_assert(SITEMS >= 0 && (SITEMS == 0 || DTYPE == 0 || PACKED == 1),
              "SITEMS: fp32 or packed 16-bit chunks");

// The pairs start after the counter head (bytes).
constexpr int WS_PAIRS_OFFSET = 2 * WS_MAX_SLOTS * 4;

// Phase clocks, for benchmarks/softmax_split_timeline.py only: a build with
// PHASE_CLOCKS = n has thread 0 of each of the first PHASE_MAX_BLOCKS blocks
// stamp %globaltimer (ns) at the marks below for the first n rows of its slot,
// into phase_clock[block][row][mark]: 0 the row's step begins (its loads
// next), 1 the block's pair is reduced (every thread's loads landed), 2 thread
// 0 saw the row complete, 3 the row's pairs are folded, 4 thread 0's stores
// are issued; and [block][0][5] as the block leaves, with the SM it ran on in
// phase_smid[block]. The row's number reaches the step through shared memory
// (phase_row), so a mark holds no register across it.
// Every registered build leaves PHASE_CLOCKS undefined: the marks are
// nothing, and the SASS manifest holds them to that.
#ifdef PHASE_CLOCKS
#ifndef PHASE_MAX_BLOCKS
#error "PHASE_MAX_BLOCKS must be defined with PHASE_CLOCKS (blocks that stamp)"
#endif
__device__ unsigned long long phase_clock[PHASE_MAX_BLOCKS][PHASE_CLOCKS][6];
__device__ unsigned phase_smid[PHASE_MAX_BLOCKS];
__shared__ unsigned phase_row;
__device__ __forceinline__ void phase_mark(int mark) {
    if (threadIdx.x != 0) return;                    // phase_row is thread 0's alone
    const unsigned row = mark == 5 ? 0u : phase_row;
    if (row < PHASE_CLOCKS && blockIdx.x < PHASE_MAX_BLOCKS) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
        phase_clock[blockIdx.x][row][mark] = t;
        if (mark == 5) {
            unsigned sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            phase_smid[blockIdx.x] = sm;
        }
    }
}
#define PHASE_ROW(k) do { if (threadIdx.x == 0) phase_row = (k); } while (0)
#define PHASE_MARK(mark) phase_mark(mark)
#else
#define PHASE_ROW(k) ((void)0)
#define PHASE_MARK(mark) ((void)0)
#endif

// Peers' pairs come from L2 (relaxed at GPU scope: never a stale L1 line).
__device__ __forceinline__ MaxSum load_pair(const MaxSum* p) {
    MaxSum r;
    asm volatile("ld.relaxed.gpu.global.v2.f32 {%0, %1}, [%2];" : "=f"(r.m), "=f"(r.l) : "l"(p) : "memory");
    return r;
}

__device__ __forceinline__ void wait_count(const unsigned* p, unsigned target) {
    unsigned long long start = 0;
    while (load_acquire(p) < target) {
        __nanosleep(32);
        if constexpr (WATCHDOG_NS != 0) {
            unsigned long long now;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
            if (start == 0) {
                start = now;
            } else if (now - start > WATCHDOG_NS) {
                __trap();
            }
        }
    }
}

// fp32 resident chunks keep their values as loaded: the phase before the
// row's wait takes only the max and a fast sum, each stored element is
// expf(x - M) / L (softmax_window.cuh, window_sum_fast). The 16-bit builds'
// exps are fast already (their machine code keeps the held exps' path).
constexpr bool EXP_AT_STORE = DTYPE == 0;

// Pairs are reduced max first: the max of their maxes, then the sum of
// l * exp(m - max), one exp a pair, where a butterfly of merges costs two exps
// a merge and ~9 merges a thread in a chain (fp32 expf: ~20 instructions a
// merge), once for the block's pair (block_pair_max_first, softmax_window.cuh)
// and once for the row's fold, both in the row's critical path (every block
// waits for the slowest). Measured on the H200, same runs, of copy: the fold
// (fifteenth round, fp32) 64 x 262144 59.0 -> 52.7 us; the block's pair
// (twenty-sixth round, fp32, with EXP_AT_STORE) 3 x 777777 0.776 -> 0.848, 4 x
// 1048576 0.747 -> 0.784, 1 x 1048576 0.607 -> 0.672; both in the 16-bit builds
// 3 x 777777 0.769 -> 0.842, 4 x 1048576 0.690 -> 0.706, 16 x 1048576 0.726 ->
// 0.734 (results/h200-softmax-split-max-first.json; the fifteenth round's build
// of both had measured bf16 16 x 1048576 38.3 -> 41.8 us, against 29.5 -> 29.2
// now).
//
// All `split` pairs of a row, folded identically by every block: thread t
// takes pairs t, t + THREADS, ... (one a thread: split <= THREADS on every
// resident grid of an H200). Each pair is read once a block. (Were every warp
// to fold all of them, each row's few lines of pairs would be read by every
// warp of the GPU at once, 4,096 warps x 2 KiB at split 256: a hot spot on the
// L2 slices that hold them, measured at ~8 us a row, more than the row's own
// 4 MiB took.)
__device__ __forceinline__ MaxSum fold_row(const MaxSum* pairs, int split, float* red) {
    const MaxSum own = threadIdx.x < split ? load_pair(pairs + threadIdx.x) : MaxSum{NEG_INF, 0.0f};
    float m = own.m;
    for (int j = threadIdx.x + THREADS; j < split; j += THREADS) m = fmaxf(m, load_pair(pairs + j).m);
    const float M = block_max<THREADS>(m, red);
    float l = rescaled<FAST_EXP>(own, M);
    for (int j = threadIdx.x + THREADS; j < split; j += THREADS)
        l += rescaled<FAST_EXP>(load_pair(pairs + j), M);
    return MaxSum{M, block_sum<THREADS>(l, red + THREADS / 32)};
}

#if SITEMS
// The shared-memory part of a thread's chunk: vectors first + s * THREADS +
// lane (s < SITEMS) in slot s * THREADS + lane of the dynamic shared memory
// (consecutive lanes on consecutive 16 bytes), each thread its own slots
// only, so no barrier: cp.async's wait orders a thread's own copies.
__device__ __forceinline__ float4* held_slots() {
    return reinterpret_cast<float4*>(dynamic_smem()) + threadIdx.x;
}

// Inside the row one 16-byte cp.async; the row's first and last vectors
// element by element, edge(e0) (-inf outside the row). The slot loops stay
// rolled (unroll 1): unrolled, their addresses crowd the 64 registers that
// hold the chunk and ptxas spills (232 B of stack at 8 + 8 vectors).
template <class Slot, class Edge>
__device__ __forceinline__ void shared_part_load(const RowWindow& w, int first, Slot* slots, Edge edge,
                                                 unsigned long long policy) {
#pragma unroll 1
    for (int s = 0; s < SITEMS; ++s) {
        const int e0 = (first + s * THREADS + static_cast<int>(threadIdx.x)) * WVEC;
        if (e0 >= w.lo && e0 + WVEC <= w.hi) {
            cp_async_16_policy(smem_addr(slots + s * THREADS), w.xw + e0, 16, policy);
        } else {
            slots[s * THREADS] = edge(e0);
        }
    }
    cp_async_commit();
}

__device__ __forceinline__ void slots_load(const RowWindow& w, int first, float4* slots,
                                           unsigned long long policy) {
    shared_part_load(w, first, slots, [&](int e0) {
        float o[WVEC];
#pragma unroll
        for (int k = 0; k < WVEC; ++k) {
            const int e = e0 + k;
            o[k] = (e >= w.lo && e < w.hi) ? to_f32(w.xw[e]) : NEG_INF;
        }
        return make_float4(o[0], o[1], o[2], o[3]);
    }, policy);
}

// window_sum_fast over the slots, in slot order (the slots keep the values).
__device__ __forceinline__ MaxSum slots_sum_fast(const float4* slots) {
    float m = NEG_INF;
#pragma unroll 1
    for (int s = 0; s < SITEMS; ++s) {
        const float4 q = slots[s * THREADS];
        m = fmaxf(m, fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w)));
    }
    const float ref = exp_ref(m);
    float l = 0.0f;
#pragma unroll 1
    for (int s = 0; s < SITEMS; ++s) {
        const float4 q = slots[s * THREADS];
        l += exp_diff<true>(q.x, ref);
        l += exp_diff<true>(q.y, ref);
        l += exp_diff<true>(q.z, ref);
        l += exp_diff<true>(q.w, ref);
    }
    return MaxSum{m, l};
}

// window_store_exp over the slots.
__device__ __forceinline__ void slots_store(const RowWindow& w, int first, const float4* slots,
                                            float row_max, float inv_sum) {
#pragma unroll 1
    for (int s = 0; s < SITEMS; ++s) {
        const int e0 = (first + s * THREADS + static_cast<int>(threadIdx.x)) * WVEC;
        if (e0 >= w.hi || e0 + WVEC <= w.lo) continue;
        const float4 q = slots[s * THREADS];
        const float o[WVEC] = {exp_out(q.x, row_max, inv_sum), exp_out(q.y, row_max, inv_sum),
                               exp_out(q.z, row_max, inv_sum), exp_out(q.w, row_max, inv_sum)};
        store_vector(w, e0, o);
    }
}
#endif

#if SITEMS && PACKED
// The packed builds' shared part: the vectors as loaded, two 16-bit elements
// a word, as their registers hold them (uint4 slots, same layout as above).
__device__ __forceinline__ uint4* held_words() {
    return reinterpret_cast<uint4*>(dynamic_smem()) + threadIdx.x;
}

// slots_load of 16-bit vectors, the edges as stored (window_words).
__device__ __forceinline__ void words_load(const RowWindow& w, int first, uint4* slots,
                                           unsigned long long policy) {
    shared_part_load(w, first, slots, [&](int e0) { return window_words(w, e0, true); }, policy);
}

// window_exp_packed over the slots: the max on the packed pairs, then the sum.
__device__ __forceinline__ MaxSum words_sum(const uint4* slots) {
    unsigned mm = NEG_INF_PAIR;
#pragma unroll 1
    for (int s = 0; s < SITEMS; ++s) mm = max_pairs_vec(mm, slots[s * THREADS]);
    const float m = pairs_max(mm);
    float l = 0.0f;
    with_exp<FAST_EXP>(m, [&](auto exp_of) {
#pragma unroll 1
        for (int s = 0; s < SITEMS; ++s) {
            const uint4 q = slots[s * THREADS];
#pragma unroll
            for (int k = 0; k < WVEC; ++k) l += exp_of(held_f32(q, k));
        }
    });
    return MaxSum{m, l};
}

// Each stored element exp(x - M) / L against the row's max M (an all -inf
// row: M = -inf, NaN, as it must).
__device__ __forceinline__ void words_store(const RowWindow& w, int first, const uint4* slots,
                                            MaxSum row) {
    const float inv_sum = 1.0f / row.l;
    with_exp<FAST_EXP>(row.m, [&](auto exp_of) {
#pragma unroll 1
        for (int s = 0; s < SITEMS; ++s) {
            const int e0 = (first + s * THREADS + static_cast<int>(threadIdx.x)) * WVEC;
            const bool in = e0 < w.hi && e0 + WVEC > w.lo;
            const uint4 q = slots[s * THREADS];
            float o[WVEC];
#pragma unroll
            for (int k = 0; k < WVEC; ++k) o[k] = exp_of(held_f32(q, k)) * inv_sum;
            unsigned words[4];
            pack_vector(o, words);
            store_vector_warp<32>(w, e0, words, in, WINDOW_SHIFTED_BLOCKS && !w.same_phase);
        }
    });
}
#endif

// One row of a slot. RESIDENT: the chunk stays in registers (1R + 1W), else
// chunks are streamed twice (2R + 1W). Two entries, not one with a runtime
// branch, and the row step a function of its own (not inlined into the row
// loop): with the loop around it ptxas put the held values on the stack.
//
// one_pass (every row of the launch in the resident grid at once): x's
// vectors in registers load evict first (window_ld16), so that in L2 this
// launch's x, which nothing reads again, goes before the lines of y written
// by the launches before. Back to back over rotating buffers on an H100
// (forty-third round, this code against the read-only loads, us): fp32 4 x
// 1048576 17.95 -> 17.06, 3 x 777777 14.27 -> 13.92; bf16 4 x 1048576 13.23
// -> 13.00. Where a launch takes its rows in passes (fp32 16 x 1048576, 64 x
// 262144, 1024 x 262144) the hint on every pass cost 1-2% one call at a time,
// so rows in passes load as before. The shared part's copies follow the same
// choice (l2_policy): bf16 16 x 1048576, one pass with 11 of a thread's 17
// vectors in shared memory, 31.84 -> 30.37 us back to back (H100,
// forty-fourth round).
template <bool RESIDENT>
__device__ __noinline__ void split_row_step(const elem_t* __restrict__ x, elem_t* __restrict__ y,
                                            long long row, int cols, long long ldx, long long ldy,
                                            MaxSum* row_pairs, unsigned* arrive, unsigned target,
                                            int split, int chunk, float* part, float* fold_part,
                                            bool one_pass) {
    constexpr int N = ITEMS * WVEC;
    constexpr int SLICE = THREADS * (ITEMS + (RESIDENT ? SITEMS : 0));   // window vectors per chunk
    const RowWindow w = row_window(x, y, row, cols, ldx, ldy);
    PHASE_MARK(0);
#if PACKED
    uint4 v[ITEMS];                                  // the chunk as loaded
#else
    float v[N];
#endif
    MaxSum th;                                       // this thread's pair
#if SITEMS && PACKED
    uint4* slots = held_words();
#elif SITEMS
    float4* slots = held_slots();
#endif
    if constexpr (RESIDENT) {
#if PACKED
#if SITEMS
        words_load(w, chunk * SLICE + THREADS * ITEMS, slots, l2_policy(one_pass));   // in flight with the loads below
#endif
        if (one_pass) window_load_packed<ITEMS, THREADS, true>(w, chunk * SLICE, threadIdx.x, true, v);
        else window_load_packed<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v);
        th = window_exp_packed<ITEMS>(v);
#else
#if SITEMS
        slots_load(w, chunk * SLICE + THREADS * ITEMS, slots, l2_policy(one_pass));   // in flight with the loads below
#endif
        if (one_pass) window_load<ITEMS, THREADS, true>(w, chunk * SLICE, threadIdx.x, true, v);
        else window_load<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v);
        th = EXP_AT_STORE ? window_sum_fast<N>(v) : window_exp<N>(v);
#endif
    } else {
#if !PACKED
        const int nchunks = (window_vectors(w) + SLICE - 1) / SLICE;
        th = MaxSum{NEG_INF, 0.0f};
        for (int c = chunk; c < nchunks; c += split) {
            window_load<ITEMS, THREADS>(w, c * SLICE, threadIdx.x, true, v);
            th = merge<FAST_EXP>(th, window_exp<N>(v));
        }
#endif
    }
    const float m_held = th.m;                       // the registers' exps are relative to it
#if SITEMS
    if constexpr (RESIDENT) {
        cp_async_wait<0>();
#if PACKED
        th = merge<FAST_EXP>(th, words_sum(slots));
#else
        th = merge<FAST_EXP>(th, slots_sum_fast(slots));
#endif
    }
#endif
    const MaxSum blk = block_pair_max_first<THREADS>(th, part);
    PHASE_MARK(1);
    if (threadIdx.x == 0) {
        row_pairs[chunk] = blk;
        arrive_release(arrive);                      // the pair before the count
        wait_count(arrive, target);
    }
    PHASE_MARK(2);
    __syncthreads();                                 // thread 0's acquire, for everyone
    const MaxSum r = fold_row(row_pairs, split, fold_part);
    PHASE_MARK(3);
    if constexpr (RESIDENT) {
#if PACKED
        window_store_packed<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v, m_held,
                                            window_scale(m_held, r));
#if SITEMS
        words_store(w, chunk * SLICE + THREADS * ITEMS, slots, r);
#endif
#else
        if constexpr (EXP_AT_STORE) {
            const float inv_sum = 1.0f / r.l;
            window_store_exp<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v, r.m, inv_sum);
#if SITEMS
            slots_store(w, chunk * SLICE + THREADS * ITEMS, slots, r.m, inv_sum);
#endif
        } else {
            window_store<ITEMS, THREADS>(w, chunk * SLICE, threadIdx.x, true, v, window_scale(m_held, r));
        }
#endif
    } else {
#if !PACKED
        const int nchunks = (window_vectors(w) + SLICE - 1) / SLICE;
        const float inv = 1.0f / r.l;
        for (int c = chunk; c < nchunks; c += split) {
            window_load<ITEMS, THREADS>(w, c * SLICE, threadIdx.x, true, v);
#pragma unroll
            for (int e = 0; e < N; ++e) v[e] = exp_shifted(v[e], r.m);   // -inf - -inf: NaN row, as it must
            window_store<ITEMS, THREADS>(w, c * SLICE, threadIdx.x, true, v, inv);
        }
#endif
    }
    PHASE_MARK(4);
}

template <bool RESIDENT>
__device__ __forceinline__ void split_rows(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows,
                                           int cols, long long ldx, long long ldy, MaxSum* __restrict__ ws,
                                           int split) {
    __shared__ float part[2 * THREADS / 32];        // block_pair_max_first's partials
    __shared__ float fold_part[2 * THREADS / 32];   // fold_row's
    // The grid before has completed (grid_dependency.cuh): its writes to x and,
    // a split launch before this one on the stream, to the workspace's counters.
    grid_dependency_wait();
    const int slots = gridDim.x / split;
    const int slot = blockIdx.x / split;
    const int chunk = blockIdx.x % split;
    if (slot >= slots || slots > WS_MAX_SLOTS) return;   // a grid that is not a multiple of split
    unsigned* arrive = reinterpret_cast<unsigned*>(ws);
    unsigned* leave = arrive + WS_MAX_SLOTS;
    MaxSum* pairs = reinterpret_cast<MaxSum*>(reinterpret_cast<char*>(ws) + WS_PAIRS_OFFSET) +
                    static_cast<long long>(slot) * 2 * split;

    // Row k of the slot is complete when arrive[slot] reaches (k + 1) * split.
    // The block barriers keep `part` and `fold_part` safe: `part`'s next write
    // comes after every thread passed this row's wait barrier, `fold_part`'s
    // after every thread passed the next row's.
    unsigned k = 0;
    for (long long row = slot; row < rows; row += slots, ++k) {
        PHASE_ROW(k);
        split_row_step<RESIDENT>(x, y, row, cols, ldx, ldy, pairs + (k & 1) * split, arrive + slot,
                                 (k + 1) * static_cast<unsigned>(split), split, chunk, part, fold_part,
                                 rows <= slots);
    }
    // Reset the counters once every block of the slot is past its last wait.
    __syncthreads();
    if (threadIdx.x == 0) {
        if (atomicAdd(leave + slot, 1u) == static_cast<unsigned>(split) - 1) {
            arrive[slot] = 0;
            leave[slot] = 0;
            __threadfence();
        }
    }
    PHASE_MARK(5);
}

// Rows of at most split * THREADS * ITEMS window vectors.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_09_split_row(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols,
                     long long ldx, long long ldy, MaxSum* __restrict__ ws, int split) {
    split_rows<true>(x, y, rows, cols, ldx, ldy, ws, split);
}

#if !PACKED && SITEMS == 0
// Any row length (2 reads + 1 write).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_09_split_row_stream(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols,
                            long long ldx, long long ldy, MaxSum* __restrict__ ws, int split) {
    split_rows<false>(x, y, rows, cols, ldx, ldy, ws, split);
}
#endif
