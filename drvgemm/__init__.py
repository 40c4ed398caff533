"""drvgemm: GEMM from naive to tensor cores, compiled with NVRTC / nvJitLink
and launched through the CUDA driver API."""
__version__ = "0.1.0"

from .errors import CompileError, CudaError, NoDeviceError  # noqa: E402
from .driver import (DeviceArray, Event, Stream, device, empty, has_gpu,  # noqa: E402
                     no_gpu_reason, synchronize, to_device)
from .kernel import Kernel, compile  # noqa: E402
from .launch import launch  # noqa: E402
from .launch import fast_path as launch_path  # noqa: E402
from . import occupancy  # noqa: E402  (callable: drvgemm.occupancy(kernel, block, smem))


# Loaded first so that the package attribute below stays the function: a
# submodule import binds its name on the package only the first time.
from . import softmax as _softmax_module  # noqa: E402


def softmax(x, *, kernel="auto", out=None, stream=None):
    """Row-wise softmax (fp32 math) with a registered softmax rung: see
    drvgemm/softmax.py."""
    return _softmax_module.softmax(x, kernel=kernel, out=out, stream=stream)


def gemm(a, b, c=None, *, alpha=1.0, beta=0.0, kernel="auto", stream=None, out_dtype=None):
    """C = alpha*A@B + beta*C with a registered rung: see drvgemm.ladder.gemm."""
    from .ladder import gemm as _gemm
    return _gemm(a, b, c, alpha=alpha, beta=beta, kernel=kernel, stream=stream,
                 out_dtype=out_dtype)


def kernels(precision=None):
    """Names of the registered GEMM rungs, in ladder order."""
    from .ladder import kernels as _kernels
    return _kernels(precision)


__all__ = ["CompileError", "CudaError", "NoDeviceError", "DeviceArray", "Event", "Stream",
           "Kernel", "compile", "device", "empty", "gemm", "has_gpu", "kernels", "launch",
           "launch_path",
           "no_gpu_reason", "occupancy", "softmax", "synchronize", "to_device"]
