// The small-op fast path (issue 18 item 4; docs/architecture.md, "Small
// elementwise ops run at once"): an elementwise op whose inputs are all
// computed, on the host, and small, outside of any transformation or
// compile trace, runs its CPU kernel on the calling thread when it is
// built and returns a computed array with no graph. Handing a 16-element
// add to a stream worker costs several times the add (a task, a queue
// item, a wake-up); the result is the same either way, and elementwise
// kernels cannot fail on valid inputs, so nothing else can tell.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>

#include "fluxion/array.h"
#include "fluxion/device.h"

namespace fluxion {
class Primitive;
}  // namespace fluxion

namespace fluxion::detail {

// Run `out`'s primitive now if the fast path applies (see above); `out` is
// then available and detached. Otherwise, or if the kernel throws (the
// node is left as it was, to fail again, where lazy evaluation reports
// errors), it stays a lazy node. Only ops whose kernels are elementwise or
// views call this.
void eval_if_small(array& out);

// The same test in parts, for ops that run a primitive of their own on the
// stack instead of building the node first (binary and unary ops: no
// primitive, input vector or detach to pay for): whether an op on `st`
// with output `shape` may run now, and whether `in` may feed it.
bool eager_output_ok(const Stream& st, const Shape& shape);
bool eager_input_ok(const array& in);
// Run `p`'s CPU kernel now from `inputs` into a new output of `shape` and
// `dtype`, returned available. Nothing when the kernel threw: the caller
// builds the lazy node instead.
std::optional<array> run_now(Primitive& p,
                             std::initializer_list<const array*> inputs,
                             Shape shape, Dtype dtype);

// True while a transformation traces or its rules run on this thread:
// ops must then build their nodes (in_tracing() || retain_graph()).
bool graph_required();

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
