// Elementwise module functions: unary math and binary ops with NumPy
// broadcasting and weakly typed Python scalars (fluxion/ops/unary.h,
// binary.h, with isclose / allclose / array_equal), astype
// (fluxion/ops/astype.h) and where / clip (fluxion/ops/ternary.h).
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

}  // namespace

void init_ops_elementwise(py::module_& m) {
// DOC: the summary line and what the result holds.
#define FLUXION_UNARY(NAME, FN, SUMMARY, RESULT)                       \
  m.def(NAME, &unary<FN>, "a"_a, py::pos_only(), py::kw_only(),        \
        "stream"_a = py::none(),                                       \
        SUMMARY FXDOC_ARGS FXDOC_A FXDOC_STREAM FXDOC_RET_ARRAY RESULT \
        "\n");
  // The ops of the unary spec (fluxion/ops/elementwise_spec.h), with their
  // docstrings; core.pyi and docs/api/ops.rst list them too
  // (tools/gen_op_spec.py).
#define FLUXION_UNARY_SPEC_BINDING(A, CLASS, NAME, POLICY, KERNEL, TYPES, \
                                   RULES, CPU, GPU, SUMMARY, RESULT)      \
  FLUXION_UNARY_IF_OP(POLICY)(FLUXION_UNARY(#NAME, fx::NAME, SUMMARY, RESULT))
  FLUXION_UNARY_SPEC(FLUXION_UNARY_SPEC_BINDING, _)
#undef FLUXION_UNARY_SPEC_BINDING
  // The unary ops outside the spec (negative: written by hand; the rest
  // compositions, an alias, a view, a copy).
  FLUXION_UNARY("negative", fx::negative,
                "Element-wise negation.",
                "``-a``, with the dtype of ``a``.")
  FLUXION_UNARY("isposinf", fx::isposinf,
                "Test element-wise for positive infinity.",
                "A ``bool`` array, ``True`` where ``a`` is +inf.")
  FLUXION_UNARY("isneginf", fx::isneginf,
                "Test element-wise for negative infinity.",
                "A ``bool`` array, ``True`` where ``a`` is -inf.")
  FLUXION_UNARY("degrees", fx::degrees,
                "Convert angles from radians to degrees.",
                "``a * 180 / pi``.")
  FLUXION_UNARY("radians", fx::radians,
                "Convert angles from degrees to radians.",
                "``a * pi / 180``.")
  FLUXION_UNARY("conj", fx::conjugate,
                "Element-wise complex conjugate (alias of :func:`conjugate`).",
                "The conjugate of ``a`` (real input unchanged).")
  FLUXION_UNARY("stop_gradient", fx::stop_gradient,
                "Identity that blocks gradients.",
                "``a`` unchanged; transformations treat it as a constant.")
  FLUXION_UNARY("copy", fx::copy,
                "A copy of ``a``.",
                "A new array with the values of ``a``.")
#undef FLUXION_UNARY
  m.def(
      "round",
      [](const fx::array& a, int decimals, fx::StreamOrDevice s) {
        return fx::round(a, decimals, s);
      },
      "a"_a, py::pos_only(), "decimals"_a = 0, py::kw_only(),
      "stream"_a = py::none(),
      "Round to the given number of decimals, halves to even." FXDOC_ARGS FXDOC_A
      "    decimals (int, optional): Decimal places to keep (negative: tens,\n"
      "        hundreds, ...). Default 0.\n" FXDOC_STREAM FXDOC_RET_ARRAY
      "The rounded values, with the dtype of ``a``.\n" FXDOC_EXAMPLE
      "    >>> mx.round(mx.array([0.5, 1.5, 2.5])).tolist()\n"
      "    [0.0, 2.0, 2.0]\n");
  m.def(
      "nan_to_num",
      [](const fx::array& a, double nan, std::optional<double> posinf,
         std::optional<double> neginf, fx::StreamOrDevice s) {
        return fx::nan_to_num(a, nan, posinf, neginf, s);
      },
      "a"_a, py::pos_only(), "nan"_a = 0.0f, "posinf"_a = py::none(),
      "neginf"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
      "Replace NaN and infinities with finite numbers." FXDOC_ARGS FXDOC_A
      "    nan (float, optional): Value for NaN. Default 0.\n"
      "    posinf (float, optional): Value for +inf; the largest finite\n"
      "        value of the dtype when omitted.\n"
      "    neginf (float, optional): Value for -inf; the lowest finite\n"
      "        value of the dtype when omitted.\n" FXDOC_STREAM FXDOC_RET_ARRAY
      "``a`` with those values replaced.\n");
  m.def(
      "bitwise_invert",
      [](const fx::array& a, fx::StreamOrDevice s) {
        return fx::bitwise_invert(a, s);
      },
      "a"_a, py::pos_only(), py::kw_only(), "stream"_a = py::none(),
      "Element-wise bitwise not of an integer or boolean array." FXDOC_ARGS
          FXDOC_A FXDOC_STREAM FXDOC_RET_ARRAY "``~a``.\n");

#define FLUXION_BINARY(NAME, FN, SUMMARY, RESULT)                       \
  m.def(NAME, &binary<FN>, "a"_a, "b"_a, py::pos_only(), py::kw_only(),  \
        "stream"_a = py::none(),                                        \
        SUMMARY FXDOC_ARGS FXDOC_AB FXDOC_STREAM FXDOC_RET_ARRAY RESULT \
        "\n");
  // The ops of the binary spec (fluxion/ops/elementwise_spec.h), with
  // their docstrings; core.pyi and docs/api/ops.rst list them too
  // (tools/gen_op_spec.py).
#define FLUXION_BINARY_SPEC_BINDING(A, CLASS, NAME, POLICY, FORM, TYPES,    \
                                    RULES, CPU, GPU, CU, SUMMARY, RESULT)   \
  FLUXION_BINARY(#NAME, fx::NAME, SUMMARY, RESULT)
  FLUXION_BINARY_SPEC(FLUXION_BINARY_SPEC_BINDING, _)
#undef FLUXION_BINARY_SPEC_BINDING
#undef FLUXION_BINARY
  m.def(
      "divmod",
      [](py::handle a, py::handle b, fx::StreamOrDevice s) {
        auto [x, y] = fxpy::to_arrays(a, b);
        auto qr = fx::divmod(x, y, s);
        return py::make_tuple(qr[0], qr[1]);
      },
      "a"_a, "b"_a, py::pos_only(), py::kw_only(), "stream"_a = py::none(),
      "Element-wise quotient and remainder in one call." FXDOC_ARGS FXDOC_AB
          FXDOC_STREAM FXDOC_RETURNS
      "    tuple(array, array): ``(floor_divide(a, b), remainder(a, b))``.\n");
  const auto s = "stream"_a = py::none();
  // --- fluxion/ops/astype.h ---
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
  // --- fluxion/ops/ternary.h ---
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
  // --- fluxion/ops/binary.h's comparisons of whole arrays ---
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
}
