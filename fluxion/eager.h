// The small-op fast path (issue 18 item 4; docs/architecture.md, "Small
// elementwise ops run at once"): an elementwise op whose inputs are all
// computed, on the host, and small, outside of any transformation or
// compile trace, runs its CPU kernel on the calling thread when it is
// built. Handing a 16-element add to a stream worker costs several times
// the add (a task, a queue item, a wake-up).
//
// The result stays a graph node (issue 33 item 1): its primitive and
// inputs are kept, exactly as a lazy node's, until an eval (or detach)
// drops them, so everything that reads the graph (export_to_dot and
// print_graph, compile's capture of closures, vjp/vmap) sees what MLX's
// lazy evaluation would show, whatever ran underneath. Such a "computed
// node" (array::is_computed_node) is available to kernels and to reads;
// eval only detaches it and its computed ancestors (detach_computed). One
// that only the graph still holds drops its value and is lazy again
// (eval.cpp, release_held_values): an unevaluated loop holds nodes only.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/dtype.h"
#include "fluxion/trace_state.h"

namespace fluxion::detail {

// The node factory of the elementwise ops (unary, binary, where, astype):
// the node of `primitive` on `inputs`, computed at once when the fast path
// applies (see above; if the kernel throws, the node is left lazy, to fail
// again at eval, where lazy evaluation reports errors). The one place
// that decides whether a node runs when built (eager.cpp): op files build
// nodes through it and call nothing of eval.
// Inline, as each op built its node inline before; the decision is
// run_if_small (eager.cpp), called by the factories, not by the ops.
void run_if_small(array& node);
inline array elementwise_node(Shape shape, Dtype dtype,
                              std::shared_ptr<Primitive> primitive,
                              std::vector<array> inputs) {
  array node(std::move(shape), dtype, std::move(primitive), std::move(inputs));
  run_if_small(node);
  return node;
}

// An operand of an elementwise op broadcast to `shape` (already checked
// compatible), as MLX builds it: `a` itself when it has that shape, else a
// Broadcast node, computed at once when small and computed, so that the op
// itself can run at once.
array elementwise_broadcast(const array& a, const Shape& shape, Stream st);

// The same for a binary op's operands, where a one-element computed
// operand (a Python scalar) outside of any transformation is a stride-0
// view of its buffer whatever the size (eager.cpp says how it is kept).
array binary_operand(const array& a, const Shape& shape, Stream st);

// The primitive of a new elementwise node. One without parameters on the
// shared default CPU stream (the fast path's) is one instance per thread
// and type, shared by all its nodes: primitives are immutable, and the
// small ops that keep their node (above) then allocate no primitive.
template <typename P, typename... Args>
std::shared_ptr<P> node_primitive(Stream st, Args... args) {
  if constexpr (sizeof...(Args) == 0) {
    if (st.index == 0 && st.device == Device::cpu) {
      thread_local const std::shared_ptr<P> shared = std::make_shared<P>(st);
      return shared;
    }
  }
  return std::make_shared<P>(st, args...);
}

// Detach `outputs` and every computed node upstream of them (what eval
// does to the nodes it runs): called by eval for outputs that need no
// kernel. Stops at lazy nodes, tracers and arrays without a primitive.
void detach_computed(const std::vector<array>& outputs);

// The largest output (in elements) the fast path computes at once; 0 turns
// it off. The default, 4096, is set by FLUXION_EAGER_MAX_SIZE when given.
size_t eager_max_size();
void set_eager_max_size(size_t n);

// Turns the fast path off while alive, for tests of the graph itself
// (printing, export, the lazy machinery) built from computed arrays.
// Process-wide: not for use while other threads build ops.
class EagerOff {
 public:
  EagerOff() : saved_(eager_max_size()) { set_eager_max_size(0); }
  ~EagerOff() { set_eager_max_size(saved_); }
  EagerOff(const EagerOff&) = delete;
  EagerOff& operator=(const EagerOff&) = delete;

 private:
  size_t saved_;
};

}  // namespace fluxion::detail
