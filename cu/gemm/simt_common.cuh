// Pieces shared by the fp32 SIMT rungs: the epilogue and the guarded global
// loads. Every rung computes C = alpha * A @ B + beta * C with A (M x K),
// B (K x N) and C (M x N) row-major and contiguous.
#pragma once

// ALIGNED=1 is only chosen when K % 4 == N % 4 == 0 and A, B, C are 16-byte
// aligned: then a quad of 4 consecutive floats starting at a multiple of 4
// inside a row is either entirely inside the matrix or entirely outside it.
#ifndef ALIGNED
#error "ALIGNED must be defined (the registry passes it)"
#endif

// One output element. With beta == 0, C is never read: it may hold NaN or
// uninitialised memory, and 0 * NaN would still be NaN. beta is uniform
// across the grid, so the branch never diverges.
__device__ __forceinline__ void store_c(float* c, float acc, float alpha, float beta) {
    if (beta == 0.0f) {
        *c = alpha * acc;
    } else {
        *c = alpha * acc + beta * *c;
    }
}

// Four consecutive outputs through one 16-byte store (and one 16-byte load
// when beta != 0). c must be 16-byte aligned.
__device__ __forceinline__ void store_c4(float* c, float4 acc, float alpha, float beta) {
    float4 out = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.0f) {
        const float4 old = *reinterpret_cast<const float4*>(c);
        out.x += beta * old.x;
        out.y += beta * old.y;
        out.z += beta * old.z;
        out.w += beta * old.w;
    }
    *reinterpret_cast<float4*>(c) = out;
}

// Four consecutive outputs C[row][col .. col+3] of a row-major M x N matrix,
// each one written only if it lies inside C.
__device__ __forceinline__ void store_c_quad(float* C, int row, int col, int M, int N,
                                             float4 acc, float alpha, float beta) {
    if (row >= M) return;
    float* c = C + (size_t)row * N + col;
#if ALIGNED
    if (col < N) store_c4(c, acc, alpha, beta);  // N % 4 == 0: the quad is whole
#else
    if (col + 0 < N) store_c(c + 0, acc.x, alpha, beta);
    if (col + 1 < N) store_c(c + 1, acc.y, alpha, beta);
    if (col + 2 < N) store_c(c + 2, acc.z, alpha, beta);
    if (col + 3 < N) store_c(c + 3, acc.w, alpha, beta);
#endif
}

// Four consecutive floats p[0..3] of which only the first `valid` exist
// (valid <= 0: none). Missing elements read as zero, so a partial tile
// contributes nothing to the dot products.
__device__ __forceinline__ float4 load_quad(const float* p, int valid) {
#if ALIGNED
    // One 16-byte load: a quarter of the instructions and of the L1 requests
    // of four scalar loads. valid is a multiple of 4 here (or <= 0).
    return valid > 0 ? *reinterpret_cast<const float4*>(p) : make_float4(0.f, 0.f, 0.f, 0.f);
#else
    // p may be misaligned (odd K or N): four guarded scalar loads.
    float4 v;
    v.x = valid > 0 ? p[0] : 0.f;
    v.y = valid > 1 ? p[1] : 0.f;
    v.z = valid > 2 ? p[2] : 0.f;
    v.w = valid > 3 ? p[3] : 0.f;
    return v;
#endif
}

// Load the elements c of the quad p[0..3] with lo <= c < hi and leave the
// others as they are. A loader that zeroes its staging registers once and
// then only ever loads in-range elements needs no zeroing per tile, and
// with loop-invariant bounds its guards are loop-invariant predicates.
__device__ __forceinline__ void load_quad_range(float4& v, const float* p, int lo, int hi) {
#if ALIGNED
    // Bounds are multiples of 4 here: the quad is all in or all out.
    if (lo <= 0 && hi >= 4) v = *reinterpret_cast<const float4*>(p);
#else
    if (lo <= 0 && hi > 0) v.x = p[0];
    if (lo <= 1 && hi > 1) v.y = p[1];
    if (lo <= 2 && hi > 2) v.z = p[2];
    if (lo <= 3 && hi > 3) v.w = p[3];
#endif
}
