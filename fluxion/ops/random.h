// Counter-based random numbers (threefry 2x32), with MLX's key API: a key is
// a uint32 array of shape (2,); without an explicit key the global state is
// split.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion::random {

array key(uint64_t seed);
void seed(uint64_t seed);
// (num, 2) keys derived from `key`.
array split(const array& key, int num, StreamOrDevice s = {});
std::pair<array, array> split(const array& key, StreamOrDevice s = {});

// Raw random bits: unsigned words of `width` bytes (1, 2 or 4) per element.
array bits(const Shape& shape, int width = 4,
           const std::optional<array>& key = std::nullopt,
           StreamOrDevice s = {});
array uniform(const array& low, const array& high, const Shape& shape,
              Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
array uniform(const Shape& shape, Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
array normal(const Shape& shape, Dtype dtype = float32, float loc = 0.0f,
             float scale = 1.0f, const std::optional<array>& key = std::nullopt,
             StreamOrDevice s = {});
// loc + scale * z for standard normal z, with loc and scale arrays (absent:
// 0 and 1) that broadcast to `shape` and receive gradients.
array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale,
             const std::optional<array>& key = std::nullopt,
             StreamOrDevice s = {});
// Integers in [low, high).
array randint(const array& low, const array& high, const Shape& shape,
              Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
array bernoulli(const array& p, const Shape& shape,
                const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
array bernoulli(const array& p, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
array bernoulli(const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});  // p = 0.5, scalar

// Standard normal values restricted to [lower, upper] (broadcast to `shape`,
// or to each other when `shape` is absent), by inverting the CDF.
array truncated_normal(const array& lower, const array& upper,
                       const std::optional<Shape>& shape = std::nullopt,
                       Dtype dtype = float32,
                       const std::optional<array>& key = std::nullopt,
                       StreamOrDevice s = {});
// Standard Gumbel samples: -log(-log(u)).
array gumbel(const Shape& shape = {}, Dtype dtype = float32,
             const std::optional<array>& key = std::nullopt,
             StreamOrDevice s = {});
array laplace(const Shape& shape = {}, Dtype dtype = float32, float loc = 0.0f,
              float scale = 1.0f,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
// Indices along `axis` drawn with probabilities softmax(logits) (Gumbel-max).
// The output shape is `shape`, which must broadcast with the logits' shape
// without `axis`; or that shape with `num_samples` appended; or, with
// neither, the logits' shape without `axis`.
array categorical(const array& logits, int axis = -1,
                  const std::optional<Shape>& shape = std::nullopt,
                  std::optional<int> num_samples = std::nullopt,
                  const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
// `x` shuffled along `axis`; an int n shuffles arange(n).
array permutation(const array& x, int axis = 0,
                  const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
array permutation(int n, const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
// mean + L z with L the Cholesky factor of `cov` (symmetric positive
// definite, (..., n, n)) and z standard normal; the output shape is `shape`
// broadcast with the batch shapes of mean (..., n) and cov, then n.
array multivariate_normal(const array& mean, const array& cov,
                          const Shape& shape = {}, Dtype dtype = float32,
                          const std::optional<array>& key = std::nullopt,
                          StreamOrDevice s = {});

// The threefry-2x32 block function with 20 rounds (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3"): a keyed pseudo-random permutation
// of 64-bit counters, which every generator here is built on.
inline std::pair<uint32_t, uint32_t> threefry2x32(
    std::pair<uint32_t, uint32_t> key, std::pair<uint32_t, uint32_t> count) {
  constexpr uint32_t rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {key.first, key.second,
                          key.first ^ key.second ^ 0x1BD11BDAu};
  uint32_t x0 = count.first + ks[0];
  uint32_t x1 = count.second + ks[1];
  for (uint32_t i = 0; i < 5; ++i) {
    for (uint32_t r : rotations[i % 2]) {
      x0 += x1;
      x1 = (x1 << r) | (x1 >> (32 - r));
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + i + 1;
  }
  return {x0, x1};
}

// Inputs: keys of shape (..., 2); output: `width`-byte words, with the
// key's batch shape leading. The bytes of each key's output are JAX's (and
// MLX's) threefry layout: the n = ceil(bytes / 4) 32-bit words are computed
// in pairs, words i and h + o + i being the two halves of threefry2x32(key,
// (i, h + o + i)) for i < h = n / 2 (o = n % 2), and for odd n the middle
// word h is the first half of threefry2x32(key, (h, 0)); little-endian,
// cut to the output's size. So split(key, 2) rows are the pairs' halves and
// the values match MLX's for the same key.
class RandomBits : public Primitive {
 public:
  bool shapeless_ok() const override { return false; }
  RandomBits(Stream s, Shape shape, int width)
      : Primitive(s), shape_(std::move(shape)), width_(width) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "RandomBits"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
  const Shape& shape() const { return shape_; }
  int width() const { return width_; }

 private:
  Shape shape_;
  int width_;
};

}  // namespace fluxion::random
