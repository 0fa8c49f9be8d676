// Conversion between dtypes (astype) and its primitive.
#pragma once

#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// `a` converted to `dtype` (the same array when it already has it).
array astype(const array& a, Dtype dtype, StreamOrDevice s = {});

// Casts pass (co)tangents through, cast to the other dtype, as MLX's
// AsType (integer inputs take gradients in their dtype); a cast from or to
// bool has a zero derivative.
class AsType : public Primitive {
 public:
  AsType(Stream s, Dtype dtype) : Primitive(s), dtype_(dtype) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "AsType"; }
  // A conversion (generated code casts each result to its node's dtype),
  // except float to unsigned: out-of-range values convert differently in
  // scalar and vector code.
  const char* elementwise_functor(const std::vector<Dtype>& in) const override {
    return is_floating_point(in[0]) && is_unsigned(dtype_) ? nullptr : "AsType";
  }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override {
    return Primitive::is_equivalent(o) &&
           static_cast<const AsType&>(o).dtype_ == dtype_;
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  Dtype dtype() const { return dtype_; }

 private:
  Dtype dtype_;
};

}  // namespace fluxion
