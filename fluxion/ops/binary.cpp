#include "fluxion/ops/binary.h"

#include <string>

#include "fluxion/ops/common.h"
#include "fluxion/ops/misc.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"

namespace fluxion {

namespace {

// Cast both inputs to `compute`, broadcast them, and build the node.
template <typename P, typename... Args>
array make_binary(const array& a, const array& b, Dtype compute, Dtype out,
                  const char* name, StreamOrDevice s, Args... args) {
  auto st = to_stream(s);
  auto shape = broadcast_shapes(a.shape(), b.shape(), name);
  auto x = broadcast_to(astype(a, compute, st), shape, st);
  auto y = broadcast_to(astype(b, compute, st), shape, st);
  std::vector<array> inputs;  // not an initializer_list: that would copy
  inputs.reserve(2);
  inputs.push_back(std::move(x));
  inputs.push_back(std::move(y));
  return array(std::move(shape), out, std::make_shared<P>(st, args...),
               std::move(inputs));
}

template <typename P>
array arith(const array& a, const array& b, const char* name,
            StreamOrDevice s) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  return make_binary<P>(a, b, t, t, name, s);
}

template <typename P>
array compare(const array& a, const array& b, const char* name,
              StreamOrDevice s) {
  return make_binary<P>(a, b, promote_types(a.dtype(), b.dtype()), bool_, name,
                        s);
}

void no_complex(const array& a, const array& b, const char* name) {
  if (is_complex(a.dtype()) || is_complex(b.dtype())) {
    throw std::invalid_argument(std::string("[") + name +
                                "] Not supported for complex64 inputs.");
  }
}

template <typename P>
array bitwise(const array& a, const array& b, const char* name,
              StreamOrDevice s) {
  if (is_inexact(a.dtype()) || is_inexact(b.dtype())) {
    throw std::invalid_argument(
        std::string("[") + name +
        "] Only integer and boolean types are supported; got " +
        dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) + ".");
  }
  return arith<P>(a, b, name, s);
}

}  // namespace

array add(const array& a, const array& b, StreamOrDevice s) {
  return arith<Add>(a, b, "add", s);
}

array subtract(const array& a, const array& b, StreamOrDevice s) {
  if (a.dtype() == bool_ && b.dtype() == bool_) {
    throw std::invalid_argument(
        "[subtract] Not supported for two bool inputs; use logical_xor or "
        "not_equal instead.");
  }
  return arith<Subtract>(a, b, "subtract", s);
}

array multiply(const array& a, const array& b, StreamOrDevice s) {
  return arith<Multiply>(a, b, "multiply", s);
}

array divide(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = at_least_float(promote_types(a.dtype(), b.dtype()));
  return make_binary<Divide>(a, b, t, t, "divide", s);
}

array floor_divide(const array& a, const array& b, StreamOrDevice s) {
  no_complex(a, b, "floor_divide");
  return arith<FloorDivide>(a, b, "floor_divide", s);
}

array remainder(const array& a, const array& b, StreamOrDevice s) {
  no_complex(a, b, "remainder");
  return arith<Remainder>(a, b, "remainder", s);
}

array power(const array& a, const array& b, StreamOrDevice s) {
  return arith<Power>(a, b, "power", s);
}

array maximum(const array& a, const array& b, StreamOrDevice s) {
  return arith<Maximum>(a, b, "maximum", s);
}

array minimum(const array& a, const array& b, StreamOrDevice s) {
  return arith<Minimum>(a, b, "minimum", s);
}

array arctan2(const array& a, const array& b, StreamOrDevice s) {
  no_complex(a, b, "arctan2");
  Dtype t = at_least_float(promote_types(a.dtype(), b.dtype()));
  return make_binary<ArcTan2>(a, b, t, t, "arctan2", s);
}

array logaddexp(const array& a, const array& b, StreamOrDevice s) {
  no_complex(a, b, "logaddexp");
  Dtype t = at_least_float(promote_types(a.dtype(), b.dtype()));
  return make_binary<LogAddExp>(a, b, t, t, "logaddexp", s);
}

array equal(const array& a, const array& b, StreamOrDevice s) {
  return compare<Equal>(a, b, "equal", s);
}
array not_equal(const array& a, const array& b, StreamOrDevice s) {
  return compare<NotEqual>(a, b, "not_equal", s);
}
array less(const array& a, const array& b, StreamOrDevice s) {
  return compare<Less>(a, b, "less", s);
}
array less_equal(const array& a, const array& b, StreamOrDevice s) {
  return compare<LessEqual>(a, b, "less_equal", s);
}
array greater(const array& a, const array& b, StreamOrDevice s) {
  return compare<Greater>(a, b, "greater", s);
}
array greater_equal(const array& a, const array& b, StreamOrDevice s) {
  return compare<GreaterEqual>(a, b, "greater_equal", s);
}

array logical_and(const array& a, const array& b, StreamOrDevice s) {
  return make_binary<LogicalAnd>(a, b, bool_, bool_, "logical_and", s);
}
array logical_or(const array& a, const array& b, StreamOrDevice s) {
  return make_binary<LogicalOr>(a, b, bool_, bool_, "logical_or", s);
}

array bitwise_and(const array& a, const array& b, StreamOrDevice s) {
  return bitwise<BitwiseAnd>(a, b, "bitwise_and", s);
}
array bitwise_or(const array& a, const array& b, StreamOrDevice s) {
  return bitwise<BitwiseOr>(a, b, "bitwise_or", s);
}
array bitwise_xor(const array& a, const array& b, StreamOrDevice s) {
  return bitwise<BitwiseXor>(a, b, "bitwise_xor", s);
}
array left_shift(const array& a, const array& b, StreamOrDevice s) {
  return bitwise<LeftShift>(a, b, "left_shift", s);
}
array right_shift(const array& a, const array& b, StreamOrDevice s) {
  return bitwise<RightShift>(a, b, "right_shift", s);
}

array operator-(const array& a) { return negative(a); }
array operator!(const array& a) { return logical_not(a); }
array operator~(const array& a) {
  if (is_inexact(a.dtype())) {
    throw std::invalid_argument(
        std::string("[bitwise_invert] Only integer and boolean types are "
                    "supported; got ") +
        dtype_name(a.dtype()) + ".");
  }
  if (a.dtype() == bool_) {
    return logical_not(a);
  }
  // ~x == x ^ all-ones, for signed and unsigned alike.
  return bitwise_xor(a, array(-1, a.dtype()));
}

}  // namespace fluxion
