#include "fluxion/backend/cpu/eval.h"

#include <cstring>

#include "fluxion/primitive.h"
#include "fluxion/scheduler.h"

namespace fluxion::cpu {

namespace {

// A failed kernel must not leave outputs without memory: later kernels would
// read through a null pointer. Give them zeros; the error itself reaches the
// caller through the stream's next event.
void fill_missing_outputs(std::vector<array>& outputs) {
  for (auto& o : outputs) {
    if (o.raw_data() == nullptr) {
      o.set_data(std::max<size_t>(o.nbytes(), 1));
      std::memset(o.raw_data(), 0, o.nbytes());
    }
  }
}

}  // namespace

void eval(array& arr) {
  // A tracer keeps its graph (transformations walk it again); anything else
  // hands its inputs to the task, which is the detach, and lets the task's
  // copies be the last references so buffers can be donated.
  std::vector<array> inputs =
      arr.is_tracer() ? arr.inputs() : arr.take_inputs();
  std::vector<array> outputs = arr.outputs();
  auto stream = arr.primitive().stream();
  scheduler::enqueue(
      stream, [prim = arr.primitive_ptr(), inputs = std::move(inputs),
               outputs = std::move(outputs), s = stream.index]() mutable {
        try {
          prim->eval_cpu(inputs, outputs);
        } catch (...) {
          fill_missing_outputs(outputs);
          scheduler::set_stream_error(s, std::current_exception());
        }
      });
}

}  // namespace fluxion::cpu
