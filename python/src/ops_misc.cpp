// Creation, integer-array indexing, linear algebra and misc ops (where,
// clip, isclose, ...).
#include <climits>
#include <cmath>
#include <cstdint>

#include "python/src/docs.h"
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
      "shape"_a, "vals"_a, "dtype"_a = py::none(), py::kw_only(), s,
      R"doc(An array of a shape filled with a value.

Args:
    shape (int or tuple(int)): Shape of the result.
    vals (array or scalar): The fill value, broadcast to ``shape``.
    dtype (Dtype, optional): Type of the result; that of ``vals`` when
        omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The filled array.

Example:
    >>> mx.full((2,), 7).tolist()
    [7, 7]
)doc");
  m.def(
      "zeros",
      [](const fxpy::ShapeArg& shape, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::zeros(fxpy::to_shape(shape), dtype, st);
      },
      "shape"_a, "dtype"_a = fx::float32, py::kw_only(), s,
      R"doc(An array of zeros.

Args:
    shape (int or tuple(int)): Shape of the result.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: Zeros of shape ``shape``.
)doc");
  m.def(
      "ones",
      [](const fxpy::ShapeArg& shape, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::ones(fxpy::to_shape(shape), dtype, st);
      },
      "shape"_a, "dtype"_a = fx::float32, py::kw_only(), s,
      R"doc(An array of ones.

Args:
    shape (int or tuple(int)): Shape of the result.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: Ones of shape ``shape``.
)doc");
  m.def(
      "zeros_like",
      [](const fx::array& a, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        // full_like: follows a's shape in shapeless compiles.
        auto z = fx::full_like(a, fx::array(0, a.dtype()), st);
        return dtype && *dtype != a.dtype() ? fx::astype(z, *dtype, st) : z;
      },
      "a"_a, py::pos_only(), "dtype"_a = py::none(), py::kw_only(), s,
      R"doc(Zeros with the shape of ``a``.

Args:
    a (array): Input array.
    dtype (Dtype, optional): Type of the result; that of ``a`` when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: Zeros of ``a``'s shape.
)doc");
  m.def(
      "ones_like",
      [](const fx::array& a, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        auto o = fx::full_like(a, fx::array(1, a.dtype()), st);
        return dtype && *dtype != a.dtype() ? fx::astype(o, *dtype, st) : o;
      },
      "a"_a, py::pos_only(), "dtype"_a = py::none(), py::kw_only(), s,
      R"doc(Ones with the shape of ``a``.

Args:
    a (array): Input array.
    dtype (Dtype, optional): Type of the result; that of ``a`` when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: Ones of ``a``'s shape.
)doc");
  m.def(
      "full_like",
      [](const fx::array& a, py::handle vals, fx::StreamOrDevice st) {
        return fx::full_like(a, fxpy::to_array_like(vals, a), st);
      },
      "a"_a, "vals"_a, py::pos_only(), py::kw_only(), s,
      R"doc(An array of ``a``'s shape and dtype filled with a value.

Args:
    a (array): Input array.
    vals (array or scalar): The fill value, broadcast to ``a``'s shape.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The filled array.
)doc");
  m.def("arange", &arange, "start"_a, "stop"_a, "step"_a = py::none(),
        "dtype"_a = py::none(), py::kw_only(), s,
      R"doc(Evenly spaced values in the half-open interval ``[start, stop)``.

Called as ``arange(stop)``, ``arange(start, stop)`` or
``arange(start, stop, step)``.

Args:
    start (int or float): First value (0 when only ``stop`` is given).
    stop (int or float): End of the interval, excluded.
    step (int or float, optional): Spacing. Default 1.
    dtype (Dtype, optional): Type of the result; ``int32`` when every
        bound is an int (``int64`` when one does not fit), else
        ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: A 1-D array of ``ceil((stop - start) / step)`` values.

Example:
    >>> mx.arange(0, 1, 0.25).tolist()
    [0.0, 0.25, 0.5, 0.75]
)doc");
  m.def(
      "arange",
      [](py::handle stop, py::handle step, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        return arange(py::int_(0), stop, step, dtype, st);
      },
      "stop"_a, "step"_a = py::none(), "dtype"_a = py::none(), py::kw_only(),
      s,
      "The form ``arange(stop)``: values from 0 to ``stop`` (see above).");
  m.def(
      "linspace",
      [](double start, double stop, int num, bool endpoint, fx::Dtype dtype,
         fx::StreamOrDevice st) {
        return fx::linspace(start, stop, num, endpoint, dtype, st);
      },
      "start"_a, "stop"_a, "num"_a = 50, "endpoint"_a = true,
      "dtype"_a = fx::float32, py::kw_only(), s,
      R"doc(``num`` evenly spaced values from ``start`` to ``stop``.

Args:
    start (float): First value.
    stop (float): Last value (included unless ``endpoint`` is ``False``).
    num (int, optional): How many values. Default 50.
    endpoint (bool, optional): Include ``stop``. Default ``True``.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: A 1-D array of ``num`` values.
)doc");
  m.def(
      "eye",
      [](int n, std::optional<int> mm, int k, fx::Dtype dtype,
         fx::StreamOrDevice st) {
        return fx::eye(n, mm.value_or(n), k, dtype, st);
      },
      "n"_a, "m"_a = py::none(), "k"_a = 0, "dtype"_a = fx::float32,
      py::kw_only(), s,
      R"doc(A 2-D array with ones on a diagonal and zeros elsewhere.

Args:
    n (int): Number of rows.
    m (int, optional): Number of columns; ``n`` when omitted.
    k (int, optional): The diagonal: 0 the main one, positive above,
        negative below. Default 0.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The ``(n, m)`` array.
)doc");
  m.def(
      "identity",
      [](int n, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::identity(n, dtype, st);
      },
      "n"_a, "dtype"_a = fx::float32, py::kw_only(), s,
      R"doc(The ``n`` by ``n`` identity matrix.

Args:
    n (int): Number of rows and columns.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The identity matrix.
)doc");
  m.def(
      "tri",
      [](int n, std::optional<int> mm, int k, fx::Dtype dtype,
         fx::StreamOrDevice st) {
        return fx::tri(n, mm.value_or(n), k, dtype, st);
      },
      "n"_a, "m"_a = py::none(), "k"_a = 0, "dtype"_a = fx::float32,
      py::kw_only(), s,
      R"doc(A lower-triangular matrix of ones: ones at and below diagonal ``k``.

Args:
    n (int): Number of rows.
    m (int, optional): Number of columns; ``n`` when omitted.
    k (int, optional): The diagonal up to which ones are set. Default 0.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The ``(n, m)`` array.
)doc");
  m.def(
      "tril",
      [](const fx::array& x, int k, fx::StreamOrDevice st) {
        return fx::tril(x, k, st);
      },
      "x"_a, "k"_a = 0, py::kw_only(), s,
      R"doc(The lower triangle of a matrix (or stack of matrices).

Args:
    x (array): Input with at least 2 dimensions.
    k (int, optional): Diagonal above which elements are zeroed.
        Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``x`` with the elements above diagonal ``k`` set to zero.
)doc");
  m.def(
      "triu",
      [](const fx::array& x, int k, fx::StreamOrDevice st) {
        return fx::triu(x, k, st);
      },
      "x"_a, "k"_a = 0, py::kw_only(), s,
      R"doc(The upper triangle of a matrix (or stack of matrices).

Args:
    x (array): Input with at least 2 dimensions.
    k (int, optional): Diagonal below which elements are zeroed.
        Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``x`` with the elements below diagonal ``k`` set to zero.
)doc");

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

  // --- linear algebra ---
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

  // --- misc ---
  m.def(
      "astype",
      [](const fx::array& a, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::astype(a, dtype, st);
      },
      "a"_a, py::pos_only(), "dtype"_a, py::kw_only(), s,
      R"doc(Convert an array to another dtype.

Args:
    a (array): Input array.
    dtype (Dtype): The target type.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The converted values (floats to ints truncate toward zero).
)doc");
  m.def(
      "where",
      [](py::handle condition, py::handle x, py::handle y,
         fx::StreamOrDevice st) {
        auto [xa, ya] = fxpy::to_arrays(x, y);
        return fx::where(fxpy::to_array(condition), xa, ya, st);
      },
      "condition"_a, "x"_a, "y"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Pick elements from ``x`` where ``condition`` is true, else from ``y``.

Args:
    condition (array or scalar): The selector (nonzero is true).
    x (array or scalar): Values where ``condition`` holds.
    y (array or scalar): Values elsewhere. The three broadcast together.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The selected values.

Example:
    >>> mx.where(mx.array([True, False]), 1, 2).tolist()
    [1, 2]
)doc");
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
      "a"_a, py::pos_only(), "a_min"_a, "a_max"_a, py::kw_only(), s,
      R"doc(Limit the values of an array to an interval.

Args:
    a (array): Input array.
    a_min (array or scalar or None): Lower bound; none when ``None``.
    a_max (array or scalar or None): Upper bound; none when ``None``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``minimum(maximum(a, a_min), a_max)``.
)doc");
  m.def(
      "isclose",
      [](py::handle a, py::handle b, double rtol, double atol, bool equal_nan,
         fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::isclose(x, y, rtol, atol, equal_nan, st);
      },
      "a"_a, "b"_a, py::pos_only(), "rtol"_a = 1e-5, "atol"_a = 1e-8,
      py::kw_only(), "equal_nan"_a = false, s,
      R"doc(Element-wise test that two arrays are equal within a tolerance.

``|a - b| <= atol + rtol * |b|``.

Args:
    a (array or scalar): First operand.
    b (array or scalar): Second operand.
    rtol (float, optional): Relative tolerance. Default 1e-5.
    atol (float, optional): Absolute tolerance. Default 1e-8.
    equal_nan (bool, optional): Count NaN as equal to NaN. Default
        ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: A ``bool`` array.
)doc");
  m.def(
      "allclose",
      [](py::handle a, py::handle b, double rtol, double atol, bool equal_nan,
         fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::allclose(x, y, rtol, atol, equal_nan, st);
      },
      "a"_a, "b"_a, py::pos_only(), "rtol"_a = 1e-5, "atol"_a = 1e-8,
      py::kw_only(), "equal_nan"_a = false, s,
      R"doc(Whether all elements of two arrays are equal within a tolerance.

See :func:`isclose`.

Args:
    a (array or scalar): First operand.
    b (array or scalar): Second operand.
    rtol (float, optional): Relative tolerance. Default 1e-5.
    atol (float, optional): Absolute tolerance. Default 1e-8.
    equal_nan (bool, optional): Count NaN as equal to NaN. Default
        ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: A scalar ``bool`` array.
)doc");
  m.def(
      "array_equal",
      [](py::handle a, py::handle b, bool equal_nan, fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::array_equal(x, y, equal_nan, st);
      },
      "a"_a, "b"_a, py::pos_only(), "equal_nan"_a = false, py::kw_only(), s,
      R"doc(Whether two arrays have the same shape and equal elements.

The dtypes may differ.

Args:
    a (array or scalar): First operand.
    b (array or scalar): Second operand.
    equal_nan (bool, optional): Count NaN as equal to NaN. Default
        ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: A scalar ``bool`` array.
)doc");
  m.def(
      "depends",
      [](py::handle inputs, py::handle dependencies) -> py::object {
        // An array is one input, not a sequence of its rows (an array
        // supports len() and indexing, so a sequence caster would iterate
        // it); a single array in gives a single array out, as MLX.
        bool single = fxpy::array_ptr(inputs) != nullptr;
        auto in = fxpy::array_or_arrays(inputs, "depends", "inputs");
        auto deps = fxpy::array_or_arrays(dependencies, "depends",
                                          "dependencies");
        auto out = fx::depends(in, deps);
        if (single) {
          return py::cast(out[0]);
        }
        return py::cast(out);
      },
      "inputs"_a, "dependencies"_a,
      R"doc(Return ``inputs`` unchanged, computed only after ``dependencies``.

Args:
    inputs (array or list(array)): The array or arrays to pass through.
    dependencies (array or list(array)): The array or arrays that must be
        evaluated first.

Returns:
    array or list(array): An array equal to ``inputs`` when it is an
    array, else a list of arrays equal to ``inputs``.
)doc");
}
