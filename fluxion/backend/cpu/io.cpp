// CPU kernel of Load: read the bytes, then fix the byte order if needed.
#include "fluxion/ops/io.h"

#include <algorithm>
#include <stdexcept>
#include <string>

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
  // A file too short for its header's shape (truncated, or a hostile
  // header) raises before the output is allocated: its size comes from the
  // file and may be far beyond what the file holds.
  uint64_t size = reader_->size();
  if (offset_ > size || out.nbytes() > size - offset_) {
    throw std::runtime_error("[load] '" + reader_->label() +
                             "' is truncated: the array needs " +
                             std::to_string(out.nbytes()) +
                             " bytes at offset " + std::to_string(offset_) +
                             ", the data has " + std::to_string(size) + ".");
  }
  out.set_data(out.nbytes());
  if (out.nbytes() == 0) {
    return;
  }
  reader_->read(out.data<char>(), out.nbytes(), offset_);
  if (swap_) {
    size_t width = out.dtype() == complex64 ? 4 : out.itemsize();
    swap_bytes(out.data<char>(), out.nbytes(), width);
  }
  // A bool's byte from a file may be anything; the kernels read it as bool,
  // where only 0 and 1 are defined (UBSan: a load of 255). Any nonzero byte
  // is True, as NumPy reads it.
  if (out.dtype() == bool_) {
    auto* p = out.data<unsigned char>();
    for (size_t i = 0; i < out.nbytes(); ++i) {
      p[i] = p[i] != 0;
    }
  }
}

}  // namespace fluxion
