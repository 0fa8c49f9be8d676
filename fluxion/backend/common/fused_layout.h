// How one call of a fused elementwise kernel (a `Compiled` node's, on any
// backend) reads its inputs: all at once in row-major order (each input
// row-contiguous of the output's size, or a broadcast scalar read once),
// or element by element through strides over the collapsed output shape.
// The CPU's and the GPU's Compiled evaluations decide the same way.
#pragma once

#include <vector>

#include "fluxion/backend/common/layout.h"
#include "fluxion/compiled.h"

namespace fluxion::codegen {

struct FusedLayout {
  enum Kind {
    kContiguous,  // the contiguous entry point
    kStrided,     // the strided entry point, over `shape` and `strides`
    kUnfused,     // a strided input behind a reshape: that reshape would
                  // be a copy, so the nodes run one by one instead
  };
  Kind kind = kContiguous;
  // kStrided: the output's shape with dimensions that are contiguous for
  // every input merged (detail::collapse_dims), and input k's element
  // strides against it in strides[k] (0 where broadcast).
  detail::Dims shape;
  std::vector<Strides> strides;
};

FusedLayout fused_layout(const Compiled& c, const std::vector<array>& inputs,
                         const Shape& out);

}  // namespace fluxion::codegen
