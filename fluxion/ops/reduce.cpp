#include "fluxion/ops/reduce.h"

#include <numeric>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/misc.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

namespace {

std::vector<int> all_axes(const array& a) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

Shape kept_shape(const Shape& shape, const std::vector<int>& axes) {
  Shape out = shape;
  for (int ax : axes) {
    out[ax] = 1;
  }
  return out;
}

// Sums and products of small integer types accumulate in 32 bits (MLX).
Dtype sum_dtype(Dtype t) {
  if (t == bool_ || t == int8 || t == int16) {
    return int32;
  }
  if (t == uint8 || t == uint16) {
    return uint32;
  }
  return t;
}

array reduce(const array& a, const std::vector<int>& axes, bool keepdims,
             Reduce::ReduceType type, Dtype out_dtype, const char* name,
             StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), name);
  auto st = to_stream(s);
  if (ax.empty()) {
    return astype(a, out_dtype, st);  // each element reduces to itself
  }
  Shape kept = kept_shape(a.shape(), ax);
  // As in NumPy: only an output fed by no elements needs an identity, so
  // max over the non-empty axis of a (0, 3) array is a fine (0,) array.
  if (a.size() == 0 && shape_size(kept) > 0 &&
      (type == Reduce::Min || type == Reduce::Max)) {
    throw std::invalid_argument(std::string("[") + name +
                                "] Cannot reduce an empty array of shape " +
                                shape_str(a.shape()) + " over axes " +
                                vec_str(axes) + ": there is no identity.");
  }
  array out(std::move(kept), out_dtype, std::make_shared<Reduce>(st, type, ax),
            {a});
  return keepdims ? out : squeeze(out, ax, st);
}

}  // namespace

#define FLUXION_REDUCTION_FORMS(NAME)                                     \
  array NAME(const array& a, bool keepdims, StreamOrDevice s) {           \
    return NAME(a, all_axes(a), keepdims, s);                             \
  }                                                                       \
  array NAME(const array& a, int axis, bool keepdims, StreamOrDevice s) { \
    return NAME(a, std::vector<int>{axis}, keepdims, s);                  \
  }

FLUXION_REDUCTION_FORMS(sum)
FLUXION_REDUCTION_FORMS(prod)
FLUXION_REDUCTION_FORMS(mean)
FLUXION_REDUCTION_FORMS(max)
FLUXION_REDUCTION_FORMS(min)
FLUXION_REDUCTION_FORMS(all)
FLUXION_REDUCTION_FORMS(any)
FLUXION_REDUCTION_FORMS(logsumexp)
#undef FLUXION_REDUCTION_FORMS

array sum(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce(a, axes, keepdims, Reduce::Sum, sum_dtype(a.dtype()), "sum", s);
}

array prod(const array& a, const std::vector<int>& axes, bool keepdims,
           StreamOrDevice s) {
  return reduce(a, axes, keepdims, Reduce::Prod, sum_dtype(a.dtype()), "prod",
                s);
}

array max(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce(a, axes, keepdims, Reduce::Max, a.dtype(), "max", s);
}

array min(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce(a, axes, keepdims, Reduce::Min, a.dtype(), "min", s);
}

array all(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce(a, axes, keepdims, Reduce::And, bool_, "all", s);
}

array any(const array& a, const std::vector<int>& axes, bool keepdims,
          StreamOrDevice s) {
  return reduce(a, axes, keepdims, Reduce::Or, bool_, "any", s);
}

namespace {

int64_t reduced_size(const array& a, const std::vector<int>& ax) {
  int64_t n = 1;
  for (int i : ax) {
    n *= a.shape(i);
  }
  return n;
}

// Statistics of half-precision inputs are computed in float32 and rounded
// once at the end: a float16 sum overflows past 65504 and 1/n underflows.
Dtype stats_dtype(Dtype t) {
  return t == float16 || t == bfloat16 ? float32 : at_least_float(t);
}

}  // namespace

array mean(const array& a, const std::vector<int>& axes, bool keepdims,
           StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "mean");
  double n = static_cast<double>(reduced_size(a, ax));
  Dtype ct = stats_dtype(a.dtype());
  // The kernel sums integers and half types into float32 directly.
  auto total = a.dtype() == ct
                   ? sum(a, ax, keepdims, s)
                   : reduce(a, ax, keepdims, Reduce::Sum, ct, "mean", s);
  auto out = multiply(total, array(1.0 / n, ct), s);
  return astype(out, at_least_float(a.dtype()), s);
}

array var(const array& a, const std::vector<int>& axes, bool keepdims, int ddof,
          StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "var");
  double n = static_cast<double>(reduced_size(a, ax));
  Dtype ct = stats_dtype(a.dtype());
  auto x = astype(a, ct, s);
  // Two passes (mean first) for accuracy; E[x^2] - E[x]^2 cancels badly.
  auto centered = subtract(x, mean(x, ax, true, s), s);
  auto sq = is_complex(ct)
                ? real(multiply(centered, conjugate(centered, s), s), s)
                : square(centered, s);
  auto total = sum(sq, ax, keepdims, s);
  // NumPy's convention: n - ddof <= 0 divides by zero (inf, or nan for 0).
  double denom = std::max(n - ddof, 0.0);
  auto out = multiply(total, array(1.0 / denom, total.dtype()), s);
  Dtype t = at_least_float(a.dtype());
  return astype(out, is_complex(t) ? float32 : t, s);
}

array std(const array& a, const std::vector<int>& axes, bool keepdims, int ddof,
          StreamOrDevice s) {
  return sqrt(var(a, axes, keepdims, ddof, s), s);
}

array var(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, all_axes(a), keepdims, ddof, s);
}
array var(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, std::vector<int>{axis}, keepdims, ddof, s);
}
array std(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, all_axes(a), keepdims, ddof, s);
}
array std(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, std::vector<int>{axis}, keepdims, ddof, s);
}

array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims,
                StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "logsumexp");
  Dtype t = at_least_float(a.dtype());
  auto x = astype(a, stats_dtype(a.dtype()), s);
  if (x.size() == 0) {
    return astype(log(sum(exp(x, s), ax, keepdims, s), s), t, s);
  }
  // Shift by the max; a max of +-inf would give nan, so use 0 there.
  auto m = stop_gradient(max(x, ax, true, s), s);
  m = where(isinf(m, s), array(0.0f, m.dtype()), m, s);
  auto out = add(log(sum(exp(subtract(x, m, s), s), ax, true, s), s), m, s);
  return astype(keepdims ? out : squeeze(out, ax, s), t, s);
}

array softmax(const array& a, const std::vector<int>& axes, bool precise,
              StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "softmax");
  Dtype t = at_least_float(a.dtype());
  auto x = astype(a, precise ? promote_types(t, float32) : t, s);
  if (x.size() == 0) {
    return astype(x, t, s);  // no max to shift by
  }
  auto m = stop_gradient(max(x, ax, true, s), s);
  auto e = exp(subtract(x, m, s), s);
  auto out = divide(e, sum(e, ax, true, s), s);
  return astype(out, t, s);
}

array softmax(const array& a, bool precise, StreamOrDevice s) {
  return softmax(a, all_axes(a), precise, s);
}
array softmax(const array& a, int axis, bool precise, StreamOrDevice s) {
  return softmax(a, std::vector<int>{axis}, precise, s);
}

array log_softmax(const array& a, const std::vector<int>& axes,
                  StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "log_softmax");
  auto x = astype(a, at_least_float(a.dtype()), s);
  if (x.size() == 0) {
    return x;
  }
  // (x - m) - log(sum(exp(x - m))) rather than x - logsumexp(x): for large
  // x the latter subtracts two nearly equal large numbers.
  auto m = stop_gradient(max(x, ax, true, s), s);
  m = where(isinf(m, s), array(0.0f, m.dtype()), m, s);
  auto y = subtract(x, m, s);
  return subtract(y, log(sum(exp(y, s), ax, true, s), s), s);
}
array log_softmax(const array& a, StreamOrDevice s) {
  return log_softmax(a, all_axes(a), s);
}
array log_softmax(const array& a, int axis, StreamOrDevice s) {
  return log_softmax(a, std::vector<int>{axis}, s);
}

namespace {
array arg_reduce(const array& a, int axis, bool keepdims,
                 ArgReduce::ReduceType type, const char* name,
                 StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), name);
  if (a.shape(ax) == 0) {
    throw std::invalid_argument(
        std::string("[") + name + "] Cannot reduce an empty axis " +
        std::to_string(axis) + " of shape " + shape_str(a.shape()) + ".");
  }
  auto st = to_stream(s);
  Shape shape = a.shape();
  shape[ax] = 1;
  array out(std::move(shape), uint32, std::make_shared<ArgReduce>(st, type, ax),
            {a});
  return keepdims ? out : squeeze(out, ax, st);
}
}  // namespace

array argmax(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce(a, axis, keepdims, ArgReduce::ArgMax, "argmax", s);
}
array argmin(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce(a, axis, keepdims, ArgReduce::ArgMin, "argmin", s);
}
array argmax(const array& a, bool keepdims, StreamOrDevice s) {
  auto out = argmax(reshape(a, {-1}, s), 0, false, s);
  return keepdims ? reshape(out, Shape(a.ndim(), 1), s) : out;
}
array argmin(const array& a, bool keepdims, StreamOrDevice s) {
  auto out = argmin(reshape(a, {-1}, s), 0, false, s);
  return keepdims ? reshape(out, Shape(a.ndim(), 1), s) : out;
}

const char* Reduce::name() const {
  switch (type_) {
    case And:
      return "All";
    case Or:
      return "Any";
    case Sum:
      return "Sum";
    case Prod:
      return "Prod";
    case Min:
      return "Min";
    case Max:
      return "Max";
  }
  return "Reduce";
}

bool Reduce::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& r = static_cast<const Reduce&>(o);
  return r.type_ == type_ && r.axes_ == axes_;
}

std::vector<Shape> Reduce::output_shapes(const std::vector<array>& in) {
  return {kept_shape(in[0].shape(), axes_)};
}

const char* ArgReduce::name() const {
  return type_ == ArgMin ? "ArgMin" : "ArgMax";
}

bool ArgReduce::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& r = static_cast<const ArgReduce&>(o);
  return r.type_ == type_ && r.axis_ == axis_;
}

std::vector<Shape> ArgReduce::output_shapes(const std::vector<array>& in) {
  Shape shape = in[0].shape();
  shape[axis_] = 1;
  return {shape};
}

}  // namespace fluxion
