// The op-spec table's case type and input helpers (design.md §7). The core
// table lives in test_rules_coverage.cpp; an op family adds its own cases in
// its own file with
//   FLUXION_REGISTER_OP_CASES(conv_cases);
// where `std::vector<OpCase> conv_cases()` builds them. Every registered case
// runs through the same finite-difference, vmap and output_shapes checks, and
// counts towards `EveryPrimitiveIsCovered`.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "transform_checks.h"

namespace fluxion::test {

struct OpCase {
  std::string name;
  Fn f;
  std::vector<array> inputs;
  bool grads = true;        // finite-difference checks apply
  bool second_order = false;
  double tol = 1e-6;
  double eps = 1e-6;  // finite-difference step
};

inline array rnd(const Shape& shape, unsigned seed, Dtype t = float64) {
  std::mt19937 gen(seed);
  return random_like(zeros(shape, t), gen);
}
inline array positive(const Shape& shape, unsigned seed) {
  return abs(rnd(shape, seed)) + 0.5;
}
inline array unit(const Shape& shape, unsigned seed) {  // in (-0.8, 0.8)
  return tanh(rnd(shape, seed)) * 0.8;
}
inline array ints(const Shape& shape, unsigned seed, Dtype t = int32) {
  return astype(floor(rnd(shape, seed) * 4.0), t);
}

inline Fn unary(UnaryFn g) {
  return [g](const std::vector<array>& x) { return std::vector<array>{g(x[0])}; };
}
inline Fn binary(std::function<array(const array&, const array&)> g) {
  return [g](const std::vector<array>& x) {
    return std::vector<array>{g(x[0], x[1])};
  };
}

using OpCaseFamily = std::vector<OpCase> (*)();

inline std::vector<OpCaseFamily>& op_case_registry() {
  static std::vector<OpCaseFamily> families;
  return families;
}

inline bool register_op_cases(OpCaseFamily f) {
  op_case_registry().push_back(f);
  return true;
}

}  // namespace fluxion::test

#define FLUXION_REGISTER_OP_CASES(fn)                              \
  [[maybe_unused]] static const bool fluxion_op_cases_##fn =       \
      ::fluxion::test::register_op_cases(&fn)
