// The primitives that move no data, evaluated the same way on every
// backend: views (Reshape when strides allow, Transpose, Broadcast,
// ExpandDims, Squeeze, Slice, AsStrided, View, Contiguous of a contiguous
// input) and buffer forwarding (StopGradient, Depends, CustomTransforms).
// Each defines `eval_view` (FLUXION_DECLARE_VIEW_EVAL) in views.cpp; a
// backend's eval_cpu / eval_gpu is `common::eval_view(*this, ...)` with its
// own copy kernel for the inputs a view cannot express.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::common {

// (The data_size of a view: detail::view_data_size, backend/common/layout.h.)

// Make `out` a view of `in`'s buffer with `strides`, `offset` elements past
// in's data pointer.
void make_view(const array& in, array& out, const Strides& strides,
               int64_t offset = 0);

// Run `p`'s view kernel; when input 0 cannot be viewed as it is, replace it
// by `row_contiguous(inputs[0])` (the backend's copy into a row-contiguous
// array) and run it again, which then always succeeds.
template <typename P, typename RowContiguous>
void eval_view(P& p, const std::vector<array>& inputs,
               std::vector<array>& outputs, RowContiguous&& row_contiguous) {
  if (p.eval_view(inputs, outputs)) {
    return;
  }
  std::vector<array> copied = inputs;
  copied[0] = row_contiguous(inputs[0]);
  if (!p.eval_view(copied, outputs)) {
    throw std::logic_error(std::string("[eval] ") + p.name() +
                           " cannot view a row-contiguous input.");
  }
}

}  // namespace fluxion::common
