// linalg::norm: vector and matrix norms composed of public ops (the
// spectral and nuclear norms through the SVD). Declared in linalg_lapack.h.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/linalg_lapack.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion::linalg {

namespace {

array vector_norm(const array& a, double ord, const std::vector<int>& axes,
                  bool keepdims, Stream s) {
  auto x = abs(a, s);
  if (ord == 2.0) {
    return sqrt(sum(square(x, s), axes, keepdims, s), s);
  }
  if (ord == 1.0) {
    return sum(x, axes, keepdims, s);
  }
  if (std::isinf(ord)) {
    return ord > 0 ? max(x, axes, keepdims, s) : min(x, axes, keepdims, s);
  }
  if (ord == 0.0) {
    return sum(astype(not_equal(a, array(0, a.dtype()), s), x.dtype(), s), axes,
               keepdims, s);
  }
  auto p = array(ord, x.dtype());
  return power(sum(power(x, p, s), axes, keepdims, s), reciprocal(p, s), s);
}

// The norm over two axes (r, c) of `a`, keeping both as unit dims.
array matrix_norm_keep(const array& a, const std::string& sord, double ord,
                       int r, int c, Stream s) {
  if (sord == "fro") {
    return sqrt(sum(square(abs(a, s), s), std::vector<int>{r, c}, true, s), s);
  }
  if (sord == "nuc" || ord == 2.0 || ord == -2.0) {
    auto m = moveaxis(moveaxis(a, r, -1, s), c < r ? c : c - 1, -1, s);
    auto sv = svd(m, false, s)[0];
    array v = sord == "nuc" ? sum(sv, -1, false, s)
              : ord > 0     ? max(sv, -1, false, s)
                            : min(sv, -1, false, s);
    int lo = std::min(r, c), hi = std::max(r, c);
    return expand_dims(expand_dims(v, lo, s), hi, s);
  }
  auto x = abs(a, s);
  if (ord == 1.0 || ord == -1.0) {  // column sums
    auto cs = sum(x, r, true, s);
    return ord > 0 ? max(cs, c, true, s) : min(cs, c, true, s);
  }
  // +-inf: row sums
  auto rs = sum(x, c, true, s);
  return ord > 0 ? max(rs, r, true, s) : min(rs, r, true, s);
}

array norm_impl(const array& a_in, std::optional<double> ord,
                std::optional<std::string> sord,
                const std::optional<std::vector<int>>& axis, bool keepdims,
                StreamOrDevice s_) {
  auto s = to_stream(s_);
  // Integer and boolean inputs are promoted to float32 (MLX).
  array a = is_inexact(a_in.dtype()) ? a_in : astype(a_in, float32, s);
  std::vector<int> axes;
  if (axis) {
    for (int ax : *axis) {
      int n = normalize_axis(ax, a.ndim(), "linalg::norm");
      if (std::find(axes.begin(), axes.end(), n) != axes.end()) {
        throw std::invalid_argument("[linalg::norm] Repeated axis in " +
                                    vec_str(*axis) + ".");
      }
      axes.push_back(n);
    }
  } else if (!ord && !sord) {
    // The 2-norm of all the elements.
    for (int i = 0; i < a.ndim(); ++i) {
      axes.push_back(i);
    }
    return vector_norm(a, 2.0, axes, keepdims, s);
  } else if (a.ndim() == 1 || a.ndim() == 2) {
    for (int i = 0; i < a.ndim(); ++i) {
      axes.push_back(i);
    }
  } else {
    throw std::invalid_argument(
        "[linalg::norm] With an ord and no axis the input must be 1-D or 2-D; "
        "got shape " +
        shape_str(a.shape()) + ".");
  }
  if (axes.size() == 1) {
    if (sord) {
      throw std::invalid_argument("[linalg::norm] Norm \"" + *sord +
                                  "\" is a matrix norm; it needs two axes.");
    }
    return vector_norm(a, ord.value_or(2.0), axes, keepdims, s);
  }
  if (axes.size() != 2) {
    throw std::invalid_argument(
        "[linalg::norm] axis must name one or two axes; got " + vec_str(*axis) +
        ".");
  }
  if (sord && *sord != "fro" && *sord != "nuc") {
    throw std::invalid_argument("[linalg::norm] Unknown matrix norm \"" +
                                *sord + "\"; use \"fro\" or \"nuc\".");
  }
  std::string so = sord.value_or(ord ? "" : "fro");
  double o = ord.value_or(0.0);
  if (so.empty() &&
      !(std::abs(o) == 1.0 || std::abs(o) == 2.0 || std::isinf(o))) {
    std::ostringstream msg;
    msg << "[linalg::norm] Matrix norms take ord 1, -1, 2, -2, inf, -inf, "
           "\"fro\" or \"nuc\"; got "
        << o << ".";
    throw std::invalid_argument(msg.str());
  }
  if ((so == "nuc" || std::abs(o) == 2.0) && !is_floating_point(a.dtype())) {
    throw std::invalid_argument(
        "[linalg::norm] Spectral and nuclear norms of complex arrays are not "
        "supported.");
  }
  auto out = matrix_norm_keep(a, so, o, axes[0], axes[1], s);
  return keepdims ? out : squeeze(out, axes, s);
}

}  // namespace

array norm(const array& a, const std::optional<std::vector<int>>& axis,
           bool keepdims, StreamOrDevice s) {
  return norm_impl(a, std::nullopt, std::nullopt, axis, keepdims, s);
}

array norm(const array& a, double ord,
           const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  return norm_impl(a, ord, std::nullopt, axis, keepdims, s);
}

array norm(const array& a, const std::string& ord,
           const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  return norm_impl(a, std::nullopt, ord, axis, keepdims, s);
}

}  // namespace fluxion::linalg
