// CPU kernels of the binary primitives, from their op spec (functors in
// backend/common/binary_ops.h).
#include "fluxion/backend/common/binary_ops.h"
#include "fluxion/backend/common/unary_ops.h"
#include "fluxion/backend/cpu/elementwise.h"
#include "fluxion/ops/binary.h"
#include "fluxion/primitive_list.h"

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

// The kernel of a primitive of the spec: its POLICY's output dtype (bool
// or the compute dtype) over its TYPES.
template <typename Op, BinaryPolicy Policy, typename List>
void spec_kernel(const std::vector<array>& in, array& out, const char* name) {
  if constexpr (binary_gives_bool(Policy)) {
    to_bool<List, Op>(in, out, name);
  } else {
    same_type<List, Op>(in, out, name);
  }
}

}  // namespace

// The kernels of the spec's primitives of FORM spec (ops/elementwise_spec.h).
#define FLUXION_CPU_BINARY(A, CLASS, NAME, POLICY, FORM, TYPES, RULES, CPU, \
                           ...)                                             \
  FLUXION_IF_KERNEL(CPU)(FLUXION_BINARY_IF_CPU_KERNEL(FORM)(                \
      void CLASS::eval_cpu(const std::vector<array>& in,                    \
                           std::vector<array>& out) {                       \
        spec_kernel<detail::CLASS, BinaryPolicy::POLICY, TYPES>(in, out[0], \
                                                                #NAME);     \
      }))
FLUXION_BINARY_SPEC(FLUXION_CPU_BINARY, _)
#undef FLUXION_CPU_BINARY

// The kernels written by hand: Power (FORM cpu_kernel), Equal (FORM class).

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
