// nvcc includes cuda_runtime.h implicitly, and sources often include it
// again; NVRTC declares the device side of it (threadIdx, __syncthreads,
// atomics, math) itself. The host API (cudaMalloc, cudaMemcpy, <<<...>>>)
// is not available: guard host code with #ifndef __CUDACC_RTC__.
