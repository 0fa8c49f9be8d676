// GPU kernels of the comparisons, logical and bitwise binary primitives.
#include "fluxion/backend/cuda/binary.cuh"

namespace fluxion {

FLUXION_GPU_SAME_TYPE(BitwiseAnd, IntBoolTypes, "bitwise_and")
FLUXION_GPU_SAME_TYPE(BitwiseOr, IntBoolTypes, "bitwise_or")
FLUXION_GPU_SAME_TYPE(BitwiseXor, IntBoolTypes, "bitwise_xor")
FLUXION_GPU_SAME_TYPE(LeftShift, IntBoolTypes, "left_shift")
FLUXION_GPU_SAME_TYPE(RightShift, IntBoolTypes, "right_shift")
FLUXION_GPU_TO_BOOL(NotEqual, AllTypes, "not_equal")
FLUXION_GPU_TO_BOOL(Less, AllTypes, "less")
FLUXION_GPU_TO_BOOL(LessEqual, AllTypes, "less_equal")
FLUXION_GPU_TO_BOOL(Greater, AllTypes, "greater")
FLUXION_GPU_TO_BOOL(GreaterEqual, AllTypes, "greater_equal")
FLUXION_GPU_TO_BOOL(LogicalAnd, TypeList<bool>, "logical_and")
FLUXION_GPU_TO_BOOL(LogicalOr, TypeList<bool>, "logical_or")

void Equal::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  if (equal_nan_) {
    gpu_binary::to_bool<AllTypes, detail::NaNEqual>(in, out[0],
                                                    "array_equal");
  } else {
    gpu_binary::to_bool<AllTypes, detail::Equal>(in, out[0], "equal");
  }
}

}  // namespace fluxion
