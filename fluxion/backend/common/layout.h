// Layout arithmetic every backend's host code needs (no data is touched):
// collapsing the dimensions of an iteration space, and the `data_size` of
// a strided view.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::detail {

// A collapsed iteration shape. 64-bit: merging dimensions multiplies their
// sizes, and an array past 2^31 elements collapses to one longer than an
// int32 Shape entry can hold.
using Dims = std::vector<int64_t>;

inline Dims to_dims(const Shape& shape) {
  return Dims(shape.begin(), shape.end());
}

// The one dimension-collapsing rule: dimension d merges into the
// (collapsed) dimension before it whenever every operand k has
// strides[k][prev] == strides[k][d] * shape[d], taking d's strides; size-1
// dimensions are dropped, and a shape with no dimension left becomes {1}
// with stride 0. In place, no allocation.
inline void collapse_dims(Dims& shape, Strides* strides, size_t operands) {
  size_t w = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      continue;
    }
    bool merge = w > 0;
    for (size_t k = 0; k < operands && merge; ++k) {
      merge = strides[k][w - 1] == strides[k][d] * shape[d];
    }
    if (merge) {
      shape[w - 1] *= shape[d];
      for (size_t k = 0; k < operands; ++k) {
        strides[k][w - 1] = strides[k][d];
      }
      continue;
    }
    shape[w] = shape[d];
    for (size_t k = 0; k < operands; ++k) {
      strides[k][w] = strides[k][d];
    }
    ++w;
  }
  if (w == 0) {
    shape.assign(1, 1);
    for (size_t k = 0; k < operands; ++k) {
      strides[k].assign(1, 0);
    }
    return;
  }
  shape.resize(w);
  for (size_t k = 0; k < operands; ++k) {
    strides[k].resize(w);
  }
}
template <size_t N>
void collapse_dims(Dims& shape, std::array<Strides, N>& strides) {
  collapse_dims(shape, strides.data(), N);
}
inline void collapse_dims(Dims& shape, std::vector<Strides>& strides) {
  collapse_dims(shape, strides.data(), strides.size());
}

// `data_size` of a view with this shape and strides. Kernels take the flat
// path (walk data[0, data_size) from the data pointer) when
// flags.contiguous, which layout_flags sets when data_size == size; so
//  - dense elements at non-negative strides (any order): size;
//  - every element at one address (a broadcast scalar): 1, which the
//    binary kernels read as a scalar;
//  - otherwise the number of slots the view spans, never equal to size:
//    an overlapping view (stride 0 next to a gap) can span exactly `size`
//    slots without filling them, and must not pass as contiguous.
inline size_t view_data_size(const Shape& shape, const Strides& strides) {
  int64_t size = 1;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, extent)
  bool positive = true;
  bool all_zero = true;
  for (size_t i = 0; i < shape.size(); ++i) {
    size *= shape[i];
    if (shape[i] != 1) {
      dims.emplace_back(std::abs(strides[i]), shape[i]);
      positive &= strides[i] > 0;
      all_zero &= strides[i] == 0;
    }
  }
  if (size <= 1) {
    return static_cast<size_t>(size);
  }
  if (all_zero) {
    return 1;
  }
  std::sort(dims.begin(), dims.end());
  bool dense = positive;
  int64_t expect = 1;
  int64_t span = 1;
  for (auto& [st, n] : dims) {
    dense &= st == expect;
    expect *= n;
    span += (n - 1) * st;
  }
  if (dense) {
    return static_cast<size_t>(size);
  }
  return static_cast<size_t>(span == size ? span + 1 : span);
}

}  // namespace fluxion::detail
