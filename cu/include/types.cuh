// Integer names every wrapper header uses, and the inline qualifier. No CUDA
// header is included anywhere: NVRTC finds <cuda_fp16.h>, <cuda_bf16.h> and
// <mma.h> only in a CUDA toolkit's include directory (13.3 and later can
// unpack a bundled copy, 13.0 on the H200 cannot), and the kernels need none
// of them: 16-bit inputs are only ever raw bits that go straight from memory
// to ldmatrix / wmma.load / the copy engine, so bf16 and fp16 matrices are
// passed as `const unsigned short*` (the same 8-byte pointer in the PTX
// signature as `const __nv_bfloat16*`).
#pragma once

#define DEVI __device__ __forceinline__

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
