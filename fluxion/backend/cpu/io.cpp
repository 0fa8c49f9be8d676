// CPU kernel of Load: read the bytes, then fix the byte order if needed.
#include "fluxion/ops/io.h"

#include <algorithm>

#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Reverse the bytes of each `width`-byte unit (complex64 swaps its two
// float32 halves separately: width 4).
void swap_bytes(char* p, size_t nbytes, size_t width) {
  cpu::parallel_for(static_cast<int64_t>(nbytes / width), 1 << 16,
                    [&](int64_t b, int64_t e) {
                      for (int64_t i = b; i < e; ++i) {
                        std::reverse(p + i * width, p + (i + 1) * width);
                      }
                    });
}

}  // namespace

void Load::eval_cpu(const std::vector<array>&, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(out.nbytes());
  if (out.nbytes() == 0) {
    return;
  }
  reader_->read(out.data<char>(), out.nbytes(), offset_);
  if (swap_) {
    size_t width = out.dtype() == complex64 ? 4 : out.itemsize();
    swap_bytes(out.data<char>(), out.nbytes(), width);
  }
}

}  // namespace fluxion
