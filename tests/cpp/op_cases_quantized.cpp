// Op-spec cases for quantized_matmul: the quantized matrix, scales and
// biases are constants of the function (derivatives and vmap are defined
// for x only, as in MLX), x is the float64 input.
#include <tuple>

#include "fluxion/ops/quantized.h"
#include "op_cases.h"

namespace fluxion::test {

namespace {

OpCase qmm_case(const std::string& name, const Shape& x_shape,
                const Shape& w_shape, bool transpose, int gs, int bits,
                unsigned seed) {
  auto [wq, scales, biases] = quantize(rnd(w_shape, seed), gs, bits);
  Fn f = [=](const std::vector<array>& x) {
    return std::vector<array>{
        quantized_matmul(x[0], wq, scales, biases, transpose, gs, bits)};
  };
  return {name, f, {rnd(x_shape, seed + 1)}};
}

std::vector<OpCase> quantized_cases() {
  return {
      qmm_case("quantized_matmul_t4", {2, 3, 64}, {8, 64}, true, 32, 4, 91),
      qmm_case("quantized_matmul_t2_gemm", {6, 128}, {5, 128}, true, 128, 2,
               93),
      qmm_case("quantized_matmul_vector", {64}, {3, 64}, true, 64, 8, 95),
      qmm_case("quantized_matmul_n8", {3, 5}, {5, 128}, false, 64, 8, 97),
  };
}

}  // namespace

FLUXION_REGISTER_OP_CASES(quantized_cases);

}  // namespace fluxion::test
