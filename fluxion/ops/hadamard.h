// The Hadamard transform (MLX's sizes m * 2^k) and its primitive.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// The Hadamard transform along the last axis, times `scale` (default
// 1/sqrt(n), which makes it orthonormal). The size is n = m * 2^k with m in
// {1, 12, 20, 28} and k <= 26 (MLX's sizes): the matrix is kron(H_m,
// H_2^k) with H_2^k Sylvester's and H_m the fixed matrix of
// detail::hadamard_matrix, so the values match MLX's. Integer inputs are
// transformed in float32. O(n (log n + m)) per row.
array hadamard_transform(const array& a,
                         std::optional<float> scale = std::nullopt,
                         StreamOrDevice s = {});

namespace detail {
// n = m * 2^k with m in {1, 12, 20, 28}: returns m, or 0 when n has no such
// form (or 2^k > 2^26).
int hadamard_factor(int64_t n);
// The m x m matrix (row-major, entries +-1) that sizes m * 2^k use, m in
// {1, 12, 20, 28}. They are MLX's (from Sloane's library), built here from
// the constructions they follow: m = 12 is Paley's second construction for
// q = 5; m = 20 and m = 28 are Williamson arrays of symmetric circulants
// (see hadamard.cpp). H_12 is symmetric; H_20 and H_28 are not.
std::vector<int8_t> hadamard_matrix(int m);
}  // namespace detail

// `transpose` applies H^T (the vjp of H when H_m is not symmetric).
class Hadamard : public Primitive {
 public:
  Hadamard(Stream s, double scale, bool transpose = false)
      : Primitive(s), scale_(scale), transpose_(transpose) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Hadamard"; }
  FLUXION_DECLARE_STATE
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

}  // namespace fluxion
