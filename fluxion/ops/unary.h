// Elementwise unary ops and their primitives.
#pragma once

#include <memory>
#include <optional>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/ops/elementwise_spec.h"
#include "fluxion/primitive.h"

namespace fluxion {

// The ops of the unary spec (elementwise_spec.h: abs, exp, erf, ...), one
// per entry but those whose POLICY is custom:
//   array NAME(const array& a, StreamOrDevice s = {});
#define FLUXION_UNARY_OP_DECL(A, CLASS, NAME, POLICY, ...) \
  FLUXION_UNARY_IF_OP(POLICY)(                             \
      array NAME(const array& a, StreamOrDevice s = {});)
FLUXION_UNARY_SPEC(FLUXION_UNARY_OP_DECL, _)
#undef FLUXION_UNARY_OP_DECL

// The ops of the spec written by hand (policy custom).
array negative(const array& a, StreamOrDevice s = {});
// Round half to even to `decimals` places.
array round(const array& a, int decimals = 0, StreamOrDevice s = {});

// isinf(a) and a > 0 (a < 0): false for integers; complex is rejected.
array isposinf(const array& a, StreamOrDevice s = {});
array isneginf(const array& a, StreamOrDevice s = {});
// Angle conversions; integers give float32.
array degrees(const array& a, StreamOrDevice s = {});
array radians(const array& a, StreamOrDevice s = {});
// NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (absent: the
// dtype's largest and lowest finite values); complex inputs are treated
// part by part, integers are returned unchanged.
array nan_to_num(const array& a, double nan = 0.0,
                 std::optional<double> posinf = std::nullopt,
                 std::optional<double> neginf = std::nullopt,
                 StreamOrDevice s = {});
// Identity in the forward pass; blocks gradients.
array stop_gradient(const array& a, StreamOrDevice s = {});
// A new buffer with the same contents.
array copy(const array& a, StreamOrDevice s = {});

// What a unary op of the spec accepts and returns (POLICY in
// elementwise_spec.h, which says what each means).
enum class UnaryPolicy {
  inexact,
  real,
  real_keep,
  same,
  to_real,
  to_bool,
  custom
};

// The output dtype of a unary primitive of `policy` on an input of dtype
// `in` (the op has cast the input already: inexact and real ops see a
// float or complex dtype here).
inline Dtype unary_output_dtype(UnaryPolicy policy, Dtype in) {
  switch (policy) {
    case UnaryPolicy::to_real:
      return is_complex(in) ? float32 : in;
    case UnaryPolicy::to_bool:
      return bool_;
    default:
      return in;
  }
}

// Base for one-input elementwise primitives: the output has the input's
// shape, and vmap passes the mapped axis through.
//
// The rules of a smooth op come from its derivative f'(x): jvp is t * f'(x)
// and vjp is ct * f'(x). For complex inputs that is JAX's holomorphic
// convention (no conjugate), which the public vjp conjugates into MLX's
// (transforms.h); the non-holomorphic ops (Abs of a complex input,
// Conjugate, Real, Imag) have rules of their own, written as JAX transposes
// them. Integer inputs take the rule computed in their dtype, the gradient
// cast back to it (MLX); bool inputs have no gradient (zeros).
class UnaryPrimitive : public Primitive,
                       public std::enable_shared_from_this<UnaryPrimitive> {
 public:
  using Primitive::Primitive;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  // detail::<name()> (backend/common/*_ops.h).
  const char* elementwise_functor(const std::vector<Dtype>&) const override {
    return name();
  }
  FLUXION_DECLARE_RULES

 protected:
  // The output dtype for an input of dtype `in` (the ops cast the input
  // first, so for most primitives it is `in`).
  virtual Dtype output_dtype(Dtype in) const { return in; }
  // f'(x) built from public ops (so that rules of rules work); `out` is
  // f(x). std::nullopt means the derivative is zero wherever it exists:
  // step functions (floor, ceil, round, sign), predicates and
  // stop_gradient.
  virtual std::optional<array> derivative(const array& x,
                                          const array& out) const {
    return std::nullopt;
  }
  // This primitive on `x`: a new node sharing it (and its parameters).
  array apply(const array& x);
};

// NAME's output dtype is OUT, an expression of the input dtype `in`; the
// rest declares the rules NAME defines (none: a zero derivative).
#define FLUXION_UNARY_PRIMITIVE(NAME, OUT, ...) \
  FLUXION_ELEMENTWISE_PRIMITIVE(UnaryPrimitive, NAME, OUT, __VA_ARGS__)
// A smooth op: its derivative.
#define FLUXION_DERIVATIVE                                          \
 protected:                                                         \
  std::optional<array> derivative(const array& x, const array& out) \
      const override;
// A linear or non-holomorphic op: jvp and vjp of its own.
#define FLUXION_OWN_RULES                                           \
  std::vector<array> jvp(const std::vector<array>& primals,         \
                         const std::vector<array>& tangents,        \
                         const std::vector<int>& argnums) override; \
  std::vector<array> vjp(const std::vector<array>& primals,         \
                         const std::vector<array>& cotangents,      \
                         const std::vector<int>& argnums,           \
                         const std::vector<array>& outputs) override;

// The classes of the spec's primitives: the output dtype is the policy's
// (unary_output_dtype), the rules those RULES names.
#define FLUXION_UNARY_RULES_derivative FLUXION_DERIVATIVE
#define FLUXION_UNARY_RULES_own FLUXION_OWN_RULES
#define FLUXION_UNARY_RULES_none
#define FLUXION_UNARY_CLASS(A, CLASS, NAME, POLICY, KERNEL, TYPES, RULES, ...) \
  FLUXION_UNARY_PRIMITIVE(CLASS, unary_output_dtype(UnaryPolicy::POLICY, in),  \
                          FLUXION_UNARY_RULES_##RULES)
FLUXION_UNARY_SPEC(FLUXION_UNARY_CLASS, _)
#undef FLUXION_UNARY_CLASS
#undef FLUXION_UNARY_RULES_derivative
#undef FLUXION_UNARY_RULES_own
#undef FLUXION_UNARY_RULES_none

// Unary primitives outside the spec: a view, and a copy whose GPU kernel
// is the copy kernel's.
FLUXION_UNARY_PRIMITIVE(StopGradient, in, FLUXION_DECLARE_VIEW_EVAL)
FLUXION_UNARY_PRIMITIVE(Copy, in, FLUXION_OWN_RULES)
#undef FLUXION_DERIVATIVE
#undef FLUXION_OWN_RULES
#undef FLUXION_UNARY_PRIMITIVE

}  // namespace fluxion
