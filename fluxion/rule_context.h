// Context for errors raised inside transformation rules.
#pragma once

#include <stdexcept>
#include <string>

#include "fluxion/primitive.h"

namespace fluxion::detail {

// The ops a rule calls name themselves in their errors ("[matmul] ..."),
// but when a vjp, jvp or vmap fails deep inside a traced function the user
// also needs the rule and the primitive being transformed: the message
// becomes "[vjp] In the rule of primitive Matmul: [matmul] ...". The
// exception type is kept so callers can still tell the cases apart.
template <typename F>
auto with_rule_context(const char* rule, const Primitive& p, F&& f) {
  auto prefix = [&] {
    return std::string("[") + rule + "] In the rule of primitive " + p.name() +
           ": ";
  };
  // Nested transformations see the same error more than once: prefix once.
  auto tagged = [](const std::exception& e) {
    return std::string(e.what()).find("In the rule of primitive") !=
           std::string::npos;
  };
  try {
    return f();
  } catch (const std::out_of_range& e) {
    if (tagged(e)) throw;
    throw std::out_of_range(prefix() + e.what());
  } catch (const std::invalid_argument& e) {
    if (tagged(e)) throw;
    throw std::invalid_argument(prefix() + e.what());
  }
}

}  // namespace fluxion::detail
