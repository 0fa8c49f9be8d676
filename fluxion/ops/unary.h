// Elementwise unary ops and their primitives.
#pragma once

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
array conjugate(const array& a, StreamOrDevice s = {});
array real(const array& a, StreamOrDevice s = {});
array imag(const array& a, StreamOrDevice s = {});
// Identity in the forward pass; blocks gradients.
array stop_gradient(const array& a, StreamOrDevice s = {});
// A new buffer with the same contents.
array copy(const array& a, StreamOrDevice s = {});

// Base for one-input elementwise primitives: the output has the input's
// shape, and vmap passes the mapped axis through.
class UnaryPrimitive : public Primitive {
 public:
  using Primitive::Primitive;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
};

#define FLUXION_UNARY_PRIMITIVE(NAME)                           \
  class NAME : public UnaryPrimitive {                          \
   public:                                                      \
    using UnaryPrimitive::UnaryPrimitive;                       \
    void eval_cpu(const std::vector<array>& inputs,             \
                  std::vector<array>& outputs) override;        \
    const char* name() const override { return #NAME; }        \
  };

FLUXION_UNARY_PRIMITIVE(Abs)
FLUXION_UNARY_PRIMITIVE(Negative)
FLUXION_UNARY_PRIMITIVE(Sign)
FLUXION_UNARY_PRIMITIVE(Exp)
FLUXION_UNARY_PRIMITIVE(Expm1)
FLUXION_UNARY_PRIMITIVE(Log)
FLUXION_UNARY_PRIMITIVE(Log1p)
FLUXION_UNARY_PRIMITIVE(Log2)
FLUXION_UNARY_PRIMITIVE(Log10)
FLUXION_UNARY_PRIMITIVE(Sqrt)
FLUXION_UNARY_PRIMITIVE(Rsqrt)
FLUXION_UNARY_PRIMITIVE(Square)
FLUXION_UNARY_PRIMITIVE(Reciprocal)
FLUXION_UNARY_PRIMITIVE(Sin)
FLUXION_UNARY_PRIMITIVE(Cos)
FLUXION_UNARY_PRIMITIVE(Tan)
FLUXION_UNARY_PRIMITIVE(ArcSin)
FLUXION_UNARY_PRIMITIVE(ArcCos)
FLUXION_UNARY_PRIMITIVE(ArcTan)
FLUXION_UNARY_PRIMITIVE(Sinh)
FLUXION_UNARY_PRIMITIVE(Cosh)
FLUXION_UNARY_PRIMITIVE(Tanh)
FLUXION_UNARY_PRIMITIVE(ArcSinh)
FLUXION_UNARY_PRIMITIVE(ArcCosh)
FLUXION_UNARY_PRIMITIVE(ArcTanh)
FLUXION_UNARY_PRIMITIVE(Sigmoid)
FLUXION_UNARY_PRIMITIVE(Erf)
FLUXION_UNARY_PRIMITIVE(ErfInv)
FLUXION_UNARY_PRIMITIVE(Floor)
FLUXION_UNARY_PRIMITIVE(Ceil)
FLUXION_UNARY_PRIMITIVE(Round)
FLUXION_UNARY_PRIMITIVE(LogicalNot)
FLUXION_UNARY_PRIMITIVE(IsNan)
FLUXION_UNARY_PRIMITIVE(IsInf)
FLUXION_UNARY_PRIMITIVE(IsFinite)
FLUXION_UNARY_PRIMITIVE(Conjugate)
FLUXION_UNARY_PRIMITIVE(Real)
FLUXION_UNARY_PRIMITIVE(Imag)
FLUXION_UNARY_PRIMITIVE(StopGradient)
FLUXION_UNARY_PRIMITIVE(Copy)
#undef FLUXION_UNARY_PRIMITIVE

}  // namespace fluxion
