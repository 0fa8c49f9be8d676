// Op-table cases for the Compiled primitive: functions whose fused runs
// become Compiled nodes, so their rules (replaying the fused nodes) are
// checked like any other primitive's.
#include <cmath>

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
  OpCase g{"compiled_gelu", gelu, {normal(s)}};
  g.dtypes = kFloats;
  g.ref = ref1([](double a) {
    return 0.5 * a * (1 + std::tanh(0.79788456 * (a + 0.044715 * a * a * a)));
  });
  g.fused_ulps = 4;
  OpCase m{"compiled_mixed",
           mixed,
           {normal(s), normal(s)}};
  m.dtypes = {float64, float32, float16};
  m.ref = [](const Arrays& x) {
    auto a = values(x[0]), b = values(x[1]);
    std::vector<double> h(a.size()), r(3, 0.0);
    for (size_t i = 0; i < a.size(); ++i) {
      h[i] = 1 / (1 + std::exp(-a[i])) * b[i] - std::exp(b[i]);
      r[i / 4] += h[i] * h[i];
    }
    return Arrays{host_array(h, {3, 4}), host_array(r, {3})};
  };
  return {g, m};
}

}  // namespace

FLUXION_REGISTER_OP_CASES(compile_cases);
