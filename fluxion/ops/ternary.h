// Elementwise choice: where (the Select primitive, ternary) and clip.
#pragma once

#include <optional>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// Elementwise choice, broadcasting all three.
array where(const array& condition, const array& x, const array& y,
            StreamOrDevice s = {});
// Limit values to [a_min, a_max]; either bound may be absent.
array clip(const array& a, const std::optional<array>& a_min,
           const std::optional<array>& a_max, StreamOrDevice s = {});

// where(condition, x, y); inputs share the output's shape. The cotangent
// goes to the chosen operand; the condition takes none.
class Select : public Primitive {
 public:
  using Primitive::Primitive;
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Select"; }
  const char* elementwise_functor(const std::vector<Dtype>&) const override {
    return "Select";
  }
  FLUXION_DECLARE_RULES
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
};

}  // namespace fluxion
