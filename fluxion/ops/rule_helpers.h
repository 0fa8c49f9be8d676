// Helpers for transformation rules. Most vmap rules bring every operand's
// mapped axis to the front, so that the primitive's own axis parameters just
// shift by one, and give unmapped operands a broadcast batch axis when the
// batched operation needs one per batch element.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/shape.h"

namespace fluxion::rules {

// The tangent of input `i` among those a jvp rule is given, or zeros shaped
// like the input: rules of primitives with several differentiable inputs
// need a value for each.
inline array tangent_or_zeros(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums, int i,
                              Stream s) {
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == i) {
      return tangents[k];
    }
  }
  return zeros_like(primals[i], s);
}

// Zero cotangents for the inputs at `argnums`: the vjp of a piecewise
// constant function (positions, reinterpreted bits).
inline std::vector<array> zero_cotangents(const std::vector<array>& primals,
                                          const std::vector<int>& argnums,
                                          Stream s) {
  std::vector<array> out;
  for (int i : argnums) {
    out.push_back(zeros_like(primals[i], s));
  }
  return out;
}

// Gather/scatter rules: integer indices have no derivative, and asking for
// one (differentiating with respect to them, or through indices computed
// from a differentiated input, e.g. argsort) is a mistake the user should
// hear about, as in MLX. Raises if any of argnums is in [first, last].
inline void check_no_index_derivative(const char* op,
                                      const std::vector<int>& argnums,
                                      int first, int last) {
  for (int a : argnums) {
    if (a >= first && a <= last) {
      throw std::invalid_argument(
          std::string("[") + op +
          "] Cannot differentiate with respect to the indices: they are "
          "integers and have no gradient. If they depend on a "
          "differentiated input, wrap them in stop_gradient.");
    }
  }
}

// The size of the mapped axis (the first mapped input's).
inline int batch_size(const std::vector<array>& inputs,
                      const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      return inputs[i].shape(axes[i]);
    }
  }
  return 1;
}

// `x` with its mapped axis `axis` moved to the front; an unmapped `x`
// (axis -1) is broadcast along a new leading axis of `size` (a stride-0
// view, no copy).
inline array to_front(const array& x, int axis, int size, Stream s) {
  if (axis < 0) {
    auto e = expand_dims(x, 0, s);
    Shape shape = e.shape();
    shape[0] = size;
    return broadcast_to(e, shape, s);
  }
  return axis == 0 ? x : moveaxis(x, axis, 0, s);
}

// Axis parameters of the unbatched primitive, shifted past a leading batch
// axis.
inline std::vector<int> shifted(std::vector<int> axes) {
  for (auto& a : axes) {
    ++a;
  }
  return axes;
}

// A shape or slice bound with `first` prepended (the batch axis' entry).
inline Shape prepend(int32_t first, const Shape& rest) {
  Shape out{first};
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// For elementwise vmap rules, whose operands share the unbatched shape:
// the operands with their mapped axes moved to the first mapped operand's
// axis, which is returned; unmapped operands get a unit axis there,
// broadcast to the batch (a stride-0 view: the kernels want operands of
// the output's shape). When no operand is mapped (a rule upstream reported
// its output unmapped) they are returned as they are, with axis -1.
inline std::pair<std::vector<array>, int> align_mapped_axes(
    const std::vector<array>& inputs, const std::vector<int>& axes, Stream s) {
  size_t first = 0;
  while (first < inputs.size() && axes[first] < 0) {
    ++first;
  }
  if (first == inputs.size()) {
    return {inputs, -1};
  }
  int ax = axes[first];
  const Shape& shape = inputs[first].shape();
  std::vector<array> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] < 0) {
      out.push_back(broadcast_to(expand_dims(inputs[i], ax, s), shape, s));
    } else if (axes[i] != ax) {
      out.push_back(moveaxis(inputs[i], axes[i], ax, s));
    } else {
      out.push_back(inputs[i]);
    }
  }
  return {std::move(out), ax};
}

}  // namespace fluxion::rules
