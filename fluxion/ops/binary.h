// Elementwise binary ops (with NumPy broadcasting and MLX type promotion),
// their primitives, and the C++ operators.
#pragma once

#include <type_traits>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/primitive.h"

namespace fluxion {

array add(const array& a, const array& b, StreamOrDevice s = {});
array subtract(const array& a, const array& b, StreamOrDevice s = {});
array multiply(const array& a, const array& b, StreamOrDevice s = {});
// True division: integers give float32.
array divide(const array& a, const array& b, StreamOrDevice s = {});
array floor_divide(const array& a, const array& b, StreamOrDevice s = {});
// Python's modulo: the result takes the sign of `b`.
array remainder(const array& a, const array& b, StreamOrDevice s = {});
array power(const array& a, const array& b, StreamOrDevice s = {});
array maximum(const array& a, const array& b, StreamOrDevice s = {});
array minimum(const array& a, const array& b, StreamOrDevice s = {});
array arctan2(const array& a, const array& b, StreamOrDevice s = {});
array logaddexp(const array& a, const array& b, StreamOrDevice s = {});
array equal(const array& a, const array& b, StreamOrDevice s = {});
array not_equal(const array& a, const array& b, StreamOrDevice s = {});
array less(const array& a, const array& b, StreamOrDevice s = {});
array less_equal(const array& a, const array& b, StreamOrDevice s = {});
array greater(const array& a, const array& b, StreamOrDevice s = {});
array greater_equal(const array& a, const array& b, StreamOrDevice s = {});
array logical_and(const array& a, const array& b, StreamOrDevice s = {});
array logical_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_and(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_xor(const array& a, const array& b, StreamOrDevice s = {});
array left_shift(const array& a, const array& b, StreamOrDevice s = {});
array right_shift(const array& a, const array& b, StreamOrDevice s = {});

// A C++ scalar as a weakly typed operand next to `like`: `x * 2` keeps x's
// dtype, `int_array * 2.5` is float32 (Python-scalar semantics).
template <typename T>
array weak_scalar(T v, const array& like) {
  Dtype kind = std::is_same_v<T, bool>             ? bool_
               : std::is_same_v<T, complex64_t>    ? complex64
               : std::is_floating_point_v<T>       ? float32
                                                   : int32;
  return array(v, promote_with_scalar(like.dtype(), kind));
}

#define FLUXION_BINARY_OPERATOR(OP, FN)                             \
  inline array operator OP(const array& a, const array& b) {        \
    return FN(a, b);                                                \
  }                                                                 \
  template <typename T, typename = std::enable_if_t<                \
                            std::is_arithmetic_v<T> ||              \
                            std::is_same_v<T, complex64_t>>>        \
  array operator OP(const array& a, T b) {                          \
    return FN(a, weak_scalar(b, a));                                \
  }                                                                 \
  template <typename T, typename = std::enable_if_t<                \
                            std::is_arithmetic_v<T> ||              \
                            std::is_same_v<T, complex64_t>>>        \
  array operator OP(T a, const array& b) {                          \
    return FN(weak_scalar(a, b), b);                                \
  }
FLUXION_BINARY_OPERATOR(+, add)
FLUXION_BINARY_OPERATOR(-, subtract)
FLUXION_BINARY_OPERATOR(*, multiply)
FLUXION_BINARY_OPERATOR(/, divide)
FLUXION_BINARY_OPERATOR(%, remainder)
FLUXION_BINARY_OPERATOR(==, equal)
FLUXION_BINARY_OPERATOR(!=, not_equal)
FLUXION_BINARY_OPERATOR(<, less)
FLUXION_BINARY_OPERATOR(<=, less_equal)
FLUXION_BINARY_OPERATOR(>, greater)
FLUXION_BINARY_OPERATOR(>=, greater_equal)
FLUXION_BINARY_OPERATOR(&&, logical_and)
FLUXION_BINARY_OPERATOR(||, logical_or)
FLUXION_BINARY_OPERATOR(&, bitwise_and)
FLUXION_BINARY_OPERATOR(|, bitwise_or)
FLUXION_BINARY_OPERATOR(^, bitwise_xor)
FLUXION_BINARY_OPERATOR(<<, left_shift)
FLUXION_BINARY_OPERATOR(>>, right_shift)
#undef FLUXION_BINARY_OPERATOR

array operator-(const array& a);
array operator!(const array& a);
array operator~(const array& a);

// Base for two-input elementwise primitives: both inputs already have the
// output's shape (the op broadcasts them first).
class BinaryPrimitive : public Primitive {
 public:
  using Primitive::Primitive;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
};

#define FLUXION_BINARY_PRIMITIVE(NAME)                    \
  class NAME : public BinaryPrimitive {                   \
   public:                                                \
    using BinaryPrimitive::BinaryPrimitive;               \
    void eval_cpu(const std::vector<array>& inputs,       \
                  std::vector<array>& outputs) override;  \
    const char* name() const override { return #NAME; }   \
  };
FLUXION_BINARY_PRIMITIVE(Add)
FLUXION_BINARY_PRIMITIVE(Subtract)
FLUXION_BINARY_PRIMITIVE(Multiply)
FLUXION_BINARY_PRIMITIVE(Divide)
FLUXION_BINARY_PRIMITIVE(FloorDivide)
FLUXION_BINARY_PRIMITIVE(Remainder)
FLUXION_BINARY_PRIMITIVE(Power)
FLUXION_BINARY_PRIMITIVE(Maximum)
FLUXION_BINARY_PRIMITIVE(Minimum)
FLUXION_BINARY_PRIMITIVE(ArcTan2)
FLUXION_BINARY_PRIMITIVE(LogAddExp)
FLUXION_BINARY_PRIMITIVE(NotEqual)
FLUXION_BINARY_PRIMITIVE(Less)
FLUXION_BINARY_PRIMITIVE(LessEqual)
FLUXION_BINARY_PRIMITIVE(Greater)
FLUXION_BINARY_PRIMITIVE(GreaterEqual)
FLUXION_BINARY_PRIMITIVE(LogicalAnd)
FLUXION_BINARY_PRIMITIVE(LogicalOr)
FLUXION_BINARY_PRIMITIVE(BitwiseAnd)
FLUXION_BINARY_PRIMITIVE(BitwiseOr)
FLUXION_BINARY_PRIMITIVE(BitwiseXor)
FLUXION_BINARY_PRIMITIVE(LeftShift)
FLUXION_BINARY_PRIMITIVE(RightShift)
#undef FLUXION_BINARY_PRIMITIVE

// Equality, optionally treating NaN == NaN (for array_equal(equal_nan)).
class Equal : public BinaryPrimitive {
 public:
  Equal(Stream s, bool equal_nan = false)
      : BinaryPrimitive(s), equal_nan_(equal_nan) {}
  void eval_cpu(const std::vector<array>& inputs,
                std::vector<array>& outputs) override;
  const char* name() const override {
    return equal_nan_ ? "NaNEqual" : "Equal";
  }
  bool is_equivalent(const Primitive& o) const override {
    return Primitive::is_equivalent(o) &&
           static_cast<const Equal&>(o).equal_nan_ == equal_nan_;
  }
  bool equal_nan() const { return equal_nan_; }

 private:
  bool equal_nan_;
};

}  // namespace fluxion
