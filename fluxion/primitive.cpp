#include "fluxion/primitive.h"

#include <stdexcept>

namespace fluxion {

// Every public primitive defines its rules (tests/cpp/test_rules_coverage
// enforces it); only internal ones such as eval's Synchronizer reach these.
std::string rule_error(const char* rule, const Primitive& p) {
  return std::string("[") + rule + "] Primitive " + p.name() + " has no " +
         rule + " rule.";
}

std::vector<array> Primitive::jvp(const std::vector<array>&,
                                  const std::vector<array>&,
                                  const std::vector<int>&) {
  throw std::invalid_argument(rule_error("jvp", *this));
}

std::vector<array> Primitive::vjp(const std::vector<array>&,
                                  const std::vector<array>&,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  throw std::invalid_argument(rule_error("vjp", *this));
}

std::pair<std::vector<array>, std::vector<int>> Primitive::vmap(
    const std::vector<array>&, const std::vector<int>&) {
  throw std::invalid_argument(rule_error("vmap", *this));
}

std::vector<Shape> Primitive::output_shapes(const std::vector<array>&) {
  throw std::invalid_argument(rule_error("output_shapes", *this));
}

}  // namespace fluxion
