// Argument handling shared by the module functions and the array methods
// (mx.sum(x, axis=...) and x.sum(axis=...) must behave the same).
#pragma once

#include "python/src/convert.h"

namespace fxpy {

// A Python int that is not a bool (bool is an int subclass): arange's
// dtype inference and take's scalar-index path use it.
inline bool is_integer_scalar(py::handle h) {
  return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr());
}

// Module functions of one array, or of two array-likes (broadcast, weak
// Python scalars), from the op of the same arguments.
using UnaryFn = fx::array (*)(const fx::array&, fx::StreamOrDevice);
using BinaryFn = fx::array (*)(const fx::array&, const fx::array&,
                               fx::StreamOrDevice);

template <UnaryFn Op>
fx::array unary(const fx::array& a, fx::StreamOrDevice s) {
  return Op(a, s);
}

template <BinaryFn Op>
fx::array binary(py::handle a, py::handle b, fx::StreamOrDevice s) {
  auto [x, y] = fxpy::to_arrays(a, b);
  return Op(x, y, s);
}

using ReduceAllFn = fx::array (*)(const fx::array&, bool, fx::StreamOrDevice);
using ReduceAxesFn = fx::array (*)(const fx::array&, const std::vector<int>&,
                                   bool, fx::StreamOrDevice);

inline std::vector<int> axes_vector(
    const std::variant<int, std::vector<int>>& axis) {
  if (auto* i = std::get_if<int>(&axis)) {
    return {*i};
  }
  return std::get<std::vector<int>>(axis);
}

template <ReduceAllFn All, ReduceAxesFn Many>
fx::array reduce(const fx::array& a, const Axes& axis, bool keepdims,
                 fx::StreamOrDevice s) {
  if (!axis) {
    return All(a, keepdims, s);
  }
  return Many(a, axes_vector(*axis), keepdims, s);
}

inline fx::array var_std(bool is_std, const fx::array& a, const Axes& axis,
                         bool keepdims, int ddof, fx::StreamOrDevice s) {
  if (!axis) {
    return is_std ? fx::std(a, keepdims, ddof, s)
                  : fx::var(a, keepdims, ddof, s);
  }
  auto axes = axes_vector(*axis);
  return is_std ? fx::std(a, axes, keepdims, ddof, s)
                : fx::var(a, axes, keepdims, ddof, s);
}

inline fx::array arg_reduce(bool is_max, const fx::array& a,
                            std::optional<int> axis, bool keepdims,
                            fx::StreamOrDevice s) {
  if (!axis) {
    return is_max ? fx::argmax(a, keepdims, s) : fx::argmin(a, keepdims, s);
  }
  return is_max ? fx::argmax(a, *axis, keepdims, s)
                : fx::argmin(a, *axis, keepdims, s);
}

inline fx::array squeeze(const fx::array& a, const Axes& axis,
                         fx::StreamOrDevice s) {
  return axis ? fx::squeeze(a, axes_vector(*axis), s) : fx::squeeze(a, s);
}

inline std::vector<fx::array> split(const fx::array& a,
                                    const std::variant<int, fx::Shape>& ios,
                                    int axis, fx::StreamOrDevice s) {
  if (auto* n = std::get_if<int>(&ios)) {
    return fx::split(a, *n, axis, s);
  }
  return fx::split(a, std::get<fx::Shape>(ios), axis, s);
}

// `x.reshape(2, 3)` and `x.reshape((2, 3))`; likewise transpose.
inline std::vector<int> int_varargs(const py::args& args, const char* op) {
  // cast_arg: an out-of-int32 value is OverflowError, another type
  // TypeError naming the op (not pybind11's bare cast RuntimeError).
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) {
    return cast_arg<std::vector<int>>(args[0], op, "the dimensions",
                                      "ints or a sequence of ints");
  }
  std::vector<int> out;
  for (auto v : args) {
    out.push_back(cast_arg<int>(v, op, "each dimension", "an int"));
  }
  return out;
}

}  // namespace fxpy
