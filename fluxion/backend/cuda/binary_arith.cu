// GPU kernels of the arithmetic binary primitives (dtypes as
// backend/cpu/binary.cpp; functors in backend/common/binary_ops.h). The
// binary ops are split over three files so nvcc builds them in parallel.
#include "fluxion/backend/cuda/binary.cuh"

namespace fluxion {

FLUXION_GPU_SAME_TYPE(Add, AllTypes, "add")
FLUXION_GPU_SAME_TYPE(Subtract, AllTypes, "subtract")
FLUXION_GPU_SAME_TYPE(Multiply, AllTypes, "multiply")
FLUXION_GPU_SAME_TYPE(Divide, InexactTypes, "divide")
FLUXION_GPU_SAME_TYPE(FloorDivide, RealTypes, "floor_divide")
FLUXION_GPU_SAME_TYPE(Remainder, RealTypes, "remainder")
FLUXION_GPU_SAME_TYPE(Power, AllTypes, "power")

}  // namespace fluxion
