// Bindings of fluxion/ops/linalg.h (matmul, addmm, inner, outer,
// tensordot) and fluxion/ops/matmul_variants.h (gather_mm, segmented_mm,
// block_masked_mm). The mx.linalg submodule is linalg.cpp.
#include "fluxion/ops/matmul_variants.h"
#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace {

constexpr const char* kAxes = "an int or a pair of axis lists";

fx::array tensordot(const fx::array& a, const fx::array& b, py::handle axes,
                    fx::StreamOrDevice s) {
  if (PyLong_Check(axes.ptr())) {
    return fx::tensordot(
        a, b, fxpy::cast_arg<int>(axes, "tensordot", "axes", kAxes), s);
  }
  auto pair = fxpy::cast_arg<py::sequence>(axes, "tensordot", "axes", kAxes);
  if (py::len(pair) != 2) {
    throw std::invalid_argument(
        "[tensordot] axes must be an int or a pair of axis lists; got " +
        py::repr(axes).cast<std::string>() + ".");
  }
  auto as_list = [](py::handle h) {
    return PyLong_Check(h.ptr()) ? std::vector<int>{fxpy::cast_arg<int>(
                                       h, "tensordot", "axes", kAxes)}
                                 : fxpy::cast_arg<std::vector<int>>(
                                       h, "tensordot", "axes", kAxes);
  };
  return fx::tensordot(a, b, as_list(pair[0]), as_list(pair[1]), s);
}

}  // namespace

void init_ops_linalg(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "matmul",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::matmul(a, b, st);
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Matrix product, with broadcasting over the leading (batch) axes.

1-D operands are treated as a row (first operand) or a column (second)
vector, and that axis is removed from the result.

Args:
    a (array): Left operand.
    b (array): Right operand.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a @ b``.

Example:
    >>> mx.matmul(mx.ones((2, 3)), mx.ones((3, 4))).shape
    (2, 4)
)doc");
  m.def(
      "addmm",
      [](const fx::array& c, const fx::array& a, const fx::array& b,
         float alpha, float beta,
         fx::StreamOrDevice st) { return fx::addmm(c, a, b, alpha, beta, st); },
      "c"_a, "a"_a, "b"_a, py::pos_only(), "alpha"_a = 1.0f, "beta"_a = 1.0f,
      py::kw_only(), s,
      R"doc(``alpha * (a @ b) + beta * c`` in one op.

Args:
    c (array): The added term, broadcast to the product's shape.
    a (array): Left matrix operand.
    b (array): Right matrix operand.
    alpha (float, optional): Scale of the product. Default 1.
    beta (float, optional): Scale of ``c``. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The result.
)doc");
  m.def(
      "inner",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::inner(a, b, st);
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Inner product over the last axes of two arrays.

Args:
    a (array): First operand.
    b (array): Second operand (same last-axis size).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The sums of products over the last axis.
)doc");
  m.def(
      "outer",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::outer(a, b, st);
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Outer product of two vectors (inputs are flattened).

Args:
    a (array): First vector.
    b (array): Second vector.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The ``(a.size, b.size)`` array ``a[i] * b[j]``.
)doc");
  m.def("tensordot", &tensordot, "a"_a, "b"_a, py::pos_only(), "axes"_a = 2,
        py::kw_only(), s,
      R"doc(Sum of products over chosen axes of two arrays.

Args:
    a (array): First operand.
    b (array): Second operand.
    axes (int or tuple(list(int), list(int)), optional): An int ``n``
        contracts the last ``n`` axes of ``a`` with the first ``n`` of
        ``b``; a pair of axis lists names the axes of each. Default 2.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The contracted product.
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
