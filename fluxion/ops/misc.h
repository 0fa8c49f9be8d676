// where, astype, clip and comparisons of whole arrays.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// `a` converted to `dtype` (the same array when it already has it).
array astype(const array& a, Dtype dtype, StreamOrDevice s = {});
// Elementwise choice, broadcasting all three.
array where(const array& condition, const array& x, const array& y,
            StreamOrDevice s = {});
// Limit values to [a_min, a_max]; either bound may be absent.
array clip(const array& a, const std::optional<array>& a_min,
           const std::optional<array>& a_max, StreamOrDevice s = {});

array isclose(const array& a, const array& b, double rtol = 1e-5,
              double atol = 1e-8, bool equal_nan = false,
              StreamOrDevice s = {});
// A scalar bool array: all(isclose(a, b)).
array allclose(const array& a, const array& b, double rtol = 1e-5,
               double atol = 1e-8, bool equal_nan = false,
               StreamOrDevice s = {});
// Same shape and equal values (dtypes may differ).
array array_equal(const array& a, const array& b, bool equal_nan = false,
                  StreamOrDevice s = {});

// Casts between inexact dtypes pass (co)tangents through, cast; a cast from
// or to an integer or bool dtype has a zero derivative (truncation is
// piecewise constant, and integer inputs take no gradient).
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
  std::vector<PrimitiveArg> state() const override {
    return export_state(dtype_);
  }
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
