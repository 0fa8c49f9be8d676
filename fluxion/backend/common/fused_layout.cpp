// fused_layout.h: which entry point of a fused kernel a call takes.
#include "fluxion/backend/common/fused_layout.h"

#include "fluxion/backend/common/codegen_parts.h"

namespace fluxion::codegen {

namespace {

// Input strides (in elements) broadcast to `shape`, right-aligned.
Strides broadcast_strides(const array& in, const Shape& shape) {
  Strides s(shape.size(), 0);
  int off = static_cast<int>(shape.size()) - in.ndim();
  for (int d = 0; d < in.ndim(); ++d) {
    s[off + d] = in.shape(d) == 1 ? 0 : in.strides(d);
  }
  return s;
}

}  // namespace

FusedLayout fused_layout(const Compiled& c, const std::vector<array>& inputs,
                         const Shape& out) {
  FusedLayout l;
  size_t out_size = 1;
  for (auto d : out) out_size *= d;
  // Contiguous when every input is a broadcast scalar still of one
  // element, or a row-contiguous array of the output's shape (or of its
  // size, read through an absorbed reshape).
  bool contiguous = true;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const array& in = inputs[k];
    bool scalar = scalar_input(c.tape(), k);
    bool dense = in.flags().row_contiguous;
    bool ok = scalar          ? in.size() == 1
              : c.reshaped(k) ? dense && in.size() == out_size
                              : dense && in.shape() == out;
    if (!ok && !scalar && c.reshaped(k) && !dense) {
      l.kind = FusedLayout::kUnfused;
      return l;
    }
    contiguous = contiguous && ok;
  }
  if (contiguous) {
    return l;
  }
  l.kind = FusedLayout::kStrided;
  l.shape = detail::to_dims(out);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (c.reshaped(k) && inputs[k].size() != 1) {
      l.strides.push_back(row_major_strides(out));  // dense, in out's order
    } else {
      l.strides.push_back(broadcast_strides(inputs[k], out));
    }
  }
  // In 64 bits: merged dimensions may pass 2^31 elements.
  detail::collapse_dims(l.shape, l.strides);
  return l;
}

}  // namespace fluxion::codegen
