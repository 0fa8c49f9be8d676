// GPU kernels of the comparisons, logical and bitwise binary primitives
// (the spec's entries whose CU is compare).
#include "fluxion/backend/cuda/binary.cuh"

namespace fluxion {

FLUXION_BINARY_SPEC(FLUXION_GPU_BINARY, compare)

// Equal (FORM class): NaNEqual for equal_nan.
void Equal::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  if (equal_nan_) {
    gpu_binary::to_bool<AllTypes, detail::NaNEqual>(in, out[0],
                                                    "array_equal");
  } else {
    gpu_binary::to_bool<AllTypes, detail::Equal>(in, out[0], "equal");
  }
}

}  // namespace fluxion
