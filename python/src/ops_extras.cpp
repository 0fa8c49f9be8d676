// searchsorted, hadamard_transform, as_strided, view, contiguous,
// broadcast_shapes and the gathered / segmented / block-masked products.
#include "fluxion/ops/extras.h"
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
      R"doc(Insertion positions of the values ``v`` (any shape) in the 1-D
``a``, sorted ascending (MLX's and NumPy's searchsorted). ``side="left"``
puts a value before equal elements, ``"right"`` after them; NaNs sort last.
``sorter`` is an argsort of ``a``. Returns uint32 positions of v's shape
(MLX). vmap maps over ``v``; mapping over ``a`` raises ValueError.)doc");
  m.def(
      "hadamard_transform",
      [](const fx::array& a, std::optional<float> scale,
         fx::StreamOrDevice st) {
        return fx::hadamard_transform(a, scale, st);
      },
      "a"_a, "scale"_a = py::none(), py::kw_only(), s,
      R"doc(The Walsh-Hadamard transform along the last axis (a power of two),
times ``scale`` (default ``1/sqrt(n)``).)doc");
  m.def(
      "as_strided",
      [](const fx::array& a, std::optional<fx::Shape> shape,
         std::optional<fx::Strides> strides, size_t offset,
         fx::StreamOrDevice st) {
        return fx::as_strided(a, shape, strides, offset, st);
      },
      "a"_a, py::pos_only(), "shape"_a = py::none(), "strides"_a = py::none(),
      "offset"_a = 0, py::kw_only(), s,
      R"doc(A view of a's row-major elements with the given shape, strides
(in elements) and offset. Every element reached must lie inside ``a``.)doc");
  m.def(
      "view",
      [](py::handle a, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::view(fxpy::to_array(a), dtype, st);
      },
      "a"_a, "dtype"_a, py::kw_only(), s,
      R"doc(The bytes of ``a`` read as ``dtype``; the last axis is rescaled
by the ratio of the item sizes.)doc");
  auto cls = py::reinterpret_borrow<py::class_<fx::array>>(m.attr("array"));
  cls.def(
      "view",
      [](const fx::array& a, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::view(a, dtype, st);
      },
      "dtype"_a, py::kw_only(), s, "The array's bytes read as ``dtype``.");
  m.def(
      "contiguous",
      [](const fx::array& a, bool allow_col_major, fx::StreamOrDevice st) {
        return fx::contiguous(a, allow_col_major, st);
      },
      "a"_a, py::pos_only(), "allow_col_major"_a = false, py::kw_only(), s,
      "``a`` with row-contiguous memory (or column-contiguous when allowed).");
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
      "The shape that the given shapes broadcast to.");
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
      R"doc(Matrix products of a's matrices at ``lhs_indices`` (flat indices
over a's batch dimensions) with b's at ``rhs_indices``; missing indices
select every batch in order.)doc");
  m.def(
      "segmented_mm",
      [](const fx::array& a, const fx::array& b, const fx::array& segments,
         fx::StreamOrDevice st) {
        return fx::segmented_mm(a, b, segments, st);
      },
      "a"_a, "b"_a, py::pos_only(), "segments"_a, py::kw_only(), s,
      R"doc(For each ``[start, end)`` pair of ``segments`` (shape (..., 2)),
``a[:, start:end] @ b[start:end, :]``.)doc");
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
      R"doc(Matrix product with block masks (block_size 32 or 64): boolean
masks zero blocks, float masks scale them.)doc");
}
