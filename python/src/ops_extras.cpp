// searchsorted, hadamard_transform, as_strided, view, contiguous,
// broadcast_shapes and the gathered / segmented / block-masked products.
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/searchsorted.h"
#include "python/src/docs.h"
#include "python/src/ops_common.h"

void init_distributed(py::module_& m);  // distributed.cpp
void init_ops_compat(py::module_& m);   // ops_compat.cpp

void init_ops_extras(py::module_& m) {
  init_distributed(m);
  init_ops_compat(m);
  const auto s = "stream"_a = py::none();
  m.def(
      "searchsorted",
      [](const fx::array& a, const fx::array& v, const std::string& side,
         std::optional<fx::array> sorter, fx::StreamOrDevice st) {
        return fx::searchsorted(a, v, side, sorter, st);
      },
      "a"_a, "v"_a, py::pos_only(), "side"_a = "left", "sorter"_a = py::none(),
      py::kw_only(), s,
      R"doc(Positions at which to insert values into a sorted 1-D array.

As MLX's and NumPy's ``searchsorted``; NaNs sort last. :func:`vmap` maps
over ``v``; mapping over ``a`` raises ``ValueError``.

Args:
    a (array): The 1-D array, sorted ascending (or see ``sorter``).
    v (array): The values, of any shape.
    side (str, optional): ``"left"`` puts a value before equal elements,
        ``"right"`` after them. Default ``"left"``.
    sorter (array, optional): Indices that sort ``a`` (its argsort).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``uint32`` positions, the shape of ``v``.

Example:
    >>> mx.searchsorted(mx.array([1, 3, 5]), mx.array([3, 4])).tolist()
    [1, 2]
)doc");
  m.def(
      "hadamard_transform",
      [](const fx::array& a, std::optional<float> scale,
         fx::StreamOrDevice st) {
        return fx::hadamard_transform(a, scale, st);
      },
      "a"_a, "scale"_a = py::none(), py::kw_only(), s,
      R"doc(The Walsh-Hadamard transform along the last axis.

Args:
    a (array): Input; the last axis' size is a power of two.
    scale (float, optional): Multiplies the result; ``1 / sqrt(n)``
        when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The transform.
)doc");
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
  m.def(
      "broadcast_shapes",
      [](py::args shapes) {
        if (shapes.size() == 0) {
          throw std::invalid_argument(
              "[broadcast_shapes] Expected at least one shape.");
        }
        fx::Shape out;
        for (auto h : shapes) {
          out = fx::broadcast_shapes(out, h.cast<fx::Shape>(),
                                     "broadcast_shapes");
        }
        return py::tuple(py::cast(out));
      },
      R"doc(The shape that the given shapes broadcast to.

Args:
    *shapes (tuple(int)): At least one shape.

Returns:
    tuple(int): The broadcast shape; ``ValueError`` if they do not
    broadcast.

Example:
    >>> mx.broadcast_shapes((2, 1), (3,))
    (2, 3)
)doc");
  m.def(
      "gather_mm",
      [](const fx::array& a, const fx::array& b, std::optional<fx::array> lhs,
         std::optional<fx::array> rhs, bool sorted_indices,
         fx::StreamOrDevice st) {
        return fx::gather_mm(a, b, lhs, rhs, sorted_indices, st);
      },
      "a"_a, "b"_a, py::pos_only(), "lhs_indices"_a = py::none(),
      "rhs_indices"_a = py::none(), py::kw_only(), "sorted_indices"_a = false,
      s,
      R"doc(Matrix products of selected batches of two stacks of matrices.

Args:
    a (array): Left matrices, ``(..., M, K)``.
    b (array): Right matrices, ``(..., K, N)``.
    lhs_indices (array, optional): Flat indices into ``a``'s batch
        dimensions; every batch in order when omitted.
    rhs_indices (array, optional): Flat indices into ``b``'s batch
        dimensions, likewise.
    sorted_indices (bool, optional): ``rhs_indices`` are sorted (a hint).
        Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a[lhs] @ b[rhs]``, batched by the indices' broadcast shape.
)doc");
  m.def(
      "segmented_mm",
      [](const fx::array& a, const fx::array& b, const fx::array& segments,
         fx::StreamOrDevice st) {
        return fx::segmented_mm(a, b, segments, st);
      },
      "a"_a, "b"_a, py::pos_only(), "segments"_a, py::kw_only(), s,
      R"doc(Matrix products over segments of the contracted axis.

For each ``[start, end)`` pair of ``segments``, computes
``a[..., start:end] @ b[start:end, :]``.

Args:
    a (array): Left matrix, ``(M, K)``.
    b (array): Right matrix, ``(K, N)``.
    segments (array): Pairs ``[start, end)``, shape ``(..., 2)``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``(..., M, N)``, one product per segment.
)doc");
  m.def(
      "block_masked_mm",
      [](const fx::array& a, const fx::array& b, int block_size,
         std::optional<fx::array> mask_out, std::optional<fx::array> mask_lhs,
         std::optional<fx::array> mask_rhs, fx::StreamOrDevice st) {
        return fx::block_masked_mm(a, b, block_size, mask_out, mask_lhs,
                                   mask_rhs, st);
      },
      "a"_a, "b"_a, py::pos_only(), "block_size"_a = 64,
      "mask_out"_a = py::none(), "mask_lhs"_a = py::none(),
      "mask_rhs"_a = py::none(), py::kw_only(), s,
      R"doc(Matrix product with block masks.

Boolean masks zero blocks, floating masks scale them.

Args:
    a (array): Left matrices, ``(..., M, K)``.
    b (array): Right matrices, ``(..., K, N)``.
    block_size (int, optional): The block size, 32 or 64. Default 64.
    mask_out (array, optional): Mask of the output's blocks.
    mask_lhs (array, optional): Mask of ``a``'s blocks.
    mask_rhs (array, optional): Mask of ``b``'s blocks.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The masked product.
)doc");
}
