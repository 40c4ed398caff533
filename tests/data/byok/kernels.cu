// Kernels of several kinds in one file, compiled as one module.
#include <tiles/scale.cuh>

extern "C" __global__ void fill(float* out, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = v;
}

// Not extern "C", not a template: named by its plain C++ name.
__global__ void offsets(int* out, short s, signed char c, unsigned short u, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * s + c + u;
}

namespace ops {
__global__ void negate(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = -x[i];
}
}  // namespace ops

template __global__ void tiles::scale_add<128, float>(float*, const float*, float, int);
