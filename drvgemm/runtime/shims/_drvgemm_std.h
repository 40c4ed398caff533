// Shared by the standard-header stand-ins: std:: names for what libcu++ has
// in cuda::std (std::min, std::sqrt, std::numeric_limits, ...), as nvcc's
// libstdc++ would give them to device code.
#ifndef DRVGEMM_SHIM_STD_H
#define DRVGEMM_SHIM_STD_H
#include <cuda/std/cstddef>
namespace cuda { namespace std {} }
namespace std { using namespace ::cuda::std; }
#endif
