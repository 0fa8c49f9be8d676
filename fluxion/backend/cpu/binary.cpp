// CPU kernels of the binary primitives (functors in
// backend/common/binary_ops.h).
#include "fluxion/backend/common/binary_ops.h"
#include "fluxion/backend/common/unary_ops.h"
#include "fluxion/backend/cpu/elementwise.h"
#include "fluxion/ops/binary.h"

namespace fluxion {

namespace {

template <typename List, typename Op>
void same_type(const std::vector<array>& in, array& out, const char* name) {
  dispatch<List>(in[0].dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::binary_kernel<T, T>(in[0], in[1], out, Op{});
  });
}

template <typename List, typename Op>
void to_bool(const std::vector<array>& in, array& out, const char* name) {
  dispatch<List>(in[0].dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::binary_kernel<T, bool>(in[0], in[1], out, Op{});
  });
}

}  // namespace


#define FLUXION_SAME_TYPE(NAME, LIST, OPNAME)                         \
  void NAME::eval_cpu(const std::vector<array>& in,                   \
                      std::vector<array>& out) {                      \
    same_type<LIST, detail::NAME>(in, out[0], OPNAME);                \
  }
#define FLUXION_TO_BOOL(NAME, LIST, OPNAME)                           \
  void NAME::eval_cpu(const std::vector<array>& in,                   \
                      std::vector<array>& out) {                      \
    to_bool<LIST, detail::NAME>(in, out[0], OPNAME);                  \
  }

FLUXION_SAME_TYPE(Add, AllTypes, "add")
FLUXION_SAME_TYPE(Subtract, AllTypes, "subtract")
FLUXION_SAME_TYPE(Multiply, AllTypes, "multiply")
FLUXION_SAME_TYPE(Divide, InexactTypes, "divide")
FLUXION_SAME_TYPE(FloorDivide, RealTypes, "floor_divide")
FLUXION_SAME_TYPE(Remainder, RealTypes, "remainder")
FLUXION_SAME_TYPE(Maximum, AllTypes, "maximum")
FLUXION_SAME_TYPE(Minimum, AllTypes, "minimum")
FLUXION_SAME_TYPE(ArcTan2, FloatTypes, "arctan2")
FLUXION_SAME_TYPE(LogAddExp, InexactTypes, "logaddexp")
FLUXION_SAME_TYPE(BitwiseAnd, IntBoolTypes, "bitwise_and")
FLUXION_SAME_TYPE(BitwiseOr, IntBoolTypes, "bitwise_or")
FLUXION_SAME_TYPE(BitwiseXor, IntBoolTypes, "bitwise_xor")
FLUXION_SAME_TYPE(LeftShift, IntBoolTypes, "left_shift")
FLUXION_SAME_TYPE(RightShift, IntBoolTypes, "right_shift")
FLUXION_TO_BOOL(NotEqual, AllTypes, "not_equal")
FLUXION_TO_BOOL(Less, AllTypes, "less")
FLUXION_TO_BOOL(LessEqual, AllTypes, "less_equal")
FLUXION_TO_BOOL(Greater, AllTypes, "greater")
FLUXION_TO_BOOL(GreaterEqual, AllTypes, "greater_equal")
FLUXION_TO_BOOL(LogicalAnd, TypeList<bool>, "logical_and")
FLUXION_TO_BOOL(LogicalOr, TypeList<bool>, "logical_or")
#undef FLUXION_SAME_TYPE
#undef FLUXION_TO_BOOL

// A float power whose exponent is one element equal to 2 is x * x, as
// NumPy computes it: the correctly rounded square (pow may be a unit off
// in its last place) for a multiply instead of a pow call per element
// (`y ** 2` on 16 floats cost twice NumPy's).
void Power::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& e = in[1];
  bool squared = false;
  if (e.data_size() == 1 && e.dtype() == in[0].dtype() &&
      is_floating_point(e.dtype())) {
    dispatch<FloatTypes>(e.dtype(), "power", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (static_cast<double>(e.data<T>()[0]) == 2.0) {
        cpu::unary_kernel<T, T>(in[0], out[0], detail::Square{});
        squared = true;
      }
    });
  }
  if (!squared) {
    same_type<AllTypes, detail::Power>(in, out[0], "power");
  }
}

void Equal::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  if (equal_nan_) {
    to_bool<AllTypes, detail::NaNEqual>(in, out[0], "array_equal");
  } else {
    to_bool<AllTypes, detail::Equal>(in, out[0], "equal");
  }
}

}  // namespace fluxion
