// A templated kernel in a header tree, reached through an include path.
#pragma once
#include "detail/load.cuh"

namespace tiles {
template <int BLOCK, typename T>
__global__ void __launch_bounds__(BLOCK) scale_add(T* __restrict__ y, const T* __restrict__ x,
                                                    T alpha, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] = alpha * load(x + i) + y[i];
}
}  // namespace tiles
