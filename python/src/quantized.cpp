// mx.quantize, mx.dequantize, mx.quantized_matmul (MLX's affine scheme).
#include "fluxion/ops/quantized.h"

#include "python/src/convert.h"

void init_quantized(py::module_& m) {
  m.def(
      "quantize",
      [](const fx::array& w, int group_size, int bits, fx::StreamOrDevice s) {
        auto [wq, scales, biases] = fx::quantize(w, group_size, bits, s);
        return py::make_tuple(wq, scales, biases);
      },
      "w"_a, py::pos_only(), "group_size"_a = 64, "bits"_a = 4, py::kw_only(),
      "stream"_a = py::none(),
      "Quantize the matrix w along its last axis in groups of group_size "
      "with bits bits per value; returns (w_q, scales, biases) with the "
      "values packed into uint32, lowest bits first.");
  m.def(
      "dequantize",
      [](const fx::array& w, const fx::array& scales, const fx::array& biases,
         int group_size, int bits, fx::StreamOrDevice s) {
        return fx::dequantize(w, scales, biases, group_size, bits, s);
      },
      "w"_a, py::pos_only(), "scales"_a, "biases"_a, "group_size"_a = 64,
      "bits"_a = 4, py::kw_only(), "stream"_a = py::none(),
      "Dequantize w (from quantize): scales * q + biases per group.");
  m.def(
      "quantized_matmul",
      [](py::handle x, const fx::array& w, const fx::array& scales,
         const fx::array& biases, bool transpose, int group_size, int bits,
         fx::StreamOrDevice s) {
        return fx::quantized_matmul(fxpy::to_array(x), w, scales, biases,
                                    transpose, group_size, bits, s);
      },
      "x"_a, "w"_a, py::pos_only(), "scales"_a, "biases"_a,
      "transpose"_a = true, "group_size"_a = 64, "bits"_a = 4, py::kw_only(),
      "stream"_a = py::none(),
      "x @ dequantize(w).T (transpose=True) or x @ dequantize(w), without "
      "dequantizing the whole matrix.");
}
