// Where SliceUpdate and Pad write in their output, for every backend's
// region copy (cpu::copy_region, cu::copy_region): the destination
// strides and first element of the written region. Host arithmetic only.
#pragma once

#include <cstdint>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::common {

struct Region {
  Strides strides;  // of the written elements in `out`'s buffer
  int64_t offset = 0;
};

// The elements start[i] + k * step[i] of row-contiguous `out`.
inline Region slice_region(const array& out, const Shape& start,
                           const Shape& step) {
  Region r{Strides(out.ndim()), 0};
  for (int i = 0; i < out.ndim(); ++i) {
    r.strides[i] = out.strides()[i] * step[i];
    r.offset += start[i] * out.strides()[i];
  }
  return r;
}

// The first interior element of a padded `out`: `low[i]` in along axes[i].
inline int64_t pad_offset(const array& out, const std::vector<int>& axes,
                          const Shape& low) {
  int64_t offset = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    offset += low[i] * out.strides()[axes[i]];
  }
  return offset;
}

}  // namespace fluxion::common
