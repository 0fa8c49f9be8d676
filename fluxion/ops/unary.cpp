#include "fluxion/ops/unary.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "fluxion/eager.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/tracer_copy.h"

namespace fluxion {

namespace {

template <typename P>
array make_unary(const array& a, Dtype out, StreamOrDevice s) {
  return detail::elementwise_node(a.shape(), out,
                                  detail::node_primitive<P>(to_stream(s)), {a});
}

// The op function of a unary primitive P of the spec, by its policy
// (elementwise_spec.h says what each accepts and returns).
template <typename P, UnaryPolicy Policy>
array spec_unary(const array& a, const char* op, StreamOrDevice s) {
  if constexpr (Policy == UnaryPolicy::real ||
                Policy == UnaryPolicy::real_keep) {
    if (is_complex(a.dtype())) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] Not supported for complex64 inputs.");
    }
  }
  if constexpr (Policy == UnaryPolicy::inexact || Policy == UnaryPolicy::real) {
    // Ints and bools become float32.
    if (!is_inexact(a.dtype())) {
      return make_unary<P>(astype(a, float32, s), float32, s);
    }
  }
  return make_unary<P>(a, unary_output_dtype(Policy, a.dtype()), s);
}

}  // namespace

// The op functions of the spec's entries (elementwise_spec.h).
#define FLUXION_UNARY_OP_DEF(A, CLASS, NAME, POLICY, ...)         \
  FLUXION_UNARY_IF_OP(POLICY)(                                    \
      array NAME(const array& a, StreamOrDevice s) {              \
        return spec_unary<CLASS, UnaryPolicy::POLICY>(a, #NAME, s); \
      })
FLUXION_UNARY_SPEC(FLUXION_UNARY_OP_DEF, _)
#undef FLUXION_UNARY_OP_DEF

// The spec's ops written by hand (policy custom).

array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) {
    throw std::invalid_argument(
        "[negative] Not supported for bool; use logical_not instead.");
  }
  return make_unary<Negative>(a, a.dtype(), s);
}

array round(const array& a, int decimals, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) {
    if (decimals >= 0 || a.dtype() == bool_) {
      return a;  // integers are already round
    }
    // To a multiple of q = 10^-decimals, half to even, in exact integer
    // arithmetic: a = d q + r with 0 <= r < q rounds up when 2 r > q, or
    // 2 r == q and d is odd. (q past the type's range leaves 0.)
    int64_t q = 1;
    for (int i = 0; i < -decimals && q <= (int64_t{1} << 62) / 10; ++i) {
      q *= 10;
    }
    Dtype t = a.dtype();
    Dtype wide = is_unsigned(t) ? uint64 : int64;
    auto st = to_stream(s);
    array x = astype(a, wide, st);
    array qa = array(q, wide);
    array d = floor_divide(x, qa, st);
    array r = subtract(x, multiply(d, qa, st), st);
    array two_r = multiply(r, array(2, wide), st);
    array odd = not_equal(remainder(d, array(2, wide), st), array(0, wide), st);
    array up = logical_or(greater(two_r, qa, st),
                          logical_and(equal(two_r, qa, st), odd, st), st);
    array out = multiply(add(d, astype(up, wide, st), st), qa, st);
    return astype(out, t, st);
  }
  if (decimals == 0) {
    return make_unary<Round>(a, a.dtype(), s);
  }
  auto scale = array(std::pow(10.0, decimals), a.dtype());
  return divide(make_unary<Round>(multiply(a, scale, s), a.dtype(), s), scale,
                s);
}

namespace {

array signed_inf(const array& a, bool positive, const char* op,
                 StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    // As MLX: equal to (+-inf) + 0j.
    float inf = std::numeric_limits<float>::infinity();
    return equal(a, array(complex64_t{positive ? inf : -inf, 0.0f}), s);
  }
  if (!is_inexact(a.dtype())) {
    return full(a.shape(), false, bool_, s);
  }
  auto zero = array(0, a.dtype());
  return logical_and(isinf(a, s),
                     positive ? greater(a, zero, s) : less(a, zero, s), s);
}

// The multiplier is rounded in the result dtype, as MLX does.
array scale_float(const array& a, double factor, StreamOrDevice s) {
  Dtype t = is_inexact(a.dtype()) ? a.dtype() : float32;
  return multiply(astype(a, t, s), array(factor, t), s);
}

double finite_max(Dtype t) {
  switch (t) {
    case float16:
      return 65504.0;
    case bfloat16:
      return 3.3895313892515355e38;
    case float64:
      return std::numeric_limits<double>::max();
    default:
      return std::numeric_limits<float>::max();
  }
}

array nan_to_num_real(const array& a, double nan, double posinf, double neginf,
                      StreamOrDevice s) {
  Dtype t = a.dtype();
  auto out = where(isnan(a, s), array(nan, t), a, s);
  out = where(isposinf(a, s), array(posinf, t), out, s);
  return where(isneginf(a, s), array(neginf, t), out, s);
}

}  // namespace

array isposinf(const array& a, StreamOrDevice s) {
  return signed_inf(a, true, "isposinf", s);
}
array isneginf(const array& a, StreamOrDevice s) {
  return signed_inf(a, false, "isneginf", s);
}
array degrees(const array& a, StreamOrDevice s) {
  return scale_float(a, 180.0 / std::numbers::pi, s);
}
array radians(const array& a, StreamOrDevice s) {
  return scale_float(a, std::numbers::pi / 180.0, s);
}
array nan_to_num(const array& a, double nan, std::optional<double> posinf,
                 std::optional<double> neginf, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) {
    return a;
  }
  Dtype part = is_complex(a.dtype()) ? float32 : a.dtype();
  double hi = posinf.value_or(finite_max(part));
  double lo = neginf.value_or(-finite_max(part));
  if (!is_complex(a.dtype())) {
    return nan_to_num_real(a, nan, hi, lo, s);
  }
  auto re = nan_to_num_real(real(a, s), nan, hi, lo, s);
  auto im = nan_to_num_real(imag(a, s), nan, hi, lo, s);
  return add(
      astype(re, complex64, s),
      multiply(astype(im, complex64, s), array(complex64_t(0.0f, 1.0f)), s), s);
}
array stop_gradient(const array& a, StreamOrDevice s) {
  return make_unary<StopGradient>(a, a.dtype(), s);
}
array copy(const array& a, StreamOrDevice s) {
  return make_unary<Copy>(a, a.dtype(), s);
}

array detail::tracer_copy(const array& a, StreamOrDevice s) {
  return make_unary<TracerCopy>(a, a.dtype(), s);
}

// --- transformation rules ---

namespace {

// A scalar of `like`'s dtype, so that constants keep float64 (and complex)
// derivatives in their dtype.
array cst(double v, const array& like) { return array(v, like.dtype()); }

// Integer inputs take gradients as MLX gives them: the rule computed in
// their dtype (d(x * 10)/dx = 10, d(x + 10)/dx = 1). Only bool inputs, whose
// values have no neighbourhood at all, take zeros.
bool differentiable(const array& x) { return x.dtype() != bool_; }

// A vector-Jacobian product in the input's dtype: a partial computed in
// float for an integer input (remainder's -floor(a / b), power's log(a) a^b)
// is cast back, as MLX's graph casts it (the gradient of an integer input is
// an integer array).
array in_dtype_of(const array& g, const array& x, Stream s) {
  return g.dtype() == x.dtype() ? g : astype(g, x.dtype(), s);
}

}  // namespace

array UnaryPrimitive::apply(const array& x) {
  return array(x.shape(), output_dtype(x.dtype()), shared_from_this(), {x});
}

std::vector<array> UnaryPrimitive::jvp(const std::vector<array>& primals,
                                       const std::vector<array>& tangents,
                                       const std::vector<int>& argnums) {
  const auto& x = primals[0];
  std::optional<array> d;
  if (differentiable(x)) {
    d = derivative(x, apply(x));
  }
  if (!d) {
    // Predicates (isnan, ...) give zeros of the tangent's dtype, not bools.
    Dtype t = output_dtype(x.dtype());
    if (!is_inexact(t) && !tangents.empty()) {
      t = tangents[0].dtype();
    }
    return {zeros(x.shape(), t, stream())};
  }
  return {multiply(tangents[0], *d, stream())};
}

std::vector<array> UnaryPrimitive::vjp(const std::vector<array>& primals,
                                       const std::vector<array>& cotangents,
                                       const std::vector<int>& argnums,
                                       const std::vector<array>& outputs) {
  const auto& x = primals[0];
  std::optional<array> d;
  if (differentiable(x)) {
    d = derivative(x, outputs[0]);
  }
  if (!d) {
    return {zeros_like(x, stream())};
  }
  return {in_dtype_of(multiply(cotangents[0], *d, stream()), x, stream())};
}

std::pair<std::vector<array>, std::vector<int>> UnaryPrimitive::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{apply(inputs[0])}, axes};
}

// Derivatives. Where f(x) is at hand, reusing it saves work: exp, sqrt,
// tanh, sigmoid and erfinv are all cheap in terms of their output.

std::optional<array> Exp::derivative(const array& x, const array& out) const {
  return out;
}
std::optional<array> Expm1::derivative(const array& x, const array& out) const {
  // exp(x), which expm1 avoids computing: out + 1 is accurate enough there.
  return add(out, cst(1, out), stream());
}
std::optional<array> Log::derivative(const array& x, const array& out) const {
  return reciprocal(x, stream());
}
std::optional<array> Log1p::derivative(const array& x, const array& out) const {
  return reciprocal(add(x, cst(1, x), stream()), stream());
}
std::optional<array> Log2::derivative(const array& x, const array& out) const {
  return reciprocal(multiply(x, cst(std::numbers::ln2, x), stream()), stream());
}
std::optional<array> Log10::derivative(const array& x, const array& out) const {
  return reciprocal(multiply(x, cst(std::numbers::ln10, x), stream()),
                    stream());
}
std::optional<array> Sqrt::derivative(const array& x, const array& out) const {
  return divide(cst(0.5, out), out, stream());
}
std::optional<array> Rsqrt::derivative(const array& x, const array& out) const {
  // d x^(-1/2) = -x^(-3/2) / 2 = -out / (2x)
  return multiply(cst(-0.5, out), divide(out, x, stream()), stream());
}
std::optional<array> Square::derivative(const array& x,
                                        const array& out) const {
  return multiply(cst(2, x), x, stream());
}
std::optional<array> Reciprocal::derivative(const array& x,
                                            const array& out) const {
  return negative(square(out, stream()), stream());
}
std::optional<array> Sin::derivative(const array& x, const array& out) const {
  return cos(x, stream());
}
std::optional<array> Cos::derivative(const array& x, const array& out) const {
  return negative(sin(x, stream()), stream());
}
std::optional<array> Tan::derivative(const array& x, const array& out) const {
  // sec^2 = 1 + tan^2
  return add(cst(1, out), square(out, stream()), stream());
}
std::optional<array> ArcSin::derivative(const array& x,
                                        const array& out) const {
  return rsqrt(subtract(cst(1, x), square(x, stream()), stream()), stream());
}
std::optional<array> ArcCos::derivative(const array& x,
                                        const array& out) const {
  return negative(
      rsqrt(subtract(cst(1, x), square(x, stream()), stream()), stream()),
      stream());
}
std::optional<array> ArcTan::derivative(const array& x,
                                        const array& out) const {
  return reciprocal(add(cst(1, x), square(x, stream()), stream()), stream());
}
std::optional<array> Sinh::derivative(const array& x, const array& out) const {
  return cosh(x, stream());
}
std::optional<array> Cosh::derivative(const array& x, const array& out) const {
  return sinh(x, stream());
}
std::optional<array> Tanh::derivative(const array& x, const array& out) const {
  return subtract(cst(1, out), square(out, stream()), stream());
}
std::optional<array> ArcSinh::derivative(const array& x,
                                         const array& out) const {
  return rsqrt(add(square(x, stream()), cst(1, x), stream()), stream());
}
std::optional<array> ArcCosh::derivative(const array& x,
                                         const array& out) const {
  // MLX's x^2 - 1 (its test compares to NumPy's float32 1/sqrt(x**2 - 1)).
  // (x - 1)(x + 1) cancels less near x = 1, but in float32 the two differ
  // there by ~1e-5 relative, beyond that comparison's tolerance.
  auto s = stream();
  return rsqrt(subtract(square(x, s), cst(1, x), s), s);
}
std::optional<array> ArcTanh::derivative(const array& x,
                                         const array& out) const {
  auto s = stream();
  return reciprocal(
      multiply(subtract(cst(1, x), x, s), add(cst(1, x), x, s), s), s);
}
std::optional<array> Sigmoid::derivative(const array& x,
                                         const array& out) const {
  return multiply(out, subtract(cst(1, out), out, stream()), stream());
}
std::optional<array> Erf::derivative(const array& x, const array& out) const {
  // 2/sqrt(pi) exp(-x^2)
  auto s = stream();
  return multiply(cst(std::numbers::inv_sqrtpi * 2, x),
                  exp(negative(square(x, s), s), s), s);
}
std::optional<array> Erfc::derivative(const array& x, const array& out) const {
  // -2/sqrt(pi) exp(-x^2): erf's, negated.
  auto s = stream();
  return multiply(cst(-std::numbers::inv_sqrtpi * 2, x),
                  exp(negative(square(x, s), s), s), s);
}
std::optional<array> ErfInv::derivative(const array& x,
                                        const array& out) const {
  // The inverse function's derivative 1 / erf'(erfinv(x)).
  auto s = stream();
  return multiply(cst(std::sqrt(std::numbers::pi) / 2, out),
                  exp(square(out, s), s), s);
}

// Linear and non-holomorphic ops. For an R-linear map L of a complex input,
// JAX's vjp is ct -> conj(L*(conj(ct))) with L* the adjoint under
// Re(a conj(b)); it reduces to ct * f'(z) for holomorphic maps.

std::vector<array> Negative::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  return {differentiable(primals[0]) ? negative(tangents[0], stream())
                                     : zeros_like(primals[0], stream())};
}
std::vector<array> Negative::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs) {
  return jvp(primals, cotangents, argnums);  // self-adjoint
}

std::vector<array> Copy::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  return {differentiable(primals[0]) ? tangents[0]
                                     : zeros_like(primals[0], stream())};
}
std::vector<array> Copy::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  return jvp(primals, cotangents, argnums);
}

std::vector<array> Conjugate::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents,
                                  const std::vector<int>& argnums) {
  return {differentiable(primals[0]) ? conjugate(tangents[0], stream())
                                     : zeros_like(primals[0], stream())};
}
std::vector<array> Conjugate::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums,
                                  const std::vector<array>& outputs) {
  // L = conj is its own adjoint, so conj(L*(conj(ct))) = conj(ct).
  return jvp(primals, cotangents, argnums);
}

std::vector<array> Real::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  const auto& x = primals[0];
  if (!differentiable(x)) {
    return {zeros_like(x, stream())};
  }
  return {real(tangents[0], stream())};
}
std::vector<array> Real::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  // The real cotangent becomes the real part: ct + 0i.
  const auto& x = primals[0];
  if (!differentiable(x)) {
    return {zeros_like(x, stream())};
  }
  return {astype(cotangents[0], x.dtype(), stream())};
}

std::vector<array> Imag::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
  const auto& x = primals[0];
  if (!is_complex(x.dtype())) {
    // imag of a real array is constant zero.
    return {zeros(x.shape(), output_dtype(x.dtype()), stream())};
  }
  return {imag(tangents[0], stream())};
}
std::vector<array> Imag::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<array>& outputs) {
  const auto& x = primals[0];
  if (!is_complex(x.dtype())) {
    return {zeros_like(x, stream())};
  }
  // L(t) = Im t has adjoint c -> i c, so the vjp is conj(i ct) = -i ct
  // (JAX's convention; the public grad of imag(z) is conj(-i) = 1j).
  return {multiply(array(complex64_t{0.0f, -1.0f}), cotangents[0], stream())};
}

namespace {

// For complex z: conj(z) / |z|, and 0 at z = 0 (where |z| has no
// derivative; 0 is the subgradient JAX and sign() pick). The division uses
// a safe denominator so that no nan reaches second derivatives.
array conj_unit(const array& z, Stream s) {
  auto zero = equal(z, array(complex64_t{0.0f, 0.0f}), s);
  auto safe = where(zero, array(complex64_t{1.0f, 0.0f}), z, s);
  auto unit = divide(conjugate(safe, s), astype(abs(safe, s), z.dtype(), s), s);
  return where(zero, array(complex64_t{0.0f, 0.0f}), unit, s);
}

}  // namespace

std::vector<array> Abs::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>& argnums) {
  const auto& x = primals[0];
  auto s = stream();
  if (!differentiable(x)) {
    return {zeros_like(x, s)};
  }
  if (is_complex(x.dtype())) {
    // d|z| = Re(conj(z) dz) / |z|
    return {real(multiply(conj_unit(x, s), tangents[0], s), s)};
  }
  // sign(0) = 0: the subgradient at the kink (MLX, JAX).
  return {multiply(tangents[0], sign(x, s), s)};
}
std::vector<array> Abs::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>& argnums,
                            const std::vector<array>& outputs) {
  const auto& x = primals[0];
  auto s = stream();
  if (!differentiable(x)) {
    return {zeros_like(x, s)};
  }
  if (is_complex(x.dtype())) {
    // L(t) = Re(u t) with u = conj(z)/|z|: L*(c) = conj(u) c, so the vjp
    // is conj(conj(u) ct) = u ct (JAX: grad(abs)(z) = conj(z)/|z|). This
    // must agree with the transposes of the linear complex rules (fft,
    // real, imag, astype) for real losses of complex intermediates to get
    // right gradients; MLX's ct * z/|z| would not with ours.
    return {multiply(conj_unit(x, s), cotangents[0], s)};
  }
  return {in_dtype_of(multiply(cotangents[0], sign(x, s), s), x, s)};
}

}  // namespace fluxion
