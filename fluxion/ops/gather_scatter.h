// MLX's general gather and scatter over several indexed axes.
//
// gather(a, indices, axes, slice_sizes): the index arrays (one per entry of
// `axes`) broadcast together to a shape B; the output has shape
// B + slice_sizes, and out[b..., s...] = a[w...] where along axes[k]
// w = indices[k][b] + s_axes[k] and along every other axis w = s. The slice
// sizes cover every axis of `a` (1 keeps an indexed axis as a unit axis).
//
// scatter*(a, indices, updates, axes): the reverse. `updates` has shape
// B + U with U one entry per axis of `a` (U[d] <= a.shape(d)); update row b
// is written to (or combined with) the window of `a` that starts at
// indices[k][b] along axes[k] and at 0 along the other axes.
//
// Negative indices wrap once, as in NumPy. An index whose window does not
// fit raises std::out_of_range when the kernel runs, naming the op, the
// index, the axis and its size (as take does). Duplicate indices: `scatter`
// keeps the last write in index order (row-major order of B); the reducing
// scatters combine every update, in index order (deterministic float sums).
#pragma once

#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

array gather(const array& a, const std::vector<array>& indices,
             const std::vector<int>& axes, const Shape& slice_sizes,
             StreamOrDevice s = {});
array gather(const array& a, const array& indices, int axis,
             const Shape& slice_sizes, StreamOrDevice s = {});

array scatter(const array& a, const std::vector<array>& indices,
              const array& updates, const std::vector<int>& axes,
              StreamOrDevice s = {});
array scatter(const array& a, const array& indices, const array& updates,
              int axis, StreamOrDevice s = {});
array scatter_add(const array& a, const std::vector<array>& indices,
                  const array& updates, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array scatter_add(const array& a, const array& indices, const array& updates,
                  int axis, StreamOrDevice s = {});
array scatter_prod(const array& a, const std::vector<array>& indices,
                   const array& updates, const std::vector<int>& axes,
                   StreamOrDevice s = {});
array scatter_prod(const array& a, const array& indices, const array& updates,
                   int axis, StreamOrDevice s = {});
array scatter_max(const array& a, const std::vector<array>& indices,
                  const array& updates, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array scatter_max(const array& a, const array& indices, const array& updates,
                  int axis, StreamOrDevice s = {});
array scatter_min(const array& a, const std::vector<array>& indices,
                  const array& updates, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array scatter_min(const array& a, const array& indices, const array& updates,
                  int axis, StreamOrDevice s = {});

// Inputs (a, indices...): the index arrays have one shape B (broadcast
// views) and one integer dtype.
class Gather : public Primitive {
 public:
  Gather(Stream s, std::vector<int> axes, Shape slice_sizes)
      : Primitive(s),
        axes_(std::move(axes)),
        slice_sizes_(std::move(slice_sizes)) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Gather"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const std::vector<int>& axes() const { return axes_; }
  const Shape& slice_sizes() const { return slice_sizes_; }

 private:
  std::vector<int> axes_;
  Shape slice_sizes_;
};

// Inputs (a, indices..., updates): updates of shape B + U (see above).
// None overwrites (last write in index order wins); Sum, Prod, Max, Min
// combine a's value with every update reaching it.
class Scatter : public Primitive {
 public:
  enum ReduceType { None, Sum, Prod, Max, Min };
  Scatter(Stream s, ReduceType reduce, std::vector<int> axes)
      : Primitive(s), reduce_(reduce), axes_(std::move(axes)) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Scatter"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  ReduceType reduce_type() const { return reduce_; }
  const std::vector<int>& axes() const { return axes_; }
  // The public op's name, for messages.
  const char* op_name() const;

 private:
  ReduceType reduce_;
  std::vector<int> axes_;
};

}  // namespace fluxion
