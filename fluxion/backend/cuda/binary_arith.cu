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

// DivMod: as on the CPU (backend/cpu/binary.cpp), the two kernels in
// turn, the inputs held during the first so that it donates none of them.
void DivMod::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  std::vector<array> held = in;
  gpu_binary::same_type<RealTypes, detail::FloorDivide>(held, out[0],
                                                         "divmod");
  held.clear();
  gpu_binary::same_type<RealTypes, detail::Remainder>(in, out[1], "divmod");
}

}  // namespace fluxion
