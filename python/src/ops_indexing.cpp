// Bindings of fluxion/ops/indexing.h: take, take_along_axis,
// put_along_axis, scatter_add_axis (NumPy-style a[...] indexing is
// indexing.cpp).
#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace {
using fxpy::is_integer_scalar;
}  // namespace

void init_ops_indexing(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "take",
      [](const fx::array& a, py::handle indices, std::optional<int> axis,
         const std::string& mode, fx::StreamOrDevice st) {
        if (mode == "raise" && is_integer_scalar(indices) && axis) {
          return fx::take(a, indices.cast<int>(), *axis, st);
        }
        fx::array idx = fxpy::to_array(indices);
        return axis ? fx::take(a, idx, *axis, mode, st)
                    : fx::take(a, idx, mode, st);
      },
      "a"_a, py::pos_only(), "indices"_a, "axis"_a = py::none(), py::kw_only(),
      "mode"_a = "raise", s,
      R"doc(Take elements along an axis.

Negative indices count from the end. ``mode`` is a Fluxion extension
(NumPy's).

Args:
    a (array): Input array.
    indices (array or int): The indices to take.
    axis (int, optional): The axis to take along; the flattened array
        when omitted.
    mode (str, optional): ``"raise"`` raises for an index out of range,
        ``"wrap"`` reduces indices modulo the axis length, ``"clip"``
        clamps them to ``[0, n - 1]`` (negative indices then select the
        first element, as in NumPy). Default ``"raise"``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The selected elements; ``axis`` is replaced by the shape of
    ``indices``.

Example:
    >>> mx.take(mx.array([10, 20, 30]), mx.array([2, 0])).tolist()
    [30, 10]
)doc");
  m.def(
      "take_along_axis",
      [](const fx::array& a, const fx::array& indices, std::optional<int> axis,
         fx::StreamOrDevice st) {
        return axis
                   ? fx::take_along_axis(a, indices, *axis, st)
                   : fx::take_along_axis(fx::reshape(a, {-1}, st),
                                         fx::reshape(indices, {-1}, st), 0, st);
      },
      "a"_a, py::pos_only(), "indices"_a, "axis"_a, py::kw_only(), s,
      R"doc(Take values at matching indices along an axis.

Args:
    a (array): Input array.
    indices (array): Integer indices, broadcastable with ``a`` except
        along ``axis``.
    axis (int or None): The axis; both are flattened when ``None``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` indexed along ``axis`` by ``indices``.
)doc");
  m.def(
      "put_along_axis",
      [](const fx::array& a, const fx::array& indices, py::handle values,
         std::optional<int> axis, fx::StreamOrDevice st) {
        fx::array v = fxpy::to_array_like(values, a);
        if (axis) {
          return fx::put_along_axis(a, indices, v, *axis, st);
        }
        return fx::reshape(fx::put_along_axis(fx::reshape(a, {-1}, st),
                                              fx::reshape(indices, {-1}, st),
                                              fx::reshape(v, {-1}, st), 0, st),
                           a.shape(), st);
      },
      "a"_a, py::pos_only(), "indices"_a, "values"_a, "axis"_a, py::kw_only(),
      s,
      R"doc(Write values at matching indices along an axis.

Args:
    a (array): Input array.
    indices (array): Integer indices, broadcastable with ``a`` except
        along ``axis``.
    values (array or scalar): The values to write.
    axis (int or None): The axis; both are flattened when ``None``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: A copy of ``a`` with the values written.
)doc");
  m.def(
      "scatter_add_axis",
      [](const fx::array& a, const fx::array& indices, py::handle values,
         int axis, fx::StreamOrDevice st) {
        return fx::scatter_add_axis(a, indices, fxpy::to_array_like(values, a),
                                    axis, st);
      },
      "a"_a, py::pos_only(), "indices"_a, "values"_a, "axis"_a, py::kw_only(),
      s,
      R"doc(Add values at matching indices along an axis.

Like :func:`put_along_axis`, but repeated indices accumulate.

Args:
    a (array): Input array.
    indices (array): Integer indices.
    values (array or scalar): The values to add.
    axis (int): The axis.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: A copy of ``a`` with the values added.
)doc");

}
