// GPU kernels of max/min and the transcendental binary primitives.
#include "fluxion/backend/cuda/binary.cuh"

namespace fluxion {

FLUXION_GPU_SAME_TYPE(Maximum, AllTypes, "maximum")
FLUXION_GPU_SAME_TYPE(Minimum, AllTypes, "minimum")
FLUXION_GPU_SAME_TYPE(ArcTan2, FloatTypes, "arctan2")
FLUXION_GPU_SAME_TYPE(LogAddExp, InexactTypes, "logaddexp")

}  // namespace fluxion
