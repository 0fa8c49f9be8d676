// Elementwise module functions: unary math and binary ops with NumPy
// broadcasting and weakly typed Python scalars.
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

}  // namespace

void init_ops_elementwise(py::module_& m) {
#define FLUXION_UNARY(NAME, FN)                                 \
  m.def(NAME, &unary<FN>, "a"_a, py::pos_only(), py::kw_only(), \
        "stream"_a = py::none());
  FLUXION_UNARY("abs", fx::abs)
  FLUXION_UNARY("negative", fx::negative)
  FLUXION_UNARY("sign", fx::sign)
  FLUXION_UNARY("exp", fx::exp)
  FLUXION_UNARY("expm1", fx::expm1)
  FLUXION_UNARY("log", fx::log)
  FLUXION_UNARY("log1p", fx::log1p)
  FLUXION_UNARY("log2", fx::log2)
  FLUXION_UNARY("log10", fx::log10)
  FLUXION_UNARY("sqrt", fx::sqrt)
  FLUXION_UNARY("rsqrt", fx::rsqrt)
  FLUXION_UNARY("square", fx::square)
  FLUXION_UNARY("reciprocal", fx::reciprocal)
  FLUXION_UNARY("sin", fx::sin)
  FLUXION_UNARY("cos", fx::cos)
  FLUXION_UNARY("tan", fx::tan)
  FLUXION_UNARY("arcsin", fx::arcsin)
  FLUXION_UNARY("arccos", fx::arccos)
  FLUXION_UNARY("arctan", fx::arctan)
  FLUXION_UNARY("sinh", fx::sinh)
  FLUXION_UNARY("cosh", fx::cosh)
  FLUXION_UNARY("tanh", fx::tanh)
  FLUXION_UNARY("arcsinh", fx::arcsinh)
  FLUXION_UNARY("arccosh", fx::arccosh)
  FLUXION_UNARY("arctanh", fx::arctanh)
  FLUXION_UNARY("sigmoid", fx::sigmoid)
  FLUXION_UNARY("erf", fx::erf)
  FLUXION_UNARY("erfinv", fx::erfinv)
  FLUXION_UNARY("floor", fx::floor)
  FLUXION_UNARY("ceil", fx::ceil)
  FLUXION_UNARY("logical_not", fx::logical_not)
  FLUXION_UNARY("isnan", fx::isnan)
  FLUXION_UNARY("isinf", fx::isinf)
  FLUXION_UNARY("isfinite", fx::isfinite)
  FLUXION_UNARY("isposinf", fx::isposinf)
  FLUXION_UNARY("isneginf", fx::isneginf)
  FLUXION_UNARY("degrees", fx::degrees)
  FLUXION_UNARY("radians", fx::radians)
  FLUXION_UNARY("conjugate", fx::conjugate)
  FLUXION_UNARY("conj", fx::conjugate)
  FLUXION_UNARY("real", fx::real)
  FLUXION_UNARY("imag", fx::imag)
  FLUXION_UNARY("stop_gradient", fx::stop_gradient)
  FLUXION_UNARY("copy", fx::copy)
#undef FLUXION_UNARY
  m.def(
      "round",
      [](const fx::array& a, int decimals, fx::StreamOrDevice s) {
        return fx::round(a, decimals, s);
      },
      "a"_a, py::pos_only(), "decimals"_a = 0, py::kw_only(),
      "stream"_a = py::none(), "Round half to even to ``decimals`` places.");
  m.def(
      "nan_to_num",
      [](const fx::array& a, double nan, std::optional<double> posinf,
         std::optional<double> neginf, fx::StreamOrDevice s) {
        return fx::nan_to_num(a, nan, posinf, neginf, s);
      },
      "a"_a, py::pos_only(), "nan"_a = 0.0f, "posinf"_a = py::none(),
      "neginf"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
      "Replace NaN and infinities with finite numbers.");
  m.def(
      "bitwise_invert",
      [](const fx::array& a, fx::StreamOrDevice s) {
        return fx::bitwise_invert(a, s);
      },
      "a"_a, py::pos_only(), py::kw_only(), "stream"_a = py::none());

#define FLUXION_BINARY(NAME, FN)                                        \
  m.def(NAME, &binary<FN>, "a"_a, "b"_a, py::pos_only(), py::kw_only(), \
        "stream"_a = py::none());
  FLUXION_BINARY("add", fx::add)
  FLUXION_BINARY("subtract", fx::subtract)
  FLUXION_BINARY("multiply", fx::multiply)
  FLUXION_BINARY("divide", fx::divide)
  FLUXION_BINARY("floor_divide", fx::floor_divide)
  FLUXION_BINARY("remainder", fx::remainder)
  FLUXION_BINARY("power", fx::power)
  FLUXION_BINARY("maximum", fx::maximum)
  FLUXION_BINARY("minimum", fx::minimum)
  FLUXION_BINARY("arctan2", fx::arctan2)
  FLUXION_BINARY("logaddexp", fx::logaddexp)
  FLUXION_BINARY("equal", fx::equal)
  FLUXION_BINARY("not_equal", fx::not_equal)
  FLUXION_BINARY("less", fx::less)
  FLUXION_BINARY("less_equal", fx::less_equal)
  FLUXION_BINARY("greater", fx::greater)
  FLUXION_BINARY("greater_equal", fx::greater_equal)
  FLUXION_BINARY("logical_and", fx::logical_and)
  FLUXION_BINARY("logical_or", fx::logical_or)
  FLUXION_BINARY("bitwise_and", fx::bitwise_and)
  FLUXION_BINARY("bitwise_or", fx::bitwise_or)
  FLUXION_BINARY("bitwise_xor", fx::bitwise_xor)
  FLUXION_BINARY("left_shift", fx::left_shift)
  FLUXION_BINARY("right_shift", fx::right_shift)
#undef FLUXION_BINARY
  m.def(
      "divmod",
      [](py::handle a, py::handle b, fx::StreamOrDevice s) {
        auto [x, y] = fxpy::to_arrays(a, b);
        return py::make_tuple(fx::floor_divide(x, y, s),
                              fx::remainder(x, y, s));
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), "stream"_a = py::none(),
      "(floor_divide(a, b), remainder(a, b)).");
}
