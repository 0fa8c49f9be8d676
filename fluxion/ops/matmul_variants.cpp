#include "fluxion/ops/matmul_variants.h"

#include <cmath>
#include <string>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

Shape drop_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

Shape with_last(Shape s, int32_t last) {
  s.push_back(last);
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

}  // namespace fluxion
