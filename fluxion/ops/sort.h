// Sorting, partitioning and cumulative scans along an axis.
#pragma once

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// Sorted along `axis` (ascending). NaNs go to the end (NumPy); complex
// numbers order lexicographically. Without an axis the array is flattened.
array sort(const array& a, int axis, StreamOrDevice s = {});
array sort(const array& a, StreamOrDevice s = {});
// The uint32 indices that sort `a` along `axis`; stable (ties keep their
// order).
array argsort(const array& a, int axis, StreamOrDevice s = {});
array argsort(const array& a, StreamOrDevice s = {});

// `a` rearranged along `axis` so that element `kth` is where a sort would
// put it, the ones before it are <= it and the ones after >= it (each side
// in no particular order). A negative kth counts from the end.
array partition(const array& a, int kth, int axis, StreamOrDevice s = {});
array partition(const array& a, int kth, StreamOrDevice s = {});
array argpartition(const array& a, int kth, int axis, StreamOrDevice s = {});
array argpartition(const array& a, int kth, StreamOrDevice s = {});

// The `k` largest elements along `axis`, in descending order (MLX leaves
// the order unspecified).
array topk(const array& a, int k, int axis, StreamOrDevice s = {});
array topk(const array& a, int k, StreamOrDevice s = {});

// Cumulative scans along `axis`: `reverse` scans from the end, an exclusive
// scan (inclusive = false) leaves out the element itself (the first output
// is the identity). bool, int8 and int16 sums and products accumulate in
// int32, uint8 and uint16 in uint32, as in sum(). Without an axis the array
// is flattened.
#define FLUXION_SCAN_DECL(NAME)                                           \
  array NAME(const array& a, int axis, bool reverse = false,              \
             bool inclusive = true, StreamOrDevice s = {});               \
  array NAME(const array& a, bool reverse = false, bool inclusive = true, \
             StreamOrDevice s = {});
FLUXION_SCAN_DECL(cumsum)
FLUXION_SCAN_DECL(cumprod)
FLUXION_SCAN_DECL(cummax)
FLUXION_SCAN_DECL(cummin)
// Floating-point inputs only (integers are promoted to float32).
FLUXION_SCAN_DECL(logcumsumexp)
#undef FLUXION_SCAN_DECL

// Gradients: Sort and Partition send the cotangent back through the
// permutation (argsort / argpartition); ArgSort and ArgPartition have
// integer outputs (zero gradients). vmap shifts the axis past the batch
// axis.
class Sort : public Primitive {
 public:
  Sort(Stream s, int axis) : Primitive(s), axis_(axis) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Sort"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  int axis() const { return axis_; }

 private:
  int axis_;
};

class ArgSort : public Primitive {
 public:
  ArgSort(Stream s, int axis) : Primitive(s), axis_(axis) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "ArgSort"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  int axis() const { return axis_; }

 private:
  int axis_;
};

// The values are those of `a` taken at ArgPartition's indices for the same
// kth and axis, so the two always agree (ties included).
class Partition : public Primitive {
 public:
  Partition(Stream s, int kth, int axis)
      : Primitive(s), kth_(kth), axis_(axis) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Partition"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  int kth() const { return kth_; }
  int axis() const { return axis_; }

 private:
  int kth_;  // in [0, n)
  int axis_;
};

class ArgPartition : public Primitive {
 public:
  ArgPartition(Stream s, int kth, int axis)
      : Primitive(s), kth_(kth), axis_(axis) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "ArgPartition"; }
  FLUXION_DECLARE_STATE
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  int kth() const { return kth_; }
  int axis() const { return axis_; }

 private:
  int kth_;
  int axis_;
};

// A cumulative scan. The output dtype is the accumulation dtype (see
// cumsum). Gradients: Sum is the opposite-direction cumsum of the
// cotangent; Prod is exact with zeros (before the first zero along the scan
// the cotangent sums are divided by nonzero elements, the first zero gets
// the scan of the others, everything after it gets 0); Max and Min route
// the cotangent to the element the running extremum came from (the latest
// of tied ones); LogAddExp weighs it by the softmax of each prefix, summed
// in the log domain so that any range of values works. An exclusive scan is
// the inclusive one shifted by one element.
class Scan : public Primitive {
 public:
  enum ReduceType { Sum, Prod, Max, Min, LogAddExp };
  Scan(Stream s, ReduceType type, int axis, bool reverse, bool inclusive)
      : Primitive(s),
        type_(type),
        axis_(axis),
        reverse_(reverse),
        inclusive_(inclusive) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Scan"; }
  FLUXION_DECLARE_STATE
  void print(std::ostream& os) const override;
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }
  ReduceType type() const { return type_; }
  int axis() const { return axis_; }
  bool reverse() const { return reverse_; }
  bool inclusive() const { return inclusive_; }

 private:
  ReduceType type_;
  int axis_;
  bool reverse_;
  bool inclusive_;
};

}  // namespace fluxion
