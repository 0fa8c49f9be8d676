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
  if (a.ndim() != 1) {
    // MLX (and NumPy): one sorted sequence. vmap over it raises too.
    throw std::invalid_argument(
        "[searchsorted] The sorted array must be 1-D; got shape " +
        shape_str(a.shape()) + ".");
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
  array flat = reshape(vv, {-1}, s);
  array out = array(flat.shape(), uint32, prim, {sa, flat});
  return reshape(out, v.shape(), s);
}

array hadamard_transform(const array& a, std::optional<float> scale,
                         StreamOrDevice sd) {
  if (a.ndim() == 0) {
    // A scalar is a length-1 transform: itself times the scale (MLX).
    return reshape(hadamard_transform(reshape(a, {1}, sd), scale, sd), {}, sd);
  }
  int64_t n = a.shape(-1);
  if (detail::hadamard_factor(n) == 0) {
    throw std::invalid_argument(
        std::string("[hadamard_transform] The last axis has size ") +
        std::to_string(n) +
        "; it must be m * 2^k with m in (1, 12, 20, 28) and k <= 26.");
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
         static_cast<const Hadamard&>(o).scale_ == scale_ &&
         static_cast<const Hadamard&>(o).transpose_ == transpose_;
}

namespace detail {

int hadamard_factor(int64_t n) {
  for (int m : {1, 12, 20, 28}) {
    if (n <= 0 || n % m != 0) {
      continue;
    }
    int64_t p = n / m;
    if ((p & (p - 1)) == 0 && p <= (int64_t{1} << 26)) {
      return m;
    }
  }
  return 0;
}

namespace {

// Paley's second construction for q = 5 (q = 1 mod 4): the symmetric
// conference matrix C of order q + 1 (C[0][j] = C[j][0] = 1 for j > 0,
// C[1 + i][1 + j] = chi(j - i), chi the quadratic character mod q) with
// each 0 replaced by [[1, -1], [-1, -1]] and each +-1 by +-[[1, 1], [1, -1]].
std::vector<int8_t> paley2_q5() {
  const int q = 5, c = q + 1, m = 2 * c;
  auto chi = [](int x) {
    x = ((x % 5) + 5) % 5;
    return x == 0 ? 0 : (x == 1 || x == 4) ? 1 : -1;  // squares mod 5: 1, 4
  };
  std::vector<int> conf(c * c, 0);
  for (int j = 1; j < c; ++j) {
    conf[j] = conf[j * c] = 1;
  }
  for (int i = 0; i < q; ++i) {
    for (int j = 0; j < q; ++j) {
      conf[(1 + i) * c + 1 + j] = chi(j - i);
    }
  }
  std::vector<int8_t> h(m * m);
  for (int i = 0; i < c; ++i) {
    for (int j = 0; j < c; ++j) {
      int e = conf[i * c + j];
      // Blocks [[a, b], [b, d]]: zero -> (1, -1, -1), +-1 -> +-(1, 1, -1).
      int a = e == 0 ? 1 : e, b = e == 0 ? -1 : e, d = e == 0 ? -1 : -e;
      h[(2 * i) * m + 2 * j] = static_cast<int8_t>(a);
      h[(2 * i) * m + 2 * j + 1] = static_cast<int8_t>(b);
      h[(2 * i + 1) * m + 2 * j] = static_cast<int8_t>(b);
      h[(2 * i + 1) * m + 2 * j + 1] = static_cast<int8_t>(d);
    }
  }
  return h;
}

// Williamson's array [[A, B, C, D], [-B, A, -D, C], [-C, D, A, -B],
// [-D, -C, B, A]] of the symmetric circulants of order p whose first rows
// are +1 at the offsets {0, +-s} of `plus` (the offsets of each block) and
// -1 elsewhere; an empty set means +1 at 0 only.
std::vector<int8_t> williamson(int p, const std::vector<int> (&blocks)[4]) {
  const int m = 4 * p;
  auto first_row = [p](const std::vector<int>& offs) {
    std::vector<int> r(p, -1);
    r[0] = 1;
    for (int o : offs) {
      r[o % p] = 1;
      r[(p - o % p) % p] = 1;
    }
    return r;
  };
  std::vector<int> rows[4];
  for (int b = 0; b < 4; ++b) {
    rows[b] = first_row(blocks[b]);
  }
  // Block (bi, bj) of the array: which circulant and its sign.
  static const int which[4][4] = {
      {0, 1, 2, 3}, {1, 0, 3, 2}, {2, 3, 0, 1}, {3, 2, 1, 0}};
  static const int sign[4][4] = {
      {1, 1, 1, 1}, {-1, 1, -1, 1}, {-1, 1, 1, -1}, {-1, -1, 1, 1}};
  std::vector<int8_t> h(m * m);
  for (int bi = 0; bi < 4; ++bi) {
    for (int bj = 0; bj < 4; ++bj) {
      const auto& r = rows[which[bi][bj]];
      for (int i = 0; i < p; ++i) {
        for (int j = 0; j < p; ++j) {
          h[(bi * p + i) * m + bj * p + j] =
              static_cast<int8_t>(sign[bi][bj] * r[((j - i) % p + p) % p]);
        }
      }
    }
  }
  return h;
}

}  // namespace

std::vector<int8_t> hadamard_matrix(int m) {
  switch (m) {
    case 1:
      return {1};
    case 12:
      return paley2_q5();
    case 20: {
      // Order 5: A = A' = +1 at {0}, B = {0, +-1}, C = {0, +-2}.
      static const std::vector<int> blocks[4] = {{}, {}, {1}, {2}};
      return williamson(5, blocks);
    }
    case 28: {
      // Order 7: A = {0}, B = {0, +-1}, C = {0, +-2}, D = {0, +-3}.
      static const std::vector<int> blocks[4] = {{}, {1}, {2}, {3}};
      return williamson(7, blocks);
    }
    default:
      throw std::invalid_argument(
          std::string("[hadamard_transform] No Hadamard matrix of order ") +
          std::to_string(m) + " (expected 1, 12, 20 or 28).");
  }
}

}  // namespace detail

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
