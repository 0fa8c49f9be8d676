#include "fluxion/ops/array_ops.h"

#include <algorithm>
#include <stdexcept>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

// Diagonal `k` of the last two axes of `a` (ndim >= 2): in the flattened
// (n*m) plane it is the strided run start, start + m + 1, ...
array last_two_diagonal(const array& a, int k, StreamOrDevice s) {
  int nd = a.ndim();
  int n = a.shape(nd - 2), m = a.shape(nd - 1);
  int64_t len = k >= 0 ? std::min<int64_t>(n, int64_t(m) - k)
                       : std::min<int64_t>(int64_t(n) + k, m);
  len = std::max<int64_t>(len, 0);
  Shape flat_shape(a.shape().begin(), a.shape().end() - 2);
  flat_shape.push_back(n * m);
  auto flat = reshape(a, flat_shape, s);
  Shape start(nd - 1, 0), stop(flat_shape), strides(nd - 1, 1);
  if (len == 0) {
    stop.back() = 0;
  } else {
    int64_t first = k >= 0 ? k : int64_t(-k) * m;
    start.back() = first;
    stop.back() = first + (len - 1) * (int64_t(m) + 1) + 1;
    strides.back() = m + 1;
  }
  return slice(flat, start, stop, strides, s);
}

}  // namespace

array diagonal(const array& a, int offset, int axis1, int axis2,
               StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(
        "[diagonal] Array must have at least two dimensions; got shape " +
        shape_str(a.shape()) + ".");
  }
  int ax1 = normalize_axis(axis1, a.ndim(), "diagonal");
  int ax2 = normalize_axis(axis2, a.ndim(), "diagonal");
  if (ax1 == ax2) {
    throw std::invalid_argument("[diagonal] axis1 and axis2 must differ; got " +
                                std::to_string(axis1) + " and " +
                                std::to_string(axis2) + " for shape " +
                                shape_str(a.shape()) + ".");
  }
  std::vector<int> perm;
  for (int i = 0; i < a.ndim(); ++i) {
    if (i != ax1 && i != ax2) {
      perm.push_back(i);
    }
  }
  perm.push_back(ax1);
  perm.push_back(ax2);
  return last_two_diagonal(transpose(a, perm, s), offset, s);
}

array diag(const array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 2) {
    return diagonal(a, k, 0, 1, s);
  }
  if (a.ndim() != 1) {
    throw std::invalid_argument("[diag] Input must be 1-D or 2-D; got shape " +
                                shape_str(a.shape()) + ".");
  }
  int64_t len = a.shape(0);
  int64_t n = len + std::abs(int64_t(k));
  auto out = zeros({int(n * n)}, a.dtype(), s);
  if (len == 0) {
    return reshape(out, {int(n), int(n)}, s);
  }
  int64_t first = k >= 0 ? k : -int64_t(k) * n;
  out = slice_update(out, a, {int(first)},
                     {int(first + (len - 1) * (n + 1) + 1)}, {int(n + 1)}, s);
  return reshape(out, {int(n), int(n)}, s);
}

array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype,
            StreamOrDevice s) {
  auto d = diagonal(a, offset, axis1, axis2, s);
  return sum(astype(d, dtype, s), -1, false, s);
}

array trace(const array& a, int offset, int axis1, int axis2,
            StreamOrDevice s) {
  return sum(diagonal(a, offset, axis1, axis2, s), -1, false, s);
}

namespace {

array roll_axis(const array& a, int64_t shift, int axis, StreamOrDevice s) {
  int64_t n = a.shape(axis);
  if (n == 0) {
    return a;
  }
  shift = ((shift % n) + n) % n;
  if (shift == 0) {
    return a;
  }
  Shape start(a.ndim(), 0), stop(a.shape());
  start[axis] = int(n - shift);
  auto tail = slice(a, start, stop, s);
  start[axis] = 0;
  stop[axis] = int(n - shift);
  auto head = slice(a, start, stop, s);
  return concatenate({tail, head}, axis, s);
}

}  // namespace

array roll(const array& a, int shift, StreamOrDevice s) {
  if (a.ndim() == 0) {
    return a;
  }
  auto flat = reshape(a, {-1}, s);
  return reshape(roll_axis(flat, shift, 0, s), a.shape(), s);
}

array roll(const array& a, int shift, int axis, StreamOrDevice s) {
  return roll(a, Shape{shift}, std::vector<int>{axis}, s);
}

array roll(const array& a, const Shape& shift, const std::vector<int>& axes,
           StreamOrDevice s) {
  // NumPy broadcasts shift against axis: one shift for several axes, or
  // several shifts for one axis (they add up).
  if (shift.size() != axes.size() && shift.size() != 1 && axes.size() != 1) {
    throw std::invalid_argument(
        "[roll] shift and axis must have the same length (or one of them a "
        "single value); got shift " +
        vec_str(shift) + " and axis " + vec_str(axes) + ".");
  }
  if (shift.empty() || axes.empty()) {
    throw std::invalid_argument(
        "[roll] At least one shift and one axis are needed.");
  }
  // Total shift per axis, so every axis is cut and joined once.
  std::vector<int64_t> total(a.ndim(), 0);
  size_t n = std::max(shift.size(), axes.size());
  for (size_t i = 0; i < n; ++i) {
    int ax = normalize_axis(axes.size() == 1 ? axes[0] : axes[i], a.ndim(),
                            "roll");
    total[ax] += shift.size() == 1 ? shift[0] : shift[i];
  }
  auto out = a;
  for (int ax = 0; ax < a.ndim(); ++ax) {
    if (total[ax] != 0) {
      out = roll_axis(out, total[ax], ax, s);
    }
  }
  return out;
}

std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse,
                            const std::string& indexing, StreamOrDevice s) {
  if (indexing != "xy" && indexing != "ij") {
    throw std::invalid_argument(
        "[meshgrid] indexing must be 'xy' or 'ij'; got '" + indexing + "'.");
  }
  int n = arrays.size();
  std::vector<array> outs;
  for (int i = 0; i < n; ++i) {
    // Cartesian indexing swaps the roles of the first two axes.
    int pos = i;
    if (indexing == "xy" && n >= 2 && i < 2) {
      pos = 1 - i;
    }
    Shape shape(n, 1);
    shape[pos] = -1;
    outs.push_back(reshape(arrays[i], shape, s));
  }
  if (!sparse && n > 1) {
    outs = broadcast_arrays(outs, s);
  }
  return outs;
}

array kron(const array& a, const array& b, StreamOrDevice s) {
  if (a.size() == 0 || b.size() == 0) {
    // MLX: the product of an empty operand is an error, not an empty array.
    throw std::invalid_argument("[kron] Input arrays cannot be empty; got "
                                "shapes " +
                                shape_str(a.shape()) + " and " +
                                shape_str(b.shape()) + ".");
  }
  if (a.ndim() == 0 || b.ndim() == 0) {
    return multiply(a, b, s);
  }
  int nd = std::max(a.ndim(), b.ndim());
  Shape sa(nd - a.ndim(), 1), sb(nd - b.ndim(), 1);
  sa.insert(sa.end(), a.shape().begin(), a.shape().end());
  sb.insert(sb.end(), b.shape().begin(), b.shape().end());
  // Interleave the axes: a on the even ones, b on the odd ones, so the
  // broadcast product reshapes to the block layout.
  Shape ia, ib, out;
  for (int i = 0; i < nd; ++i) {
    ia.insert(ia.end(), {sa[i], 1});
    ib.insert(ib.end(), {1, sb[i]});
    out.push_back(
        checked_dim(int64_t{sa[i]} * sb[i], "kron", "An output axis' size,"));
  }
  return reshape(multiply(reshape(a, ia, s), reshape(b, ib, s), s), out, s);
}

}  // namespace fluxion
