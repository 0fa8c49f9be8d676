// Method forms of ops on `array` (x.sum(...), x.reshape(...), ...).
#include "python/src/docs.h"
#include "python/src/ops_common.h"

void init_array_methods(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<fx::array>>(m.attr("array"));
  const auto s = "stream"_a = py::none();

  cls.def(
      "astype",
      [](const fx::array& a, fx::Dtype t, fx::StreamOrDevice st) {
        return fx::astype(a, t, st);
      },
      "dtype"_a, s,
      R"doc(Convert the array to another dtype.

Args:
    dtype (Dtype): The target type.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The converted array.
)doc");
  cls.def(
      "reshape",
      [](const fx::array& a, const py::args& shape, fx::StreamOrDevice st) {
        auto v = fxpy::int_varargs(shape, "reshape");
        return fx::reshape(a, fx::Shape(v.begin(), v.end()), st);
      },
      s,
      R"doc(Give the array a new shape: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``.

Args:
    *shape (int or tuple(int)): The new shape (one entry may be -1).
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The reshaped array. See :func:`fluxion.core.reshape`.
)doc");
  cls.def(
      "transpose",
      [](const fx::array& a, const py::args& axes, fx::StreamOrDevice st) {
        if (axes.size() == 0) {
          return fx::transpose(a, st);
        }
        return fx::transpose(a, fxpy::int_varargs(axes, "transpose"), st);
      },
      s,
      R"doc(Permute the axes: ``x.transpose(1, 0)``, ``x.transpose((1, 0))``.

Args:
    *axes (int or tuple(int)): The permutation; the axes are reversed
        when none is given.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The transposed array. See :func:`fluxion.core.transpose`.
)doc");
  cls.def(
      "flatten",
      [](const fx::array& a, int start, int end, fx::StreamOrDevice st) {
        return fx::flatten(a, start, end, st);
      },
      "start_axis"_a = 0, "end_axis"_a = -1, py::kw_only(), s,
      R"doc(Flatten the axes ``start_axis`` to ``end_axis`` into one.

Args:
    start_axis (int, optional): First axis to flatten. Default 0.
    end_axis (int, optional): Last axis to flatten. Default -1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The flattened array. See :func:`fluxion.core.flatten`.
)doc");
  cls.def("squeeze", &fxpy::squeeze, "axis"_a = py::none(), py::kw_only(), s,
      R"doc(Remove axes of size 1.

Args:
    axis (int or list(int), optional): The axes to remove; all size-1
        axes when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The squeezed array. See :func:`fluxion.core.squeeze`.
)doc");
  cls.def(
      "diag",
      [](const fx::array& a, int k, fx::StreamOrDevice st) {
        return fx::diag(a, k, st);
      },
      "k"_a = 0, py::kw_only(), s,
      R"doc(Extract a diagonal, or build a diagonal matrix from a vector.

Args:
    k (int, optional): The diagonal (positive above the main one).
        Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: See :func:`fluxion.core.diag`.
)doc");
  cls.def(
      "diagonal",
      [](const fx::array& a, int offset, int axis1, int axis2,
         fx::StreamOrDevice st) {
        return fx::diagonal(a, offset, axis1, axis2, st);
      },
      "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, s,
      R"doc(The diagonal at ``offset`` of the ``(axis1, axis2)`` planes.

Args:
    offset (int, optional): Offset from the main diagonal. Default 0.
    axis1 (int, optional): First axis of the planes. Default 0.
    axis2 (int, optional): Second axis of the planes. Default 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The diagonals, as the last axis.
)doc");
  cls.def(
      "__array_namespace__",
      [m](const fx::array&, py::object api_version) -> py::object {
        if (!api_version.is_none() && !py::isinstance<py::str>(api_version)) {
          throw py::type_error(
              "[__array_namespace__] api_version must be a string or None.");
        }
        return m;
      },
      "api_version"_a = py::none(),
      "The module of the array's functions (the array API's namespace): "
      "fluxion.core.");
  cls.def(
      "swapaxes",
      [](const fx::array& a, int a1, int a2, fx::StreamOrDevice st) {
        return fx::swapaxes(a, a1, a2, st);
      },
      "axis1"_a, "axis2"_a, py::kw_only(), s,
      R"doc(Swap two axes.

Args:
    axis1 (int): First axis.
    axis2 (int): Second axis.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The array with the axes exchanged.
)doc");
  cls.def(
      "moveaxis",
      [](const fx::array& a, int src, int dst, fx::StreamOrDevice st) {
        return fx::moveaxis(a, src, dst, st);
      },
      "source"_a, "destination"_a, py::kw_only(), s,
      R"doc(Move an axis to a new position.

Args:
    source (int): The axis to move.
    destination (int): Its new position.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The array with the axis moved.
)doc");
  cls.def("split", &fxpy::split, "indices_or_sections"_a, "axis"_a = 0,
          py::kw_only(), s,
      R"doc(Split the array into pieces along an axis.

Args:
    indices_or_sections (int or list(int)): A number of equal pieces or
        the indices at which to cut.
    axis (int, optional): The axis. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    list(array): The pieces. See :func:`fluxion.core.split`.
)doc");

#define FLUXION_REDUCE_METHOD(NAME, SUMMARY)                               \
  cls.def(#NAME, &fxpy::reduce<fx::NAME, fx::NAME>, "axis"_a = py::none(), \
          "keepdims"_a = false, py::kw_only(), s,                          \
          SUMMARY " See :func:`fluxion.core." #NAME "`." FXDOC_ARGS        \
              FXDOC_AXIS_REDUCE FXDOC_STREAM FXDOC_RET_ARRAY               \
          "The reduced array.\n");
  FLUXION_REDUCE_METHOD(sum, "Sum over the given axes.")
  FLUXION_REDUCE_METHOD(prod, "Product over the given axes.")
  FLUXION_REDUCE_METHOD(mean, "Mean over the given axes.")
  FLUXION_REDUCE_METHOD(max, "Maximum over the given axes.")
  FLUXION_REDUCE_METHOD(min, "Minimum over the given axes.")
  FLUXION_REDUCE_METHOD(all, "Whether all elements are nonzero over the given axes.")
  FLUXION_REDUCE_METHOD(any, "Whether any element is nonzero over the given axes.")
  FLUXION_REDUCE_METHOD(logsumexp, "``log(sum(exp(x)))`` over the given axes.")
#undef FLUXION_REDUCE_METHOD
  cls.def(
      "var",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice st) {
        return fxpy::var_std(false, a, axis, keepdims, ddof, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, "ddof"_a = 0, py::kw_only(),
      s,
      R"doc(Variance over the given axes.

Args:
    axis (int or list(int), optional): The axes; all when omitted.
    keepdims (bool, optional): Keep reduced axes as size 1.
    ddof (int, optional): Delta degrees of freedom. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The variances. See :func:`fluxion.core.var`.
)doc");
  cls.def(
      "std",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice st) {
        return fxpy::var_std(true, a, axis, keepdims, ddof, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, "ddof"_a = 0, py::kw_only(),
      s,
      R"doc(Standard deviation over the given axes.

Args:
    axis (int or list(int), optional): The axes; all when omitted.
    keepdims (bool, optional): Keep reduced axes as size 1.
    ddof (int, optional): Delta degrees of freedom. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The standard deviations. See :func:`fluxion.core.std`.
)doc");
  cls.def(
      "argmax",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fxpy::arg_reduce(true, a, axis, keepdims, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(), s,
      R"doc(Indices of the largest elements along an axis.

Args:
    axis (int, optional): The axis; the flattened array when omitted.
    keepdims (bool, optional): Keep the reduced axis as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``uint32`` indices.
)doc");
  cls.def(
      "argmin",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fxpy::arg_reduce(false, a, axis, keepdims, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(), s,
      R"doc(Indices of the smallest elements along an axis.

Args:
    axis (int, optional): The axis; the flattened array when omitted.
    keepdims (bool, optional): Keep the reduced axis as size 1.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: ``uint32`` indices.
)doc");

#define FLUXION_UNARY_METHOD(NAME, FN, SUMMARY)                            \
  cls.def(                                                                 \
      NAME,                                                                \
      [](const fx::array& a, fx::StreamOrDevice st) { return FN(a, st); }, \
      py::kw_only(), s,                                                    \
      SUMMARY " See :func:`fluxion.core." NAME "`." FXDOC_ARGS FXDOC_STREAM \
          FXDOC_RET_ARRAY "The result, element by element.\n");
  FLUXION_UNARY_METHOD("abs", fx::abs,
                       "Element-wise absolute value.")
  FLUXION_UNARY_METHOD("exp", fx::exp,
                       "Element-wise exponential.")
  FLUXION_UNARY_METHOD("log", fx::log,
                       "Element-wise natural logarithm.")
  FLUXION_UNARY_METHOD("log1p", fx::log1p,
                       "Element-wise ``log(1 + x)``.")
  FLUXION_UNARY_METHOD("log2", fx::log2,
                       "Element-wise base-2 logarithm.")
  FLUXION_UNARY_METHOD("log10", fx::log10,
                       "Element-wise base-10 logarithm.")
  FLUXION_UNARY_METHOD("sqrt", fx::sqrt,
                       "Element-wise square root.")
  FLUXION_UNARY_METHOD("rsqrt", fx::rsqrt,
                       "Element-wise reciprocal square root.")
  FLUXION_UNARY_METHOD("square", fx::square,
                       "Element-wise square.")
  FLUXION_UNARY_METHOD("reciprocal", fx::reciprocal,
                       "Element-wise reciprocal.")
  FLUXION_UNARY_METHOD("sin", fx::sin,
                       "Element-wise sine.")
  FLUXION_UNARY_METHOD("cos", fx::cos,
                       "Element-wise cosine.")
  FLUXION_UNARY_METHOD("conj", fx::conjugate,
                       "Element-wise complex conjugate.")
#undef FLUXION_UNARY_METHOD
  cls.def(
      "round",
      [](const fx::array& a, int decimals, fx::StreamOrDevice st) {
        return fx::round(a, decimals, st);
      },
      "decimals"_a = 0, py::kw_only(), s,
      R"doc(Round to the given number of decimals, halves to even.

Args:
    decimals (int, optional): Decimal places to keep. Default 0.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The rounded array.
)doc");
}
