// Counter-based random numbers (threefry 2x32), with MLX's key API: a key is
// a uint32 array of shape (2,); without an explicit key the global state is
// split.
#pragma once

#include <optional>

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

// Inputs: keys of shape (..., 2); output: `width`-byte words, with the
// key's batch shape leading.
class RandomBits : public Primitive {
 public:
  RandomBits(Stream s, Shape shape, int width)
      : Primitive(s), shape_(std::move(shape)), width_(width) {}
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  const char* name() const override { return "RandomBits"; }
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const Shape& shape() const { return shape_; }
  int width() const { return width_; }

 private:
  Shape shape_;
  int width_;
};

}  // namespace fluxion::random
