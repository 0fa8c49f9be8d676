// mx.quantize, mx.dequantize, mx.quantized_matmul, mx.gather_qmm, mx.qqmm,
// mx.gather_qqmm, mx.to_fp8 / mx.from_fp8 (MLX's affine and floating
// quantization modes).
#include "fluxion/ops/quantized.h"

#include "python/src/convert.h"

namespace {

py::tuple as_tuple(const std::vector<fx::array>& v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    t[i] = py::cast(v[i]);
  }
  return t;
}

std::optional<fx::array> opt_array(py::handle h) {
  if (h.is_none()) {
    return std::nullopt;
  }
  return fxpy::to_array(h);
}

}  // namespace

void init_quantized(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "quantize",
      [](const fx::array& w, std::optional<int> group_size,
         std::optional<int> bits, const std::string& mode,
         py::handle global_scale, fx::StreamOrDevice st) {
        return as_tuple(fx::quantize(w, group_size, bits, mode,
                                     opt_array(global_scale), st));
      },
      "w"_a, py::pos_only(), "group_size"_a = py::none(), "bits"_a = py::none(),
      "mode"_a = "affine", py::kw_only(), "global_scale"_a = py::none(), s,
      "Quantize w along its last axis in groups: (w_q, scales, biases) for "
      "mode='affine' (default group_size 64, bits 4), (w_q, scales) for "
      "'mxfp4', 'nvfp4' and 'mxfp8'. Values are packed into uint32, lowest "
      "bits first.");
  m.def(
      "dequantize",
      [](const fx::array& w, const fx::array& scales, py::handle biases,
         std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, py::handle global_scale,
         std::optional<fx::Dtype> dtype, fx::StreamOrDevice st) {
        return fx::dequantize(w, scales, opt_array(biases), group_size, bits,
                              mode, opt_array(global_scale), dtype, st);
      },
      "w"_a, py::pos_only(), "scales"_a, "biases"_a = py::none(),
      "group_size"_a = py::none(), "bits"_a = py::none(), "mode"_a = "affine",
      "global_scale"_a = py::none(), "dtype"_a = py::none(), py::kw_only(), s,
      "Dequantize w (from quantize) in ``dtype`` (default: the scales' for "
      "affine, float32 for the floating modes).");
  m.def(
      "quantized_matmul",
      [](py::handle x, const fx::array& w, const fx::array& scales,
         py::handle biases, bool transpose, std::optional<int> group_size,
         std::optional<int> bits, const std::string& mode,
         py::handle global_scale, fx::StreamOrDevice st) {
        return fx::quantized_matmul(fxpy::to_array(x), w, scales,
                                    opt_array(biases), transpose, group_size,
                                    bits, mode, opt_array(global_scale), st);
      },
      "x"_a, "w"_a, py::pos_only(), "scales"_a, "biases"_a = py::none(),
      "transpose"_a = true, "group_size"_a = py::none(), "bits"_a = py::none(),
      "mode"_a = "affine", py::kw_only(), "global_scale"_a = py::none(), s,
      "x @ dequantize(w).T (transpose=True) or x @ dequantize(w), without "
      "dequantizing the whole matrix; w may be batched.");
  m.def(
      "gather_qmm",
      [](py::handle x, const fx::array& w, const fx::array& scales,
         py::handle biases, py::handle lhs_indices, py::handle rhs_indices,
         bool transpose, std::optional<int> group_size,
         std::optional<int> bits, const std::string& mode, bool sorted_indices,
         fx::StreamOrDevice st) {
        return fx::gather_qmm(fxpy::to_array(x), w, scales, opt_array(biases),
                              opt_array(lhs_indices), opt_array(rhs_indices),
                              transpose, group_size, bits, mode, sorted_indices,
                              st);
      },
      "x"_a, "w"_a, py::pos_only(), "scales"_a, "biases"_a = py::none(),
      "lhs_indices"_a = py::none(), "rhs_indices"_a = py::none(),
      "transpose"_a = true, "group_size"_a = py::none(), "bits"_a = py::none(),
      "mode"_a = "affine", py::kw_only(), "sorted_indices"_a = false, s,
      "quantized_matmul of x's matrices at lhs_indices with w's at "
      "rhs_indices (as gather_mm).");
  m.def(
      "qqmm",
      [](py::handle x, const fx::array& w, py::handle scales,
         std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, py::handle global_scale_x,
         py::handle global_scale_w, fx::StreamOrDevice st) {
        return fx::qqmm(fxpy::to_array(x), w, opt_array(scales), group_size,
                        bits, mode, opt_array(global_scale_x),
                        opt_array(global_scale_w), st);
      },
      "x"_a, "w"_a, py::pos_only(), "scales"_a = py::none(),
      "group_size"_a = py::none(), "bits"_a = py::none(), "mode"_a = "nvfp4",
      "global_scale_x"_a = py::none(), "global_scale_w"_a = py::none(),
      py::kw_only(), s,
      "x @ w.T with both operands quantized (x by this call; w given "
      "quantized with its scales, or quantized here when scales is None).");
  m.def(
      "gather_qqmm",
      [](py::handle x, const fx::array& w, py::handle scales,
         py::handle lhs_indices, py::handle rhs_indices,
         std::optional<int> group_size, std::optional<int> bits,
         const std::string& mode, py::handle global_scale_x,
         py::handle global_scale_w, bool sorted_indices,
         fx::StreamOrDevice st) {
        return fx::gather_qqmm(fxpy::to_array(x), w, opt_array(scales),
                               opt_array(lhs_indices), opt_array(rhs_indices),
                               group_size, bits, mode,
                               opt_array(global_scale_x),
                               opt_array(global_scale_w), sorted_indices, st);
      },
      "x"_a, "w"_a, py::pos_only(), "scales"_a = py::none(),
      "lhs_indices"_a = py::none(), "rhs_indices"_a = py::none(),
      "group_size"_a = py::none(), "bits"_a = py::none(), "mode"_a = "nvfp4",
      "global_scale_x"_a = py::none(), "global_scale_w"_a = py::none(),
      py::kw_only(), "sorted_indices"_a = false, s,
      "qqmm of x's matrices at lhs_indices with w's at rhs_indices.");
  m.def(
      "to_fp8",
      [](py::handle x, fx::StreamOrDevice st) {
        return fx::to_fp8(fxpy::to_array(x), st);
      },
      "x"_a, py::pos_only(), py::kw_only(), s,
      "FP8 E4M3 codes (uint8) of x, rounded to nearest and saturated at "
      "448.");
  m.def(
      "from_fp8",
      [](const fx::array& x, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::from_fp8(x, dtype, st);
      },
      "x"_a, py::pos_only(), "dtype"_a = fx::bfloat16, py::kw_only(), s,
      "The values of FP8 E4M3 codes (uint8) in ``dtype``.");
}
