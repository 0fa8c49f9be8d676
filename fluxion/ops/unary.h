// Elementwise unary ops and their primitives.
#pragma once

#include <memory>
#include <optional>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

array abs(const array& a, StreamOrDevice s = {});
array negative(const array& a, StreamOrDevice s = {});
array sign(const array& a, StreamOrDevice s = {});
array exp(const array& a, StreamOrDevice s = {});
array expm1(const array& a, StreamOrDevice s = {});
array log(const array& a, StreamOrDevice s = {});
array log1p(const array& a, StreamOrDevice s = {});
array log2(const array& a, StreamOrDevice s = {});
array log10(const array& a, StreamOrDevice s = {});
array sqrt(const array& a, StreamOrDevice s = {});
array rsqrt(const array& a, StreamOrDevice s = {});
array square(const array& a, StreamOrDevice s = {});
array reciprocal(const array& a, StreamOrDevice s = {});
array sin(const array& a, StreamOrDevice s = {});
array cos(const array& a, StreamOrDevice s = {});
array tan(const array& a, StreamOrDevice s = {});
array arcsin(const array& a, StreamOrDevice s = {});
array arccos(const array& a, StreamOrDevice s = {});
array arctan(const array& a, StreamOrDevice s = {});
array sinh(const array& a, StreamOrDevice s = {});
array cosh(const array& a, StreamOrDevice s = {});
array tanh(const array& a, StreamOrDevice s = {});
array arcsinh(const array& a, StreamOrDevice s = {});
array arccosh(const array& a, StreamOrDevice s = {});
array arctanh(const array& a, StreamOrDevice s = {});
array sigmoid(const array& a, StreamOrDevice s = {});
array erf(const array& a, StreamOrDevice s = {});
array erfinv(const array& a, StreamOrDevice s = {});
array floor(const array& a, StreamOrDevice s = {});
array ceil(const array& a, StreamOrDevice s = {});
// Round half to even to `decimals` places.
array round(const array& a, int decimals = 0, StreamOrDevice s = {});
array logical_not(const array& a, StreamOrDevice s = {});
array isnan(const array& a, StreamOrDevice s = {});
array isinf(const array& a, StreamOrDevice s = {});
array isfinite(const array& a, StreamOrDevice s = {});
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
array conjugate(const array& a, StreamOrDevice s = {});
array real(const array& a, StreamOrDevice s = {});
array imag(const array& a, StreamOrDevice s = {});
// Identity in the forward pass; blocks gradients.
array stop_gradient(const array& a, StreamOrDevice s = {});
// A new buffer with the same contents.
array copy(const array& a, StreamOrDevice s = {});

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

FLUXION_UNARY_PRIMITIVE(Abs, is_complex(in) ? float32 : in, FLUXION_OWN_RULES)
FLUXION_UNARY_PRIMITIVE(Negative, in, FLUXION_OWN_RULES)
FLUXION_UNARY_PRIMITIVE(Sign, in)
FLUXION_UNARY_PRIMITIVE(Exp, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Expm1, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Log, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Log1p, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Log2, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Log10, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Sqrt, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Rsqrt, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Square, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Reciprocal, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Sin, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Cos, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Tan, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(ArcSin, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(ArcCos, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(ArcTan, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Sinh, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Cosh, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Tanh, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(ArcSinh, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(ArcCosh, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(ArcTanh, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Sigmoid, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Erf, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(ErfInv, in, FLUXION_DERIVATIVE)
FLUXION_UNARY_PRIMITIVE(Floor, in)
FLUXION_UNARY_PRIMITIVE(Ceil, in)
FLUXION_UNARY_PRIMITIVE(Round, in)
FLUXION_UNARY_PRIMITIVE(LogicalNot, bool_)
FLUXION_UNARY_PRIMITIVE(IsNan, bool_)
FLUXION_UNARY_PRIMITIVE(IsInf, bool_)
FLUXION_UNARY_PRIMITIVE(IsFinite, bool_)
FLUXION_UNARY_PRIMITIVE(Conjugate, in, FLUXION_OWN_RULES)
FLUXION_UNARY_PRIMITIVE(Real, is_complex(in) ? float32 : in, FLUXION_OWN_RULES)
FLUXION_UNARY_PRIMITIVE(Imag, is_complex(in) ? float32 : in, FLUXION_OWN_RULES)
FLUXION_UNARY_PRIMITIVE(StopGradient, in, FLUXION_DECLARE_VIEW_EVAL)
FLUXION_UNARY_PRIMITIVE(Copy, in, FLUXION_OWN_RULES)
#undef FLUXION_DERIVATIVE
#undef FLUXION_OWN_RULES
#undef FLUXION_UNARY_PRIMITIVE

}  // namespace fluxion
