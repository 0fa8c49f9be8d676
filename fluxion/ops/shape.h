// Shape manipulation. Reshape (when possible), transpose, broadcast, slice,
// squeeze and expand_dims produce views that share the input's buffer.
#pragma once

#include <optional>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// One dimension of `shape` may be -1 (inferred).
array reshape(const array& a, Shape shape, StreamOrDevice s = {});
array flatten(const array& a, int start_axis = 0, int end_axis = -1,
              StreamOrDevice s = {});
// Split `axis` into `shape` (one entry may be -1).
array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s = {});
array squeeze(const array& a, const std::vector<int>& axes,
              StreamOrDevice s = {});
array squeeze(const array& a, int axis, StreamOrDevice s = {});
array squeeze(const array& a, StreamOrDevice s = {});
array expand_dims(const array& a, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array expand_dims(const array& a, int axis, StreamOrDevice s = {});
array transpose(const array& a, std::vector<int> axes, StreamOrDevice s = {});
array transpose(const array& a, StreamOrDevice s = {});  // reverse the axes
array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s = {});
array moveaxis(const array& a, int source, int destination,
               StreamOrDevice s = {});
array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s = {});
std::vector<array> broadcast_arrays(const std::vector<array>& inputs,
                                    StreamOrDevice s = {});

// Basic slicing: a[start:stop:strides] per axis, with NumPy clamping of
// out-of-range bounds (negative values count from the end).
array slice(const array& a, Shape start, Shape stop, Shape strides,
            StreamOrDevice s = {});
array slice(const array& a, const Shape& start, const Shape& stop,
            StreamOrDevice s = {});
// A copy of `src` with `update` written into the region
// src[start:stop:strides] (update broadcasts to the region's shape).
array slice_update(const array& src, const array& update, Shape start,
                   Shape stop, Shape strides, StreamOrDevice s = {});
array slice_update(const array& src, const array& update, const Shape& start,
                   const Shape& stop, StreamOrDevice s = {});

array concatenate(const std::vector<array>& arrays, int axis,
                  StreamOrDevice s = {});
array concatenate(const std::vector<array>& arrays, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, StreamOrDevice s = {});
// Split into `num_splits` equal parts, or at the given indices.
std::vector<array> split(const array& a, int num_splits, int axis,
                         StreamOrDevice s = {});
std::vector<array> split(const array& a, int num_splits, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, int axis,
                         StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices,
                         StreamOrDevice s = {});

// Constant padding. `pad_width` has one (low, high) pair per axis in `axes`.
array pad(const array& a, const std::vector<int>& axes, const Shape& low_pad,
          const Shape& high_pad, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, const std::pair<int, int>& pad_width,
          const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, int pad_width, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});

array repeat(const array& a, int repeats, int axis, StreamOrDevice s = {});
array repeat(const array& a, int repeats, StreamOrDevice s = {});  // flattened
array tile(const array& a, std::vector<int> reps, StreamOrDevice s = {});

array atleast_1d(const array& a, StreamOrDevice s = {});
array atleast_2d(const array& a, StreamOrDevice s = {});
array atleast_3d(const array& a, StreamOrDevice s = {});

// --- Primitives ---

// How a reshape's output shape follows its input's, so that a shapeless
// compile can replay it on new input shapes: a requested shape (one -1 is
// inferred again from the new size), flatten(start, end), or unflatten of
// one axis into `dims` (one -1 inferred).
struct ReshapeRule {
  enum Kind { Requested, Flatten, Unflatten };
  Kind kind = Requested;
  Shape dims;
  int start = 0;
  int end = 0;
  bool operator==(const ReshapeRule& o) const {
    return kind == o.kind && dims == o.dims && start == o.start &&
           end == o.end;
  }
};

class Reshape : public Primitive {
 public:
  Reshape(Stream s, Shape shape, ReshapeRule rule)
      : Primitive(s), shape_(std::move(shape)), rule_(std::move(rule)) {}
  Reshape(Stream s, Shape shape)
      : Primitive(s),
        shape_(shape),
        rule_{ReshapeRule::Requested, std::move(shape), 0, 0} {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "Reshape"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {shape_for(in[0].shape())};
  }
  // The traced output shape.
  const Shape& shape() const { return shape_; }
  const ReshapeRule& rule() const { return rule_; }
  // The output shape for an input of shape `in` (raises like reshape when
  // the rule does not fit it).
  Shape shape_for(const Shape& in) const;

 private:
  Shape shape_;
  ReshapeRule rule_;
};

class Transpose : public Primitive {
 public:
  Transpose(Stream s, std::vector<int> axes)
      : Primitive(s), axes_(std::move(axes)) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "Transpose"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
};

class Broadcast : public Primitive {
 public:
  Broadcast(Stream s, Shape shape) : Primitive(s), shape_(std::move(shape)) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "Broadcast"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>&) override {
    return {shape_};
  }
  const Shape& shape() const { return shape_; }

 private:
  Shape shape_;
};

// The broadcast an op inserts to align an operand with its partners while
// a shapeless compile traces (MLX's BroadcastAxes; issue 33 item 3).
// Inputs: the operand, then the partners, read for their shapes only. The
// output shape is the broadcast of all their shapes with the last `ignore`
// axes of each left out, followed by the operand's own last `ignore` axes
// (matmul's matrix axes), so a replay with new input shapes recomputes it
// from output_shapes rather than keeping the traced shape. Evaluated and
// exported as the Broadcast it derives from (to its node's shape).
class BroadcastAxes : public Broadcast {
 public:
  BroadcastAxes(Stream s, Shape shape, int ignore)
      : Broadcast(s, std::move(shape)), ignore_(ignore) {}
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  int ignore() const { return ignore_; }

 private:
  int ignore_;
};

namespace detail {
// `a` broadcast to `shape`, which the caller computed as the broadcast of
// `a` with `partners` (their last `ignore` axes left out, `a` keeping its
// own): a BroadcastAxes node while a shapeless compile traces (its shape
// then follows the partners on every replay), else broadcast_to.
array broadcast_against(const array& a, const std::vector<array>& partners,
                        const Shape& shape, int ignore, StreamOrDevice s = {});
}  // namespace detail

// Removes and inserts size-1 axes (squeeze / expand_dims): always a view.
class ExpandDims : public Primitive {
 public:
  ExpandDims(Stream s, std::vector<int> axes)
      : Primitive(s), axes_(std::move(axes)) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "ExpandDims"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;  // sorted, in output coordinates
};

class Squeeze : public Primitive {
 public:
  Squeeze(Stream s, std::vector<int> axes)
      : Primitive(s), axes_(std::move(axes)) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "Squeeze"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;  // sorted, in input coordinates
};

class Slice : public Primitive {
 public:
  bool shapeless_ok() const override { return false; }
  Slice(Stream s, Shape start, Shape stop, Shape strides)
      : Primitive(s),
        start_(std::move(start)),
        stop_(std::move(stop)),
        strides_(std::move(strides)) {}
  FLUXION_DECLARE_EVAL
  FLUXION_DECLARE_VIEW_EVAL
  const char* name() const override { return "Slice"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  Shape start_, stop_, strides_;  // normalized: in range, exact stops
};

class SliceUpdate : public Primitive {
 public:
  SliceUpdate(Stream s, Shape start, Shape stop, Shape strides)
      : Primitive(s),
        start_(std::move(start)),
        stop_(std::move(stop)),
        strides_(std::move(strides)) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "SliceUpdate"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  Shape start_, stop_, strides_;
};

class Concatenate : public Primitive {
 public:
  Concatenate(Stream s, int axis) : Primitive(s), axis_(axis) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Concatenate"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  int axis() const { return axis_; }

 private:
  int axis_;
};

// Constant padding: inputs are (a, pad_value scalar).
class Pad : public Primitive {
 public:
  Pad(Stream s, std::vector<int> axes, Shape low, Shape high)
      : Primitive(s),
        axes_(std::move(axes)),
        low_(std::move(low)),
        high_(std::move(high)) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Pad"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  const std::vector<int>& axes() const { return axes_; }
  const Shape& low() const { return low_; }
  const Shape& high() const { return high_; }

 private:
  std::vector<int> axes_;
  Shape low_, high_;
};

}  // namespace fluxion
