// nvcc files include cuda_runtime_api.h for the runtime's host API (through
// cuda_runtime.h, or on their own); NVRTC declares the device side itself.
// The host API (cudaMalloc, cudaMemcpy, ...) is not available: guard host
// code with #ifndef __CUDACC_RTC__.
