// Bindings of fluxion/ops/creation.h: full, zeros, ones and their _like
// forms, arange (with MLX's dtype inference), linspace, eye, identity, tri,
// tril, triu; and the array API's asarray.
#include <climits>
#include <cstdint>

#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace {

using fxpy::is_integer_scalar;

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

}  // namespace

void init_ops_creation(py::module_& m) {
  const auto s = "stream"_a = py::none();
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

  m.def(
      "asarray",
      [](py::object a, std::optional<fx::Dtype> dtype,
         std::optional<bool> copy) -> py::object {
        if (copy && !*copy) {
          // Arrays are values: a new array always gets its own node, so no
          // conversion can promise to reuse the input's memory.
          throw std::invalid_argument(
              "[asarray] copy=False is not supported: the result may not "
              "share memory with the input. Use copy=None or copy=True.");
        }
        if (auto* p = fxpy::array_ptr(a)) {
          if (copy && *copy) {
            return py::cast(fx::copy(dtype ? fx::astype(*p, *dtype) : *p));
          }
          if (!dtype || p->dtype() == *dtype) {
            return a;  // no copy
          }
          return py::cast(fx::astype(*p, *dtype));
        }
        return py::cast(fxpy::to_array(a, dtype));
      },
      "a"_a, "dtype"_a = py::none(), "copy"_a = py::none(),
      R"doc(Convert the input to an array, without a copy where possible.

Args:
    a (array-like): An array, scalar, (nested) list, NumPy array, ...
    dtype (Dtype, optional): Type of the result.
    copy (bool, optional): ``None`` returns an array input of that dtype
        itself; ``True`` always copies; ``False`` raises (an array never
        promises to share the input's memory).

Returns:
    array: The array.
)doc");
}
