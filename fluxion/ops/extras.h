// MLX top-level ops that were missing (searchsorted is a NumPy extra the
// project asked for): sorted search, the Hadamard transform, strided and
// dtype views, contiguous copies, and the gathered / segmented / block-
// masked matrix products.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

// The Hadamard transform along the last axis, times `scale` (default
// 1/sqrt(n), which makes it orthonormal). The size is n = m * 2^k with m in
// {1, 12, 20, 28} and k <= 26 (MLX's sizes): the matrix is kron(H_m,
// H_2^k) with H_2^k Sylvester's and H_m the fixed matrix of
// detail::hadamard_matrix, so the values match MLX's. Integer inputs are
// transformed in float32. O(n (log n + m)) per row.
array hadamard_transform(const array& a,
                         std::optional<float> scale = std::nullopt,
                         StreamOrDevice s = {});

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

// Matrix products of a's matrices at `lhs_indices` (flat indices into a's
// batch dimensions) with b's at `rhs_indices`; absent indices mean every
// batch in order. Output: broadcast(index shapes) + (M, N).
array gather_mm(const array& a, const array& b,
                std::optional<array> lhs_indices = std::nullopt,
                std::optional<array> rhs_indices = std::nullopt,
                bool sorted_indices = false, StreamOrDevice s = {});

// For each segment [start, end) of the inner dimension K (segments of shape
// (..., 2)), a[:, start:end] @ b[start:end, :]. Output (..., M, N).
array segmented_mm(const array& a, const array& b, const array& segments,
                   StreamOrDevice s = {});

// matmul with block masks (block_size 32 or 64): mask_lhs (..., ceil(M/bs),
// ceil(K/bs)) and mask_rhs (..., ceil(K/bs), ceil(N/bs)) zero (bool) or
// scale (float) blocks of the operands, mask_out (..., ceil(M/bs),
// ceil(N/bs)) blocks of the product.
array block_masked_mm(const array& a, const array& b, int block_size = 64,
                      const std::optional<array>& mask_out = std::nullopt,
                      const std::optional<array>& mask_lhs = std::nullopt,
                      const std::optional<array>& mask_rhs = std::nullopt,
                      StreamOrDevice s = {});

// Inputs (a, v): a (L..., n) sorted along the last axis, v (L..., m), both
// of one dtype; output uint32 (L..., m).
class SearchSorted : public Primitive {
 public:
  SearchSorted(Stream s, bool right) : Primitive(s), right_(right) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "SearchSorted"; }
  std::vector<PrimitiveArg> state() const override {
    return export_state(right_);
  }
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[1].shape()};
  }

 private:
  bool right_;
};

namespace detail {
// n = m * 2^k with m in {1, 12, 20, 28}: returns m, or 0 when n has no such
// form (or 2^k > 2^26).
int hadamard_factor(int64_t n);
// The m x m matrix (row-major, entries +-1) that sizes m * 2^k use, m in
// {1, 12, 20, 28}. They are MLX's (from Sloane's library), built here from
// the constructions they follow: m = 12 is Paley's second construction for
// q = 5; m = 20 and m = 28 are Williamson arrays of symmetric circulants
// (see extras.cpp). H_12 is symmetric; H_20 and H_28 are not.
std::vector<int8_t> hadamard_matrix(int m);
}  // namespace detail

// `transpose` applies H^T (the vjp of H when H_m is not symmetric).
class Hadamard : public Primitive {
 public:
  Hadamard(Stream s, double scale, bool transpose = false)
      : Primitive(s), scale_(scale), transpose_(transpose) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Hadamard"; }
  std::vector<PrimitiveArg> state() const override {
    return export_state(scale_, transpose_);
  }
  bool transposed() const { return transpose_; }
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }

 private:
  double scale_;
  bool transpose_;
};

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
  std::vector<PrimitiveArg> state() const override {
    return export_state(export_ints(shape_), export_ints(strides_), static_cast<int64_t>(offset_));
  }
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
  std::vector<PrimitiveArg> state() const override {
    return export_state(dtype_);
  }
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
  std::vector<PrimitiveArg> state() const override {
    return export_state(allow_col_major_);
  }
  FLUXION_DECLARE_RULES
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override {
    return {in[0].shape()};
  }

 private:
  bool allow_col_major_;
};

}  // namespace fluxion
