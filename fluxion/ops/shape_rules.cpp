// Transformation rules (jvp, vjp, vmap) of the shape primitives. They live
// apart from shape.cpp only to keep files short; the primitives' other
// members are there.
//
// Every rule is written with public ops, so that its result is itself
// differentiable and batchable (grad of grad, vmap of grad). The shape
// primitives are linear: jvp applies the primitive to the tangents, and vjp
// applies the adjoint (slice <-> pad/slice_update, broadcast <-> sum, ...).
// vmap rules move the mapped axis to the front and shift the primitive's
// axis parameters by one.
#include <algorithm>
#include <numeric>

#include "fluxion/ops/creation.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

using rules::batch_size;
using rules::prepend;
using rules::shifted;
using rules::tangent_or_zeros;
using rules::to_front;

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;

// The axes of `out` that a broadcast from `in` created (the new leading
// ones) or grew (size 1 in `in`): where a broadcast's cotangent is summed.
std::vector<int> broadcast_axes(const Shape& in, const Shape& out) {
  int lead = static_cast<int>(out.size() - in.size());
  std::vector<int> axes;
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    if (i < lead || (in[i - lead] == 1 && out[i] != 1)) {
      axes.push_back(i);
    }
  }
  return axes;
}

// Stops that the public slice ops read back as the primitive's normalized
// ones. A normalized negative-stride slice stops exactly one stride past
// its last element, possibly below zero, where a public op would count from
// the end; shifted down by the axis size it clamps to -1 instead, which
// gives the same length.
Shape public_stop(const Shape& stop, const Shape& strides, const Shape& shape) {
  Shape out = stop;
  for (size_t i = 0; i < stop.size(); ++i) {
    if (strides[i] < 0 && stop[i] < 0) {
      out[i] = stop[i] - shape[i];
    }
  }
  return out;
}

}  // namespace

// --- Reshape ---

std::vector<array> Reshape::jvp(const Arrays&, const Arrays& tangents,
                                const std::vector<int>&) {
  // The primal's shape, not the traced one: a shapeless compile replays
  // this primitive on other shapes.
  return {reshape(tangents[0], shape_for(tangents[0].shape()), stream())};
}

std::vector<array> Reshape::vjp(const Arrays& primals, const Arrays& cts,
                                const std::vector<int>&, const Arrays&) {
  return {reshape(cts[0], primals[0].shape(), stream())};
}

Batched Reshape::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  int b = inputs[0].shape(axes[0]);
  auto x = to_front(inputs[0], axes[0], b, stream());
  Shape unbatched(x.shape().begin() + 1, x.shape().end());
  return {{reshape(x, prepend(b, shape_for(unbatched)), stream())}, {0}};
}

// --- Transpose ---

std::vector<array> Transpose::jvp(const Arrays&, const Arrays& tangents,
                                  const std::vector<int>&) {
  return {transpose(tangents[0], axes_, stream())};
}

std::vector<array> Transpose::vjp(const Arrays&, const Arrays& cts,
                                  const std::vector<int>&, const Arrays&) {
  std::vector<int> inverse(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) {
    inverse[axes_[i]] = static_cast<int>(i);
  }
  return {transpose(cts[0], std::move(inverse), stream())};
}

// One transpose does both jobs: the mapped axis goes first and the others
// follow the permutation (renumbered around the mapped axis).
Batched Transpose::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  int ax = axes[0];
  std::vector<int> perm{ax};
  for (int p : axes_) {
    perm.push_back(p < ax ? p : p + 1);
  }
  return {{transpose(inputs[0], std::move(perm), stream())}, {0}};
}

// --- Broadcast ---

std::vector<array> Broadcast::jvp(const Arrays&, const Arrays& tangents,
                                  const std::vector<int>&) {
  return {broadcast_to(tangents[0], shape_, stream())};
}

// Each input element was copied to every position along the new leading
// axes and the size-1 axes that grew, so its cotangent is the sum there.
std::vector<array> Broadcast::vjp(const Arrays& primals, const Arrays& cts,
                                  const std::vector<int>&, const Arrays&) {
  const array& x = primals[0];
  auto axes = broadcast_axes(x.shape(), shape_);
  array g = cts[0];
  if (!axes.empty()) {
    // Sums of small integers widen; the cotangent keeps the input's dtype.
    g = astype(sum(g, axes, false, stream()), x.dtype(), stream());
  }
  return {reshape(g, x.shape(), stream())};
}

Batched Broadcast::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  int b = inputs[0].shape(axes[0]);
  auto x = to_front(inputs[0], axes[0], b, stream());
  // Align the input's axes with the trailing output axes, after the batch.
  std::vector<int> lead(shape_.size() - (x.ndim() - 1));
  std::iota(lead.begin(), lead.end(), 1);
  return {{broadcast_to(expand_dims(x, lead, stream()), prepend(b, shape_),
                        stream())},
          {0}};
}

// --- BroadcastAxes (Broadcast with partners, shapeless compile) ---

// The operand's tangent broadcast the same way; partners (read for their
// shapes) carry no derivative.
std::vector<array> BroadcastAxes::jvp(const Arrays& primals,
                                      const Arrays& tangents,
                                      const std::vector<int>& argnums) {
  Arrays partners(primals.begin() + 1, primals.end());
  Shape shape = output_shapes(primals)[0];
  if (argnums.empty() || argnums[0] != 0) {
    return {zeros(shape, primals[0].dtype(), stream())};
  }
  return {detail::broadcast_against(tangents[0], partners, shape, ignore(),
                                    stream())};
}

// As Broadcast's, from the node's own shape (not the traced one).
std::vector<array> BroadcastAxes::vjp(const Arrays& primals, const Arrays& cts,
                                      const std::vector<int>& argnums,
                                      const Arrays& outputs) {
  std::vector<array> vjps;
  for (int arg : argnums) {
    if (arg != 0) {
      vjps.push_back(zeros_like(primals[arg], stream()));
      continue;
    }
    const array& x = primals[0];
    int lead = static_cast<int>(outputs[0].ndim()) - x.ndim();
    auto axes = broadcast_axes(x.shape(), outputs[0].shape());
    array g = cts[0];
    if (!axes.empty()) {
      // Summed with the axes kept and the new leading ones squeezed, so
      // that no constant shape is traced (a shapeless replay recomputes
      // it).
      g = astype(sum(g, axes, true, stream()), x.dtype(), stream());
      if (lead > 0) {
        std::vector<int> front(lead);
        std::iota(front.begin(), front.end(), 0);
        g = squeeze(g, front, stream());
      }
    }
    vjps.push_back(g);
  }
  return vjps;
}

// Mapped inputs get their batch axis in front and unit axes after it up to
// the largest unbatched rank among the inputs (left of the last `ignore`
// axes), so that right-aligned broadcasting lines the batch axes up.
Batched BroadcastAxes::vmap(const Arrays& inputs,
                            const std::vector<int>& axes) {
  int b = rules::batch_size(inputs, axes);
  int head = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    int nd = inputs[i].ndim() - (axes[i] >= 0 ? 1 : 0);
    head = std::max(head, nd - std::min(ignore(), nd));
  }
  Arrays in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] < 0) {
      in.push_back(inputs[i]);
      continue;
    }
    auto x = to_front(inputs[i], axes[i], b, stream());
    int nd = x.ndim() - 1;
    int pad = head - (nd - std::min(ignore(), nd));
    if (pad > 0) {
      std::vector<int> units(pad);
      std::iota(units.begin(), units.end(), 1);
      x = expand_dims(x, units, stream());
    }
    in.push_back(x);
  }
  bool mapped = std::any_of(axes.begin(), axes.end(),
                            [](int a) { return a >= 0; });
  Arrays partners(in.begin() + 1, in.end());
  Shape shape = output_shapes(in)[0];
  return {{detail::broadcast_against(in[0], partners, shape, ignore(),
                                     stream())},
          {mapped ? 0 : -1}};
}

// --- ExpandDims and Squeeze (each other's adjoint) ---

std::vector<array> ExpandDims::jvp(const Arrays&, const Arrays& tangents,
                                   const std::vector<int>&) {
  return {expand_dims(tangents[0], axes_, stream())};
}

std::vector<array> ExpandDims::vjp(const Arrays&, const Arrays& cts,
                                   const std::vector<int>&, const Arrays&) {
  return {squeeze(cts[0], axes_, stream())};
}

Batched ExpandDims::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  int b = inputs[0].shape(axes[0]);
  auto x = to_front(inputs[0], axes[0], b, stream());
  return {{expand_dims(x, shifted(axes_), stream())}, {0}};
}

std::vector<array> Squeeze::jvp(const Arrays&, const Arrays& tangents,
                                const std::vector<int>&) {
  return {squeeze(tangents[0], axes_, stream())};
}

std::vector<array> Squeeze::vjp(const Arrays&, const Arrays& cts,
                                const std::vector<int>&, const Arrays&) {
  return {expand_dims(cts[0], axes_, stream())};
}

Batched Squeeze::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  int b = inputs[0].shape(axes[0]);
  auto x = to_front(inputs[0], axes[0], b, stream());
  return {{squeeze(x, shifted(axes_), stream())}, {0}};
}

// --- Slice ---

std::vector<array> Slice::jvp(const Arrays& primals, const Arrays& tangents,
                              const std::vector<int>&) {
  return {slice(tangents[0], start_,
                public_stop(stop_, strides_, primals[0].shape()), strides_,
                stream())};
}

// The cotangent goes back into the sliced positions, zeros elsewhere. A
// unit-stride slice is a window, whose adjoint is a pad: it writes each
// element once, where slice_update first fills the whole array.
std::vector<array> Slice::vjp(const Arrays& primals, const Arrays& cts,
                              const std::vector<int>&, const Arrays&) {
  const array& x = primals[0];
  bool unit = std::all_of(strides_.begin(), strides_.end(),
                          [](int32_t st) { return st == 1; });
  if (unit) {
    std::vector<int> axes(x.ndim());
    std::iota(axes.begin(), axes.end(), 0);
    Shape high(x.ndim());
    for (int i = 0; i < x.ndim(); ++i) {
      high[i] = x.shape(i) - stop_[i];
    }
    return {pad(cts[0], axes, start_, high, array(0), "constant", stream())};
  }
  return {slice_update(zeros_like(x, stream()), cts[0], start_,
                       public_stop(stop_, strides_, x.shape()), strides_,
                       stream())};
}

Batched Slice::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  int b = inputs[0].shape(axes[0]);
  auto x = to_front(inputs[0], axes[0], b, stream());
  Shape unbatched(x.shape().begin() + 1, x.shape().end());
  return {{slice(x, prepend(0, start_),
                 prepend(b, public_stop(stop_, strides_, unbatched)),
                 prepend(1, strides_), stream())},
          {0}};
}

// --- SliceUpdate: inputs (src, update), the update has the region's shape
// (the op broadcast it before building the primitive) ---

std::vector<array> SliceUpdate::jvp(const Arrays& primals,
                                    const Arrays& tangents,
                                    const std::vector<int>& argnums) {
  auto s = stream();
  auto src = tangent_or_zeros(primals, tangents, argnums, 0, s);
  auto upd = tangent_or_zeros(primals, tangents, argnums, 1, s);
  return {slice_update(src, upd, start_,
                       public_stop(stop_, strides_, primals[0].shape()),
                       strides_, s)};
}

// The source's values survive outside the region only; the update's are
// exactly the region.
std::vector<array> SliceUpdate::vjp(const Arrays& primals, const Arrays& cts,
                                    const std::vector<int>& argnums,
                                    const Arrays&) {
  auto s = stream();
  auto stop = public_stop(stop_, strides_, primals[0].shape());
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(slice_update(cts[0], array(0), start_, stop, strides_, s));
    } else {
      out.push_back(slice(cts[0], start_, stop, strides_, s));
    }
  }
  return out;
}

// An unmapped source is broadcast: each batch element gets its own copy.
Batched SliceUpdate::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int b = batch_size(inputs, axes);
  auto src = to_front(inputs[0], axes[0], b, s);
  auto upd = to_front(inputs[1], axes[1], b, s);
  Shape unbatched(src.shape().begin() + 1, src.shape().end());
  return {{slice_update(src, upd, prepend(0, start_),
                        prepend(b, public_stop(stop_, strides_, unbatched)),
                        prepend(1, strides_), s)},
          {0}};
}

// --- Concatenate ---

std::vector<array> Concatenate::jvp(const Arrays& primals,
                                    const Arrays& tangents,
                                    const std::vector<int>& argnums) {
  std::vector<array> parts;
  for (int i = 0; i < static_cast<int>(primals.size()); ++i) {
    parts.push_back(tangent_or_zeros(primals, tangents, argnums, i, stream()));
  }
  return {concatenate(parts, axis_, stream())};
}

// Each input's cotangent is its own window of the output's.
std::vector<array> Concatenate::vjp(const Arrays& primals, const Arrays& cts,
                                    const std::vector<int>& argnums,
                                    const Arrays&) {
  std::vector<int32_t> offsets{0};
  for (auto& p : primals) {
    offsets.push_back(offsets.back() + p.shape(axis_));
  }
  const array& ct = cts[0];
  std::vector<array> out;
  for (int arg : argnums) {
    Shape start(ct.ndim(), 0);
    Shape stop = ct.shape();
    start[axis_] = offsets[arg];
    stop[axis_] = offsets[arg + 1];
    out.push_back(slice(ct, start, stop, stream()));
  }
  return out;
}

Batched Concatenate::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  int b = batch_size(inputs, axes);
  std::vector<array> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts.push_back(to_front(inputs[i], axes[i], b, stream()));
  }
  return {{concatenate(parts, axis_ + 1, stream())}, {0}};
}

// --- Pad: inputs (a, pad value as a 0-d array of a's dtype) ---

std::vector<array> Pad::jvp(const Arrays& primals, const Arrays& tangents,
                            const std::vector<int>& argnums) {
  auto s = stream();
  auto a = tangent_or_zeros(primals, tangents, argnums, 0, s);
  auto v = tangent_or_zeros(primals, tangents, argnums, 1, s);
  return {pad(a, axes_, low_, high_, v, "constant", s)};
}

// `a` fills the window [low, low + n) of each padded axis; the pad value
// fills every other position, so its cotangent is the sum over the border.
std::vector<array> Pad::vjp(const Arrays& primals, const Arrays& cts,
                            const std::vector<int>& argnums, const Arrays&) {
  auto s = stream();
  const array& a = primals[0];
  const array& ct = cts[0];
  Shape start(a.ndim(), 0);
  Shape stop = a.shape();
  for (size_t i = 0; i < axes_.size(); ++i) {
    start[axes_[i]] = low_[i];
    stop[axes_[i]] = low_[i] + a.shape(axes_[i]);
  }
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(slice(ct, start, stop, s));
    } else {
      auto border = slice_update(ct, array(0), start, stop, s);
      out.push_back(astype(sum(border, false, s), primals[1].dtype(), s));
    }
  }
  return out;
}

// With one pad value for every batch element this is a pad of the batched
// array. A mapped pad value differs per batch element: the output is then
// each element's value broadcast over its slab, with `a` written into the
// window.
Batched Pad::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  // As MLX: one padding value for the whole batch. (A value per batch
  // element would be a different op; pass the value unbatched.)
  if (axes[1] >= 0) {
    throw std::invalid_argument(
        "[pad] Cannot vmap over a batched padding value (constant_values "
        "must be the same for every batch element; give it in_axes None).");
  }
  int b = batch_size(inputs, axes);
  auto a = to_front(inputs[0], axes[0], b, s);
  return {{pad(a, shifted(axes_), low_, high_, inputs[1], "constant", s)},
          {0}};
}

}  // namespace fluxion
