// Ops on the memory layout of an array: strided views (as_strided), dtype
// views of the bytes (view), contiguous copies; their primitives are view
// primitives (backend/common/views.cpp).
#pragma once

#include <optional>
#include <utility>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// A view of a's row-major elements with the given shape, strides (in
// elements; default row-major) and offset. Unlike MLX, every element the
// view reaches must lie inside `a` (std::invalid_argument otherwise).
array as_strided(const array& a, std::optional<Shape> shape = std::nullopt,
                 std::optional<Strides> strides = std::nullopt,
                 size_t offset = 0, StreamOrDevice s = {});

// The bytes of `a` (row-major) read as `dtype`; the last axis is rescaled
// by the ratio of the item sizes.
array view(const array& a, Dtype dtype, StreamOrDevice s = {});

// `a` with row-contiguous memory (or column-contiguous, if allowed and
// already so); no copy when it already is.
array contiguous(const array& a, bool allow_col_major = false,
                 StreamOrDevice s = {});

class AsStrided : public Primitive {
 public:
  AsStrided(Stream s, Shape shape, Strides strides, size_t offset)
      : Primitive(s),
        shape_(std::move(shape)),
        strides_(std::move(strides)),
        offset_(offset) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "AsStrided"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return {shape_};
  }

 private:
  Shape shape_;
  Strides strides_;
  size_t offset_;
};

// Reinterpretation of the bytes: no derivative exists (the rules give
// zeros).
class View : public Primitive {
 public:
  View(Stream s, Dtype dtype) : Primitive(s), dtype_(dtype) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "View"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;

 private:
  Dtype dtype_;
};

class Contiguous : public Primitive {
 public:
  Contiguous(Stream s, bool allow_col_major)
      : Primitive(s), allow_col_major_(allow_col_major) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "Contiguous"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }

 private:
  bool allow_col_major_;
};

}  // namespace fluxion
