// Op-spec cases for the Compiled primitive: functions whose fused runs
// become Compiled nodes, so their rules (replaying the fused nodes) are
// checked like any other primitive's.
#include "fluxion/compile.h"
#include "op_cases.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

std::vector<OpCase> compile_cases() {
  Shape s{3, 4};
  Fn gelu = compile([](const std::vector<array>& x) {
    auto& a = x[0];
    return std::vector<array>{
        0.5 * a * (1.0 + tanh(0.79788456 * (a + 0.044715 * a * a * a)))};
  });
  Fn mixed = compile([](const std::vector<array>& x) {
    auto h = sigmoid(x[0]) * x[1] - exp(x[1]);
    return std::vector<array>{h, sum(h * h, 1)};
  });
  return {
      {"compiled_gelu", gelu, {rnd(s, 300)}, true, true},
      {"compiled_mixed", mixed, {rnd(s, 301), rnd(s, 302)}, true, true},
  };
}

}  // namespace

FLUXION_REGISTER_OP_CASES(compile_cases);
