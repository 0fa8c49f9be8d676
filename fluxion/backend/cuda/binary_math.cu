// GPU kernels of max/min and the transcendental binary primitives (the
// spec's entries whose CU is math).
#include "fluxion/backend/cuda/binary.cuh"

namespace fluxion {

FLUXION_BINARY_SPEC(FLUXION_GPU_BINARY, math)

}  // namespace fluxion
