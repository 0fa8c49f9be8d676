#include "fluxion/ops/binary.h"

#include <optional>
#include <string>

#include "fluxion/compile.h"
#include "fluxion/eager.h"
#include "fluxion/ops/common.h"
#include "fluxion/transforms.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

namespace {

// Under a shapeless compile trace: each operand cast and broadcast against
// the other, so that a replay recomputes the shape from both (shape.h,
// BroadcastAxes). Out of line: make_binary's hot path stays as small as it
// was.
[[gnu::noinline, gnu::cold]] std::vector<array> shapeless_operands(
    const array& a, const array& b, Dtype compute, const Shape& shape,
    Stream st) {
  auto x = astype(a, compute, st);
  auto y = astype(b, compute, st);
  auto bx = detail::broadcast_against(x, {y}, shape, 0, st);
  auto by = detail::broadcast_against(y, {x}, shape, 0, st);
  return {std::move(bx), std::move(by)};
}

// Cast both inputs to `compute`, broadcast them, and build the node with
// the elementwise node factory (fluxion/eager.h: small and computed, it is
// computed at once).
template <typename P, typename... Args>
array make_binary(const array& a, const array& b, Dtype compute, Dtype out,
                  const char* name, StreamOrDevice s, Args... args) {
  auto st = to_stream(s);
  const bool same_shape = a.shape() == b.shape();
  auto shape =
      same_shape ? a.shape() : broadcast_shapes(a.shape(), b.shape(), name);
  if (!same_shape && detail::in_shapeless_trace()) [[unlikely]] {
    return array(std::move(shape), out, std::make_shared<P>(st, args...),
                 shapeless_operands(a, b, compute, shape, st));
  }
  // An operand that needs no cast or broadcast is used as it is: no handle
  // copies (atomic counts) on the hottest path of all.
  std::optional<array> xa, yb;
  if (a.dtype() != compute || (!same_shape && a.shape() != shape)) {
    xa = detail::binary_operand(astype(a, compute, st), shape, st);
  }
  if (b.dtype() != compute || (!same_shape && b.shape() != shape)) {
    yb = detail::binary_operand(astype(b, compute, st), shape, st);
  }
  std::vector<array> inputs;  // not an initializer_list: that would copy
  inputs.reserve(2);
  inputs.push_back(xa ? std::move(*xa) : a);
  inputs.push_back(yb ? std::move(*yb) : b);
  return detail::elementwise_node(std::move(shape), out,
                                  detail::node_primitive<P>(st, args...),
                                  std::move(inputs));
}

void no_complex(const array& a, const array& b, const char* name) {
  if (is_complex(a.dtype()) || is_complex(b.dtype())) {
    throw std::invalid_argument(std::string("[") + name +
                                "] Not supported for complex64 inputs.");
  }
}

// The op function of a binary primitive P of the spec, by its policy
// (elementwise_spec.h says what each accepts and returns): the policy's
// checks, the compute dtype, then make_binary.
template <typename P, BinaryPolicy Policy>
array spec_binary(const array& a, const array& b, const char* name,
                  StreamOrDevice s) {
  if constexpr (Policy == BinaryPolicy::logical) {
    return make_binary<P>(a, b, bool_, bool_, name, s);
  } else {
    if constexpr (Policy == BinaryPolicy::real ||
                  Policy == BinaryPolicy::real_inexact) {
      no_complex(a, b, name);
    }
    if constexpr (Policy == BinaryPolicy::bitwise) {
      if (is_inexact(a.dtype()) || is_inexact(b.dtype())) {
        throw std::invalid_argument(
            std::string("[") + name +
            "] Only integer and boolean types are supported; got " +
            dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) + ".");
      }
    }
    Dtype t = promote_types(a.dtype(), b.dtype());
    if constexpr (Policy == BinaryPolicy::inexact ||
                  Policy == BinaryPolicy::real_inexact) {
      t = at_least_float(t);
    }
    return make_binary<P>(a, b, t, binary_output_dtype(Policy, t), name, s);
  }
}

}  // namespace

// The op functions of the spec's entries (elementwise_spec.h).
#define FLUXION_BINARY_OP_DEF(A, CLASS, NAME, POLICY, ...)                \
  FLUXION_BINARY_IF_OP(POLICY)(                                           \
      array NAME(const array& a, const array& b, StreamOrDevice s) {      \
        return spec_binary<CLASS, BinaryPolicy::POLICY>(a, b, #NAME, s);  \
      })
FLUXION_BINARY_SPEC(FLUXION_BINARY_OP_DEF, _)
#undef FLUXION_BINARY_OP_DEF

// The spec's ops written by hand (policy custom).

array subtract(const array& a, const array& b, StreamOrDevice s) {
  if (a.dtype() == bool_ && b.dtype() == bool_) {
    throw std::invalid_argument(
        "[subtract] Not supported for two bool inputs; use logical_xor or "
        "not_equal instead.");
  }
  return spec_binary<Subtract, BinaryPolicy::promote>(a, b, "subtract", s);
}

std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s) {
  no_complex(a, b, "divmod");
  return {stop_gradient(floor_divide(a, b, s), s),
          stop_gradient(remainder(a, b, s), s)};
}

array operator-(const array& a) { return negative(a); }
array operator!(const array& a) { return logical_not(a); }
array operator~(const array& a) { return bitwise_invert(a); }
array bitwise_invert(const array& a, StreamOrDevice s) {
  if (is_inexact(a.dtype())) {
    throw std::invalid_argument(
        std::string("[bitwise_invert] Only integer and boolean types are "
                    "supported; got ") +
        dtype_name(a.dtype()) + ".");
  }
  if (a.dtype() == bool_) {
    return logical_not(a, s);
  }
  // ~x == x ^ all-ones, for signed and unsigned alike.
  return bitwise_xor(a, array(-1, a.dtype()), s);
}

// --- transformation rules ---

namespace {

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

array BinaryPrimitive::apply(const array& a, const array& b) {
  std::vector<array> inputs;
  inputs.reserve(2);
  inputs.push_back(a);
  inputs.push_back(b);
  return array(a.shape(), output_dtype(a.dtype()), shared_from_this(),
               std::move(inputs));
}

std::vector<array> BinaryPrimitive::jvp(const std::vector<array>& primals,
                                        const std::vector<array>& tangents,
                                        const std::vector<int>& argnums) {
  const auto& a = primals[0];
  const auto& b = primals[1];
  auto s = stream();
  auto out = apply(a, b);
  std::optional<array> total;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (!differentiable(primals[argnums[i]])) {
      continue;
    }
    auto d = partial(argnums[i], a, b, out);
    if (!d) {
      continue;
    }
    auto term = multiply(tangents[i], *d, s);
    total = total ? add(*total, term, s) : term;
  }
  if (total) {
    return {*total};
  }
  // No derivative (comparisons, bitwise ops, integer operands): zeros, in
  // the tangents' dtype when the output is not inexact (a comparison's
  // tangent is a float zero, not a bool).
  Dtype t = is_inexact(out.dtype()) || tangents.empty() ? out.dtype()
                                                         : tangents[0].dtype();
  return {zeros(out.shape(), t, s)};
}

std::vector<array> BinaryPrimitive::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>& outputs) {
  std::vector<array> vjps;
  for (int arg : argnums) {
    const auto& x = primals[arg];
    std::optional<array> d;
    if (differentiable(x)) {
      d = partial(arg, primals[0], primals[1], outputs[0]);
    }
    vjps.push_back(d ? in_dtype_of(multiply(cotangents[0], *d, stream()), x,
                                   stream())
                     : zeros_like(x, stream()));
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> BinaryPrimitive::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto [in, ax] = rules::align_mapped_axes(inputs, axes, stream());
  return {{apply(in[0], in[1])}, {ax}};
}

// Linear ops.

std::vector<array> Add::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>& argnums) {
  if (!differentiable(primals[0])) {
    return {zeros_like(primals[0], stream())};
  }
  return {argnums.size() == 1 ? tangents[0]
                              : add(tangents[0], tangents[1], stream())};
}
std::vector<array> Add::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>& argnums,
                            const std::vector<array>& outputs) {
  std::vector<array> vjps;
  for (int arg : argnums) {
    vjps.push_back(differentiable(primals[arg])
                       ? cotangents[0]
                       : zeros_like(primals[arg], stream()));
  }
  return vjps;
}

std::vector<array> Subtract::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  auto s = stream();
  if (!differentiable(primals[0])) {
    return {zeros_like(primals[0], s)};
  }
  if (argnums.size() == 2) {
    return {subtract(tangents[0], tangents[1], s)};
  }
  return {argnums[0] == 0 ? tangents[0] : negative(tangents[0], s)};
}
std::vector<array> Subtract::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs) {
  std::vector<array> vjps;
  for (int arg : argnums) {
    if (!differentiable(primals[arg])) {
      vjps.push_back(zeros_like(primals[arg], stream()));
    } else {
      vjps.push_back(arg == 0 ? cotangents[0]
                              : negative(cotangents[0], stream()));
    }
  }
  return vjps;
}

// Partial derivatives.

std::optional<array> Multiply::partial(int arg, const array& a, const array& b,
                                       const array& out) const {
  return arg == 0 ? b : a;
}

std::optional<array> Divide::partial(int arg, const array& a, const array& b,
                                     const array& out) const {
  auto s = stream();
  if (arg == 0) {
    return reciprocal(b, s);
  }
  return negative(divide(out, b, s), s);  // -a / b^2
}

std::optional<array> Remainder::partial(int arg, const array& a, const array& b,
                                        const array& out) const {
  // a % b = a - b * floor(a / b), and floor's derivative is zero (MLX).
  auto s = stream();
  if (arg == 0) {
    return ones_like(a, s);
  }
  return negative(floor(divide(a, b, s), s), s);
}

std::optional<array> Power::partial(int arg, const array& a, const array& b,
                                    const array& out) const {
  // As JAX. Each special case is masked twice: where() picks the limit,
  // and the other branch is computed from a safe value so that it holds no
  // inf or nan that second derivatives (0 * inf) would pick up.
  auto s = stream();
  if (arg == 0) {
    // b a^(b-1), and 0 for b = 0 (a^0 is constant even at a = 0, where
    // b a^(b-1) would be 0 * inf).
    auto b_zero = equal(b, cst(0, b), s);
    auto safe_b = where(b_zero, cst(1, b), b, s);
    auto d = multiply(safe_b, power(a, subtract(safe_b, cst(1, b), s), s), s);
    return where(b_zero, cst(0, a), d, s);
  }
  // log(a) a^b, and 0 for a = 0 (0^b is constant for b > 0). For a < 0
  // and a real dtype log(a) is nan, as in JAX: a^b is not real-analytic
  // in b there. Only computed when b's gradient is asked for.
  auto a_zero = equal(a, cst(0, a), s);
  auto safe_a = where(a_zero, cst(1, a), a, s);
  return where(a_zero, cst(0, a), multiply(log(safe_a, s), out, s), s);
}

// Ties go to the second operand, as in MLX (JAX splits them evenly): the
// masks are a > b / a <= b for maximum and a < b / a >= b for minimum.
std::optional<array> Maximum::partial(int arg, const array& a, const array& b,
                                      const array& out) const {
  auto s = stream();
  auto mask = arg == 0 ? greater(a, b, s) : less_equal(a, b, s);
  return astype(mask, a.dtype(), s);
}
std::optional<array> Minimum::partial(int arg, const array& a, const array& b,
                                      const array& out) const {
  auto s = stream();
  auto mask = arg == 0 ? less(a, b, s) : greater_equal(a, b, s);
  return astype(mask, a.dtype(), s);
}

std::optional<array> ArcTan2::partial(int arg, const array& a, const array& b,
                                      const array& out) const {
  // atan2(a, b): (b, -a) / (a^2 + b^2)
  auto s = stream();
  auto r = add(square(a, s), square(b, s), s);
  return arg == 0 ? divide(b, r, s) : negative(divide(a, r, s), s);
}

std::optional<array> LogAddExp::partial(int arg, const array& a, const array& b,
                                        const array& out) const {
  // exp(a - out) = sigmoid(a - b). Equal infinite operands would give
  // inf - inf = nan; their limit along a = b is 1/2, which sigmoid(0)
  // gives (and the difference is replaced before it is formed, so second
  // derivatives see no nan either).
  auto s = stream();
  auto same = equal(a, b, s);
  auto d = arg == 0 ? subtract(a, b, s) : subtract(b, a, s);
  return sigmoid(where(same, cst(0, d), d, s), s);
}

// --- comparisons of whole arrays ---

namespace {

array isclose_impl(const array& a, const array& b, double rtol, double atol,
                   bool equal_nan, const char* name, StreamOrDevice s) {
  broadcast_shapes(a.shape(), b.shape(), name);
  // |a - b| <= atol + rtol * |b|, in at least float32: in a half type the
  // default atol (1e-8) would round to 0.
  Dtype t = promote_types(a.dtype(), b.dtype());
  t = is_complex(t) || t == float64 ? t : float32;
  auto x = astype(a, t, s);
  auto y = astype(b, t, s);
  auto ay = abs(y, s);
  auto rhs =
      add(array(atol, ay.dtype()), multiply(array(rtol, ay.dtype()), ay, s), s);
  auto out = less_equal(abs(subtract(x, y, s), s), rhs, s);
  // An infinite b makes the tolerance infinite: only equal values are close
  // then (as in NumPy), and inf == inf is close although inf - inf is nan.
  out = logical_or(logical_and(out, isfinite(y, s), s), equal(x, y, s), s);
  if (equal_nan) {
    out = logical_or(out, logical_and(isnan(x, s), isnan(y, s), s), s);
  }
  return out;
}

}  // namespace

array isclose(const array& a, const array& b, double rtol, double atol,
              bool equal_nan, StreamOrDevice s) {
  return isclose_impl(a, b, rtol, atol, equal_nan, "isclose", s);
}

array allclose(const array& a, const array& b, double rtol, double atol,
               bool equal_nan, StreamOrDevice s) {
  return all(isclose_impl(a, b, rtol, atol, equal_nan, "allclose", s), false,
             s);
}

array array_equal(const array& a, const array& b, bool equal_nan,
                  StreamOrDevice s) {
  if (a.shape() != b.shape()) {
    return array(false);
  }
  auto st = to_stream(s);
  Dtype t = promote_types(a.dtype(), b.dtype());
  auto eq = array(a.shape(), bool_, std::make_shared<Equal>(st, equal_nan),
                  {astype(a, t, st), astype(b, t, st)});
  return all(eq, false, s);
}

}  // namespace fluxion
