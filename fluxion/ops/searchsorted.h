// searchsorted (NumPy's and MLX's sorted search) and its primitive.
#pragma once

#include <optional>
#include <string>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// NumPy's / MLX's searchsorted: for each value of `v` (any shape; the
// output has v's shape), the insertion position in the 1-D `a`, sorted
// ascending ("left": before equal elements, "right": after them). NaNs sort
// last, as in NumPy. `sorter` (optional) is an argsort of `a`. The output
// dtype is uint32 (MLX). vmap maps over `v`; mapping over `a` raises
// std::invalid_argument, as MLX (a batched `a` would be 2-D).
array searchsorted(const array& a, const array& v,
                   const std::string& side = "left",
                   const std::optional<array>& sorter = std::nullopt,
                   StreamOrDevice s = {});

// Inputs (a, v): a (L..., n) sorted along the last axis, v (L..., m), both
// of one dtype; output uint32 (L..., m).
class SearchSorted : public Primitive {
 public:
  SearchSorted(Stream s, bool right) : Primitive(s), right_(right) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "SearchSorted"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[1].shape()};
  }

 private:
  bool right_;
};

}  // namespace fluxion
