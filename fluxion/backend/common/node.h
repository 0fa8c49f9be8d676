// What a backend's eval takes from the node it runs (shared by
// backend/cpu and backend/cuda).
#pragma once

#include <memory>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/primitive.h"

namespace fluxion::common {

struct Node {
  std::shared_ptr<Primitive> primitive;
  std::vector<array> inputs;
  std::vector<array> outputs;
};

// A tracer keeps its graph (transformations walk it again) and lends
// copies of its inputs. Anything else hands its inputs over, so that the
// kernel's copies are the last references and buffers can be donated, and
// is detached here, before any other thread holds its outputs: a stream's
// worker drops its copies when the kernel ends, and ~array reads their
// sibling lists, which detach empties.
inline Node take_node(array& arr) {
  Node n{arr.primitive_ptr(),
         arr.is_tracer() ? arr.inputs() : arr.take_inputs(), arr.outputs()};
  if (!arr.is_tracer()) {
    arr.detach();
  }
  return n;
}

}  // namespace fluxion::common
