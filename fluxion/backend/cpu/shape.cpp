// Views: these kernels only compute strides; the output shares the input's
// buffer. Reshape copies when the input layout cannot be viewed.
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

void view(const array& in, array& out, Strides strides) {
  auto flags = layout_flags(out.shape(), strides, in.data_size());
  out.copy_shared_buffer(in, strides, flags, in.data_size());
}

}  // namespace

void Reshape::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  if (a.flags().row_contiguous) {
    view(a, out[0], row_major_strides(out[0].shape()));
    return;
  }
  // Copy into row-major order, then the reshape is free.
  cpu::copy_to_row_contiguous(a, out[0]);
}

void Transpose::eval_cpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  Strides strides;
  for (int ax : axes_) {
    strides.push_back(in[0].strides()[ax]);
  }
  view(in[0], out[0], std::move(strides));
}

void Broadcast::eval_cpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  const array& a = in[0];
  Strides strides(shape_.size(), 0);
  size_t diff = shape_.size() - a.ndim();
  for (int i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) != 1) {
      strides[diff + i] = a.strides()[i];
    }
  }
  view(a, out[0], std::move(strides));
}

void ExpandDims::eval_cpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  Strides strides = in[0].strides();
  for (int ax : axes_) {
    // Any stride works for a size-1 axis; this one keeps row-major arrays
    // row-major.
    int64_t st = ax < static_cast<int>(strides.size())
                     ? strides[ax] * out[0].shape(ax + 1)
                     : 1;
    strides.insert(strides.begin() + ax, st);
  }
  view(in[0], out[0], std::move(strides));
}

void Squeeze::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  Strides strides;
  for (int i = 0; i < in[0].ndim(); ++i) {
    if (!std::binary_search(axes_.begin(), axes_.end(), i)) {
      strides.push_back(in[0].strides()[i]);
    }
  }
  view(in[0], out[0], std::move(strides));
}

}  // namespace fluxion
