#include "fluxion/ops/indexing.h"

#include <algorithm>
#include <limits>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/sort.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

void check_indices(const array& indices, const char* op) {
  if (!is_integral(indices.dtype())) {
    throw std::invalid_argument(std::string("[") + op +
                                "] Indices must be of an integer type; got " +
                                dtype_name(indices.dtype()) + ".");
  }
}

void check_same_ndim(const array& a, const array& indices, const char* op) {
  if (indices.ndim() != a.ndim()) {
    throw std::invalid_argument(std::string("[") + op + "] Indices of shape " +
                                shape_str(indices.shape()) +
                                " must have as many dimensions as the "
                                "array of shape " +
                                shape_str(a.shape()) + ".");
  }
}

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) {
    return false;
  }
  for (size_t i = 0; i < from.size(); ++i) {
    int d = from[from.size() - 1 - i];
    if (d != 1 && d != to[to.size() - 1 - i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

array take(const array& a, const array& indices, int axis, StreamOrDevice s) {
  check_indices(indices, "take");
  int ax = normalize_axis(axis, a.ndim(), "take");
  if (a.shape(ax) == 0 && indices.size() > 0) {
    // No index is valid on an empty axis: say so now (MLX), not at eval.
    throw std::invalid_argument("[take] Cannot take from the empty axis " +
                                std::to_string(ax) + " of an array of shape " +
                                shape_str(a.shape()) + ".");
  }
  auto st = to_stream(s);
  // Gather with the indices flattened: GatherAxis then copies whole blocks
  // a[.., idx, ..] (rows of a matrix: one memcpy each), and the gathered
  // array is row-contiguous, so the final reshape is a free view.
  int64_t k = static_cast<int64_t>(indices.size());
  if (k > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("[take] Too many indices (" +
                                std::to_string(k) + ").");
  }
  Shape gshape = a.shape();
  gshape[ax] = static_cast<int32_t>(k);
  // Shape-following ops (flatten, expand_dims, squeeze, unflatten with an
  // inferred size) rather than reshapes to the sizes of now, so that a
  // shapeless compile replays take on other numbers of indices.
  std::vector<int> others;
  for (int d = 0; d < a.ndim(); ++d) {
    if (d != ax) {
      others.push_back(d);
    }
  }
  auto flat = flatten(indices, 0, -1, st);
  auto idx = broadcast_to(others.empty() ? flat : expand_dims(flat, others, st),
                          gshape, st);
  auto g = array(gshape, a.dtype(),
                 std::make_shared<GatherAxis>(st, ax, "take"), {a, idx});
  if (indices.ndim() == 0) {
    return squeeze(g, ax, st);
  }
  if (indices.ndim() == 1) {
    return g;
  }
  Shape dims = indices.shape();
  if (k > 0) {
    dims[0] = -1;  // inferred again on replay
  }
  return unflatten(g, ax, dims, st);
}

array take(const array& a, const array& indices, StreamOrDevice s) {
  return take(reshape(a, {-1}, s), indices, 0, s);
}

array take(const array& a, int index, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "take");
  int n = a.shape(ax);
  int i = index < 0 ? index + n : index;
  if (i < 0 || i >= n) {
    throw std::out_of_range("[take] Index " + std::to_string(index) +
                            " is out of bounds for axis " + std::to_string(ax) +
                            " with size " + std::to_string(n) + ".");
  }
  Shape start(a.ndim(), 0);
  Shape stop = a.shape();
  start[ax] = i;
  stop[ax] = i + 1;
  return squeeze(slice(a, start, stop, s), ax, s);
}

array masked_scatter(const array& a, const array& mask, const array& values,
                     StreamOrDevice s) {
  if (mask.dtype() != bool_) {
    throw std::invalid_argument(
        std::string("[masked_scatter] The mask must be boolean; got ") +
        dtype_name(mask.dtype()) + ".");
  }
  auto st = to_stream(s);
  auto m = reshape(broadcast_to(mask, a.shape(), st), {-1}, st);
  auto flat = reshape(a, {-1}, st);
  if (flat.size() == 0) {
    return a;
  }
  auto v = reshape(astype(values, a.dtype(), st), {-1}, st);
  if (v.size() == 0) {
    // Nothing to write, which is right only where the mask is all false:
    // the kernel of take cannot tell, so read a's own values.
    v = flat;
  }
  // The k-th true position takes v[k]: k = (inclusive count of trues) - 1.
  auto k = subtract(cumsum(astype(m, int32, st), 0, false, true, st),
                    array(1, int32), st);
  // Integer positions: constants even when the mask comes from a
  // differentiated input.
  k = stop_gradient(maximum(k, array(0, int32), st), st);
  auto picked = take(v, k, 0, st);
  return reshape(where(m, picked, flat, st), a.shape(), st);
}

array take(const array& a, const array& indices, int axis,
           const std::string& mode, StreamOrDevice s) {
  if (mode == "raise") {
    return take(a, indices, axis, s);
  }
  if (mode != "wrap" && mode != "clip") {
    throw std::invalid_argument("[take] Unknown mode '" + mode +
                                "'; expected 'raise', 'wrap' or 'clip'.");
  }
  check_indices(indices, "take");
  int ax = normalize_axis(axis, a.ndim(), "take");
  int64_t n = a.shape(ax);
  if (n == 0 && indices.size() > 0) {
    throw std::invalid_argument("[take] Cannot take from the empty axis " +
                                std::to_string(ax) + " with mode '" + mode +
                                "'.");
  }
  auto st = to_stream(s);
  // Unsigned indices are never negative: compute in uint64, others in
  // int64, so that neither the bound nor the values overflow.
  bool u = is_unsigned(indices.dtype());
  Dtype t = u ? uint64 : int64;
  array idx = astype(indices, t, st);
  array last(n == 0 ? 0 : n - 1, t);
  if (mode == "wrap") {
    idx = n == 0 ? idx : remainder(idx, array(n, t), st);
  } else {
    idx = minimum(idx, last, st);
    if (!u) {
      idx = maximum(idx, array(0, t), st);
    }
  }
  return take(a, idx, ax, st);
}

array take(const array& a, const array& indices, const std::string& mode,
           StreamOrDevice s) {
  return take(reshape(a, {-1}, s), indices, 0, mode, s);
}

array take_along_axis(const array& a, const array& indices, int axis,
                      StreamOrDevice s) {
  check_indices(indices, "take_along_axis");
  int ax = normalize_axis(axis, a.ndim(), "take_along_axis");
  check_same_ndim(a, indices, "take_along_axis");
  // Broadcast a and the indices against each other except along the axis.
  Shape sa = a.shape();
  Shape si = indices.shape();
  sa[ax] = 1;
  si[ax] = 1;
  Shape b = broadcast_shapes(sa, si, "take_along_axis");
  sa = b;
  si = b;
  sa[ax] = a.shape(ax);
  si[ax] = indices.shape(ax);
  auto st = to_stream(s);
  return array(si, a.dtype(), std::make_shared<GatherAxis>(st, ax),
               {broadcast_to(a, sa, st), broadcast_to(indices, si, st)});
}

namespace {

// put_along_axis and scatter_add_axis: same checks, different reductions.
array scatter_axis(const array& a, const array& indices, const array& values,
                   int axis, ScatterAxis::ReduceType reduce, const char* op,
                   StreamOrDevice s) {
  if (indices.size() == 0 && !is_integral(indices.dtype())) {
    // No index is read: an empty index of any type is accepted (MLX).
    return scatter_axis(a, astype(indices, int32, s), values, axis, reduce, op,
                        s);
  }
  check_indices(indices, op);
  int ax = normalize_axis(axis, a.ndim(), op);
  check_same_ndim(a, indices, op);
  // The output keeps a's shape (NumPy writes in place), so the indices
  // broadcast to it except along the axis, and the values to the indices.
  Shape si = a.shape();
  si[ax] = indices.shape(ax);
  if (!broadcastable_to(indices.shape(), si)) {
    throw std::invalid_argument(std::string("[") + op + "] Indices of shape " +
                                shape_str(indices.shape()) +
                                " cannot be broadcast to the array's shape " +
                                shape_str(a.shape()) + " except along axis " +
                                std::to_string(ax) + ".");
  }
  if (!broadcastable_to(values.shape(), si)) {
    throw std::invalid_argument(std::string("[") + op + "] Values of shape " +
                                shape_str(values.shape()) +
                                " cannot be broadcast to the indices' shape " +
                                shape_str(si) + ".");
  }
  auto st = to_stream(s);
  return array(a.shape(), a.dtype(),
               std::make_shared<ScatterAxis>(st, ax, reduce, op),
               {a, broadcast_to(indices, si, st),
                broadcast_to(astype(values, a.dtype(), st), si, st)});
}

}  // namespace

array put_along_axis(const array& a, const array& indices, const array& values,
                     int axis, StreamOrDevice s) {
  return scatter_axis(a, indices, values, axis, ScatterAxis::None,
                      "put_along_axis", s);
}

array scatter_add_axis(const array& a, const array& indices,
                       const array& values, int axis, StreamOrDevice s) {
  return scatter_axis(a, indices, values, axis, ScatterAxis::Sum,
                      "scatter_add_axis", s);
}

bool GatherAxis::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const GatherAxis&>(o).axis_ == axis_;
}

std::vector<PrimitiveArg> GatherAxis::state() const {
  return export_state(int64_t{axis_}, std::string(op_));
}

std::shared_ptr<Primitive> GatherAxis::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "GatherAxis");
  return std::make_shared<GatherAxis>(s, a.i32(0), a.interned(1));
}

bool ScatterAxis::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& p = static_cast<const ScatterAxis&>(o);
  return p.axis_ == axis_ && p.reduce_ == reduce_;
}

std::vector<PrimitiveArg> ScatterAxis::state() const {
  return export_state(int64_t{axis_}, int64_t{reduce_}, std::string(op_));
}

std::shared_ptr<Primitive> ScatterAxis::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ScatterAxis");
  auto reduce = a.enum_up_to(1, Sum);
  return std::make_shared<ScatterAxis>(s, a.i32(0), reduce, a.interned(2));
}

// --- transformation rules ---
//
// Written with public ops so that they compose (grad of grad, vmap of
// grad). Index inputs are integers: no derivative exists, so their
// cotangents are integer zeros and their tangents are ignored. vmap rules
// move the mapped axis of every operand to the front (broadcasting unmapped
// ones, as the primitives need matching shapes) and shift the axis by one.

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;

// 0, 1, .., len-1 along `axis`, broadcast to `shape`.
array positions(int len, int axis, const Shape& shape, Stream s) {
  Shape col(shape.size(), 1);
  col[axis] = len;
  return broadcast_to(reshape(arange(0, len, s), col, s), shape, s);
}

// The cotangent of the values of put_along_axis. Where indices repeat along
// the axis only the last write reaches the output, so value j takes the
// output's cotangent at indices[j] if j is the last writer of that position
// and zero otherwise. Built from scatters and gathers of integer positions:
//   writer[k] = the last j writing position k (-1: none);
//   source[j] = k where writer[k] == j, else n, a zero slot appended to ct;
// then the cotangent is ct padded with that slot, gathered at `source`.
array last_writer_cotangent(const array& ct, const array& indices, int axis,
                            Stream s) {
  int n = ct.shape(axis);
  int m = indices.shape(axis);
  auto writer = put_along_axis(full(ct.shape(), -1, int32, s), indices,
                               positions(m, axis, indices.shape(), s), axis, s);
  // Writer -1 (unwritten k) wraps to an extra last slot, sliced off after.
  Shape rows = indices.shape();
  rows[axis] = m + 1;
  auto source = put_along_axis(full(rows, n, int32, s), writer,
                               positions(n, axis, ct.shape(), s), axis, s);
  rows[axis] = m;
  source = slice(source, Shape(ct.ndim(), 0), rows, s);
  auto padded = pad(ct, {axis}, {0}, {1}, array(0), "constant", s);
  return take_along_axis(padded, source, axis, s);
}

}  // namespace

// --- GatherAxis: inputs (a, indices) ---

std::vector<array> GatherAxis::jvp(const Arrays& primals,
                                   const Arrays& tangents,
                                   const std::vector<int>& argnums) {
  rules::check_no_index_derivative("take_along_axis", argnums, 1, 1);
  return {take_along_axis(tangents[0], primals[1], axis_, stream())};
}

// Each output element came from a[.., indices, ..]: its cotangent goes back
// there, and repeated indices accumulate.
std::vector<array> GatherAxis::vjp(const Arrays& primals, const Arrays& cts,
                                   const std::vector<int>& argnums,
                                   const Arrays&) {
  auto s = stream();
  rules::check_no_index_derivative("take_along_axis", argnums, 1, 1);
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(scatter_add_axis(zeros_like(primals[0], s), primals[1],
                                     cts[0], axis_, s));
    } else {
      out.push_back(zeros_like(primals[1], s));
    }
  }
  return out;
}

Batched GatherAxis::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int b = rules::batch_size(inputs, axes);
  auto a = rules::to_front(inputs[0], axes[0], b, s);
  auto idx = rules::to_front(inputs[1], axes[1], b, s);
  return {{take_along_axis(a, idx, axis_ + 1, s)}, {0}};
}

// --- ScatterAxis: inputs (a, indices, values) ---

std::vector<array> ScatterAxis::jvp(const Arrays& primals,
                                    const Arrays& tangents,
                                    const std::vector<int>& argnums) {
  auto s = stream();
  rules::check_no_index_derivative(
      reduce_ == Sum ? "scatter_add_axis" : "put_along_axis", argnums, 1, 1);
  auto a = rules::tangent_or_zeros(primals, tangents, argnums, 0, s);
  auto v = rules::tangent_or_zeros(primals, tangents, argnums, 2, s);
  return {reduce_ == Sum ? scatter_add_axis(a, primals[1], v, axis_, s)
                         : put_along_axis(a, primals[1], v, axis_, s)};
}

// Overwriting: a's values survive where nothing was written, and values
// reach the output only as last writers. Adding: both pass straight
// through.
std::vector<array> ScatterAxis::vjp(const Arrays& primals, const Arrays& cts,
                                    const std::vector<int>& argnums,
                                    const Arrays&) {
  auto s = stream();
  const array& ct = cts[0];
  const array& idx = primals[1];
  rules::check_no_index_derivative(
      reduce_ == Sum ? "scatter_add_axis" : "put_along_axis", argnums, 1, 1);
  std::vector<array> out;
  for (int arg : argnums) {
    if (reduce_ == Sum) {
      out.push_back(arg == 0 ? ct : take_along_axis(ct, idx, axis_, s));
    } else if (arg == 0) {
      out.push_back(put_along_axis(ct, idx, array(0), axis_, s));
    } else {
      out.push_back(last_writer_cotangent(ct, idx, axis_, s));
    }
  }
  return out;
}

Batched ScatterAxis::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int b = rules::batch_size(inputs, axes);
  auto a = rules::to_front(inputs[0], axes[0], b, s);
  auto idx = rules::to_front(inputs[1], axes[1], b, s);
  auto v = rules::to_front(inputs[2], axes[2], b, s);
  return {{reduce_ == Sum ? scatter_add_axis(a, idx, v, axis_ + 1, s)
                          : put_along_axis(a, idx, v, axis_ + 1, s)},
          {0}};
}

}  // namespace fluxion
