// C = beta * C over n elements; beta == 0 writes zeros and never reads C,
// so NaN or uninitialised memory in C cannot leak into the result.
// gemm() uses it for K = 0, where the product term is empty. scale_c for a
// float32 C; scale_c_bf16 / scale_c_fp16 for a C in the inputs' 16-bit type
// (the product is taken in fp32 and rounded to nearest even).
extern "C" __global__ void scale_c(float* __restrict__ c, long long n, float beta)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    }
}

template <bool BF16>
__device__ void scale_16(unsigned short* __restrict__ c, long long n, float beta)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v = 0.0f;
        if (beta != 0.0f) {
            if (BF16) {
                v = __uint_as_float(static_cast<unsigned>(c[i]) << 16);
            } else {
                asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(c[i]));
            }
            v *= beta;
        }
        unsigned short out;
        if (BF16) {
            unsigned packed;
            asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(packed) : "f"(v));
            out = static_cast<unsigned short>(packed & 0xffffu);
        } else {
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out) : "f"(v));
        }
        c[i] = out;
    }
}

extern "C" __global__ void scale_c_bf16(unsigned short* c, long long n, float beta)
{
    scale_16<true>(c, n, beta);
}

extern "C" __global__ void scale_c_fp16(unsigned short* c, long long n, float beta)
{
    scale_16<false>(c, n, beta);
}
