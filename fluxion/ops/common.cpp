#include "fluxion/ops/common.h"

#include <algorithm>
#include <limits>

namespace fluxion {

std::string shape_str(const Shape& s) { return vec_str(s); }

int32_t checked_dim(int64_t value, const char* op, const char* what) {
  if (value > std::numeric_limits<int32_t>::max() ||
      value < std::numeric_limits<int32_t>::min()) {
    std::ostringstream msg;
    msg << "[" << op << "] " << what << " " << value
        << " does not fit in int32: shape dimensions are 32-bit integers.";
    throw std::overflow_error(msg.str());
  }
  return static_cast<int32_t>(value);
}

int normalize_axis(int axis, int ndim, const char* op) {
  if (axis < -ndim || axis >= ndim) {
    std::ostringstream msg;
    msg << "[" << op << "] Invalid axis " << axis << " for array with "
        << ndim << " dimensions.";
    // MLX raises ValueError (std::invalid_argument) for a bad axis.
    throw std::invalid_argument(msg.str());
  }
  return axis < 0 ? axis + ndim : axis;
}

std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim,
                                const char* op) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int a : axes) {
    out.push_back(normalize_axis(a, ndim, op));
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw std::invalid_argument(std::string("[") + op +
                                "] Received duplicate axes " + vec_str(axes) +
                                ".");
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b || b.empty()) {
    return a;  // a scalar broadcasts to the other shape as it is
  }
  if (a.empty()) {
    return b;
  }
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw std::invalid_argument(std::string("[") + op + "] Shapes " +
                                  shape_str(a) + " and " + shape_str(b) +
                                  " cannot be broadcast.");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Dtype result_type(const std::vector<array>& arrays) {
  Dtype t = bool_;
  for (auto& a : arrays) {
    t = promote_types(t, a.dtype());
  }
  return t;
}

}  // namespace fluxion
