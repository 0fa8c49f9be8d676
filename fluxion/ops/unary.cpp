#include "fluxion/ops/unary.h"

#include <cmath>
#include <string>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/misc.h"

namespace fluxion {

namespace {

template <typename P>
array make_unary(const array& a, Dtype out, StreamOrDevice s) {
  auto st = to_stream(s);
  return array(a.shape(), out, std::make_shared<P>(st), {a});
}

// Ops defined on real and complex inputs: ints and bools become float32.
template <typename P>
array inexact_unary(const array& a, StreamOrDevice s) {
  if (is_inexact(a.dtype())) {
    return make_unary<P>(a, a.dtype(), s);
  }
  return make_unary<P>(astype(a, float32, s), float32, s);
}

// Ops defined on reals only.
template <typename P>
array real_unary(const array& a, const char* op, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    throw std::invalid_argument(std::string("[") + op +
                                "] Not supported for complex64 inputs.");
  }
  return inexact_unary<P>(a, s);
}

}  // namespace

array abs(const array& a, StreamOrDevice s) {
  return make_unary<Abs>(a, is_complex(a.dtype()) ? float32 : a.dtype(), s);
}

array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) {
    throw std::invalid_argument(
        "[negative] Not supported for bool; use logical_not instead.");
  }
  return make_unary<Negative>(a, a.dtype(), s);
}

array sign(const array& a, StreamOrDevice s) {
  return make_unary<Sign>(a, a.dtype(), s);
}

array exp(const array& a, StreamOrDevice s) { return inexact_unary<Exp>(a, s); }
array expm1(const array& a, StreamOrDevice s) {
  return real_unary<Expm1>(a, "expm1", s);
}
array log(const array& a, StreamOrDevice s) { return inexact_unary<Log>(a, s); }
array log1p(const array& a, StreamOrDevice s) {
  return real_unary<Log1p>(a, "log1p", s);
}
array log2(const array& a, StreamOrDevice s) {
  return real_unary<Log2>(a, "log2", s);
}
array log10(const array& a, StreamOrDevice s) {
  return inexact_unary<Log10>(a, s);
}
array sqrt(const array& a, StreamOrDevice s) {
  return inexact_unary<Sqrt>(a, s);
}
array rsqrt(const array& a, StreamOrDevice s) {
  return inexact_unary<Rsqrt>(a, s);
}
array square(const array& a, StreamOrDevice s) {
  return make_unary<Square>(a, a.dtype() == bool_ ? bool_ : a.dtype(), s);
}
array reciprocal(const array& a, StreamOrDevice s) {
  return inexact_unary<Reciprocal>(a, s);
}
array sin(const array& a, StreamOrDevice s) { return inexact_unary<Sin>(a, s); }
array cos(const array& a, StreamOrDevice s) { return inexact_unary<Cos>(a, s); }
array tan(const array& a, StreamOrDevice s) { return inexact_unary<Tan>(a, s); }
array arcsin(const array& a, StreamOrDevice s) {
  return inexact_unary<ArcSin>(a, s);
}
array arccos(const array& a, StreamOrDevice s) {
  return inexact_unary<ArcCos>(a, s);
}
array arctan(const array& a, StreamOrDevice s) {
  return inexact_unary<ArcTan>(a, s);
}
array sinh(const array& a, StreamOrDevice s) {
  return inexact_unary<Sinh>(a, s);
}
array cosh(const array& a, StreamOrDevice s) {
  return inexact_unary<Cosh>(a, s);
}
array tanh(const array& a, StreamOrDevice s) {
  return inexact_unary<Tanh>(a, s);
}
array arcsinh(const array& a, StreamOrDevice s) {
  return inexact_unary<ArcSinh>(a, s);
}
array arccosh(const array& a, StreamOrDevice s) {
  return inexact_unary<ArcCosh>(a, s);
}
array arctanh(const array& a, StreamOrDevice s) {
  return inexact_unary<ArcTanh>(a, s);
}
array sigmoid(const array& a, StreamOrDevice s) {
  return inexact_unary<Sigmoid>(a, s);
}
array erf(const array& a, StreamOrDevice s) {
  return real_unary<Erf>(a, "erf", s);
}
array erfinv(const array& a, StreamOrDevice s) {
  return real_unary<ErfInv>(a, "erfinv", s);
}

array floor(const array& a, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    throw std::invalid_argument("[floor] Not supported for complex64 inputs.");
  }
  return make_unary<Floor>(a, a.dtype(), s);
}

array ceil(const array& a, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    throw std::invalid_argument("[ceil] Not supported for complex64 inputs.");
  }
  return make_unary<Ceil>(a, a.dtype(), s);
}

array round(const array& a, int decimals, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) {
    return a;  // integers are already round
  }
  if (decimals == 0) {
    return make_unary<Round>(a, a.dtype(), s);
  }
  auto scale = array(std::pow(10.0, decimals), a.dtype());
  return divide(make_unary<Round>(multiply(a, scale, s), a.dtype(), s), scale,
                s);
}

array logical_not(const array& a, StreamOrDevice s) {
  return make_unary<LogicalNot>(a, bool_, s);
}
array isnan(const array& a, StreamOrDevice s) {
  return make_unary<IsNan>(a, bool_, s);
}
array isinf(const array& a, StreamOrDevice s) {
  return make_unary<IsInf>(a, bool_, s);
}
array isfinite(const array& a, StreamOrDevice s) {
  return make_unary<IsFinite>(a, bool_, s);
}
array conjugate(const array& a, StreamOrDevice s) {
  return make_unary<Conjugate>(a, a.dtype(), s);
}
array real(const array& a, StreamOrDevice s) {
  return make_unary<Real>(a, is_complex(a.dtype()) ? float32 : a.dtype(), s);
}
array imag(const array& a, StreamOrDevice s) {
  return make_unary<Imag>(a, is_complex(a.dtype()) ? float32 : a.dtype(), s);
}
array stop_gradient(const array& a, StreamOrDevice s) {
  return make_unary<StopGradient>(a, a.dtype(), s);
}
array copy(const array& a, StreamOrDevice s) {
  return make_unary<Copy>(a, a.dtype(), s);
}

}  // namespace fluxion
