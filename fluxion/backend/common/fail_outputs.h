// What a backend's stream worker does with the outputs of a kernel that
// failed or was skipped (shared by backend/cpu and backend/cuda).
#pragma once

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "fluxion/array.h"

namespace fluxion::common {

// The outputs of a failed (or skipped) kernel carry its error, and must not
// be left without memory: code reading them must never meet a null pointer.
// They read one zero through all-zero strides (a broadcast view: every
// kernel handles it, none donates or writes through it), which costs one
// element whatever the size, since the failure may have been the
// allocation of this very output. The error itself reaches the caller
// through the stream's next event. This runs on the stream's worker
// thread, where nothing may escape (it would terminate the process).
inline void fail_outputs(std::vector<array>& outputs,
                  const std::exception_ptr& e) noexcept {
  for (auto& o : outputs) {
    o.set_error(e);
    if (o.raw_data() != nullptr) {
      continue;
    }
    try {
      auto one = std::make_shared<Data>(std::max<size_t>(o.itemsize(), 1));
      std::memset(one->ptr(), 0, one->nbytes());
      Strides zero(o.ndim(), 0);
      auto flags = layout_flags(o.shape(), zero, 1);
      o.set_data(std::move(one), 1, std::move(zero), flags, 0);
    } catch (...) {
      // Not even one element: the error is already on its way to the
      // caller; readers of this output will find no data.
    }
  }
}

}  // namespace fluxion::common
