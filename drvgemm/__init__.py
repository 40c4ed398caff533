"""drvgemm: GEMM from naive to tensor cores, compiled with NVRTC / nvJitLink
and launched through the CUDA driver API."""
__version__ = "0.1.0"
