// Host-side helpers of the CUDA kernels: output allocation and the
// collapsing of layouts into what the strided kernels index.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "fluxion/backend/cuda/cuda.h"

namespace fluxion::cu {

void alloc_like(const array& like, array& out, bool may_donate) {
  const Device gpu{Device::gpu};
  if (may_donate && like.itemsize() == out.itemsize() &&
      donatable(like)) {
    out.move_shared_buffer(like);
    return;
  }
  out.set_data(std::make_shared<Data>(
                   std::max<size_t>(like.data_size(), 1) * out.itemsize(),
                   gpu),
               like.data_size(), like.strides(), like.flags());
}

Layout collapse(const Shape& shape, const std::vector<Strides>& strides,
                const char* op) {
  const int k = static_cast<int>(strides.size());
  // Drop size-1 dims, then merge dim d into d+1 when every operand walks
  // them as one: stride[d] == stride[d+1] * shape[d+1].
  std::vector<int64_t> sh;
  std::vector<std::vector<int64_t>> st(k);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      continue;
    }
    bool merge = !sh.empty();
    for (int j = 0; j < k && merge; ++j) {
      merge = st[j].back() == strides[j][d] * shape[d];
    }
    if (merge) {
      sh.back() *= shape[d];
      for (int j = 0; j < k; ++j) {
        st[j].back() = strides[j][d];
      }
    } else {
      sh.push_back(shape[d]);
      for (int j = 0; j < k; ++j) {
        st[j].push_back(strides[j][d]);
      }
    }
  }
  if (sh.size() > static_cast<size_t>(kMaxDims)) {
    throw std::invalid_argument(std::string("[") + op + "] More than " +
                                std::to_string(kMaxDims) +
                                " dimensions that do not collapse are not "
                                "supported on the gpu yet.");
  }
  Layout l;
  l.ndim = static_cast<int>(sh.size());
  for (int d = 0; d < l.ndim; ++d) {
    l.shape[d] = sh[d];
    for (int j = 0; j < k; ++j) {
      l.strides[j][d] = st[j][d];
    }
  }
  return l;
}

}  // namespace fluxion::cu
