#include "fluxion/ops/reduce.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"

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

array reduce(const array& a, const std::vector<int>& axes, bool keepdims,
             Reduce::ReduceType type, Dtype out_dtype, const char* name,
             StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), name);
  auto st = to_stream(s);
  if (ax.empty()) {
    return astype(a, out_dtype, st);  // each element reduces to itself
  }
  Shape kept = kept_shape(a.shape(), ax);
  // As in NumPy: max and min have no identity, so reducing over an empty
  // axis raises (even into an empty result), while max over the non-empty
  // axis of a (0, 3) array is a fine (0,) array.
  bool empty_axis = false;
  for (int d : ax) {
    empty_axis = empty_axis || a.shape(d) == 0;
  }
  if (empty_axis && (type == Reduce::Min || type == Reduce::Max)) {
    throw std::invalid_argument(std::string("[") + name +
                                "] Cannot reduce an empty array of shape " +
                                shape_str(a.shape()) + " over axes " +
                                vec_str(axes) + ": there is no identity.");
  }
  array out(std::move(kept), out_dtype,
            std::make_shared<Reduce>(st, type, ax, out_dtype), {a});
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

// Statistics of half-precision inputs are computed in float32 and rounded
// once at the end: a float16 sum overflows past 65504 and 1/n underflows.
Dtype stats_dtype(Dtype t) {
  return t == float16 || t == bfloat16 ? float32 : at_least_float(t);
}

}  // namespace

array mean(const array& a, const std::vector<int>& axes, bool keepdims,
           StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "mean");
  Dtype ct = stats_dtype(a.dtype());
  // The kernel sums integers and half types into float32 directly.
  auto total = a.dtype() == ct
                   ? sum(a, ax, keepdims, s)
                   : reduce(a, ax, keepdims, Reduce::Sum, ct, "mean", s);
  auto out = divide(total, number_of_elements(a, ax, ct, s), s);
  return astype(out, at_least_float(a.dtype()), s);
}

array var(const array& a, const std::vector<int>& axes, bool keepdims, int ddof,
          StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "var");
  Dtype ct = stats_dtype(a.dtype());
  auto x = astype(a, ct, s);
  // Two passes (mean first) for accuracy; E[x^2] - E[x]^2 cancels badly.
  auto centered = subtract(x, mean(x, ax, true, s), s);
  auto sq = is_complex(ct)
                ? real(multiply(centered, conjugate(centered, s), s), s)
                : square(centered, s);
  auto total = sum(sq, ax, keepdims, s);
  // NumPy's convention: n - ddof <= 0 divides by zero (inf, or nan for 0).
  // n is a node, not a number: shapeless compiles replay it on new shapes.
  auto count = number_of_elements(a, ax, total.dtype(), s);
  auto denom = maximum(subtract(count, array(ddof, total.dtype()), s),
                       array(0, total.dtype()), s);
  auto out = divide(total, denom, s);
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
  if (ax.size() == 1 && ax[0] == a.ndim() - 1 && a.size() > 0) {
    // One pass over each row (computed in float for the half types, so
    // `precise` holds either way).
    auto st = to_stream(s);
    auto x = astype(a, t, st);
    return array(x.shape(), t, std::make_shared<Softmax>(st), {x});
  }
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
  return r.type_ == type_ && r.axes_ == axes_ && r.dtype_ == dtype_;
}

std::vector<PrimitiveArg> Reduce::state() const {
  return export_state(int64_t{type_}, export_ints(axes_), dtype_);
}

std::shared_ptr<Primitive> Reduce::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Reduce");
  auto type = a.enum_up_to(0, Max);
  return std::make_shared<Reduce>(s, type, a.ints(1), a.dt(2));
}

std::vector<Shape> Reduce::output_shapes(const std::vector<array>& in) {
  // The axes were normalized when the node was built, but a node replayed
  // from a file (import_function) carries the file's axes: checked here so
  // that a corrupt one raises instead of writing past the shape.
  for (int ax : axes_) {
    if (ax < 0 || ax >= in[0].ndim()) {
      throw std::invalid_argument("[" + std::string(name()) + "] Axis " +
                                  std::to_string(ax) +
                                  " is out of range for an array with " +
                                  std::to_string(in[0].ndim()) +
                                  " dimensions.");
    }
  }
  return {kept_shape(in[0].shape(), axes_)};
}

array number_of_elements(const array& a, const std::vector<int>& axes,
                         Dtype dtype, StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "number_of_elements");
  return array(Shape{}, dtype,
               std::make_shared<NumberOfElements>(to_stream(s), std::move(ax),
                                                  dtype),
               {a});
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

std::vector<PrimitiveArg> ArgReduce::state() const {
  return export_state(int64_t{type_}, int64_t{axis_});
}

std::shared_ptr<Primitive> ArgReduce::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ArgReduce");
  auto type = a.enum_up_to(0, ArgMax);
  return std::make_shared<ArgReduce>(s, type, a.i32(1));
}

std::vector<Shape> ArgReduce::output_shapes(const std::vector<array>& in) {
  Shape shape = in[0].shape();
  shape[axis_] = 1;
  return {shape};
}

// --- transformation rules ---

namespace {

// The axes of the unbatched primitive, in the coordinates of an input with
// a batch axis inserted at `batch_axis` (-1: none, the input is unmapped).
std::vector<int> past_batch_axis(std::vector<int> axes, int batch_axis) {
  if (batch_axis < 0) {
    return axes;
  }
  for (auto& a : axes) {
    a += a >= batch_axis ? 1 : 0;
  }
  return axes;
}

// `a[..., start:stop]` along the last axis.
array last_axis_slice(const array& a, int start, int stop, Stream s) {
  Shape lo(a.ndim(), 0);
  Shape hi = a.shape();
  lo.back() = start;
  hi.back() = stop;
  return slice(a, lo, hi, s);
}

// For each element of `x`, the product of the other elements of its group
// over `axes`. Not prod / x: that is nan at a zero, and wrong for the other
// elements of a group with one zero. Instead the exclusive prefix and
// suffix products along the flattened reduced axes are multiplied, each a
// Hillis-Steele scan (log2(n) shifted products). Public ops only, so the
// result differentiates again exactly, zeros included.
array product_of_others(const array& x, const std::vector<int>& axes,
                        Stream s) {
  int n = 1;
  for (int a : axes) {
    n *= x.shape(a);
  }
  if (x.size() == 0 || n == 1) {
    return ones_like(x, s);  // an empty product
  }
  // Kept axes first, then the reduced ones flattened into one of size n.
  std::vector<int> perm;
  for (int i = 0; i < x.ndim(); ++i) {
    if (!std::binary_search(axes.begin(), axes.end(), i)) {
      perm.push_back(i);
    }
  }
  perm.insert(perm.end(), axes.begin(), axes.end());
  auto xt = transpose(x, perm, s);
  Shape flat(xt.shape().begin(), xt.shape().end() - axes.size());
  flat.push_back(n);
  auto y = reshape(xt, flat, s);
  int last = static_cast<int>(flat.size()) - 1;

  auto prefix = y;  // prefix[i] = y[0] * ... * y[i]
  auto suffix = y;  // suffix[i] = y[i] * ... * y[n-1]
  for (int k = 1; k < n; k *= 2) {
    prefix = concatenate({last_axis_slice(prefix, 0, k, s),
                          multiply(last_axis_slice(prefix, k, n, s),
                                   last_axis_slice(prefix, 0, n - k, s), s)},
                         last, s);
    suffix = concatenate({multiply(last_axis_slice(suffix, 0, n - k, s),
                                   last_axis_slice(suffix, k, n, s), s),
                          last_axis_slice(suffix, n - k, n, s)},
                         last, s);
  }
  Shape unit = flat;
  unit.back() = 1;
  auto one = ones(unit, x.dtype(), s);
  auto before =
      concatenate({one, last_axis_slice(prefix, 0, n - 1, s)}, last, s);
  auto after = concatenate({last_axis_slice(suffix, 1, n, s), one}, last, s);
  auto others = reshape(multiply(before, after, s), xt.shape(), s);
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    inverse[perm[i]] = static_cast<int>(i);
  }
  return transpose(others, inverse, s);
}

}  // namespace

array Reduce::apply(const array& x, const std::vector<int>& axes) {
  return array(kept_shape(x.shape(), axes), dtype_,
               std::make_shared<Reduce>(stream(), type_, axes, dtype_), {x});
}

std::vector<array> Reduce::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const auto& x = primals[0];
  auto s = stream();
  if (type_ == And || type_ == Or) {
    return {zeros(kept_shape(x.shape(), axes_), tangents[0].dtype(), s)};
  }
  // Sums in the output's dtype (mean() sums half types in float32). The
  // rules are linear in the tangent, so integer reductions push integer
  // tangents through them as well (jvp of an integer sum is the sum of the
  // tangents, as MLX); only the vjp treats integers as constants.
  auto total = [&](const array& v) {
    return sum(astype(v, dtype_, s), axes_, true, s);
  };
  const auto& t = tangents[0];
  if (!is_inexact(x.dtype()) && (type_ == Min || type_ == Max)) {
    // Integer ties share the tangent by floor division (exact without
    // ties, where the count is one).
    auto mask = equal(x, apply(x, axes_), s);
    auto count = astype(sum(mask, axes_, true, s), dtype_, s);
    return {floor_divide(total(where(mask, t, array(0, t.dtype()), s)), count,
                         s)};
  }
  switch (type_) {
    case Sum:
      return {total(t)};
    case Prod:
      return {total(multiply(t, product_of_others(x, axes_, s), s))};
    default: {  // Min, Max: the mean tangent of the tied extremes
      auto mask = equal(x, apply(x, axes_), s);
      auto count = astype(sum(mask, axes_, true, s), dtype_, s);
      return {divide(total(where(mask, t, array(0, t.dtype()), s)), count, s)};
    }
  }
}

std::vector<array> Reduce::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums,
                               const std::vector<array>& outputs) {
  const auto& x = primals[0];
  auto s = stream();
  // Integer inputs take gradients in their dtype, as MLX (the sum's
  // cotangent broadcast back); bool inputs and logical reductions none.
  if (x.dtype() == bool_ || type_ == And || type_ == Or) {
    return {zeros_like(x, s)};
  }
  // The cotangent has the output's kept shape and dtype.
  auto ct = astype(cotangents[0], x.dtype(), s);
  switch (type_) {
    case Sum:
      // Against x, so that grad under a shapeless compile follows x's
      // shape on every replay (shape.h, BroadcastAxes).
      return {detail::broadcast_against(ct, {x}, x.shape(), 0, s)};
    case Prod:
      return {multiply(ct, product_of_others(x, axes_, s), s)};
    default: {  // Min, Max: shared equally among the tied extremes
      auto mask = equal(x, outputs[0], s);
      auto count = astype(sum(mask, axes_, true, s), ct.dtype(), s);
      // An integer share is the float share truncated (exact without ties).
      return {astype(where(mask, divide(ct, count, s), array(0, ct.dtype()), s),
                     x.dtype(), s)};
    }
  }
}

std::pair<std::vector<array>, std::vector<int>> Reduce::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // Reduced axes stay (size 1), so the batch axis keeps its position.
  return {{apply(inputs[0], past_batch_axis(axes_, axes[0]))}, axes};
}

std::vector<array> ArgReduce::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>& argnums) {
  return {zeros(output_shapes(primals)[0], uint32, stream())};
}

std::vector<array> ArgReduce::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums,
                                  const std::vector<array>& outputs) {
  return {zeros_like(primals[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> ArgReduce::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int axis = past_batch_axis({axis_}, axes[0])[0];
  const auto& x = inputs[0];
  Shape shape = x.shape();
  shape[axis] = 1;
  return {{array(std::move(shape), uint32,
                 std::make_shared<ArgReduce>(stream(), type_, axis), {x})},
          axes};
}

bool NumberOfElements::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& r = static_cast<const NumberOfElements&>(o);
  return r.axes_ == axes_ && r.dtype_ == dtype_;
}

std::vector<PrimitiveArg> NumberOfElements::state() const {
  return export_state(export_ints(axes_), dtype_);
}

std::shared_ptr<Primitive> NumberOfElements::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "NumberOfElements");
  return std::make_shared<NumberOfElements>(s, a.ints(0), a.dt(1));
}

std::vector<array> NumberOfElements::jvp(const std::vector<array>&,
                                         const std::vector<array>& tangents,
                                         const std::vector<int>&) {
  Dtype t = is_inexact(dtype_) ? dtype_ : tangents[0].dtype();
  return {zeros(Shape{}, t, stream())};
}

std::vector<array> NumberOfElements::vjp(const std::vector<array>& primals,
                                         const std::vector<array>&,
                                         const std::vector<int>&,
                                         const std::vector<array>&) {
  return {zeros_like(primals[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> NumberOfElements::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  // The same count for every batch element, broadcast along the batch
  // (a stride-0 view).
  auto s = stream();
  auto ax = axes[0] < 0 ? axes_ : past_batch_axis(axes_, axes[0]);
  auto n = number_of_elements(inputs[0], ax, dtype_, s);
  if (axes[0] < 0) {
    return {{n}, {-1}};
  }
  return {{broadcast_to(n, {inputs[0].shape(axes[0])}, s)}, {0}};
}

// ------------------------------------------------------------- Softmax

namespace {
// y * (t - sum(t * y)) along the last axis: the jvp's and the vjp's form.
array softmax_tangent(const array& y, const array& t, Stream s) {
  auto ty = multiply(t, y, s);
  return subtract(ty, multiply(y, sum(ty, std::vector<int>{-1}, true, s), s),
                  s);
}
}  // namespace

std::vector<array> Softmax::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>&) {
  array y(primals[0].shape(), primals[0].dtype(),
          std::make_shared<Softmax>(stream()), {primals[0]});
  return {softmax_tangent(y, tangents[0], stream())};
}

std::vector<array> Softmax::vjp(const std::vector<array>&,
                                const std::vector<array>& cotangents,
                                const std::vector<int>&,
                                const std::vector<array>& outputs) {
  return {softmax_tangent(outputs[0], cotangents[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> Softmax::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  array x = inputs[0];
  int ax = axes[0];
  if (ax == x.ndim() - 1) {  // the batch axis is the softmax's: move it
    x = moveaxis(x, ax, 0, stream());
    ax = 0;
  }
  return {{array(x.shape(), x.dtype(), std::make_shared<Softmax>(stream()),
                 {x})},
          {ax}};
}

}  // namespace fluxion
