// Integer-array indexing along an axis.
#pragma once

#include <string>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// Elements of `a` at `indices` along `axis`. Negative indices count from
// the end. Index values are only known when the kernel runs, so an index out
// of range raises std::out_of_range from eval (the kernel's error reaches the
// caller through the stream's event).
array take(const array& a, const array& indices, int axis,
           StreamOrDevice s = {});
// Flattened `a`.
array take(const array& a, const array& indices, StreamOrDevice s = {});
array take(const array& a, int index, int axis, StreamOrDevice s = {});
// A Fluxion extension (NumPy's `mode`): "raise" is the plain take;
// "wrap" reduces every index modulo the axis length (any integer is
// valid); "clip" clamps to [0, n-1], so negative indices select the first
// element, as in NumPy (they do not count from the end). With "wrap" or
// "clip" an empty axis raises std::out_of_range unless there are no
// indices.
array take(const array& a, const array& indices, int axis,
           const std::string& mode, StreamOrDevice s = {});
array take(const array& a, const array& indices, const std::string& mode,
           StreamOrDevice s = {});
array take_along_axis(const array& a, const array& indices, int axis,
                      StreamOrDevice s = {});
// A copy of `a` with `values` written at `indices` along `axis`.
array put_along_axis(const array& a, const array& indices, const array& values,
                     int axis, StreamOrDevice s = {});
// A copy of `a` with `values` added at `indices` along `axis`; duplicate
// indices accumulate (the gradient of take_along_axis).
array scatter_add_axis(const array& a, const array& indices,
                       const array& values, int axis, StreamOrDevice s = {});

// `a` with the positions where `mask` (broadcast to a's shape) is true
// replaced, in row-major order, by the leading elements of `values`
// (flattened): boolean-mask assignment `a[mask] = values`, as MLX's
// masked_scatter. A composition of public ops (cumsum, take, where), so it
// differentiates and batches under vmap; too few values raise at eval.
array masked_scatter(const array& a, const array& mask, const array& values,
                     StreamOrDevice s = {});

// out[..., i, ...] = a[..., indices[..., i, ...], ...] with `indices`
// broadcast against `a` except along `axis`. `op` names the public op in
// the kernel's out-of-range error.
class GatherAxis : public Primitive {
 public:
  GatherAxis(Stream s, int axis, const char* op = "take_along_axis")
      : Primitive(s), axis_(axis), op_(op) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "GatherAxis"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[1].shape()};
  }
  int axis() const { return axis_; }

 private:
  int axis_;
  const char* op_;
};

// Inputs (a, indices, values): a copy of `a` with values scattered.
// `indices` and `values` have a's shape except along `axis`. With `None`,
// for duplicate indices the last write (in index order along the axis) wins;
// with `Sum` the values are added to a (duplicates accumulate).
class ScatterAxis : public Primitive {
 public:
  enum ReduceType { None, Sum };
  ScatterAxis(Stream s, int axis, ReduceType reduce = None,
              const char* op = "put_along_axis")
      : Primitive(s), axis_(axis), reduce_(reduce), op_(op) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "ScatterAxis"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  int axis() const { return axis_; }
  ReduceType reduce_type() const { return reduce_; }

 private:
  int axis_;
  ReduceType reduce_;
  const char* op_;
};

}  // namespace fluxion
