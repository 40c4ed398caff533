// Rung 20's epilogues: the accumulators of one consumer warpgroup -> C,
// either stored straight from registers (EPILOGUE 0, every tf32 tile) or
// staged in shared memory and stored by the copy engine (EPILOGUE 2). Part of
// 20_tma_wgmma.cu, included after its constants, Elem<>, Ring and Problem.
#pragma once

// ---------------------------------------------------------------------------
// Registers -> C. Accumulator i of lane (g, t) of warp w sits at
// wgmma row 16w + g + 8*((i/2)%2), column 8*(i/4) + 2t + i%2.
// ---------------------------------------------------------------------------
// C's elements: fp32, or (NARROW) bf16 / fp16 bits, converted with
// round-to-nearest-even (half_bits.cuh). Two adjacent columns pack into one
// 32-bit word, the lower column in the low half.
__device__ __forceinline__ void store1_f32(float* C, int N, int row, int col, float v,
                                           float alpha, float beta) {
    float* p = C + static_cast<size_t>(row) * N + col;
    *p = (beta == 0.0f) ? alpha * v : alpha * v + beta * *p;
}

template <int ELEM, bool NARROW>
__device__ __forceinline__ void store1(void* C, int N, int row, int col, float v, float alpha,
                                       float beta) {
    const size_t i = static_cast<size_t>(row) * N + col;
    if constexpr (NARROW) {
        unsigned short* p = static_cast<unsigned short*>(C) + i;
        const float out = (beta == 0.0f) ? alpha * v : alpha * v + beta * half_bits_to_f32<ELEM == ELEM_BF16>(*p);
        *p = static_cast<unsigned short>(pack_half2_rn<ELEM == ELEM_BF16>(out, 0.0f) & 0xffffu);
    } else {
        store1_f32(static_cast<float*>(C), N, row, col, v, alpha, beta);
    }
}

// Columns col, col + 1 of a row (col even), with one 8-byte (fp32) or 4-byte
// (16-bit) store; the caller checked alignment and col + 1 < N.
template <int ELEM, bool NARROW>
__device__ __forceinline__ void store_pair(void* C, size_t i, float v0, float v1, float alpha,
                                           float beta) {
    if constexpr (NARROW) {
        u32* q = reinterpret_cast<u32*>(static_cast<unsigned short*>(C) + i);
        float o0 = alpha * v0, o1 = alpha * v1;
        if (beta != 0.0f) {
            const u32 old = *q;
            o0 += beta * half_bits_to_f32<ELEM == ELEM_BF16>(static_cast<unsigned short>(old & 0xffffu));
            o1 += beta * half_bits_to_f32<ELEM == ELEM_BF16>(static_cast<unsigned short>(old >> 16));
        }
        *q = pack_half2_rn<ELEM == ELEM_BF16>(o0, o1);
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
template <int ELEM, bool NARROW, int H>
__device__ __forceinline__ void epilogue_direct_half(const float (&acc)[ACC], void* C,
                                                     const Problem& p, int r, int x0, int t,
                                                     float alpha, float beta) {
    if constexpr (!Elem<ELEM>::SWAP) {
        // Row r of C; columns in pairs (the column is even): one store per
        // pair where the row's pairs are aligned to the pair's size, which
        // with N odd is every other row.
        const int row = r;
        if (row >= p.M) return;
        constexpr size_t PAIR_BYTES = NARROW ? 4 : 8;
        const bool pairs = ((reinterpret_cast<size_t>(C) & (PAIR_BYTES - 1)) == 0) &&
                           ((static_cast<size_t>(row) * p.N) & 1) == 0;
        const size_t row_start = static_cast<size_t>(row) * p.N;
#pragma unroll
        for (int j = 0; j < ACC / 4; ++j) {
            const int col = x0 + 8 * j + 2 * t;
            const float v0 = acc[4 * j + 2 * H], v1 = acc[4 * j + 2 * H + 1];
            if (pairs && col + 1 < p.N) {
                store_pair<ELEM, NARROW>(C, row_start + col, v0, v1, alpha, beta);
            } else {
                if (col < p.N) store1<ELEM, NARROW>(C, p.N, row, col, v0, alpha, beta);
                if (col + 1 < p.N) store1<ELEM, NARROW>(C, p.N, row, col + 1, v1, alpha, beta);
            }
        }
    } else {
        // Transposed tile: wgmma row r = column of C, wgmma column = row of C.
        // Per store, 8 lanes g write 8 consecutive floats of one row of C.
        const int col = r;
        if (col >= p.N) return;
#pragma unroll
        for (int j = 0; j < ACC / 4; ++j) {
            const int row = x0 + 8 * j + 2 * t;
            if (row < p.M)
                store1<ELEM, NARROW>(C, p.N, row, col, acc[4 * j + 2 * H], alpha, beta);
            if (row + 1 < p.M)
                store1<ELEM, NARROW>(C, p.N, row + 1, col, acc[4 * j + 2 * H + 1], alpha, beta);
        }
    }
}

// NARROW: C holds the inputs' 16-bit type (Elem<ELEM>::NARROW for C itself;
// false for split-K partials, which are fp32 whatever C is).
template <int ELEM, bool NARROW>
__device__ __forceinline__ void epilogue_direct(const float (&acc)[ACC], void* C,
                                                const Problem& p, int y0, int x0, int c,
                                                float alpha, float beta) {
    const int lane = threadIdx.x & 31;
    const int w = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t = lane & 3;
    const int r0 = y0 + c * 64 + w * 16 + g;  // wgmma row of acc[0]
    epilogue_direct_half<ELEM, NARROW, 0>(acc, C, p, r0, x0, t, alpha, beta);
    epilogue_direct_half<ELEM, NARROW, 1>(acc, C, p, r0 + 8, x0, t, alpha, beta);
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
__device__ __forceinline__ void epilogue_tma(const float (&acc)[ACC], const TmaMap* mapC,
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
                                 :: "r"(addr), "r"(pack_half2_rn<ELEM == ELEM_BF16>(v0, v1)) : "memory");
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
__device__ __forceinline__ void epilogue(const float (&acc)[ACC], const TmaMap* mapC, void* C,
                                         const Ring& ring, const Problem& p, int y0, int x0,
                                         int c, float alpha, float beta, bool c_tma) {
    if constexpr (Elem<ELEM>::EPI == 2) {
        if (c_tma) {
            epilogue_tma<ELEM>(acc, mapC, ring, p, y0, x0, c, alpha);
            return;
        }
    }
    epilogue_direct<ELEM, Elem<ELEM>::NARROW>(acc, C, p, y0, x0, c, alpha, beta);
}
