// Rung 6: 16-byte vector loads, A transposed in shared memory, and a thread
// micro-tile split into 4 x 4 sub-blocks so that every shared-memory read
// is a conflict-free LDS.128. Double buffered as in rung 5.
//
// - Global: each thread loads a quad of 4 consecutive floats with one
//   LDG.128 (ALIGNED=1) instead of four LDG.32, a quarter of the load
//   instructions and L1 requests. With ALIGNED=0 (K or N not a multiple
//   of 4, or a misaligned pointer) the quad falls back to guarded scalars.
// - A is stored k-major (As[k][m]): the 8 values of A a thread needs at one
//   k are then contiguous and come in as two LDS.128 instead of eight LDS.32.
//   The transposing store writes a quad of A as 4 scalars into 4 rows of As;
//   padding the row length to BM + 4 (== 4 mod 8 words) puts the two k-quads
//   that a warp stores side by side 16 banks apart, so they do not collide.
// - A thread's 8 columns are two groups of 4, BN/2 apart (rows likewise):
//   8 neighbouring threads then read 8 consecutive 16-byte chunks, which
//   cover the 32 banks once, where contiguous 8-wide micro-tiles would put
//   threads tx and tx + 4 on the same banks (a 2-way conflict on every
//   read of B).
#include "simt_common.cuh"

#ifndef BM
#error "BM must be defined (the registry passes it)"
#endif
#ifndef BN
#error "BN must be defined (the registry passes it)"
#endif
#ifndef BK
#error "BK must be defined (the registry passes it)"
#endif
#ifndef TM
#error "TM must be defined (the registry passes it)"
#endif
#ifndef TN
#error "TN must be defined (the registry passes it)"
#endif
// APAD: floats of padding per As row
#ifndef APAD
#error "APAD must be defined (the registry passes it)"
#endif
// MIN_BLOCKS: cap registers at 128: two blocks (16 warps) per SM
#ifndef MIN_BLOCKS
#error "MIN_BLOCKS must be defined (the registry passes it)"
#endif

constexpr int TX = BN / TN, TY = BM / TM;  // 16 x 16 threads
constexpr int THREADS = TX * TY;
constexpr int SUB_M = TM / 4, SUB_N = TN / 4;  // 4 x 4 sub-blocks per thread
constexpr int LDA = BM + APAD, LDB = BN;
constexpr int A_STAGE = BK * LDA, B_STAGE = BK * LDB;
constexpr int A_QUADS = BM * BK / 4 / THREADS;  // float4 loads per thread per tile
constexpr int B_QUADS = BK * BN / 4 / THREADS;
static_assert(TM % 4 == 0 && TN % 4 == 0, "micro-tiles are made of 4 x 4 sub-blocks");
static_assert(BK % 8 == 0, "A quads are stored in pairs along k");
static_assert(BM % 16 == 0 && BN % 4 == 0, "tile shape");
static_assert(APAD % 8 == 4, "row length == 4 mod 8: 16-byte aligned, conflict-free transpose");
static_assert(A_QUADS * 4 * THREADS == BM * BK && B_QUADS * 4 * THREADS == BK * BN,
              "tile loads must divide evenly among threads");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K, float alpha, float beta) {
    extern __shared__ __align__(16) float smem[];
    float* As = smem;                // [2][BK][LDA], k-major
    float* Bs = smem + 2 * A_STAGE;  // [2][BK][LDB]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    // Loader mapping. A: consecutive threads take the two k-quads of a row
    // (one 32-byte sector when BK == 8), then the next row. B: consecutive
    // threads take consecutive quads of a row (512 contiguous bytes a warp).
    const float* a_src[A_QUADS];
    int a_valid[A_QUADS];  // floats left in this quad's row from the current tile on
    int a_sts[A_QUADS];
#pragma unroll
    for (int i = 0; i < A_QUADS; ++i) {
        const int e = tid + i * THREADS;
        const int r = (e >> 1) % BM, kq = (e >> 1) / BM * 2 + (e & 1);
        a_src[i] = A + (size_t)(row0 + r) * K + kq * 4;
        a_valid[i] = row0 + r < M ? K - kq * 4 : 0;
        a_sts[i] = kq * 4 * LDA + r;
    }
    const float* b_src[B_QUADS];
    int b_krem[B_QUADS];  // rows of B left below this quad's row from the current tile on
    int b_cols[B_QUADS];  // columns of B from this quad's first column to the edge
    int b_sts[B_QUADS];
#pragma unroll
    for (int i = 0; i < B_QUADS; ++i) {
        const int e = tid + i * THREADS;
        const int k = e / (BN / 4), cq = e % (BN / 4);
        b_src[i] = B + (size_t)k * N + col0 + cq * 4;
        b_krem[i] = K - k;
        b_cols[i] = N - col0 - cq * 4;
        b_sts[i] = k * LDB + cq * 4;
    }
    const size_t b_step = (size_t)BK * N;

    float4 a_stage[A_QUADS], b_stage[B_QUADS];
    auto load_global = [&]() {
#pragma unroll
        for (int i = 0; i < A_QUADS; ++i) {
            a_stage[i] = load_quad(a_src[i], a_valid[i]);
            a_src[i] += BK;
            a_valid[i] -= BK;
        }
#pragma unroll
        for (int i = 0; i < B_QUADS; ++i) {
            b_stage[i] = load_quad(b_src[i], b_krem[i] > 0 ? b_cols[i] : 0);
            b_src[i] += b_step;
            b_krem[i] -= BK;
        }
    };
    auto store_shared = [&](int buf) {
        float* as = As + buf * A_STAGE;
        float* bs = Bs + buf * B_STAGE;
#pragma unroll
        for (int i = 0; i < A_QUADS; ++i) {
            as[a_sts[i] + 0 * LDA] = a_stage[i].x;
            as[a_sts[i] + 1 * LDA] = a_stage[i].y;
            as[a_sts[i] + 2 * LDA] = a_stage[i].z;
            as[a_sts[i] + 3 * LDA] = a_stage[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_QUADS; ++i) *reinterpret_cast<float4*>(bs + b_sts[i]) = b_stage[i];
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    const int ktiles = (K + BK - 1) / BK;
    if (ktiles > 0) {
        load_global();
        store_shared(0);
        __syncthreads();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        const float* as = As + (kt & 1) * A_STAGE + ty * 4;
        const float* bs = Bs + (kt & 1) * B_STAGE + tx * 4;
        const bool has_next = kt + 1 < ktiles;
        if (has_next) load_global();  // in flight during the FMAs below

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int s = 0; s < SUB_M; ++s) {
                const float4 v = *reinterpret_cast<const float4*>(as + kk * LDA + s * (BM / SUB_M));
                a[s * 4 + 0] = v.x; a[s * 4 + 1] = v.y; a[s * 4 + 2] = v.z; a[s * 4 + 3] = v.w;
            }
#pragma unroll
            for (int s = 0; s < SUB_N; ++s) {
                const float4 v = *reinterpret_cast<const float4*>(bs + kk * LDB + s * (BN / SUB_N));
                b[s * 4 + 0] = v.x; b[s * 4 + 1] = v.y; b[s * 4 + 2] = v.z; b[s * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }

        if (has_next) {
            store_shared((kt + 1) & 1);
            __syncthreads();
        }
    }

    // acc[s*4 + r][t*4 + c] is C[row0 + s*BM/SUB_M + ty*4 + r][col0 + t*BN/SUB_N + tx*4 + c].
#pragma unroll
    for (int s = 0; s < SUB_M; ++s)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = row0 + s * (BM / SUB_M) + ty * 4 + r;
            const int i = s * 4 + r;
#pragma unroll
            for (int t = 0; t < SUB_N; ++t) {
                const int col = col0 + t * (BN / SUB_N) + tx * 4;
                const int j = t * 4;
                store_c_quad(C, row, col, M, N,
                             make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]),
                             alpha, beta);
            }
        }
}
