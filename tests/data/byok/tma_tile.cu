// A TMA kernel as one writes it for nvcc (the CUDA programming guide's idiom):
// <cuda.h> for CUtensorMap, the tensor map by value as a __grid_constant__
// parameter, libcu++'s block barrier and bulk tensor copy, a cluster shape
// compiled in; the host code (encoding the map, the <<<...>>> launch) guarded.
#include <cuda.h>
#include <cuda/barrier>
#include <cuda/ptx>

using block_barrier = cuda::barrier<cuda::thread_scope_block>;
namespace cde = cuda::device::experimental;

// Block (bx, by) copies the BOX_ROWS x BOX_COLS box of a row-major fp32 matrix
// at column bx * BOX_COLS, row by * BOX_ROWS into shared memory by one bulk
// tensor copy, then writes it to the same place of `out` (out_cols columns):
// out is the matrix, its edges padded to whole boxes with what the copy
// fills past the tensor's bounds (zeros).
template <int BOX_ROWS, int BOX_COLS>
__global__ void __cluster_dims__(2, 1, 1)
tile_copy(const __grid_constant__ CUtensorMap map, float* out, int out_cols) {
    __shared__ alignas(128) float tile[BOX_ROWS][BOX_COLS];
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ block_barrier bar;
    if (threadIdx.x == 0) {
        init(&bar, blockDim.x);
        cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);   // the barrier, seen by the copy engine
    }
    __syncthreads();
    block_barrier::arrival_token token;
    if (threadIdx.x == 0) {
        cde::cp_async_bulk_tensor_2d_global_to_shared(&tile, &map, blockIdx.x * BOX_COLS,
                                                      blockIdx.y * BOX_ROWS, bar);
        token = cuda::device::barrier_arrive_tx(bar, 1, sizeof(tile));
    } else {
        token = bar.arrive();
    }
    bar.wait(cuda::std::move(token));
    for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += blockDim.x) {
        const int r = i / BOX_COLS, c = i % BOX_COLS;
        out[(static_cast<long long>(blockIdx.y) * BOX_ROWS + r) * out_cols +
            blockIdx.x * BOX_COLS + c] = tile[r][c];
    }
}

#ifndef __CUDACC_RTC__
// nvcc's host side, for reference: never compiled by NVRTC.
#include <cstdio>
int main() {
    CUtensorMap map;
    // cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, ...);
    // tile_copy<16, 32><<<grid, 128>>>(map, out, out_cols);
    printf("%zu\n", sizeof(map));
    return 0;
}
#endif
