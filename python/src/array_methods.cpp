// Method forms of ops on `array` (x.sum(...), x.reshape(...), ...).
#include "python/src/ops_common.h"

void init_array_methods(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<fx::array>>(m.attr("array"));
  const auto s = "stream"_a = py::none();

  cls.def(
      "astype",
      [](const fx::array& a, fx::Dtype t, fx::StreamOrDevice st) {
        return fx::astype(a, t, st);
      },
      "dtype"_a, s, "The array converted to ``dtype``.");
  cls.def(
      "reshape",
      [](const fx::array& a, const py::args& shape, fx::StreamOrDevice st) {
        auto v = fxpy::int_varargs(shape, "reshape");
        return fx::reshape(a, fx::Shape(v.begin(), v.end()), st);
      },
      s, "Reshape: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``.");
  cls.def(
      "transpose",
      [](const fx::array& a, const py::args& axes, fx::StreamOrDevice st) {
        if (axes.size() == 0) {
          return fx::transpose(a, st);
        }
        return fx::transpose(a, fxpy::int_varargs(axes, "transpose"), st);
      },
      s);
  cls.def(
      "flatten",
      [](const fx::array& a, int start, int end, fx::StreamOrDevice st) {
        return fx::flatten(a, start, end, st);
      },
      "start_axis"_a = 0, "end_axis"_a = -1, py::kw_only(), s);
  cls.def("squeeze", &fxpy::squeeze, "axis"_a = py::none(), py::kw_only(), s);
  cls.def(
      "diag",
      [](const fx::array& a, int k, fx::StreamOrDevice st) {
        return fx::diag(a, k, st);
      },
      "k"_a = 0, py::kw_only(), s,
      "The k-th diagonal of a 2-D array, or a 2-D array with a 1-D array "
      "on its k-th diagonal.");
  cls.def(
      "diagonal",
      [](const fx::array& a, int offset, int axis1, int axis2,
         fx::StreamOrDevice st) {
        return fx::diagonal(a, offset, axis1, axis2, st);
      },
      "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, s,
      "The diagonal at ``offset`` of the (axis1, axis2) planes.");
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
      "axis1"_a, "axis2"_a, py::kw_only(), s);
  cls.def(
      "moveaxis",
      [](const fx::array& a, int src, int dst, fx::StreamOrDevice st) {
        return fx::moveaxis(a, src, dst, st);
      },
      "source"_a, "destination"_a, py::kw_only(), s);
  cls.def("split", &fxpy::split, "indices_or_sections"_a, "axis"_a = 0,
          py::kw_only(), s);

#define FLUXION_REDUCE_METHOD(NAME)                                        \
  cls.def(#NAME, &fxpy::reduce<fx::NAME, fx::NAME>, "axis"_a = py::none(), \
          "keepdims"_a = false, py::kw_only(), s);
  FLUXION_REDUCE_METHOD(sum)
  FLUXION_REDUCE_METHOD(prod)
  FLUXION_REDUCE_METHOD(mean)
  FLUXION_REDUCE_METHOD(max)
  FLUXION_REDUCE_METHOD(min)
  FLUXION_REDUCE_METHOD(all)
  FLUXION_REDUCE_METHOD(any)
  FLUXION_REDUCE_METHOD(logsumexp)
#undef FLUXION_REDUCE_METHOD
  cls.def(
      "var",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice st) {
        return fxpy::var_std(false, a, axis, keepdims, ddof, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, "ddof"_a = 0, py::kw_only(),
      s);
  cls.def(
      "std",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice st) {
        return fxpy::var_std(true, a, axis, keepdims, ddof, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, "ddof"_a = 0, py::kw_only(),
      s);
  cls.def(
      "argmax",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fxpy::arg_reduce(true, a, axis, keepdims, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(), s);
  cls.def(
      "argmin",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice st) {
        return fxpy::arg_reduce(false, a, axis, keepdims, st);
      },
      "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(), s);

#define FLUXION_UNARY_METHOD(NAME, FN)                                     \
  cls.def(                                                                 \
      NAME,                                                                \
      [](const fx::array& a, fx::StreamOrDevice st) { return FN(a, st); }, \
      py::kw_only(), s);
  FLUXION_UNARY_METHOD("abs", fx::abs)
  FLUXION_UNARY_METHOD("exp", fx::exp)
  FLUXION_UNARY_METHOD("log", fx::log)
  FLUXION_UNARY_METHOD("log1p", fx::log1p)
  FLUXION_UNARY_METHOD("log2", fx::log2)
  FLUXION_UNARY_METHOD("log10", fx::log10)
  FLUXION_UNARY_METHOD("sqrt", fx::sqrt)
  FLUXION_UNARY_METHOD("rsqrt", fx::rsqrt)
  FLUXION_UNARY_METHOD("square", fx::square)
  FLUXION_UNARY_METHOD("reciprocal", fx::reciprocal)
  FLUXION_UNARY_METHOD("sin", fx::sin)
  FLUXION_UNARY_METHOD("cos", fx::cos)
  FLUXION_UNARY_METHOD("conj", fx::conjugate)
#undef FLUXION_UNARY_METHOD
  cls.def(
      "round",
      [](const fx::array& a, int decimals, fx::StreamOrDevice st) {
        return fx::round(a, decimals, st);
      },
      "decimals"_a = 0, py::kw_only(), s);
}
