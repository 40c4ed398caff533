// <cuda.h>, the driver API, is host code but for one type: a TMA kernel takes
// its tensor map by value, `const __grid_constant__ CUtensorMap map`, and nvcc
// sources include <cuda.h> for it. NVRTC bundles no cuda.h, so this stand-in
// gives device code that type as the driver lays it out (128 opaque bytes,
// 64-byte aligned: what cuTensorMapEncodeTiled fills, and drvgemm.TensorMap
// hands to the launch), the driver's integer names and CUDA_VERSION (the
// compiler's release). Nothing of the host API: guard host code with
// #ifndef __CUDACC_RTC__ ... #endif.
#pragma once
#include <stdint.h>

#ifndef CUDA_VERSION
#define CUDA_VERSION (__CUDACC_VER_MAJOR__ * 1000 + __CUDACC_VER_MINOR__ * 10)
#endif

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

#define CU_TENSOR_MAP_NUM_QWORDS 16

// The same declaration as the driver's header, so that libcu++'s forward
// declaration (struct CUtensorMap_st, in <cuda/barrier>) names this type.
typedef struct CUtensorMap_st {
    alignas(64) cuuint64_t opaque[CU_TENSOR_MAP_NUM_QWORDS];
} CUtensorMap;
