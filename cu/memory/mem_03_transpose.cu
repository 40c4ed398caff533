// Memory lesson 3: transposes, and shared-memory bank conflicts.
//
// out (cols x rows) = transpose of in (rows x cols), both row-major. A block of
// 32 x 8 threads moves one 32 x 32 tile, each thread 4 elements. Tiles are
// numbered along blockIdx.x alone (tile_cols per tile row), so any shape fits
// the grid: ceil(rows / 32) * ceil(cols / 32) blocks.
//
// mem_transpose_naive:     reads coalesced, writes 32 rows apart: each warp
//                          store touches 32 sectors for 128 useful bytes.
// mem_transpose_smem:      the tile goes through shared memory so that both
//                          the read and the write are coalesced; but tile[32][32]
//                          puts a column in one bank (address / 4 mod 32), so
//                          reading a column is a 32-way bank conflict: 32
//                          shared-memory wavefronts per warp instead of 1.
// mem_transpose_padded:    tile[32][33]: the +1 shifts each row by one bank,
//                          a column spans all 32 banks: conflict-free.
// mem_transpose_swizzled:  tile[32][32] with column c of row r stored at
//                          c ^ r: also conflict-free, with no wasted space.
#define TILE 32
#define ROWS_PER_PASS 8

struct TileCoords {
    long long r0, c0;  // first row and column of the tile in `in`
};

__device__ __forceinline__ TileCoords tile_of_block(int cols) {
    const long long tile_cols = (cols + TILE - 1) / TILE;
    const long long t = blockIdx.x;
    return TileCoords{(t / tile_cols) * TILE, (t % tile_cols) * TILE};
}

extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
mem_transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const TileCoords t = tile_of_block(cols);
    const long long c = t.c0 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS_PER_PASS) {
        const long long r = t.r0 + threadIdx.y + k;
        if (r < rows && c < cols) out[c * rows + r] = __ldg(in + r * cols + c);
    }
}

// Shared-memory transpose with the tile's storage picked at compile time:
// PITCH = row pitch in floats (32: conflicts, 33: padded), SWIZZLE = store
// column c of row r at c ^ r.
template <int PITCH, bool SWIZZLE>
__device__ __forceinline__ void transpose_through_smem(const float* __restrict__ in, float* __restrict__ out,
                                                       int rows, int cols, float* tile) {
    const TileCoords t = tile_of_block(cols);
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS_PER_PASS) {
        const int lr = ty + k;  // row within the tile; the warp reads one tile row
        const long long r = t.r0 + lr, c = t.c0 + tx;
        const int lc = SWIZZLE ? (tx ^ lr) : tx;
        if (r < rows && c < cols) tile[lr * PITCH + lc] = __ldg(in + r * cols + c);
    }
    __syncthreads();
    // The warp now writes one row of `out`, i.e. one column of the tile:
    // lane tx reads tile element (row tx, column ty + k).
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS_PER_PASS) {
        const int lc = ty + k;
        const long long orow = t.c0 + lc, ocol = t.r0 + tx;  // out is cols x rows
        const int sc = SWIZZLE ? (lc ^ tx) : lc;
        if (orow < cols && ocol < rows) out[orow * rows + ocol] = tile[tx * PITCH + sc];
    }
}

extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
mem_transpose_smem(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE * TILE];
    transpose_through_smem<TILE, false>(in, out, rows, cols, tile);
}

extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
mem_transpose_padded(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE * (TILE + 1)];
    transpose_through_smem<TILE + 1, false>(in, out, rows, cols, tile);
}

extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
mem_transpose_swizzled(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE * TILE];
    transpose_through_smem<TILE, true>(in, out, rows, cols, tile);
}
