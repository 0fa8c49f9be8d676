#include "fluxion/ops/shape.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "fluxion/compile.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

template <typename T>
bool same_params(const Primitive& a, const Primitive& b, T get) {
  return typeid(a) == typeid(b) && get(a) == get(b);
}

}  // namespace

// --- reshape family ---

namespace {

// `requested` with its -1 (at most one) inferred for `size` elements.
Shape infer_shape(Shape shape, int64_t size, const char* op,
                  const Shape& in_shape) {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        throw std::invalid_argument(std::string("[") + op +
                                    "] Can only infer one dimension; got "
                                    "shape " +
                                    shape_str(shape) + ".");
      }
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument(std::string("[") + op + "] Invalid shape " +
                                  shape_str(shape) + ".");
    } else {
      known *= shape[i];
    }
  }
  Shape requested = shape;
  if (infer >= 0) {
    if (known == 0 || size % known != 0) {
      throw std::invalid_argument(
          std::string("[") + op + "] Cannot infer the shape " +
          shape_str(requested) + " for an array of shape " +
          shape_str(in_shape) + " (size " + std::to_string(size) + ").");
    }
    shape[infer] = static_cast<int32_t>(size / known);
    known *= shape[infer];
  }
  if (known != size) {
    throw std::invalid_argument(std::string("[") + op +
                                "] Cannot reshape array of shape " +
                                shape_str(in_shape) + " (size " +
                                std::to_string(size) + ") into shape " +
                                shape_str(requested) + ".");
  }
  return shape;
}

array make_reshape(const array& a, Shape shape, ReshapeRule rule,
                   StreamOrDevice s) {
  if (shape == a.shape()) {
    return a;
  }
  auto p = std::make_shared<Reshape>(to_stream(s), shape, std::move(rule));
  return array(std::move(shape), a.dtype(), std::move(p), {a});
}

Shape flatten_shape(const Shape& in, int b, int e) {
  Shape shape(in.begin(), in.begin() + b);
  int64_t n = 1;
  for (int i = b; i <= e; ++i) {
    n *= in[i];
  }
  shape.push_back(static_cast<int32_t>(n));
  shape.insert(shape.end(), in.begin() + e + 1, in.end());
  return shape;
}

Shape unflatten_shape(const Shape& in, int ax, const Shape& dims) {
  Shape inner = infer_shape(dims, in[ax], "unflatten", Shape{in[ax]});
  Shape out(in.begin(), in.begin() + ax);
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), in.begin() + ax + 1, in.end());
  return out;
}

}  // namespace

Shape Reshape::shape_for(const Shape& in) const {
  int nd = static_cast<int>(in.size());
  switch (rule_.kind) {
    case ReshapeRule::Flatten:
      if (rule_.end >= nd) {
        break;
      }
      return flatten_shape(in, rule_.start, rule_.end);
    case ReshapeRule::Unflatten:
      if (rule_.start >= nd) {
        break;
      }
      return unflatten_shape(in, rule_.start, rule_.dims);
    default:
      return infer_shape(rule_.dims, shape_size(in), "reshape", in);
  }
  throw std::invalid_argument("[reshape] Cannot reshape an array of shape " +
                              shape_str(in) + " as traced (into " +
                              shape_str(shape_) + ").");
}

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  Shape out = infer_shape(shape, static_cast<int64_t>(a.size()), "reshape",
                          a.shape());
  return make_reshape(a, std::move(out),
                      ReshapeRule{ReshapeRule::Requested, std::move(shape)},
                      s);
}

array flatten(const array& a, int start_axis, int end_axis, StreamOrDevice s) {
  int nd = a.ndim();
  if (nd == 0) {
    return reshape(a, {1}, s);
  }
  int b = normalize_axis(start_axis, nd, "flatten");
  int e = normalize_axis(end_axis, nd, "flatten");
  if (b > e) {
    throw std::invalid_argument(
        "[flatten] start_axis " + std::to_string(start_axis) +
        " must not come after end_axis " + std::to_string(end_axis) + ".");
  }
  return make_reshape(a, flatten_shape(a.shape(), b, e),
                      ReshapeRule{ReshapeRule::Flatten, {}, b, e}, s);
}

array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "unflatten");
  if (shape.empty()) {
    throw std::invalid_argument("[unflatten] The shape must not be empty.");
  }
  if (std::count(shape.begin(), shape.end(), -1) > 1) {
    throw std::invalid_argument(
        "[unflatten] Can only infer one dimension; got shape " +
        shape_str(shape) + ".");
  }
  Shape out;
  try {
    out = unflatten_shape(a.shape(), ax, shape);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("[unflatten] Cannot unflatten axis " +
                                std::to_string(axis) + " of size " +
                                std::to_string(a.shape(ax)) + " into shape " +
                                shape_str(shape) + ".");
  }
  return make_reshape(a, std::move(out),
                      ReshapeRule{ReshapeRule::Unflatten, std::move(shape), ax},
                      s);
}

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "squeeze");
  for (int i : ax) {
    if (a.shape(i) != 1) {
      throw std::invalid_argument(
          "[squeeze] Cannot squeeze axis " + std::to_string(i) + " of size " +
          std::to_string(a.shape(i)) + " in array of shape " +
          shape_str(a.shape()) + ".");
    }
  }
  if (ax.empty()) {
    return a;
  }
  Shape shape;
  for (int i = 0; i < a.ndim(); ++i) {
    if (!std::binary_search(ax.begin(), ax.end(), i)) {
      shape.push_back(a.shape(i));
    }
  }
  return array(std::move(shape), a.dtype(),
               std::make_shared<Squeeze>(to_stream(s), std::move(ax)), {a});
}

array squeeze(const array& a, int axis, StreamOrDevice s) {
  return squeeze(a, std::vector<int>{axis}, s);
}

array squeeze(const array& a, StreamOrDevice s) {
  std::vector<int> axes;
  for (int i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) == 1) {
      axes.push_back(i);
    }
  }
  return squeeze(a, axes, s);
}

array expand_dims(const array& a, const std::vector<int>& axes,
                  StreamOrDevice s) {
  int out_nd = a.ndim() + static_cast<int>(axes.size());
  auto ax = normalize_axes(axes, out_nd, "expand_dims");
  if (ax.empty()) {
    return a;
  }
  Shape shape;
  for (int i = 0, j = 0; i < out_nd; ++i) {
    if (std::binary_search(ax.begin(), ax.end(), i)) {
      shape.push_back(1);
    } else {
      shape.push_back(a.shape(j++));
    }
  }
  return array(std::move(shape), a.dtype(),
               std::make_shared<ExpandDims>(to_stream(s), std::move(ax)), {a});
}

array expand_dims(const array& a, int axis, StreamOrDevice s) {
  return expand_dims(a, std::vector<int>{axis}, s);
}

// --- transposes ---

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s) {
  if (static_cast<int>(axes.size()) != a.ndim()) {
    throw std::invalid_argument(
        "[transpose] Received " + std::to_string(axes.size()) +
        " axes for array with " + std::to_string(a.ndim()) + " dimensions.");
  }
  std::vector<int> sorted = axes;
  for (auto& x : sorted) {
    x = normalize_axis(x, a.ndim(), "transpose");
  }
  axes = sorted;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw std::invalid_argument("[transpose] Repeated axes in " +
                                vec_str(axes) + ".");
  }
  bool identity = true;
  for (int i = 0; i < a.ndim(); ++i) {
    identity &= axes[i] == i;
  }
  if (identity) {
    return a;
  }
  Shape shape;
  for (int x : axes) {
    shape.push_back(a.shape(x));
  }
  return array(std::move(shape), a.dtype(),
               std::make_shared<Transpose>(to_stream(s), std::move(axes)), {a});
}

array transpose(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.rbegin(), axes.rend(), 0);
  return transpose(a, std::move(axes), s);
}

array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s) {
  int i = normalize_axis(axis1, a.ndim(), "swapaxes");
  int j = normalize_axis(axis2, a.ndim(), "swapaxes");
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[i], axes[j]);
  return transpose(a, std::move(axes), s);
}

array moveaxis(const array& a, int source, int destination, StreamOrDevice s) {
  int src = normalize_axis(source, a.ndim(), "moveaxis");
  int dst = normalize_axis(destination, a.ndim(), "moveaxis");
  std::vector<int> axes;
  for (int i = 0; i < a.ndim(); ++i) {
    if (i != src) {
      axes.push_back(i);
    }
  }
  axes.insert(axes.begin() + dst, src);
  return transpose(a, std::move(axes), s);
}

// --- broadcasting ---

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s) {
  if (a.shape() == shape) {
    return a;
  }
  bool ok = shape.size() >= a.shape().size();
  for (size_t i = 0; ok && i < a.shape().size(); ++i) {
    int d = a.shape()[a.ndim() - 1 - i];
    ok = d == 1 || d == shape[shape.size() - 1 - i];
  }
  if (!ok) {
    throw std::invalid_argument(
        "[broadcast_to] Cannot broadcast array of "
        "shape " +
        shape_str(a.shape()) + " to shape " + shape_str(shape) + ".");
  }
  return array(shape, a.dtype(),
               std::make_shared<Broadcast>(to_stream(s), shape), {a});
}

std::vector<array> broadcast_arrays(const std::vector<array>& inputs,
                                    StreamOrDevice s) {
  Shape shape;
  for (auto& in : inputs) {
    shape = broadcast_shapes(shape, in.shape(), "broadcast_arrays");
  }
  std::vector<array> out;
  for (auto& in : inputs) {
    out.push_back(broadcast_to(in, shape, s));
  }
  return out;
}

// --- slicing ---

namespace {

struct NormalizedSlice {
  Shape start, stop, strides, shape;
  bool identity = true;  // the whole array, in order
};

// NumPy's slice.indices(): negative bounds count from the end, then bounds
// are clamped to the axis ([0, n] going forward, [-1, n-1] going backward).
// The result is exact: stop = start + len * stride, and an empty axis has
// start = stop = 0, so equal slices compare equal.
NormalizedSlice normalize_slice(const array& a, const Shape& start,
                                const Shape& stop, const Shape& strides,
                                const char* op) {
  int nd = a.ndim();
  if (static_cast<int>(start.size()) != nd ||
      static_cast<int>(stop.size()) != nd ||
      static_cast<int>(strides.size()) != nd) {
    throw std::invalid_argument(
        std::string("[") + op + "] Invalid number of start (" +
        std::to_string(start.size()) + "), stop (" +
        std::to_string(stop.size()) + ") or stride (" +
        std::to_string(strides.size()) + ") values for array of shape " +
        shape_str(a.shape()) + ".");
  }
  NormalizedSlice r;
  r.start.resize(nd);
  r.stop.resize(nd);
  r.strides = strides;
  r.shape.resize(nd);
  for (int i = 0; i < nd; ++i) {
    int64_t n = a.shape(i);
    int64_t st = strides[i];
    if (st == 0) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] Slice stride cannot be zero (axis " +
                                  std::to_string(i) + ").");
    }
    int64_t b = start[i];
    int64_t e = stop[i];
    if (b < 0) {
      b += n;
    }
    if (e < 0) {
      e += n;
    }
    int64_t len;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      len = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp<int64_t>(b, -1, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      len = b > e ? (b - e - st - 1) / (-st) : 0;
    }
    if (len == 0) {
      b = e = 0;
    } else {
      e = b + len * st;
    }
    r.start[i] = static_cast<int32_t>(b);
    r.stop[i] = static_cast<int32_t>(e);
    r.shape[i] = static_cast<int32_t>(len);
    r.identity &= len == n && (b == 0 || n == 0) && (st == 1 || n <= 1);
  }
  return r;
}

}  // namespace

array slice(const array& a, Shape start, Shape stop, Shape strides,
            StreamOrDevice s) {
  auto r = normalize_slice(a, start, stop, strides, "slice");
  if (r.identity) {
    return a;
  }
  return array(std::move(r.shape), a.dtype(),
               std::make_shared<Slice>(to_stream(s), std::move(r.start),
                                       std::move(r.stop), std::move(r.strides)),
               {a});
}

array slice(const array& a, const Shape& start, const Shape& stop,
            StreamOrDevice s) {
  return slice(a, start, stop, Shape(a.ndim(), 1), s);
}

array slice_update(const array& src, const array& update, Shape start,
                   Shape stop, Shape strides, StreamOrDevice s) {
  auto r = normalize_slice(src, start, stop, strides, "slice_update");
  bool ok = update.ndim() <= src.ndim();
  for (int i = 0; ok && i < update.ndim(); ++i) {
    int d = update.shape()[update.ndim() - 1 - i];
    ok = d == 1 || d == r.shape[r.shape.size() - 1 - i];
  }
  if (!ok) {
    throw std::invalid_argument("[slice_update] Update of shape " +
                                shape_str(update.shape()) +
                                " cannot be broadcast to the slice's shape " +
                                shape_str(r.shape) + ".");
  }
  auto st = to_stream(s);
  auto upd = broadcast_to(astype(update, src.dtype(), st), r.shape, st);
  return array(
      src.shape(), src.dtype(),
      std::make_shared<SliceUpdate>(st, std::move(r.start), std::move(r.stop),
                                    std::move(r.strides)),
      {src, std::move(upd)});
}

array slice_update(const array& src, const array& update, const Shape& start,
                   const Shape& stop, StreamOrDevice s) {
  return slice_update(src, update, start, stop, Shape(src.ndim(), 1), s);
}

// --- joining and splitting ---

array concatenate(const std::vector<array>& arrays, int axis,
                  StreamOrDevice s) {
  if (arrays.empty()) {
    throw std::invalid_argument(
        "[concatenate] No arrays provided for concatenation.");
  }
  const array& first = arrays[0];
  if (first.ndim() == 0) {
    throw std::invalid_argument(
        "[concatenate] Zero-dimensional arrays cannot be concatenated.");
  }
  int ax = normalize_axis(axis, first.ndim(), "concatenate");
  Shape shape = first.shape();
  int64_t total = 0;
  for (size_t k = 0; k < arrays.size(); ++k) {
    const array& x = arrays[k];
    bool ok = x.ndim() == first.ndim();
    for (int i = 0; ok && i < x.ndim(); ++i) {
      ok = i == ax || x.shape(i) == first.shape(i);
    }
    if (!ok) {
      throw std::invalid_argument(
          "[concatenate] All the input array dimensions must match exactly "
          "except for the concatenation axis " +
          std::to_string(ax) + "; array 0 has shape " +
          shape_str(first.shape()) + " and array " + std::to_string(k) +
          " has shape " + shape_str(x.shape()) + ".");
    }
    total += x.shape(ax);
  }
  shape[ax] = checked_dim(total, "concatenate",
                          "The output's size along the axis,");
  Dtype t = result_type(arrays);
  if (arrays.size() == 1) {
    return astype(first, t, s);
  }
  auto st = to_stream(s);
  std::vector<array> inputs;
  inputs.reserve(arrays.size());
  for (auto& x : arrays) {
    inputs.push_back(astype(x, t, st));
  }
  return array(std::move(shape), t, std::make_shared<Concatenate>(st, ax),
               std::move(inputs));
}

array concatenate(const std::vector<array>& arrays, StreamOrDevice s) {
  std::vector<array> flat;
  flat.reserve(arrays.size());
  for (auto& x : arrays) {
    flat.push_back(reshape(x, {-1}, s));
  }
  return concatenate(flat, 0, s);
}

array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) {
    throw std::invalid_argument("[stack] No arrays provided for stacking.");
  }
  for (size_t k = 1; k < arrays.size(); ++k) {
    if (arrays[k].shape() != arrays[0].shape()) {
      throw std::invalid_argument(
          "[stack] All arrays must have the same shape; array 0 has shape " +
          shape_str(arrays[0].shape()) + " and array " + std::to_string(k) +
          " has shape " + shape_str(arrays[k].shape()) + ".");
    }
  }
  int ax = normalize_axis(axis, arrays[0].ndim() + 1, "stack");
  std::vector<array> expanded;
  expanded.reserve(arrays.size());
  for (auto& x : arrays) {
    expanded.push_back(expand_dims(x, ax, s));
  }
  return concatenate(expanded, ax, s);
}

array stack(const std::vector<array>& arrays, StreamOrDevice s) {
  return stack(arrays, 0, s);
}

std::vector<array> split(const array& a, const Shape& indices, int axis,
                         StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "split");
  Shape start(a.ndim(), 0);
  Shape stop = a.shape();
  std::vector<array> out;
  out.reserve(indices.size() + 1);
  // Each part is a[prev:idx] along the axis with Python slice semantics, as
  // NumPy's array_split: unsorted indices give empty parts, not errors.
  for (size_t k = 0; k <= indices.size(); ++k) {
    stop[ax] = k < indices.size() ? indices[k] : a.shape(ax);
    out.push_back(slice(a, start, stop, s));
    start[ax] = stop[ax];
  }
  return out;
}

std::vector<array> split(const array& a, const Shape& indices,
                         StreamOrDevice s) {
  return split(a, indices, 0, s);
}

std::vector<array> split(const array& a, int num_splits, int axis,
                         StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "split");
  int n = a.shape(ax);
  if (num_splits <= 0 || n % num_splits != 0) {
    throw std::invalid_argument("[split] Cannot split axis " +
                                std::to_string(ax) + " of size " +
                                std::to_string(n) + " into " +
                                std::to_string(num_splits) + " equal parts.");
  }
  Shape indices;
  for (int k = 1; k < num_splits; ++k) {
    indices.push_back(k * (n / num_splits));
  }
  return split(a, indices, ax, s);
}

std::vector<array> split(const array& a, int num_splits, StreamOrDevice s) {
  return split(a, num_splits, 0, s);
}

// --- padding ---

array pad(const array& a, const std::vector<int>& axes, const Shape& low_pad,
          const Shape& high_pad, const array& pad_value,
          const std::string& mode, StreamOrDevice s) {
  if (axes.size() != low_pad.size() || axes.size() != high_pad.size()) {
    throw std::invalid_argument("[pad] Invalid number of padding sizes: " +
                                std::to_string(low_pad.size()) + " low and " +
                                std::to_string(high_pad.size()) + " high for " +
                                std::to_string(axes.size()) + " axes.");
  }
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "symmetric") {
    throw std::invalid_argument("[pad] Invalid padding mode (" + mode +
                                ") passed to pad; expected 'constant', "
                                "'edge', 'reflect' or 'symmetric'.");
  }
  if (pad_value.size() != 1) {
    throw std::invalid_argument(
        "[pad] The padding value must be a scalar; got an array of shape " +
        shape_str(pad_value.shape()) + ".");
  }
  // Keep the (low, high) pairs with their axes while sorting the axes.
  std::vector<int> norm;
  for (int ax : axes) {
    norm.push_back(normalize_axis(ax, a.ndim(), "pad"));
  }
  normalize_axes(axes, a.ndim(), "pad");  // rejects duplicates
  for (size_t i = 0; i < axes.size(); ++i) {
    if (low_pad[i] < 0 || high_pad[i] < 0) {
      throw std::invalid_argument(
          "[pad] Padding widths must be non-negative; got (" +
          std::to_string(low_pad[i]) + ", " + std::to_string(high_pad[i]) +
          ") for axis " + std::to_string(axes[i]) + ".");
    }
  }
  std::vector<int> order(norm.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int x, int y) { return norm[x] < norm[y]; });
  std::vector<int> ax_sorted;
  Shape lo, hi;
  Shape shape = a.shape();
  for (int k : order) {
    if (low_pad[k] == 0 && high_pad[k] == 0) {
      continue;
    }
    ax_sorted.push_back(norm[k]);
    lo.push_back(low_pad[k]);
    hi.push_back(high_pad[k]);
    shape[norm[k]] += low_pad[k] + high_pad[k];
  }
  if (ax_sorted.empty()) {
    return a;
  }
  auto st = to_stream(s);
  if (mode == "reflect" || mode == "symmetric") {
    // Each padded axis becomes one take of source indices, so gradients
    // scatter back. The indices are the periodic extension of the axis
    // mirrored at its ends (period 2(n - 1) for reflect, 2n for
    // symmetric), as MLX and NumPy 2 compute them, however wide the pad.
    // (NumPy 1 filled wide pads in rounds that mirror values padded
    // before, and its reflect departs from the periodic extension when
    // both sides are padded: numpy 1.24's pad([0, 1, 2], (9, 1),
    // 'reflect') starts 1, 2, 1, 2 where the extension gives 1, 0, 1, 2.)
    bool sym = mode == "symmetric";
    array out = a;
    for (size_t i = 0; i < ax_sorted.size(); ++i) {
      int ax = ax_sorted[i];
      int n = out.shape(ax);
      if (n == 0) {
        throw std::invalid_argument("[pad] Cannot pad the empty axis " +
                                    std::to_string(ax) + " in '" + mode +
                                    "' mode.");
      }
      const int64_t total = int64_t{n} + lo[i] + hi[i];
      // reflect of one element: nothing to mirror about, every slot is it.
      const int64_t period = sym ? 2 * int64_t{n} : 2 * (int64_t{n} - 1);
      std::vector<int32_t> idx(total, 0);
      for (int64_t k = 0; k < total && period > 0; ++k) {
        int64_t j = ((k - lo[i]) % period + period) % period;
        idx[k] = static_cast<int32_t>(j < n ? j : (sym ? period - 1 - j
                                                        : period - j));
      }
      out = take(out,
                 array(idx.begin(),
                       Shape{checked_dim(total, "pad", "A padded axis' size,")},
                       int32),
                 ax, st);
    }
    return out;
  }
  if (mode == "edge") {
    // Repeat the first and last slices along each padded axis.
    array out = a;
    for (size_t i = 0; i < ax_sorted.size(); ++i) {
      int ax = ax_sorted[i];
      int n = out.shape(ax);
      if (n == 0) {
        throw std::invalid_argument("[pad] Cannot pad the empty axis " +
                                    std::to_string(ax) + " in 'edge' mode.");
      }
      std::vector<array> parts;
      Shape b(out.ndim(), 0);
      Shape e = out.shape();
      if (lo[i] > 0) {
        e[ax] = 1;
        Shape bs = out.shape();
        bs[ax] = lo[i];
        parts.push_back(broadcast_to(slice(out, b, e, st), bs, st));
      }
      parts.push_back(out);
      if (hi[i] > 0) {
        b[ax] = n - 1;
        e[ax] = n;
        Shape bs = out.shape();
        bs[ax] = hi[i];
        parts.push_back(broadcast_to(slice(out, b, e, st), bs, st));
      }
      out = concatenate(parts, ax, st);
    }
    return out;
  }
  auto value = reshape(astype(pad_value, a.dtype(), st), {}, st);
  return array(std::move(shape), a.dtype(),
               std::make_shared<Pad>(st, std::move(ax_sorted), std::move(lo),
                                     std::move(hi)),
               {a, value});
}

array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value, const std::string& mode, StreamOrDevice s) {
  if (static_cast<int>(pad_width.size()) != a.ndim()) {
    throw std::invalid_argument(
        "[pad] Expected one (low, high) pair per dimension (" +
        std::to_string(a.ndim()) + "); got " +
        std::to_string(pad_width.size()) + ".");
  }
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  Shape lo, hi;
  for (auto& [l, h] : pad_width) {
    lo.push_back(l);
    hi.push_back(h);
  }
  return pad(a, axes, lo, hi, pad_value, mode, s);
}

array pad(const array& a, const std::pair<int, int>& pad_width,
          const array& pad_value, const std::string& mode, StreamOrDevice s) {
  return pad(a, std::vector<std::pair<int, int>>(a.ndim(), pad_width),
             pad_value, mode, s);
}

array pad(const array& a, int pad_width, const array& pad_value,
          const std::string& mode, StreamOrDevice s) {
  return pad(a, std::make_pair(pad_width, pad_width), pad_value, mode, s);
}

// --- repetition ---

array repeat(const array& a, int repeats, int axis, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "repeat");
  if (repeats < 0) {
    throw std::invalid_argument(
        "[repeat] The number of repeats cannot be negative; got " +
        std::to_string(repeats) + ".");
  }
  if (repeats == 1) {
    return a;
  }
  // (.., n, ..) -> (.., n, 1, ..) -> (.., n, repeats, ..) -> (.., n*repeats,
  // ..)
  auto e = expand_dims(a, ax + 1, s);
  Shape bs = e.shape();
  bs[ax + 1] = repeats;
  Shape out = a.shape();
  out[ax] = checked_dim(int64_t{out[ax]} * repeats, "repeat",
                        "The repeated axis' size,");
  return reshape(broadcast_to(e, bs, s), std::move(out), s);
}

array repeat(const array& a, int repeats, StreamOrDevice s) {
  return repeat(flatten(a, 0, -1, s), repeats, 0, s);
}

array tile(const array& a, std::vector<int> reps, StreamOrDevice s) {
  for (int r : reps) {
    if (r < 0) {
      throw std::invalid_argument(
          "[tile] Repetitions must be non-negative; got " + vec_str(reps) +
          ".");
    }
  }
  // NumPy: pad the shorter of shape and reps with leading ones.
  int nd = std::max<int>(a.ndim(), static_cast<int>(reps.size()));
  Shape shape(nd - a.ndim(), 1);
  shape.insert(shape.end(), a.shape().begin(), a.shape().end());
  reps.insert(reps.begin(), nd - reps.size(), 1);
  // (s0, s1, ..) -> (1, s0, 1, s1, ..) -> (r0, s0, r1, s1, ..) -> (r0*s0, ..)
  Shape expanded, bshape, out;
  bool trivial = true;
  for (int i = 0; i < nd; ++i) {
    expanded.push_back(1);
    expanded.push_back(shape[i]);
    bshape.push_back(reps[i]);
    bshape.push_back(shape[i]);
    out.push_back(checked_dim(int64_t{reps[i]} * shape[i], "tile",
                              "A tiled axis' size,"));
    trivial &= reps[i] == 1;
  }
  if (trivial) {
    return reshape(a, std::move(out), s);
  }
  return reshape(broadcast_to(reshape(a, std::move(expanded), s), bshape, s),
                 std::move(out), s);
}

// --- at least n dimensions ---

array atleast_1d(const array& a, StreamOrDevice s) {
  return a.ndim() == 0 ? reshape(a, {1}, s) : a;
}

array atleast_2d(const array& a, StreamOrDevice s) {
  switch (a.ndim()) {
    case 0:
      return reshape(a, {1, 1}, s);
    case 1:
      return reshape(a, {1, a.shape(0)}, s);
    default:
      return a;
  }
}

array atleast_3d(const array& a, StreamOrDevice s) {
  switch (a.ndim()) {
    case 0:
      return reshape(a, {1, 1, 1}, s);
    case 1:
      return reshape(a, {1, a.shape(0), 1}, s);
    case 2:
      return reshape(a, {a.shape(0), a.shape(1), 1}, s);
    default:
      return a;
  }
}

// --- primitive parameters ---

bool Reshape::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    auto& r = static_cast<const Reshape&>(p);
    return std::make_pair(r.shape_, r.rule_);
  });
}

std::vector<PrimitiveArg> Reshape::state() const {
  return export_state(export_ints(shape_), int64_t{rule_.kind},
                      export_ints(rule_.dims), int64_t{rule_.start},
                      int64_t{rule_.end});
}

std::shared_ptr<Primitive> Reshape::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Reshape");
  // Files written before the rule was saved have the shape only.
  if (a.size() == 1) {
    return std::make_shared<Reshape>(s, a.shp(0));
  }
  ReshapeRule rule{a.enum_up_to(1, ReshapeRule::Unflatten), a.shp(2), a.i32(3),
                   a.i32(4)};
  return std::make_shared<Reshape>(s, a.shp(0), std::move(rule));
}

bool Transpose::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const Transpose&>(p).axes_;
  });
}

std::vector<PrimitiveArg> Transpose::state() const {
  return export_state(export_ints(axes_));
}

std::shared_ptr<Primitive> Transpose::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Transpose");
  return std::make_shared<Transpose>(s, a.ints(0));
}

std::vector<Shape> Transpose::output_shapes(const std::vector<array>& in) {
  Shape shape;
  for (int x : axes_) {
    shape.push_back(in[0].shape(x));
  }
  return {shape};
}
bool Broadcast::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const Broadcast&>(p).shape_;
  });
}

std::vector<PrimitiveArg> Broadcast::state() const {
  return export_state(export_ints(shape_));
}

std::shared_ptr<Primitive> Broadcast::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Broadcast");
  return std::make_shared<Broadcast>(s, a.shp(0));
}

bool ExpandDims::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const ExpandDims&>(p).axes_;
  });
}

std::vector<PrimitiveArg> ExpandDims::state() const {
  return export_state(export_ints(axes_));
}

std::shared_ptr<Primitive> ExpandDims::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ExpandDims");
  return std::make_shared<ExpandDims>(s, a.ints(0));
}

std::vector<Shape> ExpandDims::output_shapes(const std::vector<array>& in) {
  Shape shape = in[0].shape();
  for (int ax : axes_) {
    shape.insert(shape.begin() + ax, 1);
  }
  return {shape};
}
bool Squeeze::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const Squeeze&>(p).axes_;
  });
}

std::vector<PrimitiveArg> Squeeze::state() const {
  return export_state(export_ints(axes_));
}

std::shared_ptr<Primitive> Squeeze::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Squeeze");
  return std::make_shared<Squeeze>(s, a.ints(0));
}

std::vector<Shape> Squeeze::output_shapes(const std::vector<array>& in) {
  Shape shape;
  for (int i = 0; i < in[0].ndim(); ++i) {
    if (!std::binary_search(axes_.begin(), axes_.end(), i)) {
      shape.push_back(in[0].shape(i));
    }
  }
  return {shape};
}

bool Slice::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& p = static_cast<const Slice&>(o);
  return start_ == p.start_ && stop_ == p.stop_ && strides_ == p.strides_;
}

std::vector<PrimitiveArg> Slice::state() const {
  return export_state(export_ints(start_), export_ints(stop_),
                      export_ints(strides_));
}

std::shared_ptr<Primitive> Slice::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Slice");
  return std::make_shared<Slice>(s, a.shp(0), a.shp(1), a.shp(2));
}

std::vector<Shape> Slice::output_shapes(const std::vector<array>&) {
  Shape shape(start_.size());
  for (size_t i = 0; i < start_.size(); ++i) {
    shape[i] = (stop_[i] - start_[i]) / strides_[i];  // stops are exact
  }
  return {shape};
}
bool SliceUpdate::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& p = static_cast<const SliceUpdate&>(o);
  return start_ == p.start_ && stop_ == p.stop_ && strides_ == p.strides_;
}

std::vector<PrimitiveArg> SliceUpdate::state() const {
  return export_state(export_ints(start_), export_ints(stop_),
                      export_ints(strides_));
}

std::shared_ptr<Primitive> SliceUpdate::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "SliceUpdate");
  return std::make_shared<SliceUpdate>(s, a.shp(0), a.shp(1), a.shp(2));
}

bool Concatenate::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const Concatenate&>(p).axis_;
  });
}

std::vector<PrimitiveArg> Concatenate::state() const {
  return export_state(int64_t{axis_});
}

std::shared_ptr<Primitive> Concatenate::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Concatenate");
  return std::make_shared<Concatenate>(s, a.i32(0));
}

std::vector<Shape> Concatenate::output_shapes(const std::vector<array>& in) {
  Shape shape = in[0].shape();
  shape[axis_] = 0;
  for (auto& x : in) {
    shape[axis_] += x.shape(axis_);
  }
  return {shape};
}
bool Pad::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& p = static_cast<const Pad&>(o);
  return axes_ == p.axes_ && low_ == p.low_ && high_ == p.high_;
}

std::vector<PrimitiveArg> Pad::state() const {
  return export_state(export_ints(axes_), export_ints(low_),
                      export_ints(high_));
}

std::shared_ptr<Primitive> Pad::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Pad");
  return std::make_shared<Pad>(s, a.ints(0), a.shp(1), a.shp(2));
}

std::vector<Shape> Pad::output_shapes(const std::vector<array>& in) {
  Shape shape = in[0].shape();
  for (size_t i = 0; i < axes_.size(); ++i) {
    shape[axes_[i]] += low_[i] + high_[i];
  }
  return {shape};
}

}  // namespace fluxion

// --- BroadcastAxes (shapeless compile's broadcasts; shape.h) ---

namespace fluxion {

namespace {

// The broadcast shape of `in` (operand first), the last `ignore` axes of
// each left out and the operand's put back.
Shape broadcast_axes_shape(const std::vector<array>& in, int ignore) {
  Shape batch;
  for (auto& x : in) {
    int keep = x.ndim() - std::min(ignore, x.ndim());
    batch = broadcast_shapes(batch, Shape(x.shape().begin(),
                                          x.shape().begin() + keep),
                             "broadcast");
  }
  const Shape& a = in[0].shape();
  batch.insert(batch.end(), a.end() - std::min(ignore, in[0].ndim()), a.end());
  return batch;
}

}  // namespace

std::vector<Shape> BroadcastAxes::output_shapes(
    const std::vector<array>& inputs) {
  return {broadcast_axes_shape(inputs, ignore_)};
}

bool BroadcastAxes::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this) || !Primitive::is_equivalent(o)) {
    return false;
  }
  auto& b = static_cast<const BroadcastAxes&>(o);
  return b.ignore_ == ignore_ && b.shape() == shape();
}

namespace detail {

array broadcast_against(const array& a, const std::vector<array>& partners,
                        const Shape& shape, int ignore, StreamOrDevice s) {
  if (!in_shapeless_trace()) {
    return broadcast_to(a, shape, s);
  }
  // Also when `a` has the shape already: a replay may give it another
  // (traced (2,3,...) @ (2,...) replayed as (3,2,...) @ (1,...)), which a
  // node without this one would leave unbroadcast (MLX skips it there).
  std::vector<array> inputs{a};
  inputs.insert(inputs.end(), partners.begin(), partners.end());
  // Checks the shapes as broadcast_to would (the caller computed `shape`).
  broadcast_to(a, shape, s);
  return array(shape, a.dtype(),
               std::make_shared<BroadcastAxes>(to_stream(s), shape, ignore),
               std::move(inputs));
}

}  // namespace detail

}  // namespace fluxion
