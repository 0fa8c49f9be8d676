// Bindings of fluxion/ops/compat.h: the NumPy / array-API ops MLX programs
// use that Fluxion lacked (issue 11). The array-API spellings of other
// families' ops are bound with those families (ops_elementwise.cpp,
// ops_shape.cpp, ops_sort.cpp, ops_creation.cpp); print options with the
// graph printing (graph_utils.cpp), the constants with the dtypes
// (dtypes.cpp).
#include "fluxion/ops/compat.h"
#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace {

using fxpy::binary;
using fxpy::unary;

std::optional<std::vector<int>> opt_axes(const fxpy::Axes& axis) {
  if (!axis) {
    return std::nullopt;
  }
  return fxpy::axes_vector(*axis);
}

}  // namespace

void init_ops_compat(py::module_& m) {
  const auto s = "stream"_a = py::none();

  m.def("trunc", &unary<fx::trunc>, "a"_a, py::pos_only(), py::kw_only(), s,
        "Element-wise truncation toward zero." FXDOC_ARGS FXDOC_A FXDOC_STREAM
            FXDOC_RET_ARRAY "The result, element by element.\n");
  m.def("logical_xor", &binary<fx::logical_xor>, "a"_a, "b"_a, py::pos_only(),
        py::kw_only(), s,
        "Element-wise exclusive or of the truth values (a ``bool`` "
        "array)." FXDOC_ARGS FXDOC_AB FXDOC_STREAM FXDOC_RET_ARRAY
        "The result, element by element.\n");
  m.def(
      "empty",
      [](fxpy::ShapeArg shape, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::empty(fxpy::to_shape(shape), dtype, st);
      },
      "shape"_a, "dtype"_a = fx::float32, py::kw_only(), s,
      R"doc(An array whose values are unspecified (Fluxion gives zeros).

Args:
    shape (int or list(int)): Shape of the result.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The array.
)doc");
  m.def(
      "empty_like",
      [](const fx::array& a, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        return dtype ? fx::empty(a.shape(), *dtype, st) : fx::empty_like(a, st);
      },
      "a"_a, py::pos_only(), "dtype"_a = py::none(), py::kw_only(), s,
      R"doc(An array of ``a``'s shape whose values are unspecified (zeros).

Args:
    a (array): Input array.
    dtype (Dtype, optional): Type of the result; ``a``'s when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The array.
)doc");
#define FLUXION_WINDOW(NAME, DOC)                                           \
  m.def(                                                                    \
      #NAME, [](int m_, fx::StreamOrDevice st) { return fx::NAME(m_, st); }, \
      "M"_a, py::kw_only(), s,                                              \
      DOC FXDOC_ARGS "    M (int): The number of points.\n" FXDOC_STREAM   \
          FXDOC_RET_ARRAY "The ``float32`` window, shape ``(M,)``.\n");
  FLUXION_WINDOW(bartlett, "NumPy's Bartlett (triangular) window, float32.")
  FLUXION_WINDOW(blackman, "NumPy's Blackman window, float32.")
  FLUXION_WINDOW(hamming, "NumPy's Hamming window, float32.")
  FLUXION_WINDOW(hanning, "NumPy's Hann window, float32.")
#undef FLUXION_WINDOW

  // Reductions and shape ops.
  m.def(
      "median",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fx::median(a, opt_axes(axis), keepdims, st);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), s,
      R"doc(The median over the given axes; NaNs propagate.

Args:
    a (array): Input array.
    axis (int or list(int), optional): The axes; all when omitted.
    keepdims (bool, optional): Keep reduced axes as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The medians (the mean of the two middle values for an even
    count).
)doc");
  m.def(
      "diff",
      [](const fx::array& a, int n, int axis, std::optional<fx::array> prepend,
         std::optional<fx::array> append, fx::StreamOrDevice st) {
        return fx::diff(a, n, axis, prepend, append, st);
      },
      "a"_a, py::pos_only(), "n"_a = 1, "axis"_a = -1,
      "prepend"_a = py::none(), "append"_a = py::none(), py::kw_only(), s,
      R"doc(The ``n``-th discrete difference along an axis (NumPy's ``diff``).

Args:
    a (array): Input array.
    n (int, optional): How many times to difference. Default 1.
    axis (int, optional): The axis. Default -1.
    prepend (array, optional): Values put before ``a`` along ``axis``.
    append (array, optional): Values put after ``a`` along ``axis``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a[1:] - a[:-1]`` along ``axis``, applied ``n`` times.
)doc");
  m.def(
      "flip",
      [](const fx::array& a, const fxpy::Axes& axis, fx::StreamOrDevice st) {
        return fx::flip(a, opt_axes(axis), st);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), py::kw_only(), s,
      R"doc(Reverse the order of elements along the given axes.

Args:
    a (array): Input array.
    axis (int or list(int), optional): The axes; all when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The flipped array.
)doc");
  m.def(
      "unstack",
      [](const fx::array& a, int axis, fx::StreamOrDevice st) {
        auto parts = fx::unstack(a, axis, st);
        py::tuple out(parts.size());
        for (size_t i = 0; i < parts.size(); ++i) {
          out[i] = py::cast(parts[i]);
        }
        return out;
      },
      "a"_a, py::pos_only(), "axis"_a = 0, py::kw_only(), s,
      R"doc(Split an array into its slices along an axis.

Args:
    a (array): Input array.
    axis (int, optional): The axis. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array): The slices, without that axis.
)doc");
  m.def(
      "count_nonzero",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fx::count_nonzero(a, opt_axes(axis), keepdims, st);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), s,
      R"doc(Count the non-zero elements over the given axes.

Args:
    a (array): Input array.
    axis (int or list(int), optional): The axes; all when omitted.
    keepdims (bool, optional): Keep reduced axes as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``int32`` counts.
)doc");
  m.def(
      "vecdot",
      [](py::handle a, py::handle b, int axis, fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::vecdot(x, y, axis, st);
      },
      "a"_a, "b"_a, py::pos_only(), "axis"_a = -1, py::kw_only(), s,
      R"doc(Vector dot product ``sum(conj(a) * b)`` along an axis (the array API's).

Args:
    a (array or scalar): First operand.
    b (array or scalar): Second operand (broadcast with ``a``).
    axis (int, optional): The axis. Default -1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The dot products.
)doc");
  m.def(
      "matrix_norm",
      [](const fx::array& a, const std::variant<double, std::string>& ord,
         bool keepdims, fx::StreamOrDevice st) {
        return fx::matrix_norm(a, ord, keepdims, st);
      },
      "a"_a, py::pos_only(), py::kw_only(), "ord"_a = "fro",
      "keepdims"_a = false, s,
      R"doc(The matrix norm over the last two axes.

Args:
    a (array): Input array.
    ord (float or str, optional): ``"fro"``, ``"nuc"``, 1, -1, 2, -2,
        ``inf`` or ``-inf``. Default ``"fro"``.
    keepdims (bool, optional): Keep reduced axes as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The norms.
)doc");
}
