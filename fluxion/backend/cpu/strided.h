// Walking arrays of any layout: collapse dimensions that are contiguous in
// every operand, then loop over the outer index with a strided inner run.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/backend/common/layout.h"

namespace fluxion::cpu {

// Dimension collapsing is shared by every backend (backend/common/layout.h).
using detail::collapse_dims;
using detail::Dims;
using detail::to_dims;

// Calls f(offsets, n, inner_strides) for every innermost run of a collapsed
// iteration space, where offsets[k] is the element offset of operand k at the
// start of the run. [begin, end) selects outer rows (for parallel splits).
template <size_t N, typename F>
void for_each_run(const Dims& shape, const std::array<Strides, N>& strides,
                  int64_t begin, int64_t end, F&& f) {
  int nd = static_cast<int>(shape.size());
  int64_t inner = shape[nd - 1];
  std::array<int64_t, N> inner_st;
  for (size_t k = 0; k < N; ++k) {
    inner_st[k] = strides[k][nd - 1];
  }
  // Decompose `begin` into an index over the outer dimensions.
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, N> off{};
  int64_t r = begin;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = r % shape[d];
    r /= shape[d];
    for (size_t k = 0; k < N; ++k) {
      off[k] += idx[d] * strides[k][d];
    }
  }
  for (int64_t row = begin; row < end; ++row) {
    f(off, inner, inner_st);
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) {
          off[k] += strides[k][d];
        }
        break;
      }
      for (size_t k = 0; k < N; ++k) {
        off[k] -= (shape[d] - 1) * strides[k][d];
      }
      idx[d] = 0;
    }
  }
}

// Outer rows per parallel chunk for runs of `inner` elements (inner may be 0
// for empty arrays).
inline int64_t row_grain(int64_t grain, int64_t inner) {
  return std::max<int64_t>(1, grain / std::max<int64_t>(inner, 1));
}

// Number of outer rows of a collapsed shape.
inline int64_t outer_rows(const Dims& shape) {
  int64_t n = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    n *= shape[d];
  }
  return n;
}

}  // namespace fluxion::cpu
