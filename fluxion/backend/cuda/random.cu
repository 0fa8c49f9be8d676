// RandomBits on the GPU: the CPU's counters and layout
// (fluxion/ops/random.h), so every key's bytes equal the CPU's bit for
// bit. One thread per (key, pair of words), plus the middle word of an odd
// count.
#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/random.h"

namespace fluxion::random {

namespace {

// Threefry-2x32, 20 rounds (Salmon et al.), as the CPU computes it.
__device__ __forceinline__ void threefry(uint32_t k0, uint32_t k1,
                                         uint32_t c0, uint32_t c1,
                                         uint32_t& r0, uint32_t& r1) {
  const uint32_t rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = c0 + ks[0];
  uint32_t x1 = c1 + ks[1];
#pragma unroll
  for (uint32_t i = 0; i < 5; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t r = rot[i % 2][j];
      x0 += x1;
      x1 = (x1 << r) | (x1 >> (32 - r));
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + i + 1;
  }
  r0 = x0;
  r1 = x1;
}

// Word w of a key's `bytes` bytes at `dst`, the last one cut (little
// endian), byte by byte when words are not 4-aligned.
__device__ __forceinline__ void put_word(unsigned char* dst, int64_t bytes,
                                         int64_t w, uint32_t v,
                                         bool aligned) {
  int64_t at = 4 * w;
  if (aligned) {
    *reinterpret_cast<uint32_t*>(dst + at) = v;
    return;
  }
  for (int b = 0; b < 4 && at + b < bytes; ++b) {
    dst[at + b] = static_cast<unsigned char>(v >> (8 * b));
  }
}

__global__ void random_bits(const uint32_t* keys, unsigned char* out,
                            int64_t num_keys, int64_t bytes, int64_t half,
                            int64_t odd, bool aligned) {
  const int64_t per_key = half + odd;
  FLUXION_GRID_LOOP(t, num_keys * per_key) {
    int64_t k = t / per_key, i = t % per_key;
    uint32_t k0 = keys[2 * k], k1 = keys[2 * k + 1];
    unsigned char* kd = out + k * bytes;
    uint32_t a, b;
    if (i == half) {  // the middle word of an odd count
      threefry(k0, k1, static_cast<uint32_t>(half), 0u, a, b);
      put_word(kd, bytes, half, a, aligned);
    } else {
      uint32_t c = static_cast<uint32_t>(i);
      threefry(k0, k1, c, c + static_cast<uint32_t>(half + odd), a, b);
      put_word(kd, bytes, i, a, aligned);
      put_word(kd, bytes, half + odd + i, b, aligned);
    }
  }
}

}  // namespace

void RandomBits::eval_gpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  array& o = out[0];
  cu::alloc(o);
  const int64_t num_keys = in[0].size() / 2;
  if (o.size() == 0 || num_keys == 0) {
    return;
  }
  array keys = cu::contiguous(in[0]);
  const int64_t bytes = o.nbytes() / num_keys;
  const int64_t words = (bytes + 3) / 4;
  const int64_t half = words / 2;
  const int64_t odd = words % 2;
  random_bits<<<cu::blocks_for(num_keys * (half + odd)), cu::kThreads, 0,
                cu::current_stream()>>>(
      cu::ptr<const uint32_t>(keys), cu::ptr<unsigned char>(o), num_keys,
      bytes, half, odd, bytes % 4 == 0);
  cu::check_launch("random_bits");
}

}  // namespace fluxion::random
