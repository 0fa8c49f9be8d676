// Reductions over any set of axes, with keepdims, and the softmax family.
#pragma once

#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// Each reduction has three forms: over all axes, over `axes`, over one axis.
#define FLUXION_REDUCTION_DECL(NAME)                                        \
  array NAME(const array& a, bool keepdims = false, StreamOrDevice s = {}); \
  array NAME(const array& a, const std::vector<int>& axes,                  \
             bool keepdims = false, StreamOrDevice s = {});                 \
  array NAME(const array& a, int axis, bool keepdims = false,               \
             StreamOrDevice s = {});
FLUXION_REDUCTION_DECL(sum)
FLUXION_REDUCTION_DECL(prod)
FLUXION_REDUCTION_DECL(mean)
FLUXION_REDUCTION_DECL(max)
FLUXION_REDUCTION_DECL(min)
FLUXION_REDUCTION_DECL(all)
FLUXION_REDUCTION_DECL(any)
FLUXION_REDUCTION_DECL(logsumexp)
#undef FLUXION_REDUCTION_DECL

// Variance and standard deviation with `ddof` degrees of freedom removed.
array var(const array& a, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array var(const array& a, const std::vector<int>& axes, bool keepdims = false,
          int ddof = 0, StreamOrDevice s = {});
array var(const array& a, int axis, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array std(const array& a, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array std(const array& a, const std::vector<int>& axes, bool keepdims = false,
          int ddof = 0, StreamOrDevice s = {});
array std(const array& a, int axis, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});

// Index of the first extreme value (uint32, as in MLX). Without an axis the
// array is flattened.
array argmax(const array& a, bool keepdims = false, StreamOrDevice s = {});
array argmax(const array& a, int axis, bool keepdims = false,
             StreamOrDevice s = {});
array argmin(const array& a, bool keepdims = false, StreamOrDevice s = {});
array argmin(const array& a, int axis, bool keepdims = false,
             StreamOrDevice s = {});

// Numerically stable (the max is subtracted first).
array softmax(const array& a, bool precise = false, StreamOrDevice s = {});
array softmax(const array& a, const std::vector<int>& axes,
              bool precise = false, StreamOrDevice s = {});
array softmax(const array& a, int axis, bool precise = false,
              StreamOrDevice s = {});
array log_softmax(const array& a, StreamOrDevice s = {});
array log_softmax(const array& a, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array log_softmax(const array& a, int axis, StreamOrDevice s = {});

// Gradients: Sum broadcasts the cotangent back; Prod multiplies it by the
// product of the other elements (computed without dividing, so zeros are
// exact); Max and Min share it equally among the elements equal to the
// result (as MLX does with ties); And and Or are piecewise constant
// (zeros). vmap shifts the reduced axes past the mapped one.
class Reduce : public Primitive {
 public:
  enum ReduceType { And, Or, Sum, Prod, Min, Max };
  // `dtype` is the output's: a Sum of int32 is int32 for sum() but float32
  // for mean(), so the rules cannot infer it.
  Reduce(Stream s, ReduceType type, std::vector<int> axes, Dtype dtype)
      : Primitive(s), type_(type), axes_(std::move(axes)), dtype_(dtype) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override;
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  // The output keeps reduced axes as size 1 (ops squeeze afterwards).
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  ReduceType type() const { return type_; }
  const std::vector<int>& axes() const { return axes_; }
  Dtype dtype() const { return dtype_; }

 private:
  // This reduction of `x` over `axes`, with reduced axes kept.
  array apply(const array& x, const std::vector<int>& axes);

  ReduceType type_;
  std::vector<int> axes_;  // sorted, unique
  Dtype dtype_;
};

// softmax over the last axis as one pass over each row (a row is read
// once and written once, computed in float for the half types and in
// double for float64): softmax() uses it for a single axis that is the
// last, the composite of max/exp/sum/divide otherwise. The input is of the
// output's floating dtype. Rules with public ops: the jvp and the vjp are
// y * (t - sum(t * y)) along the axis; vmap moves a batch axis that is the
// last to the front.
class Softmax : public Primitive {
 public:
  explicit Softmax(Stream s) : Primitive(s) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Softmax"; }
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override {
    return typeid(o) == typeid(*this);
  }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
};

// Integer-valued: zero gradients.
class ArgReduce : public Primitive {
 public:
  enum ReduceType { ArgMin, ArgMax };
  ArgReduce(Stream s, ReduceType type, int axis)
      : Primitive(s), type_(type), axis_(axis) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override;
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  ReduceType type() const { return type_; }
  int axis() const { return axis_; }

 private:
  ReduceType type_;
  int axis_;  // kept as size 1 in the output
};

// The number of elements of the input over `axes`, as a scalar of `dtype`
// (mean's and var's divisor). A node rather than a constant so that a
// shapeless compile recomputes it for each new input shape; it reads only
// the input's shape. Zero derivatives; unmapped under vmap.
class NumberOfElements : public Primitive {
 public:
  NumberOfElements(Stream s, std::vector<int> axes, Dtype dtype)
      : Primitive(s), axes_(std::move(axes)), dtype_(dtype) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "NumberOfElements"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return {Shape{}};
  }
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
  Dtype dtype_;
};

// number_of_elements(a, axes, dtype): see NumberOfElements.
array number_of_elements(const array& a, const std::vector<int>& axes,
                         Dtype dtype, StreamOrDevice s = {});

}  // namespace fluxion
