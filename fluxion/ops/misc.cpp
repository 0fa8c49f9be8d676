#include "fluxion/ops/misc.h"

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/rule_helpers.h"
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

// --- transformation rules ---

namespace {
bool passes_gradient(Dtype from, Dtype to) {
  return is_inexact(from) && is_inexact(to);
}
}  // namespace

std::vector<array> AsType::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const auto& x = primals[0];
  if (!passes_gradient(x.dtype(), dtype_)) {
    return {zeros(x.shape(), dtype_, stream())};
  }
  return {astype(tangents[0], dtype_, stream())};
}

std::vector<array> AsType::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>& outputs) {
  const auto& x = primals[0];
  if (!passes_gradient(x.dtype(), dtype_)) {
    return {zeros_like(x, stream())};
  }
  // Complex to real keeps the real part, so its transpose is ct + 0i; real
  // to complex is the embedding, whose transpose takes the real part: both
  // are the cast back.
  return {astype(cotangents[0], x.dtype(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> AsType::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{astype(inputs[0], dtype_, stream())}, axes};
}

std::vector<array> Select::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  auto s = stream();
  const auto& x = primals[1];
  // Tangents of x and y; one not given (or the condition's) is zero.
  std::optional<array> tx, ty;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 1) {
      tx = tangents[i];
    } else if (argnums[i] == 2) {
      ty = tangents[i];
    }
  }
  if (!is_inexact(x.dtype()) || (!tx && !ty)) {
    return {zeros_like(x, s)};
  }
  auto zero = array(0, x.dtype());
  return {where(primals[0], tx ? *tx : zero, ty ? *ty : zero, s)};
}

std::vector<array> Select::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>& outputs) {
  auto s = stream();
  const auto& cond = primals[0];
  const auto& ct = cotangents[0];
  auto zero = array(0, ct.dtype());
  std::vector<array> vjps;
  for (int arg : argnums) {
    if (arg == 0 || !is_inexact(primals[arg].dtype())) {
      vjps.push_back(zeros_like(primals[arg], s));
    } else {
      vjps.push_back(arg == 1 ? where(cond, ct, zero, s)
                              : where(cond, zero, ct, s));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> Select::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto [in, ax] = rules::align_mapped_axes(inputs, axes, stream());
  Shape shape = in[0].shape();
  Dtype t = in[1].dtype();
  return {{array(std::move(shape), t, std::make_shared<Select>(stream()),
                 std::move(in))},
          {ax}};
}

}  // namespace fluxion
