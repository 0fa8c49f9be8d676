// Transformation rules of SearchSorted, Hadamard, AsStrided, View and
// Contiguous, written with public ops. vmap rules bring the mapped axis to
// the front.
#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/extras.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/misc.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;

Arrays zero_cotangents(const Arrays& primals, const std::vector<int>& argnums,
                       Stream s) {
  Arrays out;
  for (int i : argnums) {
    out.push_back(zeros_like(primals[i], s));
  }
  return out;
}

// The transform with this primitive's exact (double) scale, or its
// transpose; x is already of a floating type.
array same_hadamard(const array& x, double scale, bool transpose, Stream s) {
  return array(x.shape(), x.dtype(),
               std::make_shared<Hadamard>(s, scale, transpose), {x});
}

}  // namespace

// --- SearchSorted: integer positions, piecewise constant ---

std::vector<array> SearchSorted::jvp(const Arrays& primals, const Arrays&,
                                     const std::vector<int>&) {
  return {zeros(primals[1].shape(), int32, stream())};
}

std::vector<array> SearchSorted::vjp(const Arrays& primals, const Arrays&,
                                     const std::vector<int>& argnums,
                                     const Arrays&) {
  return zero_cotangents(primals, argnums, stream());
}

Batched SearchSorted::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  if (axes[0] >= 0) {
    throw std::invalid_argument(
        "[searchsorted] Cannot vmap over the sorted array: it must stay 1-D "
        "(map over the values instead).");
  }
  // The values may have any shape: the batch axis stays where it is.
  return {{searchsorted(inputs[0], inputs[1], right_ ? "right" : "left",
                        std::nullopt, stream())},
          {axes[1]}};
}

// --- Hadamard: a linear map; its transpose for the vjp (H_20 and H_28 are
// not symmetric, so the vjp is not the transform itself) ---

std::vector<array> Hadamard::jvp(const Arrays&, const Arrays& tangents,
                                 const std::vector<int>&) {
  return {same_hadamard(tangents[0], scale_, transpose_, stream())};
}

std::vector<array> Hadamard::vjp(const Arrays&, const Arrays& cts,
                                 const std::vector<int>&, const Arrays&) {
  return {same_hadamard(cts[0], scale_, !transpose_, stream())};
}

Batched Hadamard::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  array x = rules::to_front(inputs[0], axes[0], 1, s);
  return {{same_hadamard(x, scale_, transpose_, s)}, {0}};
}

// --- AsStrided: each output element reads one element of a ---

std::vector<array> AsStrided::jvp(const Arrays&, const Arrays& tangents,
                                  const std::vector<int>&) {
  return {as_strided(tangents[0], shape_, strides_, offset_, stream())};
}

// The cotangent of a: every output element's cotangent added at the flat
// position it read (overlapping views accumulate).
std::vector<array> AsStrided::vjp(const Arrays& primals, const Arrays& cts,
                                  const std::vector<int>&, const Arrays&) {
  auto s = stream();
  const array& a = primals[0];
  const array& ct = cts[0];
  if (ct.size() == 0) {
    return {zeros_like(a, s)};
  }
  Dtype it = a.size() > (1u << 30) ? int64 : int32;
  array pos = astype(array(static_cast<int64_t>(offset_)), it, s);
  for (size_t d = 0; d < shape_.size(); ++d) {
    Shape col(shape_.size(), 1);
    col[d] = shape_[d];
    array step = multiply(astype(arange(0, shape_[d], s), it, s),
                          astype(array(strides_[d]), it, s), s);
    pos = add(pos, reshape(step, col, s), s);
  }
  pos = reshape(broadcast_to(pos, shape_, s), {-1}, s);
  array flat =
      scatter_add(zeros({static_cast<int32_t>(a.size())}, ct.dtype(), s), pos,
                  reshape(ct, {-1, 1}, s), 0, s);
  return {reshape(flat, a.shape(), s)};
}

Batched AsStrided::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  array x = rules::to_front(inputs[0], axes[0], 1, s);
  int64_t n = x.shape(0) == 0 ? 0 : static_cast<int64_t>(x.size()) / x.shape(0);
  Strides st{n};
  st.insert(st.end(), strides_.begin(), strides_.end());
  return {{as_strided(x, rules::prepend(x.shape(0), shape_), st, offset_, s)},
          {0}};
}

// --- View: a reinterpretation of bits, no derivative ---

std::vector<array> View::jvp(const Arrays& primals, const Arrays&,
                             const std::vector<int>&) {
  return {zeros(output_shapes(primals)[0], dtype_, stream())};
}

std::vector<array> View::vjp(const Arrays& primals, const Arrays&,
                             const std::vector<int>& argnums, const Arrays&) {
  return zero_cotangents(primals, argnums, stream());
}

Batched View::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  array x = rules::to_front(inputs[0], axes[0], 1, s);
  return {{view(x, dtype_, s)}, {0}};
}

// --- Contiguous: the identity on values ---

std::vector<array> Contiguous::jvp(const Arrays&, const Arrays& tangents,
                                   const std::vector<int>&) {
  return {tangents[0]};
}

std::vector<array> Contiguous::vjp(const Arrays&, const Arrays& cts,
                                   const std::vector<int>&, const Arrays&) {
  return {cts[0]};
}

Batched Contiguous::vmap(const Arrays& inputs, const std::vector<int>& axes) {
  auto s = stream();
  array x = rules::to_front(inputs[0], axes[0], 1, s);
  return {{contiguous(x, allow_col_major_, s)}, {0}};
}

}  // namespace fluxion
