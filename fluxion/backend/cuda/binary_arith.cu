// GPU kernels of the arithmetic binary primitives (the spec's entries whose
// CU is arith; functors in backend/common/binary_ops.h). The binary ops are
// split over three files so nvcc builds them in parallel.
#include "fluxion/backend/cuda/binary.cuh"

namespace fluxion {

FLUXION_BINARY_SPEC(FLUXION_GPU_BINARY, arith)

}  // namespace fluxion
