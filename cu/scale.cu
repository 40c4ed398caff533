// C = beta * C over n elements; beta == 0 writes zeros and never reads C,
// so NaN or uninitialised memory in C cannot leak into the result.
// gemm() uses it for K = 0, where the product term is empty.
extern "C" __global__ void scale_c(float* __restrict__ c, long long n, float beta)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    }
}
