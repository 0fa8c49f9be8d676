// Slice updates, concatenation and padding on the GPU: fresh (or donated)
// buffers written by the region copy, as on the CPU (backend/cpu/shape.cpp).
#include "fluxion/backend/common/regions.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

void SliceUpdate::eval_gpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  const array& src = in[0];
  const array& upd = in[1];
  array& o = out[0];
  if (cu::donatable(src)) {
    o.move_shared_buffer(src);
  } else {
    cu::copy_general(src, o);
  }
  if (upd.size() == 0) {
    return;
  }
  auto r = common::slice_region(o, start_, strides_);
  cu::copy_region(upd, upd.strides(), 0, o, r.strides, r.offset, upd.shape());
}

void Concatenate::eval_gpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  array& o = out[0];
  cu::alloc(o);
  int64_t offset = 0;
  for (auto& x : in) {
    cu::copy_region(x, x.strides(), 0, o, o.strides(), offset, x.shape());
    offset += x.shape(axis_) * o.strides()[axis_];
  }
}

void Pad::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  cu::alloc(o);
  // Fill everything, then copy the interior over it (as on the CPU).
  cu::fill(in[1], o);
  cu::copy_region(a, a.strides(), 0, o, o.strides(),
                   common::pad_offset(o, axes_, low_), a.shape());
}

}  // namespace fluxion
