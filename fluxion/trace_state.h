// This thread's transformation state, which every op asks about when it is
// built (is a transformation tracing? must graphs be kept? is this a
// shapeless compile trace?). The state is thread-local; a shared library
// reaches thread-locals through a call (__tls_get_addr), and a tiny op asked
// up to a dozen times (callgrind: ~7% of `y + 1.0`). So a process-wide count
// of open scopes comes first: while no thread has one open, the answer is
// "no" after one plain load. A thread always sees its own scopes in the
// count, so the fast answer is never wrong for it.
#pragma once

#include <atomic>

namespace fluxion::detail {

struct TraceState {
  int trace_depth = 0;   // InTracing scopes open
  int retain_graph = 0;  // RetainGraph scopes open
  bool shapeless = false;
};

// Scopes open on all threads (InTracing, RetainGraph, shapeless traces).
extern std::atomic<int> g_open_trace_scopes;

// This thread's state (out of line: only read when a scope is open).
TraceState& trace_state();

inline bool any_trace_scope() {
  return g_open_trace_scopes.load(std::memory_order_relaxed) != 0;
}

// Every change of a thread's TraceState goes through one of these, which
// keep the count.
struct TraceScope {
  TraceScope() { g_open_trace_scopes.fetch_add(1, std::memory_order_relaxed); }
  ~TraceScope() { g_open_trace_scopes.fetch_sub(1, std::memory_order_relaxed); }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
};

}  // namespace fluxion::detail

namespace fluxion {

// True while a transformation traces a function on this thread.
inline bool in_tracing() {
  return detail::any_trace_scope() && detail::trace_state().trace_depth > 0;
}
// True while transformation rules run: graphs must be kept, not detached.
inline bool retain_graph() {
  return detail::any_trace_scope() && detail::trace_state().retain_graph > 0;
}

namespace detail {
// in_tracing() || retain_graph(): ops must then build their nodes.
inline bool graph_required() {
  if (!any_trace_scope()) {
    return false;
  }
  auto& s = trace_state();
  return s.trace_depth > 0 || s.retain_graph > 0;
}
// True while this thread traces a shapeless compile (not an export): ops
// then record how their operands' broadcast shapes follow their partners
// (BroadcastAxes), as MLX's in_dynamic_tracing.
inline bool in_shapeless_trace() {
  return any_trace_scope() && trace_state().shapeless;
}
}  // namespace detail

}  // namespace fluxion
