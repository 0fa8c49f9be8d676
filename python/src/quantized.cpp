// mx.quantize, mx.dequantize, mx.quantized_matmul, mx.gather_qmm, mx.qqmm,
// mx.gather_qqmm, mx.to_fp8 / mx.from_fp8 (MLX's affine and floating
// quantization modes).
#include "fluxion/ops/quantized.h"

#include "python/src/docs.h"
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
      R"doc(Quantize a matrix along its last axis, in groups.

Values are packed into ``uint32`` words, lowest bits first.

Args:
    w (array): The matrix (or stack), last axis a multiple of
        ``group_size``.
    group_size (int, optional): Elements per group (64 for affine by
        default; the mode's own size for the floating modes).
    bits (int, optional): Bits per element (4 for affine by default).
    mode (str, optional): ``"affine"``, ``"mxfp4"``, ``"nvfp4"`` or
        ``"mxfp8"``. Default ``"affine"``.
    global_scale (array, optional): A scale applied first (``nvfp4``).
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array, ...): ``(w_q, scales, biases)`` for ``"affine"``,
    ``(w_q, scales)`` for the floating modes.

Example:
    >>> w_q, scales, biases = mx.quantize(mx.ones((32, 64)), 64, 4)
)doc");
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
      R"doc(Reconstruct a matrix from :func:`quantize`'s output.

Args:
    w (array): The packed values.
    scales (array): The group scales.
    biases (array, optional): The group biases (affine mode).
    group_size (int, optional): Elements per group (64 for affine by
        default; the mode's own size for the floating modes).
    bits (int, optional): Bits per element (4 for affine by default).
    mode (str, optional): ``"affine"``, ``"mxfp4"``, ``"nvfp4"`` or
        ``"mxfp8"``. Default ``"affine"``.
    global_scale (array, optional): The global scale (``nvfp4``).
    dtype (Dtype, optional): Type of the result: the scales' for affine,
        ``bfloat16`` for the floating modes when omitted (as MLX).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The dequantized matrix.
)doc");
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
      R"doc(Multiply by a quantized matrix without dequantizing all of it.

Args:
    x (array): The input.
    w (array): The packed matrix (may be batched).
    scales (array): The group scales.
    biases (array, optional): The group biases (affine mode).
    transpose (bool, optional): ``x @ dequantize(w).T`` (``True``) or
        ``x @ dequantize(w)``. Default ``True``.
    group_size (int, optional): Elements per group (64 for affine by
        default; the mode's own size for the floating modes).
    bits (int, optional): Bits per element (4 for affine by default).
    mode (str, optional): ``"affine"``, ``"mxfp4"``, ``"nvfp4"`` or
        ``"mxfp8"``. Default ``"affine"``.
    global_scale (array, optional): The global scale (``nvfp4``).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The product.
)doc");
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
      R"doc(:func:`quantized_matmul` of selected batches (as :func:`gather_mm`).

Args:
    x (array): The inputs.
    w (array): The packed matrices.
    scales (array): The group scales.
    biases (array, optional): The group biases (affine mode).
    lhs_indices (array, optional): Flat indices into ``x``'s batches.
    rhs_indices (array, optional): Flat indices into ``w``'s batches.
    transpose (bool, optional): Multiply by ``w.T``. Default ``True``.
    group_size (int, optional): Elements per group (64 for affine by
        default; the mode's own size for the floating modes).
    bits (int, optional): Bits per element (4 for affine by default).
    mode (str, optional): ``"affine"``, ``"mxfp4"``, ``"nvfp4"`` or
        ``"mxfp8"``. Default ``"affine"``.
    sorted_indices (bool, optional): ``rhs_indices`` are sorted (a hint).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The products.
)doc");
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
      R"doc(``x @ w.T`` with both operands quantized.

``x`` is quantized by this call; ``w`` is given quantized with its
``scales``, or quantized here when ``scales`` is ``None``.

Args:
    x (array): The input.
    w (array): The matrix, packed (with ``scales``) or not.
    scales (array, optional): ``w``'s group scales.
    group_size (int, optional): Elements per group (64 for affine by
        default; the mode's own size for the floating modes).
    bits (int, optional): Bits per element (4 for affine by default).
    mode (str, optional): ``"affine"``, ``"mxfp4"``, ``"nvfp4"`` or
        ``"mxfp8"``. Default ``"nvfp4"``.
    global_scale_x (array, optional): ``x``'s global scale.
    global_scale_w (array, optional): ``w``'s global scale.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The product.
)doc");
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
      R"doc(:func:`qqmm` of selected batches (as :func:`gather_mm`).

Args:
    x (array): The inputs.
    w (array): The matrices, packed (with ``scales``) or not.
    scales (array, optional): ``w``'s group scales.
    lhs_indices (array, optional): Flat indices into ``x``'s batches.
    rhs_indices (array, optional): Flat indices into ``w``'s batches.
    group_size (int, optional): Elements per group (64 for affine by
        default; the mode's own size for the floating modes).
    bits (int, optional): Bits per element (4 for affine by default).
    mode (str, optional): ``"affine"``, ``"mxfp4"``, ``"nvfp4"`` or
        ``"mxfp8"``. Default ``"nvfp4"``.
    global_scale_x (array, optional): ``x``'s global scale.
    global_scale_w (array, optional): ``w``'s global scale.
    sorted_indices (bool, optional): ``rhs_indices`` are sorted (a hint).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The products.
)doc");
  m.def(
      "to_fp8",
      [](py::handle x, fx::StreamOrDevice st) {
        return fx::to_fp8(fxpy::to_array(x), st);
      },
      "x"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Encode values as FP8 E4M3 codes.

Args:
    x (array): The values.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``uint8`` codes, rounded to nearest and saturated at 448.
)doc");
  m.def(
      "from_fp8",
      [](const fx::array& x, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::from_fp8(x, dtype, st);
      },
      "x"_a, py::pos_only(), "dtype"_a = fx::bfloat16, py::kw_only(), s,
      R"doc(Decode FP8 E4M3 codes.

Args:
    x (array): ``uint8`` codes.
    dtype (Dtype, optional): Type of the result. Default ``bfloat16``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The values.
)doc");
}
