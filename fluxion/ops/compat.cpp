#include "fluxion/ops/compat.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg_lapack.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/sort.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

array trunc(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) {
    return a;
  }
  if (is_complex(a.dtype())) {
    throw std::invalid_argument(
        "[trunc] Not defined for complex64 inputs (round the real and "
        "imaginary parts separately).");
  }
  // floor and ceil have zero derivatives, so trunc's is zero too.
  return where(less(a, zeros_like(a, s), s), ceil(a, s), floor(a, s), s);
}

array logical_xor(const array& a, const array& b, StreamOrDevice s) {
  return not_equal(astype(a, bool_, s), astype(b, bool_, s), s);
}

array median(const array& a, const std::optional<std::vector<int>>& axes_in,
             bool keepdims, StreamOrDevice s) {
  std::vector<int> axes;
  if (axes_in) {
    axes = normalize_axes(*axes_in, a.ndim(), "median");
  } else {
    axes.resize(a.ndim());
    std::iota(axes.begin(), axes.end(), 0);
  }
  int64_t n = 1;
  for (int ax : axes) {
    n *= a.shape(ax);
  }
  if (n == 0) {
    throw std::invalid_argument(
        "[median] Cannot take the median of an empty set of elements (shape " +
        shape_str(a.shape()) + ", axes " + vec_str(axes) + ").");
  }
  Dtype out_dtype = at_least_float(a.dtype());
  // Move the reduced axes last and merge them into one.
  std::vector<int> perm;
  Shape kept_shape;
  for (int i = 0; i < a.ndim(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      perm.push_back(i);
      kept_shape.push_back(a.shape(i));
    }
  }
  perm.insert(perm.end(), axes.begin(), axes.end());
  Shape flat_shape = kept_shape;
  flat_shape.push_back(static_cast<int32_t>(n));
  array x = reshape(transpose(astype(a, out_dtype, s), perm, s), flat_shape, s);
  // sort puts NaNs last; a NaN anywhere makes the median NaN (NumPy).
  array sorted = sort(x, -1, s);
  int k = sorted.ndim() - 1;
  auto pick = [&](int64_t i) {
    Shape start(flat_shape.size(), 0), stop = flat_shape;
    start[k] = static_cast<int32_t>(i);
    stop[k] = static_cast<int32_t>(i + 1);
    return squeeze(slice(sorted, start, stop, s), k, s);
  };
  array med = n % 2 ? pick(n / 2)
                    : multiply(add(pick(n / 2 - 1), pick(n / 2), s),
                               array(0.5, out_dtype), s);
  if (is_inexact(out_dtype)) {
    // The last sorted element is NaN exactly when the row holds a NaN.
    med = where(isnan(pick(n - 1), s), pick(n - 1), med, s);
  }
  if (keepdims) {
    Shape ks = a.shape();
    for (int ax : axes) {
      ks[ax] = 1;
    }
    med = reshape(med, ks, s);
  }
  return med;
}

array diff(const array& a, int n, int axis, const std::optional<array>& prepend,
           const std::optional<array>& append, StreamOrDevice s) {
  if (a.ndim() == 0) {
    throw std::invalid_argument(
        "[diff] Expected an array with at least one dimension; got a 0-d "
        "array.");
  }
  if (n < 0) {
    throw std::invalid_argument("[diff] The order n must be non-negative; got " +
                                std::to_string(n) + ".");
  }
  int ax = normalize_axis(axis, a.ndim(), "diff");
  array x = a;
  if (prepend || append) {
    auto along = [&](const array& v) {
      if (v.ndim() == 0) {
        Shape sh = a.shape();
        sh[ax] = 1;
        return broadcast_to(astype(v, a.dtype(), s), sh, s);
      }
      return v;
    };
    std::vector<array> parts;
    if (prepend) {
      parts.push_back(along(*prepend));
    }
    parts.push_back(a);
    if (append) {
      parts.push_back(along(*append));
    }
    x = concatenate(parts, ax, s);
  }
  for (int i = 0; i < n && x.shape(ax) > 0; ++i) {
    int len = x.shape(ax);
    Shape lo_start(x.ndim(), 0), lo_stop = x.shape();
    Shape hi_start(x.ndim(), 0), hi_stop = x.shape();
    lo_stop[ax] = len - 1;
    hi_start[ax] = 1;
    array lo = slice(x, lo_start, lo_stop, s);
    array hi = slice(x, hi_start, hi_stop, s);
    x = x.dtype() == bool_ ? not_equal(hi, lo, s) : subtract(hi, lo, s);
  }
  return x;
}

array flip(const array& a, const std::optional<std::vector<int>>& axes_in,
           StreamOrDevice s) {
  std::vector<int> axes;
  if (axes_in) {
    axes = normalize_axes(*axes_in, a.ndim(), "flip");
  } else {
    axes.resize(a.ndim());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (axes.empty()) {
    return a;
  }
  Shape start(a.ndim(), 0), stop = a.shape(), strides(a.ndim(), 1);
  for (int ax : axes) {
    // a[::-1] along ax: from the last element down past the first.
    start[ax] = a.shape(ax) - 1;
    stop[ax] = -a.shape(ax) - 1;
    strides[ax] = -1;
  }
  return slice(a, start, stop, strides, s);
}

std::vector<array> unstack(const array& a, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) {
    throw std::invalid_argument("[unstack] Cannot unstack a 0-d array.");
  }
  int ax = normalize_axis(axis, a.ndim(), "unstack");
  std::vector<array> out;
  int n = a.shape(ax);
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    Shape start(a.ndim(), 0), stop = a.shape();
    start[ax] = i;
    stop[ax] = i + 1;
    out.push_back(squeeze(slice(a, start, stop, s), ax, s));
  }
  return out;
}

array count_nonzero(const array& a,
                    const std::optional<std::vector<int>>& axes,
                    bool keepdims, StreamOrDevice s) {
  array nz = astype(not_equal(a, zeros({}, a.dtype(), s), s), int32, s);
  return axes ? sum(nz, *axes, keepdims, s) : sum(nz, keepdims, s);
}

array vecdot(const array& a, const array& b, int axis, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw std::invalid_argument(
        "[vecdot] Expected arrays with at least one dimension; got shapes " +
        shape_str(a.shape()) + " and " + shape_str(b.shape()) + ".");
  }
  int ax_a = normalize_axis(axis, a.ndim(), "vecdot");
  int ax_b = normalize_axis(axis, b.ndim(), "vecdot");
  if (a.shape(ax_a) != b.shape(ax_b)) {
    throw std::invalid_argument(
        "[vecdot] The arrays must have the same size along axis " +
        std::to_string(axis) + "; got shapes " + shape_str(a.shape()) +
        " and " + shape_str(b.shape()) + ".");
  }
  Dtype t = promote_types(a.dtype(), b.dtype());
  Shape out = broadcast_shapes(a.shape(), b.shape(), "vecdot");
  array prod = multiply(conjugate(astype(a, t, s), s), astype(b, t, s), s);
  int ax = normalize_axis(axis, static_cast<int>(out.size()), "vecdot");
  return sum(prod, ax, false, s);
}

array matrix_norm(const array& a, const std::variant<double, std::string>& ord,
                  bool keepdims, StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(
        "[matrix_norm] Expected an array with at least two dimensions; got "
        "shape " +
        shape_str(a.shape()) + ".");
  }
  std::vector<int> axes = {-2, -1};
  if (auto* str = std::get_if<std::string>(&ord)) {
    return linalg::norm(a, *str, axes, keepdims, s);
  }
  return linalg::norm(a, std::get<double>(ord), axes, keepdims, s);
}

namespace {

// A window of m points, w(x) for x = (2 i - (m - 1)) / (m - 1) in [-1, 1],
// computed in float64 and rounded once. Built from ops rather than a host
// vector, so that a huge m is a lazy array whose allocation fails (or
// succeeds) at eval like any other, on the requested stream.
template <typename F>
array window(int m, F w, StreamOrDevice s) {
  if (m <= 0) {
    return zeros({0}, float32, s);
  }
  if (m == 1) {
    return ones({1}, float32, s);
  }
  double d = m - 1;
  array i = arange(0.0, static_cast<double>(m), 1.0, float64, s);
  array x = divide(
      subtract(multiply(i, array(2.0, float64), s), array(d, float64), s),
      array(d, float64), s);
  return astype(w(x), float32, s);
}

array cos_pi(const array& x, double k, StreamOrDevice s) {
  return cos(multiply(x, array(k * M_PI, float64), s), s);
}
array plus(double c, const array& x, StreamOrDevice s) {
  return add(array(c, float64), x, s);
}
array times(double c, const array& x, StreamOrDevice s) {
  return multiply(array(c, float64), x, s);
}

}  // namespace

array bartlett(int m, StreamOrDevice s) {
  return window(
      m, [&](const array& x) { return plus(1.0, negative(abs(x, s), s), s); },
      s);
}
array blackman(int m, StreamOrDevice s) {
  return window(
      m,
      [&](const array& x) {
        return add(plus(0.42, times(0.5, cos_pi(x, 1, s), s), s),
                   times(0.08, cos_pi(x, 2, s), s), s);
      },
      s);
}
array hamming(int m, StreamOrDevice s) {
  return window(
      m,
      [&](const array& x) {
        return plus(0.54, times(0.46, cos_pi(x, 1, s), s), s);
      },
      s);
}
array hanning(int m, StreamOrDevice s) {
  return window(
      m,
      [&](const array& x) {
        return plus(0.5, times(0.5, cos_pi(x, 1, s), s), s);
      },
      s);
}

array empty(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return zeros(shape, dtype, s);
}
array empty_like(const array& a, StreamOrDevice s) { return zeros_like(a, s); }

}  // namespace fluxion
