// CPU kernel of RandomBits in JAX's / MLX's layout (see random.h): per key
// the n words are made in pairs (i, h + o + i); each pair is one threefry
// call on its own counters, so the result does not depend on how the work
// is split over threads.
#include "fluxion/ops/random.h"

#include <algorithm>
#include <cstring>

#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion::random {

namespace {

constexpr int64_t kPairGrain = 1 << 12;
constexpr int64_t kTile = 256;  // pairs per vectorized run

// Pairs i = first .. first + n - 1 (n <= kTile): lo[j] and hi[j] are the
// halves of threefry2x32(key, (i, i + shift)). No branches or partial
// stores, so the loop vectorizes; the AVX2 clone (picked at load time when
// the CPU has it) runs 8 lanes.
__attribute__((target_clones("avx2", "default"))) void threefry_tile(
    std::pair<uint32_t, uint32_t> key, uint32_t first, uint32_t shift,
    int64_t n, uint32_t* lo, uint32_t* hi) {
  for (int64_t j = 0; j < n; ++j) {
    uint32_t c = first + static_cast<uint32_t>(j);
    auto r = threefry2x32(key, {c, c + shift});
    lo[j] = r.first;
    hi[j] = r.second;
  }
}

// Word w (of 4 bytes) of a key's output at `dst`, of `bytes` bytes: whole
// words are stored, the last one cut to the bytes left (little-endian).
inline void put_word(char* dst, int64_t bytes, int64_t w, uint32_t v) {
  int64_t at = 4 * w;
  std::memcpy(dst + at, &v, std::min<int64_t>(4, bytes - at));
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

  const int64_t bytes = o.nbytes() / num_keys;
  const int64_t words = (bytes + 3) / 4;
  const int64_t half = words / 2;
  const int64_t odd = words % 2;
  char* dst = o.data<char>();
  // Tasks: each key's pairs, then (odd n) its middle word.
  const int64_t per_key = half + odd;
  cpu::parallel_for(
      num_keys * per_key, kPairGrain, [&](int64_t lo, int64_t hi) {
        uint32_t a[kTile], b[kTile];
        for (int64_t t = lo; t < hi;) {
          int64_t k = t / per_key, i = t % per_key;
          char* kd = dst + k * bytes;
          if (i == half) {  // the middle word of an odd count
            auto r = threefry2x32(ks[k], {static_cast<uint32_t>(half), 0u});
            put_word(kd, bytes, half, r.first);
            ++t;
            continue;
          }
          int64_t n = std::min({kTile, half - i, hi - t});
          threefry_tile(ks[k], static_cast<uint32_t>(i),
                        static_cast<uint32_t>(half + odd), n, a, b);
          for (int64_t j = 0; j < n; ++j) {
            put_word(kd, bytes, i + j, a[j]);
            put_word(kd, bytes, half + odd + i + j, b[j]);
          }
          t += n;
        }
      });
}

}  // namespace fluxion::random
