// Fused graphs for the GPU code generator's tests: between them every
// elementwise primitive with a functor (unary, binary, Select, AsType) at
// the dtypes it takes, half types, broadcasts, absorbed reshapes and
// broadcast scalars. Each case is one function whose compile fuses into
// one or a few large Compiled nodes (few NVRTC compiles), with inputs in a
// domain where every term is finite, so a wrong term shows in the result.
// test_nvrtc_codegen.cpp compiles their CUDA source with NVRTC (no GPU
// needed); test_cuda_compiled.cpp runs them on the GPU against eager.
#pragma once

#include <random>
#include <set>
#include <string>
#include <vector>

#include "fluxion/compile.h"
#include "fluxion/compiled.h"
#include "test_utils.h"

namespace fluxion::test {

struct FusedCase {
  std::string name;
  Fn f;
  // Inputs: shape, dtype and the uniform range of their values.
  struct Input {
    Shape shape;
    Dtype dtype;
    double lo, hi;
  };
  std::vector<Input> inputs;
};

// Values drawn on the CPU (so every device reads the same ones), cast to
// the dtype there; integer dtypes take whole numbers.
inline array fused_input(const FusedCase::Input& in, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(in.lo, in.hi);
  std::vector<double> v(shape_size(in.shape));
  for (auto& x : v) {
    x = d(gen);
    if (!is_inexact(in.dtype)) {
      x = std::floor(x);
    }
  }
  auto a = astype(array(v.begin(), in.shape, float64), in.dtype, Device::cpu);
  a.eval();
  return a;
}

inline std::vector<array> fused_inputs(const FusedCase& c) {
  std::vector<array> x;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    x.push_back(fused_input(c.inputs[i], 17u + 31u * unsigned(i)));
  }
  return x;
}

inline std::vector<FusedCase> fused_cases() {
  std::vector<FusedCase> cases;
  const Shape s{6, 40};
  // Every float unary functor on x in (0.1, 0.9), where each is finite.
  auto unary_all = [](const std::vector<array>& in) {
    const array& x = in[0];
    Dtype t = x.dtype();
    array r = exp(x) + expm1(x) + log(x) + log1p(x) + log2(x) + log10(x) +
              sqrt(x) + rsqrt(x) + square(x) + reciprocal(x) + sin(x) +
              cos(x) + tan(x) + arcsin(x) + arccos(x) + arctan(x) + sinh(x) +
              cosh(x) + tanh(x) + arcsinh(x) + arccosh(x + 1.5) +
              arctanh(x) + sigmoid(x) + erf(x) + erfinv(x) + floor(x * 4) +
              ceil(x * 4) + round(x * 4) + abs(negative(x)) +
              sign(x - 0.5) + stop_gradient(x);
    r = r + astype(isnan(x), t) + astype(isinf(x), t) +
        astype(isfinite(x), t) + astype(logical_not(x > 0.5), t);
    return std::vector<array>{r};
  };
  // Every binary functor on floats, y in (0.5, 1.5).
  auto binary_all = [](const std::vector<array>& in) {
    const array &x = in[0], &y = in[1];
    Dtype t = x.dtype();
    array r = add(x, y) + subtract(x, y) * multiply(x, y) + divide(x, y) +
              floor_divide(x * 8, y) + remainder(x * 8, y) + power(x, y) +
              maximum(x, y) + minimum(x, y) + arctan2(x, y) +
              logaddexp(x, y);
    r = r + astype(equal(x, y), t) + astype(not_equal(x, y), t) +
        astype(less(x, y), t) + astype(less_equal(x, y), t) +
        astype(greater(x, y), t) + astype(greater_equal(x, y), t) +
        astype(logical_and(x > 0.5, y > 1), t) +
        astype(logical_or(x > 0.5, y > 1), t);
    return std::vector<array>{r};
  };
  // Integer functors, x in [0, 50), y in [1, 6).
  auto integer_all = [](const std::vector<array>& in) {
    const array &x = in[0], &y = in[1];
    Dtype t = x.dtype();
    array r = add(x, y) + subtract(x, y) * multiply(x, y) +
              floor_divide(x, y) + remainder(x, y) + power(y, y) +
              maximum(x, y) + minimum(x, y) + bitwise_and(x, y) +
              bitwise_or(x, y) + bitwise_xor(x, y) + left_shift(y, y) +
              right_shift(x, y) + abs(x) + negative(y) + sign(x) +
              square(y) + floor(x) + ceil(y) + round(x);
    r = r + astype(equal(x, y), t) + astype(less(x, y), t) +
        astype(greater_equal(x, y), t) + astype(logical_not(x), t);
    return std::vector<array>{r};
  };
  for (Dtype t : {float32, float16, bfloat16, float64}) {
    std::string n = dtype_name(t);
    cases.push_back({"unary_" + n, unary_all, {{s, t, 0.1, 0.9}}});
    cases.push_back(
        {"binary_" + n, binary_all, {{s, t, 0.1, 0.9}, {s, t, 0.5, 1.5}}});
  }
  for (Dtype t : {int32, int64, uint8, int16, uint32, int8, uint16, uint64}) {
    cases.push_back({std::string("integer_") + dtype_name(t),
                     integer_all,
                     {{s, t, 0, 50}, {s, t, 1, 6}}});
  }
  // bool: the logical functors and arithmetic on bools.
  cases.push_back(
      {"bool",
       [](const std::vector<array>& in) {
         const array &a = in[0] > 0.5, &b = in[1] > 0.5;
         array r = logical_or(logical_and(a, b), logical_not(a)) ^
                   (add(a, b) == multiply(a, b));
         return std::vector<array>{astype(r, float32) + in[0]};
       },
       {{s, float32, 0, 1}, {s, float32, 0, 1}}});
  // Select, and casts between every kind of dtype.
  cases.push_back(
      {"select_and_casts",
       [](const std::vector<array>& in) {
         const array &x = in[0], &y = in[1];
         array h = astype(x, float16), b = astype(y, bfloat16);
         array i = astype(h * 8, int32), u = astype(b * 4, uint8);
         array r = where(x > y, x, y) + astype(h * b, float32) +
                   astype(i + astype(u, int32), float32) +
                   astype(astype(x * 100, int64), float32) +
                   astype(astype(y, float64) * 3, float32) +
                   astype(astype(i, bfloat16), float32) +
                   astype(astype(x > 0.5, float16), float32);
         return std::vector<array>{where(r > 3, r, astype(u, float32))};
       },
       {{s, float32, 0, 1}, {s, float32, 0, 1}}});
  // Broadcasts (a row, a column, a scalar) and an absorbed reshape.
  cases.push_back(
      {"broadcasts",
       [](const std::vector<array>& in) {
         array r = (in[0] * in[1] + in[2]) * in[3] +
                   reshape(in[4], {6, 40}) * 2;
         return std::vector<array>{tanh(r) - 1};
       },
       {{s, float32, -1, 1},
        {{40}, float32, -1, 1},
        {{6, 1}, float32, -1, 1},
        {{}, float32, 1, 2},
        {{240}, float32, -1, 1}}});
  // Mixed half types with broadcast scalars of their own dtype.
  cases.push_back(
      {"half_scalars",
       [](const std::vector<array>& in) {
         array r = in[0] * in[1] + astype(in[2], float16) * in[1];
         return std::vector<array>{sigmoid(r) * in[0]};
       },
       {{s, float16, -2, 2}, {{}, float16, 1, 2}, {s, bfloat16, -2, 2}}});
  return cases;
}

// The Compiled nodes in the graph of `outs`.
inline std::vector<const Compiled*> compiled_in(const std::vector<array>& outs) {
  std::vector<const Compiled*> found;
  std::set<uintptr_t> seen;
  std::vector<array> stack(outs.begin(), outs.end());
  while (!stack.empty()) {
    array a = stack.back();
    stack.pop_back();
    if (!seen.insert(a.id()).second || !a.has_primitive()) {
      continue;
    }
    if (auto* p = dynamic_cast<const Compiled*>(&a.primitive())) {
      found.push_back(p);
    }
    for (auto& in : a.inputs()) {
      stack.push_back(in);
    }
  }
  return found;
}

}  // namespace fluxion::test
