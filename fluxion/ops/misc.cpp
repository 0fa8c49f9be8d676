#include "fluxion/ops/misc.h"

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

array astype(const array& a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) {
    return a;
  }
  return array(a.shape(), dtype, std::make_shared<AsType>(to_stream(s), dtype),
               {a});
}

array where(const array& condition, const array& x, const array& y,
            StreamOrDevice s) {
  auto st = to_stream(s);
  auto shape =
      broadcast_shapes(broadcast_shapes(condition.shape(), x.shape(), "where"),
                       y.shape(), "where");
  Dtype t = promote_types(x.dtype(), y.dtype());
  return array(shape, t, std::make_shared<Select>(st),
               {broadcast_to(astype(condition, bool_, st), shape, st),
                broadcast_to(astype(x, t, st), shape, st),
                broadcast_to(astype(y, t, st), shape, st)});
}

array clip(const array& a, const std::optional<array>& a_min,
           const std::optional<array>& a_max, StreamOrDevice s) {
  if (!a_min && !a_max) {
    throw std::invalid_argument(
        "[clip] At least one of a_min and a_max must be given.");
  }
  Shape shape = a.shape();
  for (auto* bound : {&a_min, &a_max}) {
    if (*bound) {
      shape = broadcast_shapes(shape, (*bound)->shape(), "clip");
    }
  }
  array out = a;
  if (a_min) {
    out = maximum(out, *a_min, s);
  }
  if (a_max) {
    out = minimum(out, *a_max, s);
  }
  return out;
}

namespace {

array isclose_impl(const array& a, const array& b, double rtol, double atol,
                   bool equal_nan, const char* name, StreamOrDevice s) {
  broadcast_shapes(a.shape(), b.shape(), name);
  // |a - b| <= atol + rtol * |b|, in at least float32: in a half type the
  // default atol (1e-8) would round to 0.
  Dtype t = promote_types(a.dtype(), b.dtype());
  t = is_complex(t) || t == float64 ? t : float32;
  auto x = astype(a, t, s);
  auto y = astype(b, t, s);
  auto ay = abs(y, s);
  auto rhs =
      add(array(atol, ay.dtype()), multiply(array(rtol, ay.dtype()), ay, s), s);
  auto out = less_equal(abs(subtract(x, y, s), s), rhs, s);
  // An infinite b makes the tolerance infinite: only equal values are close
  // then (as in NumPy), and inf == inf is close although inf - inf is nan.
  out = logical_or(logical_and(out, isfinite(y, s), s), equal(x, y, s), s);
  if (equal_nan) {
    out = logical_or(out, logical_and(isnan(x, s), isnan(y, s), s), s);
  }
  return out;
}

}  // namespace

array isclose(const array& a, const array& b, double rtol, double atol,
              bool equal_nan, StreamOrDevice s) {
  return isclose_impl(a, b, rtol, atol, equal_nan, "isclose", s);
}

array allclose(const array& a, const array& b, double rtol, double atol,
               bool equal_nan, StreamOrDevice s) {
  return all(isclose_impl(a, b, rtol, atol, equal_nan, "allclose", s), false,
             s);
}

array array_equal(const array& a, const array& b, bool equal_nan,
                  StreamOrDevice s) {
  if (a.shape() != b.shape()) {
    return array(false);
  }
  auto st = to_stream(s);
  Dtype t = promote_types(a.dtype(), b.dtype());
  auto eq = array(a.shape(), bool_, std::make_shared<Equal>(st, equal_nan),
                  {astype(a, t, st), astype(b, t, st)});
  return all(eq, false, s);
}

}  // namespace fluxion
