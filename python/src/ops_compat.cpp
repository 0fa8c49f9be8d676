// Names MLX programs use that Fluxion lacked (issue 11): NumPy / array-API
// aliases, constants, and the ops of fluxion/ops/compat.h.
#include <cmath>

#include "fluxion/ops/compat.h"
#include "python/src/docs.h"
#include "python/src/ops_common.h"

namespace {

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

std::optional<std::vector<int>> opt_axes(const fxpy::Axes& axis) {
  if (!axis) {
    return std::nullopt;
  }
  return fxpy::axes_vector(*axis);
}

// The array API's cumulative_sum / cumulative_prod: an inclusive scan along
// `axis` (the flattened array when None), optionally starting with the
// identity (include_initial), in `dtype` when given.
template <bool IsSum>
fx::array cumulative(const fx::array& a, std::optional<int> axis,
                     std::optional<fx::Dtype> dtype, bool include_initial,
                     fx::StreamOrDevice s) {
  fx::array x = dtype ? fx::astype(a, *dtype, s) : a;
  if (!axis) {
    x = fx::flatten(x, 0, -1, s);
  }
  int ax = axis.value_or(0);
  fx::array out = IsSum ? fx::cumsum(x, ax, false, true, s)
                        : fx::cumprod(x, ax, false, true, s);
  if (!include_initial) {
    return out;
  }
  int nd = out.ndim();
  int k = fx::normalize_axis(ax, nd, IsSum ? "cumulative_sum"
                                            : "cumulative_prod");
  fx::Shape first = out.shape();
  first[k] = 1;
  fx::array init = IsSum ? fx::zeros(first, out.dtype(), s)
                         : fx::ones(first, out.dtype(), s);
  return fx::concatenate({init, out}, k, s);
}

// `with printoptions(precision=p):` sets the options and restores the
// previous ones on exit.
struct PrintOptionsContext {
  fx::PrintOptions options;
  std::vector<fx::PrintOptions> saved;
};

}  // namespace

void init_ops_compat(py::module_& m) {
  const auto s = "stream"_a = py::none();

  // Print options.
  py::class_<fx::PrintOptions>(m, "PrintOptions",
                               "How arrays are printed.")
      .def(py::init([](int precision) { return fx::PrintOptions{precision}; }),
           "precision"_a = -1)
      .def_readwrite("precision", &fx::PrintOptions::precision)
      .def("__repr__", [](const fx::PrintOptions& o) {
        return "PrintOptions(precision=" + std::to_string(o.precision) + ")";
      });
  m.def(
      "set_printoptions",
      [](int precision) { fx::set_printoptions({precision}); },
      "precision"_a = -1,
      R"doc(Set how arrays print.

Args:
    precision (int, optional): Decimals of floating-point values; -1 (the
        default) prints six significant digits.
)doc");
  m.def("get_printoptions", &fx::get_printoptions,
      R"doc(The current print options.

Returns:
    PrintOptions: Its ``precision`` is the number of decimals (-1: six
    significant digits).
)doc");
  py::class_<PrintOptionsContext>(m, "_PrintOptionsContext")
      .def("__enter__",
           [](PrintOptionsContext& c) {
             c.saved.push_back(fx::get_printoptions());
             fx::set_printoptions(c.options);
           })
      .def("__exit__", [](PrintOptionsContext& c, py::args) {
        if (!c.saved.empty()) {
          fx::set_printoptions(c.saved.back());
          c.saved.pop_back();
        }
      });
  m.def(
      "printoptions",
      [](int precision) {
        if (precision < -1) {
          throw std::invalid_argument(
              "[printoptions] precision must be -1 (default) or "
              "non-negative; got " +
              std::to_string(precision) + ".");
        }
        return PrintOptionsContext{{precision}, {}};
      },
      "precision"_a = -1,
      R"doc(Set print options inside a ``with`` block only.

Args:
    precision (int, optional): Decimals of floating-point values; -1 (the
        default) prints six significant digits.

Returns:
    A context manager restoring the previous options on exit.

Example:
    >>> with mx.printoptions(precision=2):
    ...     print(mx.array([1 / 3]))
)doc");

  // Constants.
  m.attr("e") = py::float_(M_E);
  m.attr("pi") = py::float_(M_PI);
  m.attr("inf") = py::float_(INFINITY);
  m.attr("nan") = py::float_(NAN);
  m.attr("newaxis") = py::none();
  m.attr("euler_gamma") = py::float_(0.57721566490153286060651209008240243);

  // Array-API spellings of existing ops.
#define FLUXION_UNARY(NAME, FN, SUMMARY)                                 \
  m.def(NAME, &unary<FN>, "a"_a, py::pos_only(), py::kw_only(), s,       \
        SUMMARY FXDOC_ARGS FXDOC_A FXDOC_STREAM FXDOC_RET_ARRAY          \
        "The result, element by element.\n");
  FLUXION_UNARY("acos", fx::arccos,
                "Element-wise inverse cosine (the array API's name of :func:`arccos`).")
  FLUXION_UNARY("asin", fx::arcsin,
                "Element-wise inverse sine (the array API's name of :func:`arcsin`).")
  FLUXION_UNARY("atan", fx::arctan,
                "Element-wise inverse tangent (the array API's name of :func:`arctan`).")
  FLUXION_UNARY("acosh", fx::arccosh,
                "Element-wise inverse hyperbolic cosine (alias of :func:`arccosh`).")
  FLUXION_UNARY("asinh", fx::arcsinh,
                "Element-wise inverse hyperbolic sine (alias of :func:`arcsinh`).")
  FLUXION_UNARY("atanh", fx::arctanh,
                "Element-wise inverse hyperbolic tangent (alias of :func:`arctanh`).")
  FLUXION_UNARY("trunc", fx::trunc,
                "Element-wise truncation toward zero.")
#undef FLUXION_UNARY
#define FLUXION_BINARY(NAME, FN, DOC)                                     \
  m.def(NAME, &binary<FN>, "a"_a, "b"_a, py::pos_only(), py::kw_only(), s, \
        DOC FXDOC_ARGS FXDOC_AB FXDOC_STREAM FXDOC_RET_ARRAY                 \
        "The result, element by element.\n");
  FLUXION_BINARY("atan2", fx::arctan2, "Element-wise arc tangent of ``a / b`` (alias of :func:`arctan2`).")
  FLUXION_BINARY("pow", fx::power, "Element-wise power ``a ** b`` (alias of :func:`power`).")
  FLUXION_BINARY("bitwise_left_shift", fx::left_shift, "Element-wise left shift (alias of :func:`left_shift`).")
  FLUXION_BINARY("bitwise_right_shift", fx::right_shift,
                 "Element-wise right shift (alias of :func:`right_shift`).")
  FLUXION_BINARY("logical_xor", fx::logical_xor,
                 "Element-wise exclusive or of the truth values (a ``bool`` "
                 "array).")
#undef FLUXION_BINARY
  m.def(
      "positive", [](const fx::array& a, fx::StreamOrDevice) { return a; },
      "a"_a, py::pos_only(), py::kw_only(), s,
      R"doc(``+a``: the array itself.

Args:
    a (array): Input array.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a``.
)doc");
  m.def(
      "permute_dims",
      [](const fx::array& a, std::optional<std::vector<int>> axes,
         fx::StreamOrDevice st) {
        return axes ? fx::transpose(a, *axes, st) : fx::transpose(a, st);
      },
      "a"_a, py::pos_only(), "axes"_a = py::none(), py::kw_only(), s,
      R"doc(Permute the axes (the array API's name of :func:`transpose`).

Args:
    a (array): Input array.
    axes (list(int), optional): The permutation; reversed axes when
        omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The transposed array.
)doc");
  m.def(
      "matrix_transpose",
      [](const fx::array& a, fx::StreamOrDevice st) {
        if (a.ndim() < 2) {
          throw std::invalid_argument(
              "[matrix_transpose] Expected an array with at least two "
              "dimensions; got shape " +
              fx::shape_str(a.shape()) + ".");
        }
        return fx::swapaxes(a, -1, -2, st);
      },
      "a"_a, py::pos_only(), py::kw_only(), s,
      R"doc(Swap the last two axes.

Args:
    a (array): Input with at least two dimensions.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``swapaxes(a, -1, -2)``.
)doc");
  m.def("cumulative_sum", &cumulative<true>, "a"_a, py::pos_only(),
        "axis"_a = py::none(), py::kw_only(), "dtype"_a = py::none(),
        "include_initial"_a = false, s,
      R"doc(Cumulative sum (the array API's), optionally starting with 0.

Args:
    a (array): Input array.
    axis (int, optional): The axis; the flattened array when omitted.
    dtype (Dtype, optional): Type of the result.
    include_initial (bool, optional): Start with a 0, so the result is
        one longer along ``axis``. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The running sums.
)doc");
  m.def("cumulative_prod", &cumulative<false>, "a"_a, py::pos_only(),
        "axis"_a = py::none(), py::kw_only(), "dtype"_a = py::none(),
        "include_initial"_a = false, s,
      R"doc(Cumulative product (the array API's), optionally starting with 1.

Args:
    a (array): Input array.
    axis (int, optional): The axis; the flattened array when omitted.
    dtype (Dtype, optional): Type of the result.
    include_initial (bool, optional): Start with a 1, so the result is
        one longer along ``axis``. Default ``False``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The running products.
)doc");

  // Creation.
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
  m.def(
      "empty",
      [](fxpy::ShapeArg shape, fx::Dtype dtype, fx::StreamOrDevice st) {
        return fx::empty(fxpy::to_shape(shape), dtype, st);
      },
      "shape"_a, "dtype"_a = fx::float32, py::kw_only(), s,
      R"doc(An array whose values are unspecified (Fluxion gives zeros).

Args:
    shape (int or list(int)): Shape of the result.
    dtype (Dtype, optional): Type of the result. Default ``float32``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The array.
)doc");
  m.def(
      "empty_like",
      [](const fx::array& a, std::optional<fx::Dtype> dtype,
         fx::StreamOrDevice st) {
        return dtype ? fx::empty(a.shape(), *dtype, st) : fx::empty_like(a, st);
      },
      "a"_a, py::pos_only(), "dtype"_a = py::none(), py::kw_only(), s,
      R"doc(An array of ``a``'s shape whose values are unspecified (zeros).

Args:
    a (array): Input array.
    dtype (Dtype, optional): Type of the result; ``a``'s when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The array.
)doc");
#define FLUXION_WINDOW(NAME, DOC)                                           \
  m.def(                                                                    \
      #NAME, [](int m_, fx::StreamOrDevice st) { return fx::NAME(m_, st); }, \
      "M"_a, py::kw_only(), s,                                              \
      DOC FXDOC_ARGS "    M (int): The number of points.\n" FXDOC_STREAM   \
          FXDOC_RET_ARRAY "The ``float32`` window, shape ``(M,)``.\n");
  FLUXION_WINDOW(bartlett, "NumPy's Bartlett (triangular) window, float32.")
  FLUXION_WINDOW(blackman, "NumPy's Blackman window, float32.")
  FLUXION_WINDOW(hamming, "NumPy's Hamming window, float32.")
  FLUXION_WINDOW(hanning, "NumPy's Hann window, float32.")
#undef FLUXION_WINDOW

  // Reductions and shape ops.
  m.def(
      "median",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fx::median(a, opt_axes(axis), keepdims, st);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), s,
      R"doc(The median over the given axes; NaNs propagate.

Args:
    a (array): Input array.
    axis (int or list(int), optional): The axes; all when omitted.
    keepdims (bool, optional): Keep reduced axes as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The medians (the mean of the two middle values for an even
    count).
)doc");
  m.def(
      "diff",
      [](const fx::array& a, int n, int axis, std::optional<fx::array> prepend,
         std::optional<fx::array> append, fx::StreamOrDevice st) {
        return fx::diff(a, n, axis, prepend, append, st);
      },
      "a"_a, py::pos_only(), "n"_a = 1, "axis"_a = -1,
      "prepend"_a = py::none(), "append"_a = py::none(), py::kw_only(), s,
      R"doc(The ``n``-th discrete difference along an axis (NumPy's ``diff``).

Args:
    a (array): Input array.
    n (int, optional): How many times to difference. Default 1.
    axis (int, optional): The axis. Default -1.
    prepend (array, optional): Values put before ``a`` along ``axis``.
    append (array, optional): Values put after ``a`` along ``axis``.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``a[1:] - a[:-1]`` along ``axis``, applied ``n`` times.
)doc");
  m.def(
      "flip",
      [](const fx::array& a, const fxpy::Axes& axis, fx::StreamOrDevice st) {
        return fx::flip(a, opt_axes(axis), st);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), py::kw_only(), s,
      R"doc(Reverse the order of elements along the given axes.

Args:
    a (array): Input array.
    axis (int or list(int), optional): The axes; all when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The flipped array.
)doc");
  m.def(
      "unstack",
      [](const fx::array& a, int axis, fx::StreamOrDevice st) {
        auto parts = fx::unstack(a, axis, st);
        py::tuple out(parts.size());
        for (size_t i = 0; i < parts.size(); ++i) {
          out[i] = py::cast(parts[i]);
        }
        return out;
      },
      "a"_a, py::pos_only(), "axis"_a = 0, py::kw_only(), s,
      R"doc(Split an array into its slices along an axis.

Args:
    a (array): Input array.
    axis (int, optional): The axis. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    tuple(array): The slices, without that axis.
)doc");
  m.def(
      "count_nonzero",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fx::count_nonzero(a, opt_axes(axis), keepdims, st);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), s,
      R"doc(Count the non-zero elements over the given axes.

Args:
    a (array): Input array.
    axis (int or list(int), optional): The axes; all when omitted.
    keepdims (bool, optional): Keep reduced axes as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``int32`` counts.
)doc");
  m.def(
      "vecdot",
      [](py::handle a, py::handle b, int axis, fx::StreamOrDevice st) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return fx::vecdot(x, y, axis, st);
      },
      "a"_a, "b"_a, py::pos_only(), "axis"_a = -1, py::kw_only(), s,
      R"doc(Vector dot product ``sum(conj(a) * b)`` along an axis (the array API's).

Args:
    a (array or scalar): First operand.
    b (array or scalar): Second operand (broadcast with ``a``).
    axis (int, optional): The axis. Default -1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The dot products.
)doc");
  m.def(
      "matrix_norm",
      [](const fx::array& a, const std::variant<double, std::string>& ord,
         bool keepdims, fx::StreamOrDevice st) {
        return fx::matrix_norm(a, ord, keepdims, st);
      },
      "a"_a, py::pos_only(), py::kw_only(), "ord"_a = "fro",
      "keepdims"_a = false, s,
      R"doc(The matrix norm over the last two axes.

Args:
    a (array): Input array.
    ord (float or str, optional): ``"fro"``, ``"nuc"``, 1, -1, 2, -2,
        ``inf`` or ``-inf``. Default ``"fro"``.
    keepdims (bool, optional): Keep reduced axes as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The norms.
)doc");
}
