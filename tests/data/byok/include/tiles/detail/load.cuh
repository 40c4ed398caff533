#pragma once
namespace tiles {
template <typename T>
__device__ __forceinline__ T load(const T* p) { return __ldg(p); }
}  // namespace tiles
