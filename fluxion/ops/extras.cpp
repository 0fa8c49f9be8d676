#include "fluxion/ops/extras.h"

#include <cmath>
#include <string>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/misc.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

Shape drop_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

Shape with_last(Shape s, int32_t last) {
  s.push_back(last);
  return s;
}

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

// Repeat each block mask entry over its block and cut to `rows` x `cols`.
array expand_mask(const array& m, int bs, int rows, int cols, Stream s) {
  array e = repeat(repeat(m, bs, -2, s), bs, -1, s);
  Shape start(e.ndim(), 0);
  Shape stop = e.shape();
  stop[e.ndim() - 2] = rows;
  stop[e.ndim() - 1] = cols;
  return slice(e, start, stop, s);
}

array apply_mask(const array& x, const array& mask, Stream s) {
  return mask.dtype() == bool_ ? where(mask, x, zeros_like(x, s), s)
                               : multiply(x, mask, s);
}

}  // namespace

array searchsorted(const array& a, const array& v, const std::string& side,
                   const std::optional<array>& sorter, StreamOrDevice sd) {
  auto s = to_stream(sd);
  if (side != "left" && side != "right") {
    throw std::invalid_argument(
        "[searchsorted] side must be 'left' or 'right'; got '" + side + "'.");
  }
  if (a.ndim() == 0) {
    throw std::invalid_argument(
        "[searchsorted] The sorted array must have at least one dimension; "
        "got a scalar.");
  }
  Dtype t = promote_types(a.dtype(), v.dtype());
  if (t == complex64) {
    throw std::invalid_argument("[searchsorted] complex64 is not supported.");
  }
  array sa = a;
  if (sorter) {
    if (!is_integral(sorter->dtype()) || sorter->shape() != a.shape()) {
      throw std::invalid_argument(
          "[searchsorted] sorter must be an integer array of a's shape " +
          shape_str(a.shape()) + "; got " + dtype_name(sorter->dtype()) +
          " of shape " + shape_str(sorter->shape()) + ".");
    }
    sa = take_along_axis(a, *sorter, -1, s);
  }
  sa = astype(sa, t, s);
  array vv = astype(v, t, s);
  auto prim = std::make_shared<SearchSorted>(s, side == "right");
  if (a.ndim() == 1) {
    array flat = reshape(vv, {-1}, s);
    array out = array(flat.shape(), uint32, prim, {sa, flat});
    return reshape(out, v.shape(), s);
  }
  if (v.ndim() != a.ndim()) {
    throw std::invalid_argument(
        "[searchsorted] With a sorted array of shape " + shape_str(a.shape()) +
        " the values must have " + std::to_string(a.ndim()) +
        " dimensions; got shape " + shape_str(v.shape()) + ".");
  }
  Shape lead = broadcast_shapes(drop_last(a.shape()), drop_last(v.shape()),
                                "searchsorted");
  sa = broadcast_to(sa, with_last(lead, a.shape(-1)), s);
  vv = broadcast_to(vv, with_last(lead, v.shape(-1)), s);
  return array(vv.shape(), uint32, prim, {sa, vv});
}

array hadamard_transform(const array& a, std::optional<float> scale,
                         StreamOrDevice sd) {
  if (a.ndim() == 0) {
    // A scalar is a length-1 transform: itself times the scale (MLX).
    return reshape(hadamard_transform(reshape(a, {1}, sd), scale, sd), {}, sd);
  }
  int64_t n = a.shape(-1);
  if (n == 0 || (n & (n - 1)) != 0) {
    throw std::invalid_argument("[hadamard_transform] The last axis has size " +
                                std::to_string(n) +
                                "; only powers of two are supported.");
  }
  if (a.dtype() == complex64) {
    throw std::invalid_argument(
        "[hadamard_transform] complex64 is not supported.");
  }
  Dtype t = is_floating_point(a.dtype()) ? a.dtype() : float32;
  double sc = scale ? static_cast<double>(*scale)
                    : 1.0 / std::sqrt(static_cast<double>(n));
  auto s = to_stream(sd);
  return array(a.shape(), t, std::make_shared<Hadamard>(s, sc),
               {astype(a, t, s)});
}

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

array gather_mm(const array& a, const array& b,
                std::optional<array> lhs_indices,
                std::optional<array> rhs_indices, bool /*sorted_indices*/,
                StreamOrDevice sd) {
  auto s = to_stream(sd);
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw std::invalid_argument(
        "[gather_mm] The operands must have at least one dimension; got "
        "shapes " +
        shape_str(a.shape()) + " and " + shape_str(b.shape()) + ".");
  }
  // Vectors as in matmul: a row (1, K), a column (K, 1), squeezed after.
  bool va = a.ndim() == 1, vb = b.ndim() == 1;
  array A = va ? reshape(a, {1, a.shape(0)}, s) : a;
  array B = vb ? reshape(b, {b.shape(0), 1}, s) : b;
  int K = A.shape(-1);
  if (B.shape(-2) != K) {
    throw std::invalid_argument("[gather_mm] Inner dimensions differ: shapes " +
                                shape_str(a.shape()) + " and " +
                                shape_str(b.shape()) + ".");
  }
  auto check_index = [&](const std::optional<array>& idx, const char* which) {
    if (idx && !is_integral(idx->dtype())) {
      throw std::invalid_argument(std::string("[gather_mm] ") + which +
                                  " must have an integer type; got " +
                                  dtype_name(idx->dtype()) + ".");
    }
  };
  check_index(lhs_indices, "lhs_indices");
  check_index(rhs_indices, "rhs_indices");
  auto batch_of = [](const array& x) {
    return Shape(x.shape().begin(), x.shape().end() - 2);
  };
  Shape out_batch = broadcast_shapes(
      lhs_indices ? lhs_indices->shape() : batch_of(A),
      rhs_indices ? rhs_indices->shape() : batch_of(B), "gather_mm");
  int nb = static_cast<int>(out_batch.size());
  // Each operand as (P, rows, cols) over the P output batch positions:
  // gathered by its indices, or broadcast over the batch without them.
  // Written with shape-following ops (flatten, unflatten, squeeze) so that a
  // shapeless compile can replay it on other batch sizes.
  auto operand = [&](const std::optional<array>& idx, const array& x) {
    int r = x.shape(-2), c = x.shape(-1);
    if (idx) {
      auto flat_idx = flatten(broadcast_to(*idx, out_batch, s), 0, -1, s);
      return take(reshape(x, {-1, r, c}, s), flat_idx, 0, s);
    }
    Shape full = out_batch;
    full.push_back(r);
    full.push_back(c);
    auto xb = broadcast_to(x, full, s);
    return nb == 0 ? expand_dims(xb, 0, s) : flatten(xb, 0, nb - 1, s);
  };
  auto prod = matmul(operand(lhs_indices, A), operand(rhs_indices, B), s);
  array out = prod;
  if (nb == 0) {
    out = squeeze(prod, 0, s);
  } else if (nb > 1) {
    Shape dims{-1};
    dims.insert(dims.end(), out_batch.begin() + 1, out_batch.end());
    out = unflatten(prod, 0, dims, s);
  }
  if (va) {
    out = squeeze(out, -2, s);
  }
  if (vb) {
    out = squeeze(out, -1, s);
  }
  return out;
}

array segmented_mm(const array& a, const array& b, const array& segments,
                   StreamOrDevice sd) {
  auto s = to_stream(sd);
  if (a.ndim() != 2 || b.ndim() != 2 || a.shape(1) != b.shape(0)) {
    throw std::invalid_argument(
        "[segmented_mm] Expected matrices (M, K) and (K, N); got shapes " +
        shape_str(a.shape()) + " and " + shape_str(b.shape()) + ".");
  }
  if (segments.ndim() == 0 || segments.shape(-1) != 2 ||
      !is_integral(segments.dtype())) {
    throw std::invalid_argument(
        std::string("[segmented_mm] segments must be integer pairs of shape "
                    "(..., 2); got ") +
        dtype_name(segments.dtype()) + " of shape " +
        shape_str(segments.shape()) + ".");
  }
  int K = a.shape(1);
  Shape lead = drop_last(segments.shape());
  Shape col = with_last(lead, 1);
  Shape one(lead.size(), 1);
  Shape zero(lead.size() + 1, 0);
  Shape stop = with_last(lead, 1);
  array start = slice(segments, zero, stop, s);
  zero.back() = 1;
  stop.back() = 2;
  array end = slice(segments, zero, stop, s);
  array k = reshape(arange(0, K, s), with_last(one, K), s);
  Dtype t = promote_types(a.dtype(), b.dtype());
  array mask =
      astype(logical_and(greater_equal(k, start, s), less(k, end, s), s), t, s);
  // (..., 1, K) * (M, K) -> (..., M, K), then @ (K, N).
  return matmul(multiply(expand_dims(mask, -2, s), a, s), b, s);
}

array block_masked_mm(const array& a, const array& b, int block_size,
                      const std::optional<array>& mask_out,
                      const std::optional<array>& mask_lhs,
                      const std::optional<array>& mask_rhs, StreamOrDevice sd) {
  auto s = to_stream(sd);
  if (block_size != 32 && block_size != 64) {
    throw std::invalid_argument(
        "[block_masked_mm] Only block sizes 32 and 64 are supported; got " +
        std::to_string(block_size) + ".");
  }
  if (a.ndim() < 2 || b.ndim() < 2 || a.shape(-1) != b.shape(-2)) {
    throw std::invalid_argument(
        "[block_masked_mm] Expected (..., M, K) and (..., K, N) operands; got "
        "shapes " +
        shape_str(a.shape()) + " and " + shape_str(b.shape()) + ".");
  }
  int M = a.shape(-2), K = a.shape(-1), N = b.shape(-1);
  auto blocks = [&](int n) { return (n + block_size - 1) / block_size; };
  auto check = [&](const std::optional<array>& m, const char* name, int r,
                   int c) {
    if (m && (m->ndim() < 2 || m->shape(-2) != blocks(r) ||
              m->shape(-1) != blocks(c))) {
      throw std::invalid_argument(std::string("[block_masked_mm] ") + name +
                                  " of shape " + shape_str(m->shape()) +
                                  " must end in (" + std::to_string(blocks(r)) +
                                  "," + std::to_string(blocks(c)) + ").");
    }
  };
  check(mask_out, "mask_out", M, N);
  check(mask_lhs, "mask_lhs", M, K);
  check(mask_rhs, "mask_rhs", K, N);
  array x = mask_lhs
                ? apply_mask(a, expand_mask(*mask_lhs, block_size, M, K, s), s)
                : a;
  array y = mask_rhs
                ? apply_mask(b, expand_mask(*mask_rhs, block_size, K, N, s), s)
                : b;
  array out = matmul(x, y, s);
  return mask_out
             ? apply_mask(out, expand_mask(*mask_out, block_size, M, N, s), s)
             : out;
}

bool SearchSorted::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const SearchSorted&>(o).right_ == right_;
}

bool Hadamard::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const Hadamard&>(o).scale_ == scale_;
}

bool AsStrided::is_equivalent(const Primitive& o) const {
  if (typeid(*this) != typeid(o)) {
    return false;
  }
  auto& p = static_cast<const AsStrided&>(o);
  return p.shape_ == shape_ && p.strides_ == strides_ && p.offset_ == offset_;
}

bool View::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const View&>(o).dtype_ == dtype_;
}

std::vector<Shape> View::output_shapes(const std::vector<array>& in) {
  return {view_shape(in[0], dtype_)};
}

bool Contiguous::is_equivalent(const Primitive& o) const {
  return typeid(*this) == typeid(o) &&
         static_cast<const Contiguous&>(o).allow_col_major_ == allow_col_major_;
}

}  // namespace fluxion
