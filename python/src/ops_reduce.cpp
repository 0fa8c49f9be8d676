// Reductions, arg-reductions, variance and the softmax family.
#include "python/src/ops_common.h"

void init_ops_reduce(py::module_& m) {
#define FLUXION_REDUCE(NAME)                                             \
  m.def(#NAME, &fxpy::reduce<fx::NAME, fx::NAME>, "a"_a, py::pos_only(), \
        "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(),      \
        "stream"_a = py::none());
  FLUXION_REDUCE(sum)
  FLUXION_REDUCE(prod)
  FLUXION_REDUCE(mean)
  FLUXION_REDUCE(max)
  FLUXION_REDUCE(min)
  FLUXION_REDUCE(all)
  FLUXION_REDUCE(any)
  FLUXION_REDUCE(logsumexp)
#undef FLUXION_REDUCE
  m.def(
      "var",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice s) {
        return fxpy::var_std(false, a, axis, keepdims, ddof, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      "ddof"_a = 0, py::kw_only(), "stream"_a = py::none());
  m.def(
      "std",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice s) {
        return fxpy::var_std(true, a, axis, keepdims, ddof, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      "ddof"_a = 0, py::kw_only(), "stream"_a = py::none());
  m.def(
      "argmax",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice s) {
        return fxpy::arg_reduce(true, a, axis, keepdims, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), "stream"_a = py::none());
  m.def(
      "argmin",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice s) {
        return fxpy::arg_reduce(false, a, axis, keepdims, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), "stream"_a = py::none());
  m.def(
      "softmax",
      [](const fx::array& a, const fxpy::Axes& axis, bool precise,
         fx::StreamOrDevice s) {
        return axis ? fx::softmax(a, fxpy::axes_vector(*axis), precise, s)
                    : fx::softmax(a, precise, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), py::kw_only(),
      "precise"_a = false, "stream"_a = py::none());
  m.def(
      "log_softmax",
      [](const fx::array& a, const fxpy::Axes& axis, fx::StreamOrDevice s) {
        return axis ? fx::log_softmax(a, fxpy::axes_vector(*axis), s)
                    : fx::log_softmax(a, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), py::kw_only(),
      "stream"_a = py::none());
}
