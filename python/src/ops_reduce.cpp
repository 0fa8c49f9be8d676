// Reductions, arg-reductions, variance and the softmax family.
#include "python/src/docs.h"
#include "python/src/ops_common.h"

void init_ops_reduce(py::module_& m) {
#define FLUXION_REDUCE(NAME, SUMMARY, RESULT, EXAMPLE)                  \
  m.def(#NAME, &fxpy::reduce<fx::NAME, fx::NAME>, "a"_a, py::pos_only(), \
        "axis"_a = py::none(), "keepdims"_a = false, py::kw_only(),      \
        "stream"_a = py::none(),                                         \
        SUMMARY FXDOC_ARGS FXDOC_A FXDOC_AXIS_REDUCE FXDOC_STREAM        \
            FXDOC_RET_ARRAY RESULT "\n" EXAMPLE);
  FLUXION_REDUCE(sum, "Sum of the elements over the given axes.",
                 "The sums (``bool`` and integers narrower than 32 bits are "
                 "summed as ``int32``, unsigned ones as ``uint32``).",
                 FXDOC_EXAMPLE "    >>> mx.sum(mx.array([[1, 2], [3, 4]]), axis=0).tolist()\n    [4, 6]\n")
  FLUXION_REDUCE(prod, "Product of the elements over the given axes.",
                 "The products.",
                 "")
  FLUXION_REDUCE(mean, "Arithmetic mean over the given axes.",
                 "The means (``float32`` for integer input).",
                 FXDOC_EXAMPLE "    >>> mx.mean(mx.array([1.0, 2.0, 6.0])).item()\n    3.0\n")
  FLUXION_REDUCE(max, "Maximum over the given axes.",
                 "The largest elements, with the dtype of ``a``.",
                 "")
  FLUXION_REDUCE(min, "Minimum over the given axes.",
                 "The smallest elements, with the dtype of ``a``.",
                 "")
  FLUXION_REDUCE(all, "Whether all elements over the given axes are nonzero.",
                 "A ``bool`` array.",
                 "")
  FLUXION_REDUCE(any, "Whether any element over the given axes is nonzero.",
                 "A ``bool`` array.",
                 "")
  FLUXION_REDUCE(logsumexp, "``log(sum(exp(a)))`` over the given axes, computed stably.",
                 "The log of the sum of exponentials.",
                 "")
#undef FLUXION_REDUCE
  m.def(
      "var",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice s) {
        return fxpy::var_std(false, a, axis, keepdims, ddof, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      "ddof"_a = 0, py::kw_only(), "stream"_a = py::none(),
      "Variance over the given axes." FXDOC_ARGS FXDOC_A FXDOC_AXIS_REDUCE
      "    ddof (int, optional): Delta degrees of freedom: the sum of squares\n"
      "        is divided by ``N - ddof``. Default 0.\n" FXDOC_STREAM
      FXDOC_RET_ARRAY "The variances ``mean((a - mean(a))**2)`` times ``N / (N - ddof)``.\n");
  m.def(
      "std",
      [](const fx::array& a, const fxpy::Axes& axis, bool keepdims, int ddof,
         fx::StreamOrDevice s) {
        return fxpy::var_std(true, a, axis, keepdims, ddof, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      "ddof"_a = 0, py::kw_only(), "stream"_a = py::none(),
      "Standard deviation over the given axes." FXDOC_ARGS FXDOC_A
      FXDOC_AXIS_REDUCE
      "    ddof (int, optional): Delta degrees of freedom: the sum of squares\n"
      "        is divided by ``N - ddof``. Default 0.\n" FXDOC_STREAM
      FXDOC_RET_ARRAY "``sqrt(var(a, axis, keepdims, ddof))``.\n");
  m.def(
      "argmax",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice s) {
        return fxpy::arg_reduce(true, a, axis, keepdims, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), "stream"_a = py::none(),
      "Indices of the largest elements along an axis." FXDOC_ARGS FXDOC_A
      "    axis (int, optional): The axis; the flattened array when omitted.\n"
      "    keepdims (bool, optional): Keep the reduced axis as size 1.\n"
      FXDOC_STREAM FXDOC_RET_ARRAY "``uint32`` indices (the first one on ties).\n");
  m.def(
      "argmin",
      [](const fx::array& a, std::optional<int> axis, bool keepdims,
         fx::StreamOrDevice s) {
        return fxpy::arg_reduce(false, a, axis, keepdims, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), "keepdims"_a = false,
      py::kw_only(), "stream"_a = py::none(),
      "Indices of the smallest elements along an axis." FXDOC_ARGS FXDOC_A
      "    axis (int, optional): The axis; the flattened array when omitted.\n"
      "    keepdims (bool, optional): Keep the reduced axis as size 1.\n"
      FXDOC_STREAM FXDOC_RET_ARRAY "``uint32`` indices (the first one on ties).\n");
  m.def(
      "softmax",
      [](const fx::array& a, const fxpy::Axes& axis, bool precise,
         fx::StreamOrDevice s) {
        return axis ? fx::softmax(a, fxpy::axes_vector(*axis), precise, s)
                    : fx::softmax(a, precise, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), py::kw_only(),
      "precise"_a = false, "stream"_a = py::none(),
      "Softmax ``exp(a) / sum(exp(a))`` over the given axes." FXDOC_ARGS FXDOC_A
      "    axis (int or list(int), optional): Axes to normalise over; all\n"
      "        axes when omitted.\n"
      "    precise (bool, optional): For half-precision input, compute in\n"
      "        ``float32``. Default ``False``.\n" FXDOC_STREAM FXDOC_RET_ARRAY
      "Non-negative values summing to 1 over ``axis``.\n" FXDOC_EXAMPLE
      "    >>> mx.softmax(mx.array([0.0, 0.0])).tolist()\n"
      "    [0.5, 0.5]\n");
  m.def(
      "log_softmax",
      [](const fx::array& a, const fxpy::Axes& axis, fx::StreamOrDevice s) {
        return axis ? fx::log_softmax(a, fxpy::axes_vector(*axis), s)
                    : fx::log_softmax(a, s);
      },
      "a"_a, py::pos_only(), "axis"_a = py::none(), py::kw_only(),
      "stream"_a = py::none(),
      "Log of the softmax over the given axes, ``a - logsumexp(a)``." FXDOC_ARGS
          FXDOC_A
      "    axis (int or list(int), optional): Axes to normalise over; all\n"
      "        axes when omitted.\n" FXDOC_STREAM FXDOC_RET_ARRAY
      "``log(softmax(a, axis))``.\n");
}
