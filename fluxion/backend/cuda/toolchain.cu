// The CUDA backend's place (FLUXION_CUDA, CMakeLists.txt). It has no
// kernels yet: the GPU entry points are backend/no_gpu's. This file only
// proves that nvcc builds against the host compiler and Fluxion's headers.
#include <cuda_runtime_api.h>

#include "fluxion/primitive_list.h"

namespace fluxion::cuda {

// The CUDA runtime version the backend is compiled against.
int toolkit_version() { return CUDART_VERSION; }

// How many primitives the registry lists (each will get a kernel here or a
// generated one that raises, from the registry's GPU column).
int registered_primitives() {
#define FLUXION_COUNT_PRIMITIVE(CLASS, FAMILY, CPU, GPU) +1
  return 0 FLUXION_PRIMITIVES(FLUXION_COUNT_PRIMITIVE);
#undef FLUXION_COUNT_PRIMITIVE
}

}  // namespace fluxion::cuda
