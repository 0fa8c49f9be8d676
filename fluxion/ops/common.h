// Helpers shared by op functions: axis normalisation, broadcasting, and
// error message formatting.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion {

std::string shape_str(const Shape& s);  // "(2,3)"
template <typename T, typename A>
std::string vec_str(const std::vector<T, A>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) {
    os << (i ? "," : "") << v[i];
  }
  os << ")";
  return os.str();
}

// Map `axis` in [-ndim, ndim) to [0, ndim) or throw std::invalid_argument
// "[op] Invalid axis <axis> for array with <ndim> dimensions." (MLX's
// ValueError; out-of-range *indices* stay std::out_of_range / IndexError).
int normalize_axis(int axis, int ndim, const char* op);
// Normalize, check for duplicates, and sort.
std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim,
                                const char* op);

// NumPy broadcasting; throws "[op] Shapes (..) and (..) cannot be broadcast."
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// A dimension computed by an op (concatenate's total, repeat's and kron's
// products): returned when it fits in int32 (Shape's entry type, as in MLX),
// else std::overflow_error "[op] <what> <value> does not fit in int32..."
// (Python's OverflowError, as MLX: the value is named rather than wrapped
// into a bogus dimension).
int32_t checked_dim(int64_t value, const char* op, const char* what);

// Common dtype of several arrays.
Dtype result_type(const std::vector<array>& arrays);

}  // namespace fluxion
