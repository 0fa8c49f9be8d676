// CPU kernel of RandomBits: every 8-byte block of the output is one
// threefry call on its own counter, so blocks are computed independently and
// the result does not depend on how the work is split over threads.
#include "fluxion/ops/random.h"

#include <algorithm>
#include <cstring>

#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion::random {

namespace {

// Threefry costs ~100 cycles a block.
constexpr int64_t kBlockGrain = 1 << 12;

}  // namespace

void RandomBits::eval_cpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  const array& keys = in[0];
  array& o = out[0];
  o.set_data(o.nbytes());
  const int64_t num_keys = keys.size() / 2;
  if (o.size() == 0 || num_keys == 0) {
    return;
  }

  // The keys, read through their strides (they may be views).
  std::vector<std::pair<uint32_t, uint32_t>> ks(num_keys);
  {
    const uint32_t* kp = keys.data<uint32_t>();
    int nd = keys.ndim();
    std::vector<int32_t> idx(nd, 0);
    for (int64_t i = 0; i < num_keys; ++i) {
      int64_t off = 0;
      for (int d = 0; d < nd - 1; ++d) {
        off += idx[d] * keys.strides()[d];
      }
      ks[i] = {kp[off], kp[off + keys.strides()[nd - 1]]};
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < keys.shape(d)) {
          break;
        }
        idx[d] = 0;
      }
    }
  }

  const int64_t bytes_per_key = o.nbytes() / num_keys;
  const int64_t blocks = (bytes_per_key + 7) / 8;
  char* dst = o.data<char>();
  const uint64_t first = offset_;
  cpu::parallel_for(
      num_keys * blocks, kBlockGrain, [&](int64_t lo, int64_t hi) {
        int64_t k = lo / blocks, b = lo % blocks;
        for (int64_t t = lo; t < hi; ++t) {
          uint64_t ctr = first + b;
          auto r = threefry2x32(ks[k], {static_cast<uint32_t>(ctr),
                                        static_cast<uint32_t>(ctr >> 32)});
          uint32_t words[2] = {r.first, r.second};
          int64_t start = b * 8;
          // memcpy: segments of 1- and 2-byte outputs need not be aligned, and
          // the last block of a key may be cut short.
          std::memcpy(dst + k * bytes_per_key + start, words,
                      std::min<int64_t>(8, bytes_per_key - start));
          if (++b == blocks) {
            b = 0;
            ++k;
          }
        }
      });
}

}  // namespace fluxion::random
