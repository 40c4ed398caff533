// Programmatic dependent launch (sm_90+). drvgemm launches a kernel that
// calls grid_dependency_wait() (Kernel.dependent_launch) with the
// programmatic-stream-serialization attribute: the GPU may then schedule its
// blocks as soon as the blocks of the grid ahead of it in the stream have
// exited, before that grid has completed, so they set up (shared-memory
// barriers, tensor-map prefetch, register moves) in the shadow of its end.
// Each thread waits here for that grid to complete and its writes to be
// visible before its first global-memory access: the order a plain launch
// gives. In a kernel launched without the attribute the wait returns at once;
// before sm_90 there is no such launch, and no instruction.
#pragma once

__device__ __forceinline__ void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
