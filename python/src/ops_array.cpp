// Bindings of fluxion/ops/array_ops.h: diag, diagonal, trace, roll,
// meshgrid, kron, einsum and einsum_path, with MLX's signatures.
#include <numeric>

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
      "A 1-D input gives a square matrix with it on diagonal ``k``; a 2-D "
      "input gives its diagonal ``k``.");
  m.def(
      "diagonal",
      [](const fx::array& a, int offset, int axis1, int axis2,
         fx::StreamOrDevice st) {
        return fx::diagonal(a, offset, axis1, axis2, st);
      },
      "a"_a, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, py::kw_only(), s,
      "The diagonal of the (axis1, axis2) planes, as the last axis.");
  m.def(
      "trace",
      [](const fx::array& a, int offset, int axis1, int axis2,
         std::optional<fx::Dtype> dtype, fx::StreamOrDevice st) {
        return dtype ? fx::trace(a, offset, axis1, axis2, *dtype, st)
                     : fx::trace(a, offset, axis1, axis2, st);
      },
      "a"_a, py::pos_only(), "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1,
      "dtype"_a = py::none(), py::kw_only(), s,
      "Sum along the diagonal of the (axis1, axis2) planes.");
  m.def("roll", &roll, "a"_a, py::pos_only(), "shift"_a, "axis"_a = py::none(),
        py::kw_only(), s,
        "Shift elements along ``axis`` (the flattened array if None), "
        "wrapping around.");
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
      "Coordinate grids from 1-D arrays (``indexing`` 'xy' or 'ij').");
  m.def(
      "kron",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::kron(a, b, st);
      },
      "a"_a, "b"_a, py::kw_only(), s, "Kronecker product of a and b.");
  m.def(
      "einsum",
      [](const std::string& subscripts, const py::args& operands,
         fx::StreamOrDevice st) {
        return fx::einsum(subscripts, arrays_of(operands), st);
      },
      "subscripts"_a, py::kw_only(), s,
      "Einstein summation over the operands, contracted pairwise in a "
      "greedy order.");
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
      "The pairwise contraction order einsum uses and its description.");
}
