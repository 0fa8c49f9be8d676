// Reductions over any set of axes, with keepdims, and the softmax family.
#pragma once

#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// Each reduction has three forms: over all axes, over `axes`, over one axis.
#define FLUXION_REDUCTION_DECL(NAME)                                      \
  array NAME(const array& a, bool keepdims = false, StreamOrDevice s = {}); \
  array NAME(const array& a, const std::vector<int>& axes,                \
             bool keepdims = false, StreamOrDevice s = {});               \
  array NAME(const array& a, int axis, bool keepdims = false,             \
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

class Reduce : public Primitive {
 public:
  enum ReduceType { And, Or, Sum, Prod, Min, Max };
  Reduce(Stream s, ReduceType type, std::vector<int> axes)
      : Primitive(s), type_(type), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  const char* name() const override;
  bool is_equivalent(const Primitive& o) const override;
  // The output keeps reduced axes as size 1 (ops squeeze afterwards).
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  ReduceType type() const { return type_; }
  const std::vector<int>& axes() const { return axes_; }

 private:
  ReduceType type_;
  std::vector<int> axes_;  // sorted, unique
};

class ArgReduce : public Primitive {
 public:
  enum ReduceType { ArgMin, ArgMax };
  ArgReduce(Stream s, ReduceType type, int axis)
      : Primitive(s), type_(type), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  const char* name() const override;
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  ReduceType type() const { return type_; }
  int axis() const { return axis_; }

 private:
  ReduceType type_;
  int axis_;  // kept as size 1 in the output
};

}  // namespace fluxion
