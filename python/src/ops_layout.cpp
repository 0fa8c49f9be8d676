// Bindings of fluxion/ops/layout.h: as_strided, view (also the array
// method) and contiguous.
#include "fluxion/ops/layout.h"
#include "python/src/docs.h"
#include "python/src/ops_common.h"

void init_ops_layout(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "as_strided",
      [](const fx::array& a, std::optional<fx::Shape> shape,
         std::optional<fx::Strides> strides, size_t offset,
         fx::StreamOrDevice st) {
        return fx::as_strided(a, shape, strides, offset, st);
      },
      "a"_a, py::pos_only(), "shape"_a = py::none(), "strides"_a = py::none(),
      "offset"_a = 0, py::kw_only(), s,
      R"doc(A view of an array's elements with a given shape, strides and offset.

Args:
    a (array): Input; its row-major elements are viewed.
    shape (list(int), optional): Shape of the view; ``a``'s when omitted.
    strides (list(int), optional): Strides in elements; row-major for
        ``shape`` when omitted.
    offset (int, optional): Index of the first element. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The view. Every element it reaches must lie inside ``a``.
)doc");
  m.def(
      "view",
      [](py::handle a, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::view(fxpy::to_array(a), dtype, st);
      },
      "a"_a, "dtype"_a, py::kw_only(), s,
      R"doc(Reinterpret the bytes of an array as another dtype.

Args:
    a (array): Input array.
    dtype (Dtype): The type to read the bytes as.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The view; its last axis is rescaled by the ratio of the item
    sizes.

Example:
    >>> mx.view(mx.array([1.0]), mx.uint32).tolist()
    [1065353216]
)doc");
  auto cls = py::reinterpret_borrow<py::class_<fx::array>>(m.attr("array"));
  cls.def(
      "view",
      [](const fx::array& a, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::view(a, dtype, st);
      },
      "dtype"_a, py::kw_only(), s,
      R"doc(Reinterpret the array's bytes as another dtype.

Args:
    dtype (Dtype): The type to read the bytes as.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The view (see :func:`fluxion.core.view`).
)doc");
  m.def(
      "contiguous",
      [](const fx::array& a, bool allow_col_major, fx::StreamOrDevice st) {
        return fx::contiguous(a, allow_col_major, st);
      },
      "a"_a, py::pos_only(), "allow_col_major"_a = false, py::kw_only(), s,
      R"doc(A copy of ``a`` with contiguous memory, where it is not already.

Args:
    a (array): Input array.
    allow_col_major (bool, optional): Column-major memory also counts as
        contiguous. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a`` with row-contiguous (or column-contiguous) memory.
)doc");
}
