// Elementwise binary ops (with NumPy broadcasting and MLX type promotion),
// their primitives, and the C++ operators.
#pragma once

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/ops/elementwise_spec.h"
#include "fluxion/primitive.h"

namespace fluxion {

// The ops of the binary spec (elementwise_spec.h: add, divide, equal,
// bitwise_and, ...), one per entry:
//   array NAME(const array& a, const array& b, StreamOrDevice s = {});
// divide is true division (integers give float32); remainder is Python's
// modulo (the sign of `b`).
#define FLUXION_BINARY_OP_DECL(A, CLASS, NAME, ...) \
  array NAME(const array& a, const array& b, StreamOrDevice s = {});
FLUXION_BINARY_SPEC(FLUXION_BINARY_OP_DECL, _)
#undef FLUXION_BINARY_OP_DECL
// ~a for integers and booleans (logical not).
array bitwise_invert(const array& a, StreamOrDevice s = {});

// A C++ scalar as a weakly typed operand next to `like`: `x * 2` keeps x's
// dtype, `int_array * 2.5` is float32 (Python-scalar semantics).
template <typename T>
array weak_scalar(T v, const array& like) {
  Dtype kind = std::is_same_v<T, bool>          ? bool_
               : std::is_same_v<T, complex64_t> ? complex64
               : std::is_floating_point_v<T>    ? float32
                                                : int32;
  return array(v, promote_with_scalar(like.dtype(), kind));
}

#define FLUXION_BINARY_OPERATOR(OP, FN)                                  \
  inline array operator OP(const array& a, const array& b) {             \
    return FN(a, b);                                                     \
  }                                                                      \
  template <typename T,                                                  \
            typename = std::enable_if_t<std::is_arithmetic_v<T> ||       \
                                        std::is_same_v<T, complex64_t>>> \
  array operator OP(const array& a, T b) {                               \
    return FN(a, weak_scalar(b, a));                                     \
  }                                                                      \
  template <typename T,                                                  \
            typename = std::enable_if_t<std::is_arithmetic_v<T> ||       \
                                        std::is_same_v<T, complex64_t>>> \
  array operator OP(T a, const array& b) {                               \
    return FN(weak_scalar(a, b), b);                                     \
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

// The dtype policies of the binary spec (elementwise_spec.h says what each
// accepts and returns).
enum class BinaryPolicy {
  promote,
  inexact,
  real,
  real_inexact,
  compare,
  logical,
  bitwise,
  custom
};

// Whether a primitive of `policy` gives bool (else the compute dtype).
constexpr bool binary_gives_bool(BinaryPolicy policy) {
  return policy == BinaryPolicy::compare || policy == BinaryPolicy::logical;
}

// The output dtype of a binary primitive of `policy` on operands of the
// compute dtype `in`.
constexpr Dtype binary_output_dtype(BinaryPolicy policy, Dtype in) {
  return binary_gives_bool(policy) ? bool_ : in;
}

// Base for two-input elementwise primitives: both inputs already have the
// output's shape (the op broadcasts them first; the Broadcast's rules sum
// cotangents back).
//
// The rules of a smooth op come from its partial derivatives: jvp is
// t_a * df/da + t_b * df/db, and the vjp for input i is ct * df/di (the
// holomorphic rule for complex inputs, JAX's convention, which the public
// vjp conjugates into MLX's: transforms.h). Integer inputs take the rule in
// their dtype, the gradient cast back to it (MLX: d(x * 10)/dx = 10); bool
// inputs have none (zeros). vmap aligns the operands' mapped axes.
class BinaryPrimitive : public Primitive,
                        public std::enable_shared_from_this<BinaryPrimitive> {
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
  // The output dtype for inputs of dtype `in`.
  virtual Dtype output_dtype(Dtype in) const { return in; }
  // df/d(input `arg`) at (a, b), built from public ops; `out` is f(a, b).
  // std::nullopt means zero wherever it exists: comparisons, logical and
  // bitwise ops, shifts and floor_divide are piecewise constant.
  virtual std::optional<array> partial(int arg, const array& a, const array& b,
                                       const array& out) const {
    return std::nullopt;
  }
  // This primitive on (a, b): a new node sharing it (and its parameters).
  array apply(const array& a, const array& b);
};

// NAME's output dtype is OUT, an expression of the input dtype `in`; the
// rest declares the rules NAME defines (none: zero derivatives).
#define FLUXION_BINARY_PRIMITIVE(NAME, OUT, ...) \
  FLUXION_ELEMENTWISE_PRIMITIVE(BinaryPrimitive, NAME, OUT, __VA_ARGS__)
// A smooth op: its partial derivatives.
#define FLUXION_PARTIAL                                                 \
 protected:                                                             \
  std::optional<array> partial(int arg, const array& a, const array& b, \
                               const array& out) const override;
// A linear op: jvp and vjp of its own.
#define FLUXION_OWN_RULES                                           \
  std::vector<array> jvp(const std::vector<array>& primals,         \
                         const std::vector<array>& tangents,        \
                         const std::vector<int>& argnums) override; \
  std::vector<array> vjp(const std::vector<array>& primals,         \
                         const std::vector<array>& cotangents,      \
                         const std::vector<int>& argnums,           \
                         const std::vector<array>& outputs) override;

// The classes of the spec's primitives (but FORM class): the output dtype is
// the policy's, the rules those RULES names.
#define FLUXION_BINARY_RULES_partial FLUXION_PARTIAL
#define FLUXION_BINARY_RULES_own FLUXION_OWN_RULES
#define FLUXION_BINARY_RULES_none
#define FLUXION_BINARY_CLASS(A, CLASS, NAME, POLICY, FORM, TYPES, RULES, ...) \
  FLUXION_BINARY_IF_CLASS(FORM)(FLUXION_BINARY_PRIMITIVE(                      \
      CLASS, binary_output_dtype(BinaryPolicy::POLICY, in),                   \
      FLUXION_BINARY_RULES_##RULES))
FLUXION_BINARY_SPEC(FLUXION_BINARY_CLASS, _)
#undef FLUXION_BINARY_CLASS
#undef FLUXION_BINARY_RULES_partial
#undef FLUXION_BINARY_RULES_own
#undef FLUXION_BINARY_RULES_none
#undef FLUXION_PARTIAL
#undef FLUXION_OWN_RULES
#undef FLUXION_BINARY_PRIMITIVE

// Python's divmod: (floor_divide(a, b), remainder(a, b)). MLX defines
// both outputs' derivatives as zero (remainder alone has 1 and
// -floor(a / b)), so the pair is returned through stop_gradient: the same
// two kernels a fused node would run, and no primitive of its own.
std::vector<array> divmod(const array& a, const array& b,
                          StreamOrDevice s = {});

// Equality, optionally treating NaN == NaN (for array_equal(equal_nan)).
// Piecewise constant: zero derivatives. The spec's entry of FORM class: its
// op function, registry entry and binding come from the spec, this class
// and its kernels are written by hand.
class Equal : public BinaryPrimitive {
 public:
  Equal(Stream s, bool equal_nan = false)
      : BinaryPrimitive(s), equal_nan_(equal_nan) {}
  FLUXION_DECLARE_EVAL
  const char* name() const override {
    return equal_nan_ ? "NaNEqual" : "Equal";
  }
  bool is_equivalent(const Primitive& o) const override {
    return Primitive::is_equivalent(o) &&
           static_cast<const Equal&>(o).equal_nan_ == equal_nan_;
  }
  bool equal_nan() const { return equal_nan_; }

 protected:
  Dtype output_dtype(Dtype) const override { return bool_; }

 private:
  bool equal_nan_;
};

// Comparisons of whole arrays (composed).
array isclose(const array& a, const array& b, double rtol = 1e-5,
              double atol = 1e-8, bool equal_nan = false,
              StreamOrDevice s = {});
// A scalar bool array: all(isclose(a, b)).
array allclose(const array& a, const array& b, double rtol = 1e-5,
               double atol = 1e-8, bool equal_nan = false,
               StreamOrDevice s = {});
// Same shape and equal values (dtypes may differ).
array array_equal(const array& a, const array& b, bool equal_nan = false,
                  StreamOrDevice s = {});

}  // namespace fluxion
