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
  auto shape = broadcast_shapes(
      broadcast_shapes(condition.shape(), x.shape(), "where"), y.shape(),
      "where");
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
  array out = a;
  if (a_min) {
    out = maximum(out, *a_min, s);
  }
  if (a_max) {
    out = minimum(out, *a_max, s);
  }
  return out;
}

array isclose(const array& a, const array& b, double rtol, double atol,
              bool equal_nan, StreamOrDevice s) {
  // |a - b| <= atol + rtol * |b|, computed in (at least) float32.
  Dtype t = at_least_float(promote_types(a.dtype(), b.dtype()));
  auto x = astype(a, t, s);
  auto y = astype(b, t, s);
  auto rhs = add(array(atol, abs(y, s).dtype()),
                 multiply(array(rtol, abs(y, s).dtype()), abs(y, s), s), s);
  auto out = less_equal(abs(subtract(x, y, s), s), rhs, s);
  // inf == inf counts as close; the subtraction above gives nan for it.
  out = logical_or(out, equal(x, y, s), s);
  if (equal_nan) {
    out = logical_or(out, logical_and(isnan(x, s), isnan(y, s), s), s);
  }
  return out;
}

array allclose(const array& a, const array& b, double rtol, double atol,
               bool equal_nan, StreamOrDevice s) {
  return all(isclose(a, b, rtol, atol, equal_nan, s), false, s);
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
