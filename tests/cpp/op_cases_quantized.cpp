// Op-spec cases for quantized_matmul: the packed matrix (integers, no
// derivative, no vmap) is a constant of the function; x, and in some cases
// the scales and biases, are the float64 inputs.
#include <tuple>

#include "fluxion/ops/quantized.h"
#include "op_cases.h"

namespace fluxion::test {

namespace {

OpCase qmm_case(const std::string& name, const Shape& x_shape,
                const Shape& w_shape, bool transpose, int gs, int bits,
                unsigned seed) {
  auto wq_scales_biases_ = quantize(rnd(w_shape, seed), gs, bits);
  [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
  [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
  [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
  Fn f = [=](const std::vector<array>& x) {
    return std::vector<array>{
        quantized_matmul(x[0], wq, scales, biases, transpose, gs, bits)};
  };
  return {name, f, {rnd(x_shape, seed + 1)}};
}

std::vector<OpCase> quantized_cases() {
  auto wq_scales_biases_ = quantize(rnd({6, 64}, 99), 32, 4);
  [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
  [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
  [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
  Fn with_sb = [wq](const std::vector<array>& in) {
    return std::vector<array>{
        quantized_matmul(in[0], wq, in[1], in[2], true, 32, 4)};
  };
  auto wn_sn_bn_ = quantize(rnd({4, 128}, 101), 64, 2);
  [[maybe_unused]] auto& wn = std::get<0>(wn_sn_bn_);
  [[maybe_unused]] auto& sn = std::get<1>(wn_sn_bn_);
  [[maybe_unused]] auto& bn = std::get<2>(wn_sn_bn_);
  Fn with_sb_n = [wn](const std::vector<array>& in) {
    return std::vector<array>{
        quantized_matmul(in[0], wn, in[1], in[2], false, 64, 2)};
  };
  return {
      {"quantized_matmul_scales_biases",
       with_sb,
       {rnd({2, 3, 64}, 100), scales, biases}},
      {"quantized_matmul_scales_biases_vector",
       with_sb,
       {rnd({64}, 102), scales, biases}},
      {"quantized_matmul_scales_biases_n",
       with_sb_n,
       {rnd({3, 4}, 103), sn, bn}},
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
