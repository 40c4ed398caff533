// Softmax rung 12: short contiguous rows read as one flat run of 16-byte
// vectors, held in registers; only the rows' (max, sum) pairs meet in shared
// memory.
//
// Rung 10 copies a block's run of rows into shared memory and lets lane
// groups read each row back out of it: for 16-bit rows of a hundred-odd
// elements starting anywhere in a vector, that reduce step issued 29
// instructions an element and met 4.8 bank conflicts a shared load (ncu on
// the H200, bf16 131072 x 127: 0.78 of copy where fp32 reaches 0.94 on the
// same rung). Here the data never goes through shared memory. A block takes
// a run of TILE_ROWS whole rows (a host argument: as many as the block's
// THREADS * ITEMS vectors cover), and thread t loads vectors t, t + THREADS,
// ... of the 16-byte aligned vectors that cover the run (coalesced 128-bit
// loads) and keeps them. Then:
//   1. a vector of VEC elements lies in at most two rows (cols >= VEC): the
//      elements before a row boundary ("head": the row of its element 0) and
//      after it ("tail": the next row). The thread reduces each part to a
//      (max, sum) pair, holding exp(x - its part's max), and writes both
//      pairs to the vector's slot in shared memory;
//   2. FOLD lanes a row fold the row's pairs -- the pair of the vector its
//      first element lies in (tail, or head where the row starts on the
//      vector's element 0), then the head pairs of the vectors after it --
//      max first, lane-strided then by butterflies, in an order fixed by the
//      row alone: the same bits whichever block or grid runs it;
//   3. each thread scales its held exps by the row factor of each part and
//      stores the vector whole where it lies inside the run (and y has x's
//      16-byte phase), element by element at the run's two ends.
// One read and one write of every element; per element a max, an exp, a sum
// and a scale, plus the part tests (k below the vector's boundary or not).
//
// Every constant is a define the registry always passes: DTYPE, THREADS,
// ITEMS (vectors a thread), FOLD (lanes a row in the fold: a power of two
// <= 32), MIN_BLOCKS (__launch_bounds__).
// Parameters: x, y are rows x cols, row-major, contiguous (pitch == cols);
// cols >= VEC; tile_rows >= 1 with tile_rows * cols + VEC - 1 <= THREADS *
// ITEMS * VEC (the run and its misalignment inside the vectors); grid >=
// ceil(rows / tile_rows) blocks (extra blocks return). y may start at another
// 16-byte phase than x: its stores are then element-wise.
#include "grid_dependency.cuh"
#include "softmax_common.cuh"

#ifndef THREADS
#error "THREADS must be defined (threads per block)"
#endif
#ifndef ITEMS
#error "ITEMS must be defined (16-byte vectors a thread holds)"
#endif
#ifndef FOLD
#error "FOLD must be defined (lanes a row in the fold: a power of two <= 32)"
#endif
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (__launch_bounds__ blocks per SM)"
#endif

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: a multiple of 32 up to 1024");
static_assert(FOLD >= 1 && FOLD <= 32 && (FOLD & (FOLD - 1)) == 0, "FOLD: a power of two <= 32");
static_assert(ITEMS >= 1, "ITEMS >= 1");

// The 16-bit builds take the fast exp, as rungs 07-11's do (softmax_common.cuh, exp_diff).
constexpr bool kFast = DTYPE != 0;
constexpr int SZ = static_cast<int>(sizeof(elem_t));
constexpr int VEC = 16 / SZ;                 // elements a vector
constexpr int NV = THREADS * ITEMS;          // vectors a block holds
constexpr int N = ITEMS * VEC;               // values a thread holds
// Rows a run holds at most: cols >= VEC, so no more rows than vectors.
constexpr int MAX_ROWS = NV;

// exp(x - ref) * exp(ref - M) / L for a part whose values were exponentiated
// against its own max m (slice_scale: an all -inf row gives 0 * inf = NaN).
__device__ __forceinline__ float part_scale(float m, MaxSum row) {
    return slice_scale<kFast>(m, row);
}

// The run row of run position p, floor(p / cols), for p in [-(VEC - 1), NV *
// VEC]: (p + 0.5) / cols lies at least 0.5 / cols from any integer, and the
// float product (two roundings, 2^-23 relative at most) is within NV * VEC *
// 1.2e-7 / cols of it (< 0.004 / cols for the 32K elements of the largest
// block), so rounding it down is exact -- two instructions where an integer
// division by a runtime value costs twenty.
__device__ __forceinline__ int row_of(int p, float inv_cols) {
    return __float2int_rd(__fmul_rn(static_cast<float>(p) + 0.5f, inv_cols));
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_12_flat_rows(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols,
                     int tile_rows) {
    __shared__ MaxSum head[NV];      // per vector: its head part's pair
    __shared__ MaxSum tail[NV];      // per vector: its tail part's pair
    __shared__ MaxSum row_ml[MAX_ROWS];   // per row of the run: (M, L)
    grid_dependency_wait();          // the grid before has completed (grid_dependency.cuh)

    const long long row0 = static_cast<long long>(blockIdx.x) * tile_rows;
    if (row0 >= rows) return;
    const int nrows = static_cast<int>(min(static_cast<long long>(tile_rows), rows - row0));
    const int n = nrows * cols;                                   // the run's elements
    const int xphase = static_cast<int>(reinterpret_cast<unsigned long long>(x) & 15) / SZ;
    // Aligned vector q of x covers elements [q * VEC - xphase, (q + 1) * VEC - xphase).
    const long long a0 = row0 * cols + xphase;
    const long long q0 = a0 / VEC;          // the vector holding the run's element 0
    const int shift = static_cast<int>(a0 - q0 * VEC);   // run elements start `shift` into it
    const int nvec = (shift + n + VEC - 1) / VEC;
    const float inv_cols = 1.0f / static_cast<float>(cols);

    // Load: vector v = threadIdx.x + i * THREADS, element k at run position
    // v * VEC - shift + k; outside the run -inf (neighbouring rows' bytes are
    // loaded with the vector but never used or stored).
    float v[N];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int vi = static_cast<int>(threadIdx.x) + i * THREADS;
        const int p0 = vi * VEC - shift;
        float* o = v + i * VEC;
        const long long g0 = (q0 + vi) * VEC - xphase;   // element index of its element 0 in x
        if (vi < nvec && p0 >= 0 && p0 + VEC <= n) {
            load_vec<VEC>(x + g0, o);
        } else if (vi < nvec) {
            // a run end: only the run's elements (its vector may reach before
            // x[0] or past the array's end)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const int p = p0 + k;
                o[k] = (p >= 0 && p < n) ? to_f32(x[g0 + k]) : NEG_INF;
            }
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = NEG_INF;
        }
    }

    // 1. Each vector's two parts: head (row r of its element 0, elements k <
    // ka) and tail (row r + 1). Run elements only hold values; the rest is
    // -inf and joins no part that is read (a vector before the run has r = -1,
    // its head is never folded; a row past the run is never folded either).
    float mh[ITEMS], mt[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int vi = static_cast<int>(threadIdx.x) + i * THREADS;
        const int r = row_of(vi * VEC - shift, inv_cols);
        const int ka = min(VEC, (r + 1) * cols - (vi * VEC - shift));
        float a = NEG_INF, b = NEG_INF;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float e = v[i * VEC + k];
            const bool h = k < ka;
            a = fmaxf(a, h ? e : NEG_INF);
            b = fmaxf(b, h ? NEG_INF : e);
        }
        mh[i] = a;
        mt[i] = b;
        const float rh = exp_ref(a), rt = exp_ref(b);
        float lh = 0.0f, lt = 0.0f;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const bool h = k < ka;
            const float e = exp_diff<kFast>(v[i * VEC + k], h ? rh : rt);
            v[i * VEC + k] = e;
            lh += h ? e : 0.0f;
            lt += h ? 0.0f : e;
        }
        if (vi < nvec) {
            head[vi] = MaxSum{mh[i], lh};
            tail[vi] = MaxSum{mt[i], lt};
        }
    }
    __syncthreads();

    // 2. FOLD lanes a row: row j is run elements [j * cols, (j + 1) * cols),
    // vectors vs .. ve; pair 0 is vs's tail (its head when the row starts on
    // the vector's element 0), pairs 1.. the heads of vs + 1 .. ve.
    {
        const int lane = static_cast<int>(threadIdx.x) % FOLD;
        for (int j0 = 0; j0 < nrows; j0 += THREADS / FOLD) {
            const int j = j0 + static_cast<int>(threadIdx.x) / FOLD;
            const bool live = j < nrows;
            const int s = j * cols + shift;
            const int vs = s / VEC;
            const int ve = (s + cols - 1) / VEC;
            const int count = live ? ve - vs + 1 : 0;
            float m = NEG_INF;
            for (int q = lane; q < count; q += FOLD) {
                const MaxSum pr = q == 0 ? ((s % VEC) == 0 ? head[vs] : tail[vs]) : head[vs + q];
                m = fmaxf(m, pr.m);
            }
            const float M = shfl_max<FOLD>(m);
            float l = 0.0f;
            for (int q = lane; q < count; q += FOLD) {
                const MaxSum pr = q == 0 ? ((s % VEC) == 0 ? head[vs] : tail[vs]) : head[vs + q];
                l += rescaled<kFast>(pr, M);
            }
            const float L = shfl_sum<FOLD>(l);
            if (live && lane == 0) row_ml[j] = MaxSum{M, L};
        }
    }
    __syncthreads();

    // 3. Scale and store.
    const int yphase = static_cast<int>(reinterpret_cast<unsigned long long>(y) & 15) / SZ;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int vi = static_cast<int>(threadIdx.x) + i * THREADS;
        if (vi >= nvec) continue;
        const int p0 = vi * VEC - shift;
        const int r = row_of(p0, inv_cols);
        const int ka = min(VEC, (r + 1) * cols - p0);
        const MaxSum rh = row_ml[max(r, 0)];
        const MaxSum rt = row_ml[min(r + 1, nrows - 1)];
        const float sh = part_scale(mh[i], rh);
        const float st = part_scale(mt[i], rt);
        float* o = v + i * VEC;
#pragma unroll
        for (int k = 0; k < VEC; ++k) o[k] *= (k < ka) ? sh : st;
        const long long g0 = (q0 + vi) * VEC - xphase;
        if (yphase == xphase && p0 >= 0 && p0 + VEC <= n) {
            store_vec<VEC>(y + g0, o);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const int p = p0 + k;
                if (p >= 0 && p < n) y[g0 + k] = from_f32(o[k]);
            }
        }
    }
}
