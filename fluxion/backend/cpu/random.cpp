// CPU kernel of RandomBits: every 8-byte block of the output is one
// threefry call on its own counter, so blocks are computed independently and
// the result does not depend on how the work is split over threads.
#include "fluxion/ops/random.h"

#include <algorithm>
#include <cstring>

#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion::random {

namespace {

constexpr int64_t kBlockGrain = 1 << 12;
constexpr int64_t kTile = 256;  // blocks per vectorized run

// n <= kTile consecutive blocks from counter `ctr`. The loop has no branches
// or partial stores, so it vectorizes; the AVX2 clone (picked at load time
// when the CPU has it) runs 8 lanes.
__attribute__((target_clones("avx2", "default"))) void threefry_tile(
    std::pair<uint32_t, uint32_t> key, uint64_t ctr, int64_t n,
    uint32_t* words) {
  for (int64_t j = 0; j < n; ++j) {
    uint64_t c = ctr + j;
    auto r = threefry2x32(
        key, {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32)});
    words[2 * j] = r.first;
    words[2 * j + 1] = r.second;
  }
}

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
  cpu::parallel_for(num_keys * blocks, kBlockGrain,
                    [&](int64_t lo, int64_t hi) {
                      // Blocks of one key in tiles, then the bytes copied out
                      // (memcpy: segments of 1- and 2-byte words need not be
                      // aligned, and a key's last block may be cut short).
                      uint32_t words[2 * kTile];
                      for (int64_t t = lo; t < hi;) {
                        int64_t k = t / blocks, b = t % blocks;
                        int64_t n = std::min({kTile, blocks - b, hi - t});
                        threefry_tile(ks[k], first + b, n, words);
                        std::memcpy(dst + k * bytes_per_key + b * 8, words,
                                    std::min(8 * n, bytes_per_key - b * 8));
                        t += n;
                      }
                    });
}

}  // namespace fluxion::random
