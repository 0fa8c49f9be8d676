#include "fluxion/ops/shape.h"

#include <algorithm>
#include <numeric>

#include "fluxion/ops/common.h"

namespace fluxion {

namespace {

template <typename T>
bool same_params(const Primitive& a, const Primitive& b, T get) {
  return typeid(a) == typeid(b) && get(a) == get(b);
}

}  // namespace

// --- reshape family ---

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        throw std::invalid_argument(
            "[reshape] Can only infer one dimension; got shape " +
            shape_str(shape) + ".");
      }
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("[reshape] Invalid shape " +
                                  shape_str(shape) + ".");
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || static_cast<int64_t>(a.size()) % known != 0) {
      throw std::invalid_argument("[reshape] Cannot infer the shape " +
                                  shape_str(shape) + " for an array of size " +
                                  std::to_string(a.size()) + ".");
    }
    shape[infer] = static_cast<int32_t>(a.size() / known);
    known *= shape[infer];
  }
  if (known != static_cast<int64_t>(a.size())) {
    throw std::invalid_argument("[reshape] Cannot reshape array of shape " +
                                shape_str(a.shape()) + " (size " +
                                std::to_string(a.size()) + ") into shape " +
                                shape_str(shape) + ".");
  }
  if (shape == a.shape()) {
    return a;
  }
  auto p = std::make_shared<Reshape>(to_stream(s), shape);
  return array(std::move(shape), a.dtype(), std::move(p), {a});
}

array flatten(const array& a, int start_axis, int end_axis,
              StreamOrDevice s) {
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
  Shape shape(a.shape().begin(), a.shape().begin() + b);
  int64_t n = 1;
  for (int i = b; i <= e; ++i) {
    n *= a.shape(i);
  }
  shape.push_back(static_cast<int32_t>(n));
  shape.insert(shape.end(), a.shape().begin() + e + 1, a.shape().end());
  return reshape(a, std::move(shape), s);
}

array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "unflatten");
  if (shape.empty()) {
    throw std::invalid_argument("[unflatten] The shape must not be empty.");
  }
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        throw std::invalid_argument(
            "[unflatten] Can only infer one dimension; got shape " +
            shape_str(shape) + ".");
      }
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known != 0) {
    shape[infer] = static_cast<int32_t>(a.shape(ax) / known);
    known *= shape[infer];
  }
  if (known != a.shape(ax)) {
    throw std::invalid_argument("[unflatten] Cannot unflatten axis " +
                                std::to_string(axis) + " of size " +
                                std::to_string(a.shape(ax)) + " into shape " +
                                shape_str(shape) + ".");
  }
  Shape out(a.shape().begin(), a.shape().begin() + ax);
  out.insert(out.end(), shape.begin(), shape.end());
  out.insert(out.end(), a.shape().begin() + ax + 1, a.shape().end());
  return reshape(a, std::move(out), s);
}

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  auto ax = normalize_axes(axes, a.ndim(), "squeeze");
  for (int i : ax) {
    if (a.shape(i) != 1) {
      throw std::invalid_argument("[squeeze] Cannot squeeze axis " +
                                  std::to_string(i) + " of size " +
                                  std::to_string(a.shape(i)) +
                                  " in array of shape " +
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
    throw std::invalid_argument("[transpose] Received " +
                                std::to_string(axes.size()) +
                                " axes for array with " +
                                std::to_string(a.ndim()) + " dimensions.");
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
               std::make_shared<Transpose>(to_stream(s), std::move(axes)),
               {a});
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

array moveaxis(const array& a, int source, int destination,
               StreamOrDevice s) {
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
    throw std::invalid_argument("[broadcast_to] Cannot broadcast array of "
                                "shape " +
                                shape_str(a.shape()) + " to shape " +
                                shape_str(shape) + ".");
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

// --- primitive parameters ---

bool Reshape::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const Reshape&>(p).shape_;
  });
}
bool Transpose::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const Transpose&>(p).axes_;
  });
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
bool ExpandDims::is_equivalent(const Primitive& o) const {
  return same_params(*this, o, [](const Primitive& p) {
    return static_cast<const ExpandDims&>(p).axes_;
  });
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
std::vector<Shape> Squeeze::output_shapes(const std::vector<array>& in) {
  Shape shape;
  for (int i = 0; i < in[0].ndim(); ++i) {
    if (!std::binary_search(axes_.begin(), axes_.end(), i)) {
      shape.push_back(in[0].shape(i));
    }
  }
  return {shape};
}

}  // namespace fluxion
