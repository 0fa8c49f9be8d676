// Matrix products.
#pragma once

#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

// NumPy matmul: batched, broadcasting batch dims; 1-D operands get a unit
// dimension added and removed.
array matmul(const array& a, const array& b, StreamOrDevice s = {});
// alpha * (a @ b) + beta * c.
array addmm(const array& c, const array& a, const array& b, float alpha = 1.0f,
            float beta = 1.0f, StreamOrDevice s = {});
array inner(const array& a, const array& b, StreamOrDevice s = {});
array outer(const array& a, const array& b, StreamOrDevice s = {});
array tensordot(const array& a, const array& b, int axes = 2,
                StreamOrDevice s = {});
array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s = {});

// (..., M, K) @ (..., K, N) with equal batch shapes.
class Matmul : public Primitive {
 public:
  using Primitive::Primitive;
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "Matmul"; }
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
};

// alpha * (a @ b) + beta * c; inputs (a, b, c), c broadcast to the output.
class AddMM : public Primitive {
 public:
  AddMM(Stream s, float alpha, float beta)
      : Primitive(s), alpha_(alpha), beta_(beta) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override { return "AddMM"; }
  FLUXION_DECLARE_STATE
  bool is_equivalent(const Primitive& o) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& in) override;
  FLUXION_DECLARE_RULES
  float alpha() const { return alpha_; }
  float beta() const { return beta_; }

 private:
  float alpha_, beta_;
};

}  // namespace fluxion
