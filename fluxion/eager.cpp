// The small-op path (fluxion/eager.h; docs/architecture.md, "Small
// elementwise ops run at once", D15): the node factory of the elementwise
// ops, which runs a small computed node's CPU kernel when it is built, and
// what eval does to the computed nodes it reaches. The one place that
// decides whether a node runs when built: the ops only build nodes.
#include "fluxion/eager.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "fluxion/backend_interface.h"
#include "fluxion/ops/shape.h"
#include "fluxion/primitive.h"
#include "fluxion/schedule_lock.h"
#include "fluxion/tls.h"
#include "fluxion/trace_state.h"

namespace fluxion::detail {

namespace {
// At most 2^31, so that eager_output_ok's running product (at most the
// limit times one int32 dimension) cannot overflow.
constexpr size_t kEagerCap = size_t{1} << 31;

std::atomic<size_t>& eager_limit() {
  static std::atomic<size_t> limit = [] {
    const char* v = std::getenv("FLUXION_EAGER_MAX_SIZE");
    size_t n = v != nullptr ? static_cast<size_t>(std::strtoull(v, nullptr, 10))
                            : size_t{4096};
    return std::min(n, kEagerCap);
  }();
  return limit;
}
}  // namespace

size_t eager_max_size() {
  return eager_limit().load(std::memory_order_relaxed);
}
void set_eager_max_size(size_t n) {
  eager_limit().store(std::min(n, kEagerCap));
}

namespace {
// Only the shared default CPU stream (index 0, which every thread may
// use): another stream may belong to another thread, whose ops must fail
// at eval here, or be meant to run apart from this thread.
bool eager_stream(const Stream& st) {
  return st.index == 0 && st.device == Device::cpu;
}

// Computed (an async_eval result whose event has fired counts) and homed
// on the host: a buffer homed on a GPU stays lazy (reading it here would
// mean a blocking copy).
bool eager_input_ok(const array& in) {
  return in.is_available() && in.home_device() == Device::cpu;
}

// A computed node that only the graph still holds (the intermediates of
// `y = y + 1` in a loop, once Python has rebound `y`) goes back to lazy:
// its value is dropped and its node kept, which is what MLX would hold for
// it. Without this a loop of small ops left unevaluated kept every
// intermediate's buffer until the eval (20,000 adds of 4,096 floats: 312
// MB, where a lazy graph holds its nodes only). Nothing needs the value
// again: its consumers are computed, and eval stops at computed arrays;
// should the node be reached and evaluated through the graph, it is
// recomputed from its inputs as any lazy node. Nodes with siblings are
// left as they are (their outputs are computed together).
void release_if_only_held_by_graph(array& a) {
  if (a.use_count() == 1 && a.is_computed_node() && a.siblings().empty()) {
    a.set_data(nullptr, 0, {}, a.flags());
    a.set_status(array::Status::unscheduled);
  }
}

// Called when `arr` has been computed: its inputs held by it alone (a
// temporary broadcast) and its inputs' inputs (the value a rebound name
// held when `arr`'s input was built) are released. One level back is
// enough for a chain, as every op of it releases the one before.
void release_held_values(array& arr) {
  // Under the scheduling lock, as every detach: another thread may be
  // evaluating (detaching) a node this reads the inputs of. Skipped when
  // the lock is busy: dropping values early only saves memory.
  std::unique_lock<std::recursive_mutex> lock(schedule_mutex(),
                                              std::try_to_lock);
  if (!lock.owns_lock()) {
    return;
  }
  for (auto& in : arr.inputs()) {
    if (in.is_computed_node()) {
      for (auto& before : in.inputs()) {
        release_if_only_held_by_graph(before);
      }
    }
    release_if_only_held_by_graph(in);
  }
}

// Whether computed node `a` still holds its primitive (no eval has
// detached it), read under the scheduling lock every detach takes, so that
// another thread's eval cannot be detaching it meanwhile; false when the
// lock is busy.
bool still_a_node(const array& a) {
  std::unique_lock<std::recursive_mutex> lock(schedule_mutex(),
                                              std::try_to_lock);
  return lock.owns_lock() && a.has_primitive();
}
}  // namespace

// Run `out`'s primitive now if the small-op path applies: `out` is then
// available and keeps its node. Otherwise, or if the kernel throws (the
// node is left as it was, to fail again at eval, where lazy evaluation
// reports errors), it stays a lazy node.
void run_if_small(array& out) {
  // Cheapest tests first: this runs for every node the factories build.
  if (out.size() == 0 || out.size() > eager_max_size() || graph_required() ||
      !out.has_primitive() || out.status() != array::Status::unscheduled ||
      !eager_stream(out.primitive().stream())) {
    return;
  }
  for (auto& in : out.inputs()) {
    if (!eager_input_ok(in)) {
      return;
    }
  }
  // eager_stream: only the default cpu stream gets here.
  if (cpu_backend().eval_now(out)) {
    release_held_values(out);
  }
}

void detach_computed(const std::vector<array>& outputs) {
  // Depth first on an explicit stack: a chain of a million computed adds
  // must not recurse. Each node's inputs are held by the stack before the
  // node lets go of them, so nothing is freed recursively either.
  std::vector<array> stack;
  for (auto& o : outputs) {
    if (o.is_computed_node()) {
      stack.push_back(o);
    }
  }
  while (!stack.empty()) {
    array a = std::move(stack.back());
    stack.pop_back();
    if (!a.is_computed_node()) {
      continue;  // reached twice, detached the first time
    }
    for (auto& in : a.inputs()) {
      if (in.is_computed_node()) {
        stack.push_back(in);
      }
    }
    a.detach();
  }
}

array elementwise_broadcast(const array& a, const Shape& shape, Stream st) {
  if (a.shape() == shape) {
    return a;  // maybe the caller's own array: not ours to evaluate
  }
  auto b = broadcast_to(a, shape, st);
  run_if_small(b);
  return b;
}

namespace {
// The Broadcast primitive of a scalar's view: one per thread for the
// last stream and shape (primitives are immutable; nodes may share one, as
// node_primitive shares those without parameters).
std::shared_ptr<Broadcast> scalar_broadcast(Stream st, const Shape& shape) {
  thread_local std::shared_ptr<Broadcast> last;
  if (!last || last->stream() != st || last->shape() != shape) {
    last = std::make_shared<Broadcast>(st, shape);
  }
  return last;
}
}  // namespace

// A one-element computed operand (a Python scalar) outside of any
// transformation is an all-stride-0 view of its buffer, made at once
// whatever the size (what the Broadcast kernel would make of it): on a CPU
// stream as a computed Broadcast node, so the graph shows MLX's node
// (issue 33) while eval has nothing to schedule for it (issue 18: `x + 1.0`
// cost two scheduled nodes per op); on a GPU stream without a node (the
// GPU path has not been measured with one). Other operands become their
// view at once when small and computed (elementwise_broadcast), so that
// the op itself can run at once; inside a trace every operand keeps a lazy
// Broadcast node.
array binary_operand(const array& a, const Shape& shape, Stream st) {
  if (a.shape() == shape) {
    return a;
  }
  if (a.size() != 1 || a.status() != array::Status::available ||
      a.data_shared_ptr() == nullptr || in_tracing() || retain_graph() ||
      (st.device != Device::cpu && a.has_primitive())) {
    return elementwise_broadcast(a, shape, st);
  }
  int64_t size = 1;
  for (auto d : shape) {
    size *= d;
  }
  if (size == 0) {
    return broadcast_to(a, shape, st);
  }
  // A loop's `y + 1.0` broadcasts the same cached scalar to the same shape
  // at every step: the view built last on this thread is handed out again
  // while it is still the Broadcast node of that scalar (not detached by an
  // eval, which another thread may be running). Nodes sharing an input is
  // an ordinary graph (common subexpressions are shared the same way); it
  // saves building a node per op (a third of `y + 1.0`'s cost). The stream
  // is kept beside the view because its primitive may only be read under
  // the scheduling lock (still_a_node), which is taken last.
  struct LastView {
    std::optional<array> scalar, view;
    Stream stream{0, Device::cpu};
  };
  thread_local LastView t_last;
  LastView& last = *pin_tls(&t_last);  // one TLS call (fluxion/tls.h)
  if (last.view && last.scalar->id() == a.id() && last.stream == st &&
      last.view->shape() == shape && still_a_node(*last.view)) {
    return *last.view;
  }
  Strides zero(shape.size(), 0);
  auto flags = layout_flags(shape, zero, 1);
  array out = st.device == Device::cpu
                  ? array(shape, a.dtype(), scalar_broadcast(st, shape), {a})
                  : array(shape, a.dtype(), nullptr, {});
  out.copy_shared_buffer(a, std::move(zero), flags, 1);
  out.set_status(array::Status::available);
  if (st.device == Device::cpu) {
    last.scalar = a;
    last.view = out;
    last.stream = st;
  }
  return out;
}

}  // namespace fluxion::detail
