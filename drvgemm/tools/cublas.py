"""cuBLAS baselines, each call written once: torch.matmul, and cublasGemmEx
through CuPy's bindings. Each builder returns (enqueue, result, sync, ...)
so a caller times ``enqueue`` its own way (per-call events or batches) and
reads the product back with ``result``; None when the library (or its GPU
support) is missing."""
from __future__ import annotations

import numpy as np

from ..runtime import dtypes
from .optional import torch_cuda

__all__ = ["torch_matmul_call", "gemmex_call", "gemmex_enqueue"]

CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77


def torch_matmul_call(prec, a, b):
    """cuBLAS through torch.matmul (TF32 off for fp32, on for tf32):
    (enqueue, result as float32 ndarray, sync, restore), or None without
    torch/CUDA. restore() puts torch's TF32 switch back."""
    torch = torch_cuda()
    if torch is None:
        return None
    tdt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
           "bf16": torch.bfloat16}[prec]
    prev = torch.backends.cuda.matmul.allow_tf32
    ta = torch.from_numpy(np.asarray(a).astype(np.float32)).cuda().to(tdt)
    tb = torch.from_numpy(np.asarray(b).astype(np.float32)).cuda().to(tdt)
    out = {}

    def enqueue():
        # The TF32 switch is global: set it for every call, as the calls of
        # several precisions may interleave.
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        out["c"] = torch.matmul(ta, tb)

    def result():
        torch.cuda.synchronize()
        return out["c"].float().cpu().numpy()

    def restore():
        torch.backends.cuda.matmul.allow_tf32 = prev

    return enqueue, result, torch.cuda.synchronize, restore


def gemmex_call(prec, m, n, k, a, b, out_fp32=False):
    """cublasGemmEx through CuPy on row-major operands (column-major C^T =
    B^T A^T: B is passed first): 16-bit in with fp32 compute and C in the
    input type (the call a Hopper kernel is measured against) or in fp32 with
    ``out_fp32``; tf32 in with the fast-TF32 compute type and an fp32 C.
    Returns (enqueue, result as float32 ndarray, sync, name, out type, stream
    handle), or None without CuPy or for fp32."""
    if prec not in ("bf16", "fp16", "tf32"):
        return None
    try:
        import cupy
        from cupy_backends.cuda.libs import cublas  # noqa: F401  (gemmex_enqueue's)
    except ImportError:
        return None
    if prec == "tf32":
        in_t = CUDA_R_32F
        ca, cb = cupy.asarray(a), cupy.asarray(b)
    else:
        in_t = CUDA_R_16BF if prec == "bf16" else CUDA_R_16F
        ca, cb = cupy.asarray(a.view(np.uint16)), cupy.asarray(b.view(np.uint16))
    if out_fp32 or prec == "tf32":
        out_t, cc = CUDA_R_32F, cupy.empty((m, n), np.float32)
    else:
        out_t, cc = in_t, cupy.empty((m, n), np.uint16)
    enqueue = gemmex_enqueue(prec, m, n, k, ca.data.ptr, cb.data.ptr, cc.data.ptr,
                             out_fp32=out_t == CUDA_R_32F)
    enqueue.operands = (ca, cb, cc)   # the call reads them by address: keep them alive

    def result():
        cupy.cuda.runtime.deviceSynchronize()
        host = cupy.asnumpy(cc)
        if out_t != CUDA_R_32F:
            host = host.view(dtypes.numpy_dtype(prec)).astype(np.float32)
        return host

    name = "cublas_gemmex" if out_t != CUDA_R_32F or prec == "tf32" else "cublas_gemmex_f32out"
    out = "fp32" if out_t == CUDA_R_32F else prec
    stream = cupy.cuda.get_current_stream().ptr or None
    return enqueue, result, cupy.cuda.runtime.deviceSynchronize, name, out, stream


def gemmex_enqueue(prec, m, n, k, pa, pb, pc, out_fp32=False):
    """The cublasGemmEx call on row-major device operands at addresses
    ``pa`` (M x K), ``pb`` (K x N), ``pc`` (M x N), enqueued on the legacy
    default stream (the stream drvgemm's events time): 16-bit in with fp32
    compute and C in the input type, or fp32 with ``out_fp32``; tf32: float32
    in and out with the fast-TF32 compute type. Returns enqueue(), or None
    without CuPy or for fp32."""
    if prec not in ("bf16", "fp16", "tf32"):
        return None
    try:
        import cupy
        from cupy_backends.cuda.libs import cublas
    except ImportError:
        return None
    if prec == "tf32":
        in_t, compute, out_t = CUDA_R_32F, COMPUTE_32F_FAST_TF32, CUDA_R_32F
    else:
        in_t = CUDA_R_16BF if prec == "bf16" else CUDA_R_16F
        compute = COMPUTE_32F
        out_t = CUDA_R_32F if out_fp32 else in_t
    alpha = np.array(1.0, np.float32)
    beta = np.array(0.0, np.float32)
    handle = cupy.cuda.device.get_cublas_handle()
    cupy.cuda.Stream.null.use()
    pa, pb, pc = int(pa), int(pb), int(pc)
    pal, pbe = alpha.ctypes.data, beta.ctypes.data

    def enqueue():
        # column-major C^T = B^T A^T: B is passed first
        cublas.gemmEx(handle, 0, 0, n, m, k, pal, pb, in_t, n, pa, in_t, k, pbe, pc, out_t, n,
                      compute, 0)   # CUBLAS_GEMM_DEFAULT
    enqueue.keep = (alpha, beta)   # the host scalars cuBLAS reads at each call
    return enqueue
