"""The runtime layer: everything that talks to the CUDA toolchain or driver.

The only folder that imports ``cuda.bindings``: the driver (context, device
properties, memory, streams, events, error translation), the compiler (the
only NVRTC / nvJitLink caller, and its disk cache), kernels and their
attributes, launches (argument checking and packing, the C fast path), tensor
maps, timing, SASS disassembly, kernel sources and the host dtypes."""
