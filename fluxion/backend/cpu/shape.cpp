// Slice updates, concatenation and padding write fresh buffers. (The views
// of this family are evaluated in backend/common/views.cpp.)
#include "fluxion/ops/shape.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/layout.h"
#include "fluxion/backend/common/regions.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

void SliceUpdate::eval_cpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  const array& src = in[0];
  const array& upd = in[1];
  array& o = out[0];
  if (src.is_donatable()) {
    o.move_shared_buffer(src);
  } else {
    cpu::copy_to_row_contiguous(src, o);
  }
  if (upd.size() == 0) {
    return;
  }
  auto r = common::slice_region(o, start_, strides_);
  cpu::copy_region(upd, upd.strides(), 0, o, r.strides, r.offset, upd.shape());
}

void Concatenate::eval_cpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  array& o = out[0];
  o.set_data(o.nbytes());
  int64_t offset = 0;
  for (auto& x : in) {
    cpu::copy_region(x, x.strides(), 0, o, o.strides(), offset, x.shape());
    offset += x.shape(axis_) * o.strides()[axis_];
  }
}

void Pad::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  const array& value = in[1];
  array& o = out[0];
  o.set_data(o.nbytes());
  // Fill everything, then copy the interior over it: simpler than filling
  // only the border, and the border is usually most of the extra work anyway.
  dispatch_bytes(o.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, value.raw_data(), sizeof(T));
    T* p = o.data<T>();
    cpu::parallel_for(
        o.size(), cpu::kElementwiseGrain * 4,
        [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
  });
  cpu::copy_region(a, a.strides(), 0, o, o.strides(),
                   common::pad_offset(o, axes_, low_), a.shape());
}

}  // namespace fluxion
