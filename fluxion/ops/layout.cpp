#include "fluxion/ops/layout.h"

#include <cmath>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace {

using Arrays = std::vector<array>;
using Batched = std::pair<std::vector<array>, std::vector<int>>;


Shape view_shape(const array& a, Dtype dtype) {
  int in = a.dtype().size, out = dtype.size;
  if (in == out) {
    return a.shape();
  }
  if (a.ndim() == 0) {
    throw std::invalid_argument(std::string("[view] A scalar of dtype ") +
                                dtype_name(a.dtype()) +
                                " cannot be viewed as " + dtype_name(dtype) +
                                " (the item sizes differ).");
  }
  int64_t bytes = static_cast<int64_t>(a.shape(-1)) * in;
  if (bytes % out != 0) {
    throw std::invalid_argument(
        "[view] The last axis (size " + std::to_string(a.shape(-1)) +
        ") of dtype " + dtype_name(a.dtype()) + " does not divide into " +
        dtype_name(dtype) + " items.");
  }
  Shape s = a.shape();
  s.back() = static_cast<int32_t>(bytes / out);
  return s;
}

}  // namespace

array as_strided(const array& a, std::optional<Shape> shape,
                 std::optional<Strides> strides, size_t offset,
                 StreamOrDevice s) {
  Shape sh = shape.value_or(a.shape());
  Strides st;
  if (strides) {
    st = *strides;
  } else {
    st.assign(sh.size(), 1);
    for (int d = static_cast<int>(sh.size()) - 2; d >= 0; --d) {
      st[d] = st[d + 1] * sh[d + 1];
    }
  }
  if (st.size() != sh.size()) {
    throw std::invalid_argument("[as_strided] Got strides " + vec_str(st) +
                                " for the shape " + shape_str(sh) +
                                "; they must have the same length.");
  }
  int64_t size = 1, lo = static_cast<int64_t>(offset), hi = lo;
  for (size_t d = 0; d < sh.size(); ++d) {
    if (sh[d] < 0) {
      throw std::invalid_argument("[as_strided] Negative dimension in shape " +
                                  shape_str(sh) + ".");
    }
    size *= sh[d];
    int64_t span = static_cast<int64_t>(sh[d] - 1) * st[d];
    (span < 0 ? lo : hi) += span;
  }
  if (size > 0 && (lo < 0 || hi >= static_cast<int64_t>(a.size()))) {
    throw std::invalid_argument(
        "[as_strided] The view of shape " + shape_str(sh) + " with strides " +
        vec_str(st) + " and offset " + std::to_string(offset) +
        " reaches element " + std::to_string(lo < 0 ? lo : hi) +
        ", outside the array's " + std::to_string(a.size()) + " elements.");
  }
  return array(sh, a.dtype(),
               std::make_shared<AsStrided>(to_stream(s), sh, st, offset), {a});
}

array view(const array& a, Dtype dtype, StreamOrDevice s) {
  Shape sh = view_shape(a, dtype);
  return array(std::move(sh), dtype,
               std::make_shared<View>(to_stream(s), dtype), {a});
}

array contiguous(const array& a, bool allow_col_major, StreamOrDevice s) {
  return array(a.shape(), a.dtype(),
               std::make_shared<Contiguous>(to_stream(s), allow_col_major),
               {a});
}

bool AsStrided::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& p = static_cast<const AsStrided&>(o);
  return p.shape_ == shape_ && p.strides_ == strides_ && p.offset_ == offset_;
}

std::vector<PrimitiveArg> AsStrided::state() const {
  return export_state(export_ints(shape_), export_ints(strides_),
                      static_cast<int64_t>(offset_));
}

std::shared_ptr<Primitive> AsStrided::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "AsStrided");
  auto& strides = a.get<std::vector<int64_t>>(1);
  return std::make_shared<AsStrided>(s, a.shp(0),
                                     Strides(strides.begin(), strides.end()),
                                     static_cast<size_t>(a.i64(2)));
}

bool View::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const View&>(o).dtype_ == dtype_;
}

std::vector<PrimitiveArg> View::state() const { return export_state(dtype_); }

std::shared_ptr<Primitive> View::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "View");
  return std::make_shared<View>(s, a.dt(0));
}

std::vector<Shape> View::output_shapes(const std::vector<array>& in) {
  return {view_shape(in[0], dtype_)};
}

bool Contiguous::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const Contiguous&>(o).allow_col_major_ == allow_col_major_;
}

std::vector<PrimitiveArg> Contiguous::state() const {
  return export_state(allow_col_major_);
}

std::shared_ptr<Primitive> Contiguous::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Contiguous");
  return std::make_shared<Contiguous>(s, a.b(0));
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
  return rules::zero_cotangents(primals, argnums, stream());
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
