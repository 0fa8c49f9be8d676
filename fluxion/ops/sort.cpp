#include "fluxion/ops/sort.h"

#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

array flat(const array& a, Stream s) { return reshape(a, {-1}, s); }

array make_sort(const array& a, int ax, Stream st) {
  return array(a.shape(), a.dtype(), std::make_shared<Sort>(st, ax), {a});
}
array make_argsort(const array& a, int ax, Stream st) {
  return array(a.shape(), uint32, std::make_shared<ArgSort>(st, ax), {a});
}
array make_partition(const array& a, int kth, int ax, Stream st) {
  return array(a.shape(), a.dtype(), std::make_shared<Partition>(st, kth, ax),
               {a});
}
array make_argpartition(const array& a, int kth, int ax, Stream st) {
  return array(a.shape(), uint32, std::make_shared<ArgPartition>(st, kth, ax),
               {a});
}

// kth in [-n, n) normalized to [0, n).
int normalize_kth(const array& a, int kth, int ax, int axis, const char* op) {
  int n = a.shape(ax);
  if (kth < -n || kth >= n) {
    throw std::invalid_argument(
        std::string("[") + op + "] Received invalid kth " +
        std::to_string(kth) + " along axis " + std::to_string(axis) +
        " of an array of shape " + shape_str(a.shape()) + ".");
  }
  return kth < 0 ? kth + n : kth;
}

// Sums and products accumulate in sum_dtype (dtype.h); the other scans
// keep the dtype.
Dtype scan_dtype(Scan::ReduceType type, Dtype t) {
  return type == Scan::Sum || type == Scan::Prod ? sum_dtype(t) : t;
}

array make_scan(const array& a, Scan::ReduceType type, int ax, bool reverse,
                bool inclusive, Stream st) {
  return array(a.shape(), scan_dtype(type, a.dtype()),
               std::make_shared<Scan>(st, type, ax, reverse, inclusive), {a});
}

array scan(const array& a, int axis, bool reverse, bool inclusive,
           Scan::ReduceType type, const char* name, StreamOrDevice s) {
  auto st = to_stream(s);
  int ax = normalize_axis(axis, a.ndim(), name);
  array x = a;
  if (type == Scan::LogAddExp) {
    if (a.dtype() == bool_) {
      throw std::invalid_argument(
          std::string("[") + name + "] Received an input of dtype " +
          dtype_name(a.dtype()) + ": it needs a real number type.");
    }
    x = astype(a, at_least_float(a.dtype()), st);
  }
  return make_scan(x, type, ax, reverse, inclusive, st);
}

// The axis of the unbatched primitive in an input whose batch axis is
// `batch_axis` (-1: unmapped).
int past_batch_axis(int axis, int batch_axis) {
  return batch_axis >= 0 && axis >= batch_axis ? axis + 1 : axis;
}

}  // namespace

array sort(const array& a, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "sort");
  return make_sort(a, ax, to_stream(s));
}
array sort(const array& a, StreamOrDevice s) {
  return sort(flat(a, to_stream(s)), 0, s);
}
array argsort(const array& a, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "argsort");
  return make_argsort(a, ax, to_stream(s));
}
array argsort(const array& a, StreamOrDevice s) {
  return argsort(flat(a, to_stream(s)), 0, s);
}

array partition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "partition");
  int k = normalize_kth(a, kth, ax, axis, "partition");
  return make_partition(a, k, ax, to_stream(s));
}
array partition(const array& a, int kth, StreamOrDevice s) {
  return partition(flat(a, to_stream(s)), kth, 0, s);
}
array argpartition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "argpartition");
  int k = normalize_kth(a, kth, ax, axis, "argpartition");
  return make_argpartition(a, k, ax, to_stream(s));
}
array argpartition(const array& a, int kth, StreamOrDevice s) {
  return argpartition(flat(a, to_stream(s)), kth, 0, s);
}

array topk(const array& a, int k, int axis, StreamOrDevice s) {
  auto st = to_stream(s);
  int ax = normalize_axis(axis, a.ndim(), "topk");
  int n = a.shape(ax);
  if (k < 0 || k > n) {
    throw std::invalid_argument(
        "[topk] Received k = " + std::to_string(k) + " for axis " +
        std::to_string(axis) + " of an array of shape " + shape_str(a.shape()) +
        ": k must be in [0, " + std::to_string(n) + "].");
  }
  if (k == 0) {
    Shape stop = a.shape();
    stop[ax] = 0;
    return slice(a, Shape(a.ndim(), 0), stop, st);
  }
  // The k largest sit after position n - k of a partition; sorting just
  // those and reading them backwards costs O(k log k).
  auto part = make_partition(a, n - k, ax, st);
  Shape lo(a.ndim(), 0);
  Shape hi = a.shape();
  lo[ax] = n - k;
  auto largest = make_sort(slice(part, lo, hi, st), ax, st);
  Shape start(a.ndim(), 0);
  Shape stop = largest.shape();
  Shape strides(a.ndim(), 1);
  start[ax] = k - 1;
  stop[ax] = -k - 1;  // before the first element (NumPy clamping)
  strides[ax] = -1;
  return slice(largest, start, stop, strides, st);
}
array topk(const array& a, int k, StreamOrDevice s) {
  return topk(flat(a, to_stream(s)), k, 0, s);
}

#define FLUXION_SCAN_DEF(NAME, TYPE)                                           \
  array NAME(const array& a, int axis, bool reverse, bool inclusive,           \
             StreamOrDevice s) {                                               \
    return scan(a, axis, reverse, inclusive, Scan::TYPE, #NAME, s);            \
  }                                                                            \
  array NAME(const array& a, bool reverse, bool inclusive, StreamOrDevice s) { \
    return scan(flat(a, to_stream(s)), 0, reverse, inclusive, Scan::TYPE,      \
                #NAME, s);                                                     \
  }
FLUXION_SCAN_DEF(cumsum, Sum)
FLUXION_SCAN_DEF(cumprod, Prod)
FLUXION_SCAN_DEF(cummax, Max)
FLUXION_SCAN_DEF(cummin, Min)
FLUXION_SCAN_DEF(logcumsumexp, LogAddExp)
#undef FLUXION_SCAN_DEF

bool Sort::is_equivalent(const Primitive& o) const {
  return typeid(o) == typeid(*this) &&
         static_cast<const Sort&>(o).axis_ == axis_;
}

std::vector<PrimitiveArg> Sort::state() const {
  return export_state(int64_t{axis_});
}

std::shared_ptr<Primitive> Sort::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Sort");
  return std::make_shared<Sort>(s, a.i32(0));
}

bool ArgSort::is_equivalent(const Primitive& o) const {
  return typeid(o) == typeid(*this) &&
         static_cast<const ArgSort&>(o).axis_ == axis_;
}

std::vector<PrimitiveArg> ArgSort::state() const {
  return export_state(int64_t{axis_});
}

std::shared_ptr<Primitive> ArgSort::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ArgSort");
  return std::make_shared<ArgSort>(s, a.i32(0));
}

bool Partition::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const Partition&>(o);
  return p.kth_ == kth_ && p.axis_ == axis_;
}

std::vector<PrimitiveArg> Partition::state() const {
  return export_state(int64_t{kth_}, int64_t{axis_});
}

std::shared_ptr<Primitive> Partition::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Partition");
  return std::make_shared<Partition>(s, a.i32(0), a.i32(1));
}

bool ArgPartition::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const ArgPartition&>(o);
  return p.kth_ == kth_ && p.axis_ == axis_;
}

std::vector<PrimitiveArg> ArgPartition::state() const {
  return export_state(int64_t{kth_}, int64_t{axis_});
}

std::shared_ptr<Primitive> ArgPartition::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ArgPartition");
  return std::make_shared<ArgPartition>(s, a.i32(0), a.i32(1));
}

bool Scan::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& p = static_cast<const Scan&>(o);
  return p.type_ == type_ && p.axis_ == axis_ && p.reverse_ == reverse_ &&
         p.inclusive_ == inclusive_;
}

std::vector<PrimitiveArg> Scan::state() const {
  return export_state(int64_t{type_}, int64_t{axis_}, reverse_, inclusive_);
}

std::shared_ptr<Primitive> Scan::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Scan");
  auto type = a.enum_up_to(0, LogAddExp);
  return std::make_shared<Scan>(s, type, a.i32(1), a.b(2), a.b(3));
}

void Scan::print(std::ostream& os) const {
  static const char* names[] = {"Sum", "Prod", "Max", "Min", "LogAddExp"};
  os << "Scan(" << names[type_] << ", axis=" << axis_
     << (reverse_ ? ", reverse" : "") << (inclusive_ ? "" : ", exclusive")
     << ")";
}

// --- transformation rules ---

namespace {

// The cotangent (or tangent) of a permuted output sent back to the input
// positions `idx` came from.
array unpermute(const array& ct, const array& idx, int axis, Stream s) {
  return put_along_axis(zeros_like(ct, s), idx, ct, axis, s);
}

}  // namespace

std::vector<array> Sort::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  auto s = stream();
  // Indices computed from the primal: constants for higher derivatives
  // (index derivatives raise).
  auto idx = stop_gradient(make_argsort(primals[0], axis_, s), s);
  return {take_along_axis(tangents[0], idx, axis_, s)};
}
std::vector<array> Sort::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  auto s = stream();
  auto idx = stop_gradient(make_argsort(primals[0], axis_, s), s);
  return {unpermute(cotangents[0], idx, axis_, s)};
}
std::pair<std::vector<array>, std::vector<int>> Sort::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{make_sort(inputs[0], past_batch_axis(axis_, axes[0]), stream())},
          axes};
}

std::vector<array> ArgSort::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  return {zeros(primals[0].shape(), uint32, stream())};
}
std::vector<array> ArgSort::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  return {zeros_like(primals[0], stream())};
}
std::pair<std::vector<array>, std::vector<int>> ArgSort::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{make_argsort(inputs[0], past_batch_axis(axis_, axes[0]), stream())},
          axes};
}

std::vector<array> Partition::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>& argnums) {
  auto s = stream();
  auto idx = stop_gradient(make_argpartition(primals[0], kth_, axis_, s), s);
  return {take_along_axis(tangents[0], idx, axis_, s)};
}
std::vector<array> Partition::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums,
                                  const std::vector<array>& outputs) {
  auto s = stream();
  auto idx = stop_gradient(make_argpartition(primals[0], kth_, axis_, s), s);
  return {unpermute(cotangents[0], idx, axis_, s)};
}
std::pair<std::vector<array>, std::vector<int>> Partition::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{make_partition(inputs[0], kth_, past_batch_axis(axis_, axes[0]),
                          stream())},
          axes};
}

std::vector<array> ArgPartition::jvp(const std::vector<array>& primals,
                                     const std::vector<array>& tangents,
                                     const std::vector<int>& argnums) {
  return {zeros(primals[0].shape(), uint32, stream())};
}
std::vector<array> ArgPartition::vjp(const std::vector<array>& primals,
                                     const std::vector<array>& cotangents,
                                     const std::vector<int>& argnums,
                                     const std::vector<array>& outputs) {
  return {zeros_like(primals[0], stream())};
}
std::pair<std::vector<array>, std::vector<int>> ArgPartition::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{make_argpartition(inputs[0], kth_, past_batch_axis(axis_, axes[0]),
                             stream())},
          axes};
}

namespace {

// Slices [start, stop) of `a` along `axis`.
array axis_slice(const array& a, int axis, int start, int stop, Stream s) {
  Shape lo(a.ndim(), 0);
  Shape hi = a.shape();
  lo[axis] = start;
  hi[axis] = stop;
  return slice(a, lo, hi, s);
}

// `a` moved one step along `axis` in the scan direction (`toward_end`
// true: out[i] = a[i - 1]), with a zero coming in.
array shift(const array& a, int axis, bool toward_end, Stream s) {
  int n = a.shape(axis);
  if (n == 0) {
    return a;
  }
  Shape zshape = a.shape();
  zshape[axis] = 1;
  auto z = zeros(zshape, a.dtype(), s);
  if (toward_end) {
    return concatenate({z, axis_slice(a, axis, 0, n - 1, s)}, axis, s);
  }
  return concatenate({axis_slice(a, axis, 1, n, s), z}, axis, s);
}

// 0, 1, ..., n-1 along `axis`, broadcast to `shape`.
array positions(const Shape& shape, int axis, Stream s) {
  Shape unit(shape.size(), 1);
  unit[axis] = shape[axis];
  return broadcast_to(reshape(arange(0, shape[axis], int32, s), unit, s), shape,
                      s);
}

// A signed weight c as logs of its positive and negative parts (-inf where
// a part is 0): sums of c_i exp(z_i) then become differences of two
// logsumexps, which neither overflow nor underflow however wide the range
// of z. The inner `where` keeps log's derivative finite at the zeros.
std::pair<array, array> log_parts(const array& c, Stream s) {
  auto zero = array(0, c.dtype());
  auto one = array(1, c.dtype());
  auto neg_inf = array(-std::numeric_limits<double>::infinity(), c.dtype());
  auto pos = greater(c, zero, s);
  auto neg = less(c, zero, s);
  return {where(pos, log(where(pos, c, one, s), s), neg_inf, s),
          where(neg, log(where(neg, negative(c, s), one, s), s), neg_inf, s)};
}

// A running logsumexp with -inf (an all -inf prefix, whose elements weigh
// nothing) replaced by 0, so that x - y is never -inf - -inf.
array safe_lse(const array& y, Stream s) {
  auto neg_inf = array(-std::numeric_limits<double>::infinity(), y.dtype());
  return where(equal(y, neg_inf, s), array(0, y.dtype()), y, s);
}

}  // namespace

// The inclusive scan's Jacobian products; the exclusive scan's are obtained
// by shifting (its output i is the inclusive output i - 1).
std::vector<array> Scan::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  const auto& x = primals[0];
  auto s = stream();
  Dtype out_t = scan_dtype(type_, x.dtype());
  if (!is_inexact(x.dtype())) {
    return {zeros(x.shape(), out_t, s)};
  }
  const auto& t = tangents[0];
  auto fwd = [&](const array& v, ReduceType type) {
    return make_scan(v, type, axis_, reverse_, true, s);
  };
  array out = t;
  switch (type_) {
    case Sum:
      return {make_scan(t, Sum, axis_, reverse_, inclusive_, s)};
    case Prod: {
      // Before the first zero along the scan: y * cumsum(t / x). From the
      // first zero on, only its own term survives: t[j0] times the product
      // of the others (the scan with that zero replaced by 1).
      auto zero = equal(x, array(0, x.dtype()), s);
      auto nz = fwd(astype(zero, int32, s), Sum);
      auto before = equal(nz, array(0, int32), s);
      auto first = logical_and(zero, equal(nz, array(1, int32), s), s);
      auto x1 = where(first, array(1, x.dtype()), x, s);
      auto x_safe = where(before, x, array(1, x.dtype()), s);
      auto y1 = fwd(x1, Prod);
      auto head = multiply(
          y1,
          fwd(where(before, divide(t, x_safe, s), array(0, x.dtype()), s), Sum),
          s);
      auto tail =
          multiply(fwd(where(first, t, array(0, x.dtype()), s), Sum), y1, s);
      out = where(before, head, tail, s);
      break;
    }
    case Max:
    case Min: {
      // The tangent of the element the running extremum came from.
      auto y = fwd(x, type_);
      auto pos = positions(x.shape(), axis_, s);
      int none = reverse_ ? x.shape(axis_) : -1;
      auto src = where(equal(x, y, s), pos, array(none, int32), s);
      src = stop_gradient(fwd(src, reverse_ ? Min : Max), s);
      out = take_along_axis(t, src, axis_, s);
      break;
    }
    case LogAddExp: {
      // sum_{j<=i} t_j exp(x_j - y_i), in the log domain (see log_parts).
      auto y = safe_lse(fwd(x, LogAddExp), s);
      auto [lp, lq] = log_parts(t, s);
      auto part = [&](const array& l) {
        return exp(subtract(fwd(add(x, l, s), LogAddExp), y, s), s);
      };
      out = subtract(part(lp), part(lq), s);
      break;
    }
  }
  return {inclusive_ ? out : shift(out, axis_, !reverse_, s)};
}

std::vector<array> Scan::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  const auto& x = primals[0];
  auto s = stream();
  // Integer inputs take gradients in their dtype (MLX); bool none.
  if (x.dtype() == bool_) {
    return {zeros_like(x, s)};
  }
  auto ct = astype(cotangents[0], x.dtype(), s);
  if (type_ == Sum) {
    return {make_scan(ct, Sum, axis_, !reverse_, inclusive_, s)};
  }
  // Output i of the exclusive scan is inclusive output i - 1: its
  // cotangent moves one step back.
  if (!inclusive_) {
    ct = shift(ct, axis_, reverse_, s);
  }
  auto fwd = [&](const array& v, ReduceType type) {
    return make_scan(v, type, axis_, reverse_, true, s);
  };
  auto bwd_sum = [&](const array& v) {
    return make_scan(v, Sum, axis_, !reverse_, true, s);
  };
  auto zero_v = array(0, x.dtype());
  switch (type_) {
    case Prod: {
      // dx_j = sum_{i>=j} ct_i prod_{k<=i, k!=j} x_k. Terms through a zero
      // other than x_j vanish: before the first zero j0 only i < j0 count,
      // and there prod/x_j is safe; at j0 it is the scan of the others (x_j0
      // replaced by 1); after j0 every term holds x_j0 = 0.
      auto zero = equal(x, zero_v, s);
      auto nz = fwd(astype(zero, int32, s), Sum);
      auto before = equal(nz, array(0, int32), s);
      auto first = logical_and(zero, equal(nz, array(1, int32), s), s);
      auto x1 = where(first, array(1, x.dtype()), x, s);
      auto x_safe = where(before, x, array(1, x.dtype()), s);
      auto w = multiply(ct, fwd(x1, Prod), s);
      auto head = divide(bwd_sum(where(before, w, zero_v, s)), x_safe, s);
      auto at_first = bwd_sum(w);
      return {astype(where(before, head, where(first, at_first, zero_v, s), s),
                     x.dtype(), s)};
    }
    case Max:
    case Min: {
      auto y = fwd(x, type_);
      auto pos = positions(x.shape(), axis_, s);
      int none = reverse_ ? x.shape(axis_) : -1;
      auto src = where(equal(x, y, s), pos, array(none, int32), s);
      src = stop_gradient(fwd(src, reverse_ ? Min : Max), s);
      return {scatter_add_axis(zeros_like(x, s), src, ct, axis_, s)};
    }
    default: {  // LogAddExp: dx_j = sum_{i>=j} ct_i exp(x_j - y_i)
      auto y = safe_lse(fwd(x, LogAddExp), s);
      auto [lp, lq] = log_parts(ct, s);
      auto part = [&](const array& l) {
        auto lse =
            make_scan(subtract(l, y, s), LogAddExp, axis_, !reverse_, true, s);
        return exp(add(x, lse, s), s);
      };
      return {subtract(part(lp), part(lq), s)};
    }
  }
}

std::pair<std::vector<array>, std::vector<int>> Scan::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{make_scan(inputs[0], type_, past_batch_axis(axis_, axes[0]),
                     reverse_, inclusive_, stream())},
          axes};
}

}  // namespace fluxion
