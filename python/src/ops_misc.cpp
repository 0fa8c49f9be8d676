// Creation, integer-array indexing, linear algebra and misc ops (where,
// clip, isclose, ...).
#include <climits>
#include <cmath>
#include <cstdint>

#include "python/src/ops_common.h"

namespace {

bool is_integer_scalar(py::handle h) {
  return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr());
}

double to_double(py::handle h, const char* what) {
  if (fxpy::scalar_kind(h) == fxpy::ScalarKind::none ||
      fxpy::scalar_kind(h) == fxpy::ScalarKind::complex) {
    throw std::invalid_argument(std::string("[arange] ") + what +
                                " must be an int or a float; got " +
                                Py_TYPE(h.ptr())->tp_name + ".");
  }
  return PyFloat_AsDouble(h.ptr());
}

bool fits_int32(py::handle h) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  return overflow == 0 && v >= INT32_MIN && v <= INT32_MAX;
}

// MLX's arange: int32 when every given bound is an int (int64 when one does
// not fit in int32), else float32. `arange(start, None, step)` counts from 0
// to `start`, as `arange(stop, step=step)`.
fx::array arange(py::handle start, py::handle stop, py::handle step,
                 std::optional<fx::Dtype> dtype, fx::StreamOrDevice s) {
  if (stop.is_none()) {
    return arange(py::int_(0), start, step, dtype, s);
  }
  bool ints = is_integer_scalar(start) && is_integer_scalar(stop) &&
              (step.is_none() || is_integer_scalar(step));
  bool wide = ints && !(fits_int32(start) && fits_int32(stop) &&
                        (step.is_none() || fits_int32(step)));
  double st = step.is_none() ? 1.0 : to_double(step, "step");
  fx::Dtype inferred = ints ? (wide ? fx::int64 : fx::int32) : fx::float32;
  return fx::arange(to_double(start, "start"), to_double(stop, "stop"), st,
                    dtype.value_or(inferred), s);
}

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

void init_ops_misc(py::module_& m) {
  const auto s = "stream"_a = py::none();
  // --- creation ---
  m.def(
      "full",
      [](const fxpy::ShapeArg& shape, py::handle vals,
         std::optional<fx::Dtype> dtype, fx::StreamOrDevice st) {
        fx::array v = fxpy::to_array(vals, dtype);
        return fx::full(fxpy::to_shape(shape), v, st);
      },
      "shape"_a, "vals"_a, "dtype"_a = py::none(), py::kw_only(), s);
  m.def(
      "zeros",
      [](const fxpy::ShapeArg& shape, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::zeros(fxpy::to_shape(shape), dtype, st);
      },
      "shape"_a, "dtype"_a = fx::float32, py::kw_only(), s);
  m.def(
      "ones",
      [](const fxpy::ShapeArg& shape, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::ones(fxpy::to_shape(shape), dtype, st);
      },
      "shape"_a, "dtype"_a = fx::float32, py::kw_only(), s);
  m.def(
      "zeros_like",
      [](const fx::array& a, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        // full_like: follows a's shape in shapeless compiles.
        auto z = fx::full_like(a, fx::array(0, a.dtype()), st);
        return dtype && *dtype != a.dtype() ? fx::astype(z, *dtype, st) : z;
      },
      "a"_a, py::pos_only(), "dtype"_a = py::none(), py::kw_only(), s,
      "Zeros of a's shape, in a's dtype or ``dtype``.");
  m.def(
      "ones_like",
      [](const fx::array& a, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        auto o = fx::full_like(a, fx::array(1, a.dtype()), st);
        return dtype && *dtype != a.dtype() ? fx::astype(o, *dtype, st) : o;
      },
      "a"_a, py::pos_only(), "dtype"_a = py::none(), py::kw_only(), s,
      "Ones of a's shape, in a's dtype or ``dtype``.");
  m.def(
      "full_like",
      [](const fx::array& a, py::handle vals, fx::StreamOrDevice st) {
        return fx::full_like(a, fxpy::to_array_like(vals, a), st);
      },
      "a"_a, "vals"_a, py::pos_only(), py::kw_only(), s);
  m.def("arange", &arange, "start"_a, "stop"_a, "step"_a = py::none(),
        "dtype"_a = py::none(), py::kw_only(), s,
        "Values from ``start`` to ``stop`` (excluded) in steps of ``step``; "
        "int32 when all bounds are ints, else float32.");
  m.def(
      "arange",
      [](py::handle stop, py::handle step, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        return arange(py::int_(0), stop, step, dtype, st);
      },
      "stop"_a, "step"_a = py::none(), "dtype"_a = py::none(), py::kw_only(),
      s);
  m.def(
      "linspace",
      [](double start, double stop, int num, bool endpoint, fx::Dtype dtype,
         fx::StreamOrDevice st) {
        return fx::linspace(start, stop, num, endpoint, dtype, st);
      },
      "start"_a, "stop"_a, "num"_a = 50, "endpoint"_a = true,
      "dtype"_a = fx::float32, py::kw_only(), s,
      "``num`` evenly spaced values from ``start`` to ``stop`` (included "
      "unless ``endpoint=False``).");
  m.def(
      "eye",
      [](int n, std::optional<int> mm, int k, fx::Dtype dtype,
         fx::StreamOrDevice st) {
        return fx::eye(n, mm.value_or(n), k, dtype, st);
      },
      "n"_a, "m"_a = py::none(), "k"_a = 0, "dtype"_a = fx::float32,
      py::kw_only(), s);
  m.def(
      "identity",
      [](int n, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::identity(n, dtype, st);
      },
      "n"_a, "dtype"_a = fx::float32, py::kw_only(), s);
  m.def(
      "tri",
      [](int n, std::optional<int> mm, int k, fx::Dtype dtype,
         fx::StreamOrDevice st) {
        return fx::tri(n, mm.value_or(n), k, dtype, st);
      },
      "n"_a, "m"_a = py::none(), "k"_a = 0, "dtype"_a = fx::float32,
      py::kw_only(), s);
  m.def(
      "tril",
      [](const fx::array& x, int k, fx::StreamOrDevice st) {
        return fx::tril(x, k, st);
      },
      "x"_a, "k"_a = 0, py::kw_only(), s);
  m.def(
      "triu",
      [](const fx::array& x, int k, fx::StreamOrDevice st) {
        return fx::triu(x, k, st);
      },
      "x"_a, "k"_a = 0, py::kw_only(), s);

  // --- integer-array indexing ---
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
      R"doc(Take elements along an axis (of the flattened array when ``axis``
is None). Negative indices count from the end.

``mode`` is a Fluxion extension (NumPy's): ``"raise"`` (default) raises for
an index out of range, ``"wrap"`` reduces indices modulo the axis length,
``"clip"`` clamps them to ``[0, n - 1]`` (negative indices then select the
first element, as in NumPy).)doc");
  m.def(
      "take_along_axis",
      [](const fx::array& a, const fx::array& indices, std::optional<int> axis,
         fx::StreamOrDevice st) {
        return axis
                   ? fx::take_along_axis(a, indices, *axis, st)
                   : fx::take_along_axis(fx::reshape(a, {-1}, st),
                                         fx::reshape(indices, {-1}, st), 0, st);
      },
      "a"_a, py::pos_only(), "indices"_a, "axis"_a, py::kw_only(), s);
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
      s);
  m.def(
      "scatter_add_axis",
      [](const fx::array& a, const fx::array& indices, py::handle values,
         int axis, fx::StreamOrDevice st) {
        return fx::scatter_add_axis(a, indices, fxpy::to_array_like(values, a),
                                    axis, st);
      },
      "a"_a, py::pos_only(), "indices"_a, "values"_a, "axis"_a, py::kw_only(),
      s);

  // --- linear algebra ---
  m.def(
      "matmul",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::matmul(a, b, st);
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), s);
  m.def(
      "addmm",
      [](const fx::array& c, const fx::array& a, const fx::array& b,
         float alpha, float beta,
         fx::StreamOrDevice st) { return fx::addmm(c, a, b, alpha, beta, st); },
      "c"_a, "a"_a, "b"_a, py::pos_only(), "alpha"_a = 1.0f, "beta"_a = 1.0f,
      py::kw_only(), s);
  m.def(
      "inner",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::inner(a, b, st);
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), s);
  m.def(
      "outer",
      [](const fx::array& a, const fx::array& b, fx::StreamOrDevice st) {
        return fx::outer(a, b, st);
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), s);
  m.def("tensordot", &tensordot, "a"_a, "b"_a, py::pos_only(), "axes"_a = 2,
        py::kw_only(), s);

  // --- misc ---
  m.def(
      "astype",
      [](const fx::array& a, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::astype(a, dtype, st);
      },
      "a"_a, py::pos_only(), "dtype"_a, py::kw_only(), s);
  m.def(
      "where",
      [](py::handle condition, py::handle x, py::handle y,
         fx::StreamOrDevice st) {
        auto [xa, ya] = fxpy::to_arrays(x, y);
        return fx::where(fxpy::to_array(condition), xa, ya, st);
      },
      "condition"_a, "x"_a, "y"_a, py::pos_only(), py::kw_only(), s);
  m.def(
      "clip",
      [](const fx::array& a, py::handle a_min, py::handle a_max,
         fx::StreamOrDevice st) {
        auto bound = [&](py::handle h) -> std::optional<fx::array> {
          if (h.is_none()) {
            return std::nullopt;
          }
          return fxpy::to_array_like(h, a);
        };
        return fx::clip(a, bound(a_min), bound(a_max), st);
      },
      "a"_a, py::pos_only(), "a_min"_a, "a_max"_a, py::kw_only(), s);
  m.def(
      "isclose",
      [](py::handle a, py::handle b, double rtol, double atol, bool equal_nan,
         fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::isclose(x, y, rtol, atol, equal_nan, st);
      },
      "a"_a, "b"_a, py::pos_only(), "rtol"_a = 1e-5, "atol"_a = 1e-8,
      py::kw_only(), "equal_nan"_a = false, s);
  m.def(
      "allclose",
      [](py::handle a, py::handle b, double rtol, double atol, bool equal_nan,
         fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::allclose(x, y, rtol, atol, equal_nan, st);
      },
      "a"_a, "b"_a, py::pos_only(), "rtol"_a = 1e-5, "atol"_a = 1e-8,
      py::kw_only(), "equal_nan"_a = false, s);
  m.def(
      "array_equal",
      [](py::handle a, py::handle b, bool equal_nan, fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::array_equal(x, y, equal_nan, st);
      },
      "a"_a, "b"_a, py::pos_only(), "equal_nan"_a = false, py::kw_only(), s);
  m.def("depends", &fx::depends, "inputs"_a, "dependencies"_a,
        "``inputs`` unchanged, computed only after ``dependencies``.");
}
