// Bindings of fluxion/ops/array_ops.h (diag, diagonal, trace, roll,
// meshgrid, kron) and fluxion/ops/einsum.h (einsum, einsum_path), with
// MLX's signatures.
#include <numeric>

#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace {

using IntOrInts = std::variant<int, std::vector<int>>;

fx::array roll(const fx::array& a, const IntOrInts& shift,
               const std::optional<IntOrInts>& axis, fx::StreamOrDevice s) {
  auto shifts = fxpy::axes_vector(shift);
  if (!axis) {
    // NumPy applies every shift to the flattened array.
    if (shifts.empty()) {
      throw std::invalid_argument("[roll] At least one shift is needed.");
    }
    return fx::roll(a, std::accumulate(shifts.begin(), shifts.end(), 0), s);
  }
  return fx::roll(a, fx::Shape(shifts.begin(), shifts.end()),
                  fxpy::axes_vector(*axis), s);
}

std::vector<fx::array> arrays_of(const py::args& args) {
  std::vector<fx::array> out;
  for (auto a : args) {
    out.push_back(fxpy::to_array(a));
  }
  return out;
}

}  // namespace

void init_ops_array(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "diag",
      [](const fx::array& a, int k, fx::StreamOrDevice st) {
        return fx::diag(a, k, st);
      },
      "a"_a, py::pos_only(), "k"_a = 0, py::kw_only(), s,
      R"doc(Extract a diagonal, or build a diagonal matrix.

Args:
    a (array): A 1-D array (put on diagonal ``k`` of a square matrix) or
        a 2-D array (its diagonal ``k`` is taken).
    k (int, optional): The diagonal: positive above the main one,
        negative below. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The matrix or the diagonal.

Example:
    >>> mx.diag(mx.array([1, 2])).tolist()
    [[1, 0], [0, 2]]
)doc");
  m.def(
      "diagonal",
      [](const fx::array& a, int offset, int axis1, int axis2,
         fx::StreamOrDevice st) {
        return fx::diagonal(a, offset, axis1, axis2, st);
      },
      "a"_a, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, py::kw_only(), s,
      R"doc(The diagonals of the ``(axis1, axis2)`` planes.

Args:
    a (array): Input array.
    offset (int, optional): Offset from the main diagonal. Default 0.
    axis1 (int, optional): First axis of the planes. Default 0.
    axis2 (int, optional): Second axis of the planes. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The diagonals, as the last axis (the two axes removed).
)doc");
  m.def(
      "trace",
      [](const fx::array& a, int offset, int axis1, int axis2,
         std::optional<fx::Dtype> dtype, fx::StreamOrDevice st) {
        return dtype ? fx::trace(a, offset, axis1, axis2, *dtype, st)
                     : fx::trace(a, offset, axis1, axis2, st);
      },
      "a"_a, py::pos_only(), "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1,
      "dtype"_a = py::none(), py::kw_only(), s,
      R"doc(Sum along the diagonals of the ``(axis1, axis2)`` planes.

Args:
    a (array): Input array.
    offset (int, optional): Offset from the main diagonal. Default 0.
    axis1 (int, optional): First axis of the planes. Default 0.
    axis2 (int, optional): Second axis of the planes. Default 1.
    dtype (Dtype, optional): Type of the result.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The traces.
)doc");
  m.def("roll", &roll, "a"_a, py::pos_only(), "shift"_a, "axis"_a = py::none(),
        py::kw_only(), s,
      R"doc(Shift elements along axes, wrapping around.

Args:
    a (array): Input array.
    shift (int or list(int)): The shift per axis.
    axis (int or list(int), optional): The axes; the flattened array when
        omitted (shifted by the sum of ``shift``).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The rolled array.

Example:
    >>> mx.roll(mx.arange(4), 1).tolist()
    [3, 0, 1, 2]
)doc");
  m.def(
      "meshgrid",
      [](const py::args& arrays, bool sparse, const std::string& indexing,
         fx::StreamOrDevice st) {
        std::vector<fx::array> in;
        for (auto a : arrays) {
          in.push_back(fxpy::to_array(a));
        }
        return py::tuple(py::cast(fx::meshgrid(in, sparse, indexing, st)));
      },
      py::kw_only(), "sparse"_a = false, "indexing"_a = "xy", s,
      R"doc(Coordinate grids from 1-D arrays.

Args:
    *arrays (array): The coordinates along each axis.
    sparse (bool, optional): Return broadcastable arrays instead of full
        grids. Default ``False``.
    indexing (str, optional): ``"xy"`` (Cartesian, the first two axes
        swapped) or ``"ij"`` (matrix). Default ``"xy"``.
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array): One grid per input.
)doc");
  m.def(
      "kron",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::kron(a, b, st);
      },
      "a"_a, "b"_a, py::kw_only(), s,
      R"doc(Kronecker product of two arrays.

Args:
    a (array): First operand.
    b (array): Second operand.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The blocks ``a[i, j] * b``, tiled.
)doc");
  m.def(
      "einsum",
      [](const std::string& subscripts, const py::args& operands,
         fx::StreamOrDevice st) {
        return fx::einsum(subscripts, arrays_of(operands), st);
      },
      "subscripts"_a, py::kw_only(), s,
      R"doc(Einstein summation over the operands.

Contracted pairwise, in a greedy order (see :func:`einsum_path`).

Args:
    subscripts (str): The subscripts, as NumPy's (``"ij,jk->ik"``).
    *operands (array): The operands.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The result.

Example:
    >>> mx.einsum("ij,jk->ik", mx.ones((2, 3)), mx.ones((3, 4))).shape
    (2, 4)
)doc");
  m.def(
      "einsum_path",
      [](const std::string& subscripts, const py::args& operands) {
        auto [path, text] = fx::einsum_path(subscripts, arrays_of(operands));
        py::list steps;
        for (const auto& p : path) {
          py::tuple step(p.size());  // (i,), (i, j), or all that is left
          for (size_t k = 0; k < p.size(); ++k) {
            step[k] = py::int_(p[k]);
          }
          steps.append(step);
        }
        return py::make_tuple(steps, text);
      },
      "subscripts"_a,
      R"doc(The pairwise contraction order that :func:`einsum` uses.

Args:
    subscripts (str): The subscripts.
    *operands (array): The operands.

Returns:
    tuple(list(tuple(int)), str): The contraction steps and a text
    description.
)doc");
}
