"""drvgemm: GEMM from naive to tensor cores, compiled with NVRTC / nvJitLink
and launched through the CUDA driver API.

The package, by layer (each imports only the ones above it in this list):
  runtime/   the only code importing cuda.bindings: driver, compiler,
             kernels, launches, tensor maps, timing, SASS, kernel sources
  analysis/  pure-Python models: device catalogue, occupancy, roofline,
             fragment layouts, shared-memory banks
  ladders/   the kernel ladders (gemm/, softmax/, memory/): registries of
             rungs and the dispatchers gemm() and softmax()
  tools/     benchmarks, Nsight Compute, ceilings, plots, result records
  cli/       the ``drvgemm`` command, one module per subcommand
"""
from ._version import __version__
from .ladders.gemm.dispatch import gemm, kernels, plan
from .ladders.softmax.dispatch import softmax
from .runtime.driver import (DeviceArray, Event, Stream, device, empty, has_gpu, no_gpu_reason,
                             reset, synchronize, to_device)
from .runtime.errors import CompileError, CudaError, NoDeviceError, StaleObjectError
from .runtime.graph import Graph, graph
from .runtime.isolated import IsolatedError, isolated
from .runtime.kernel import Kernel, Module, compile, compile_module
from .runtime.launch import fast_path as launch_path
from .runtime.launch import launch
from .runtime.tensormap import TensorMap
from .tools.kernel_occupancy import occupancy

__all__ = ["CompileError", "CudaError", "DeviceArray", "Event", "Graph", "IsolatedError",
           "Kernel", "Module", "NoDeviceError", "StaleObjectError", "Stream", "TensorMap",
           "__version__",
           "compile", "compile_module", "device", "empty", "gemm", "graph", "has_gpu",
           "isolated", "kernels", "launch", "launch_path", "no_gpu_reason", "occupancy", "plan",
           "reset", "softmax", "synchronize", "to_device"]
