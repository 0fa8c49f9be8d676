// Op-spec cases for quantized_matmul: the packed matrix (integers, no
// derivative, no vmap) is a constant of the function; x, and in some cases
// the scales and biases, are the float64 inputs.
#include <tuple>

#include "fluxion/ops/quantized.h"
#include "op_cases.h"

namespace fluxion::test {

namespace {

// The reference multiplies by the dequantized matrix (an independent
// path: dequantize, then a host matmul).
array qmm_ref(const array& x, const array& w, bool transpose) {
  auto xs = x.shape();
  int k = xs.back();
  int64_t rows = shape_size(xs) / k;
  auto wd = transpose ? swapaxes(w, 0, 1) : w;  // (K, N)
  int n = wd.shape(1);
  auto xv = values(x), wv = values(wd);
  std::vector<double> out(rows * n, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int l = 0; l < k; ++l)
      for (int j = 0; j < n; ++j) out[r * n + j] += xv[r * k + l] * wv[l * n + j];
  Shape os = xs;
  os.back() = n;
  return host_array(out, os);
}

OpCase qmm_entry(const std::string& name, Fn f, std::vector<In> in, Ref ref) {
  OpCase k{name, std::move(f), std::move(in)};
  k.dtypes = {float64, float32};
  k.ref = std::move(ref);
  // The kernel computes in float32 whatever the input dtype.
  k.fwd_tol = 2e-5;
  return k;
}

OpCase qmm_case(const std::string& name, const Shape& x_shape,
                const Shape& w_shape, bool transpose, int gs, int bits,
                unsigned seed) {
  auto wq_scales_biases_ = quantize(normal_values(w_shape, seed), gs, bits);
  [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
  [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
  [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
  // Evaluated: compile refuses closures over unevaluated arrays.
  eval({wq, scales, biases});
  Fn f = [=](const std::vector<array>& x) {
    return std::vector<array>{
        quantized_matmul(x[0], wq, scales, biases, transpose, gs, bits)};
  };
  auto dense = astype(dequantize(wq, scales, biases, gs, bits), float64);
  Ref ref = [dense, transpose](const Arrays& x) {
    return Arrays{qmm_ref(x[0], dense, transpose)};
  };
  return qmm_entry(name, f, {normal(x_shape)}, ref);
}

std::vector<OpCase> quantized_cases() {
  auto wq_scales_biases_ = quantize(normal_values({6, 64}, 99), 32, 4);
  [[maybe_unused]] auto& wq = std::get<0>(wq_scales_biases_);
  [[maybe_unused]] auto& scales = std::get<1>(wq_scales_biases_);
  [[maybe_unused]] auto& biases = std::get<2>(wq_scales_biases_);
  eval({wq, scales, biases});
  Fn with_sb = [wq](const std::vector<array>& in) {
    return std::vector<array>{
        quantized_matmul(in[0], wq, in[1], in[2], true, 32, 4)};
  };
  Ref with_sb_ref = [wq](const Arrays& x) {
    auto dense = astype(dequantize(wq, x[1], x[2], 32, 4), float64);
    return Arrays{qmm_ref(x[0], dense, true)};
  };
  auto wn_sn_bn_ = quantize(normal_values({4, 128}, 101), 64, 2);
  [[maybe_unused]] auto& wn = std::get<0>(wn_sn_bn_);
  [[maybe_unused]] auto& sn = std::get<1>(wn_sn_bn_);
  [[maybe_unused]] auto& bn = std::get<2>(wn_sn_bn_);
  eval({wn, sn, bn});
  Fn with_sb_n = [wn](const std::vector<array>& in) {
    return std::vector<array>{
        quantized_matmul(in[0], wn, in[1], in[2], false, 64, 2)};
  };
  Ref with_sb_n_ref = [wn](const Arrays& x) {
    auto dense = astype(dequantize(wn, x[1], x[2], 64, 2), float64);
    return Arrays{qmm_ref(x[0], dense, false)};
  };
  return {
      qmm_entry("quantized_matmul_scales_biases", with_sb,
                {normal({2, 3, 64}), scales, biases}, with_sb_ref),
      qmm_entry("quantized_matmul_scales_biases_vector", with_sb,
                {normal({64}), scales, biases}, with_sb_ref),
      qmm_entry("quantized_matmul_scales_biases_n", with_sb_n,
                {normal({3, 4}), sn, bn}, with_sb_n_ref),
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
