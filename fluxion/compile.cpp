// compile: tracing into an Ir, the per-function cache, and replay.
#include "fluxion/compile.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "fluxion/compile_ir.h"
#include "fluxion/ops/common.h"
#include "fluxion/primitive.h"

namespace fluxion {

namespace {

// Sets this thread's shapeless-trace flag for one trace (a nested trace of
// another compiled function sets its own, then restores this one).
struct ShapelessTraceScope {
  detail::TraceScope scope;
  bool saved;
  explicit ShapelessTraceScope(bool on)
      : saved(detail::trace_state().shapeless) {
    detail::trace_state().shapeless = on;
  }
  ~ShapelessTraceScope() { detail::trace_state().shapeless = saved; }
};

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> enabled{std::getenv("FLUXION_DISABLE_COMPILE") ==
                                   nullptr};
  return enabled;
}

struct CacheEntry {
  bool shapeless = false;
  std::vector<Dtype> dtypes;
  std::vector<Shape> shapes;  // only ndims count when shapeless
  std::vector<uint64_t> constants;
  detail::Ir ir;
  bool cacheable = true;
  // The binding's data of this trace (detail::ArraysAndExtra).
  std::shared_ptr<void> extra;
};

struct FunctionCache {
  std::vector<std::shared_ptr<const CacheEntry>> entries;
};

std::mutex cache_mutex;
std::unordered_map<std::uintptr_t, FunctionCache>& cache() {
  static auto* c = new std::unordered_map<std::uintptr_t, FunctionCache>();
  return *c;
}

bool matches(const CacheEntry& e, const std::vector<array>& inputs,
             bool shapeless, const std::vector<uint64_t>& constants) {
  // A shapeless trace and a shaped one of the same function are different
  // entries: a shaped trace replayed shapelessly would keep its shapes.
  if (e.shapeless != shapeless || e.dtypes.size() != inputs.size() ||
      e.constants != constants) {
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (e.dtypes[i] != inputs[i].dtype()) {
      return false;
    }
    if (shapeless ? e.shapes[i].size() != inputs[i].shape().size()
                  : e.shapes[i] != inputs[i].shape()) {
      return false;
    }
  }
  return true;
}

// Post-order over the traced graph: every array reached becomes a value;
// arrays with data or without a primitive are constants, the placeholders
// are the inputs.
// An array from an enclosing transformation (a tracer that does not depend
// on the inputs) is kept as a constant, and `captures_tracer` is set: such a
// trace is right for this call only, and is not cached.
// A lazy array the function closes over (built before the trace, depending
// on no input) keeps its graph in the tape, as MLX: it is recomputed from
// its leaves on each call. With `closures_as_constants` (export) it is a
// constant instead (its value when traced, evaluated when written).
// `originals` are the arrays the call was given (arguments and captured
// inputs): reaching one of them in the traced graph means the function read
// it other than through its placeholder (a closure over an argument, or a
// lazy array computed from one), and raises, as MLX.
detail::Ir build_ir(const std::vector<array>& tracers,
                    const std::vector<array>& outputs, bool& captures_tracer,
                    bool closures_as_constants = false,
                    const std::vector<array>* originals = nullptr) {
  detail::Ir ir;
  std::unordered_map<uintptr_t, int> index;
  std::vector<bool> depends;  // on an input, per value
  auto add_value = [&](const array& a) {
    int v = static_cast<int>(ir.values.size());
    ir.values.push_back({a.shape(), a.dtype(), std::nullopt});
    depends.push_back(false);
    index[a.id()] = v;
    return v;
  };
  captures_tracer = false;
  for (auto& t : tracers) {
    ir.inputs.push_back(add_value(t));
    depends.back() = true;
  }
  std::unordered_map<uintptr_t, int> original_ids;
  if (originals) {
    for (size_t i = 0; i < originals->size(); ++i) {
      original_ids.emplace((*originals)[i].id(), static_cast<int>(i));
    }
  }
  auto check_original = [&](const array& a) {
    auto it = original_ids.find(a.id());
    if (it == original_ids.end()) {
      return;
    }
    std::ostringstream msg;
    msg << "[compile] Attempting to compile a function with uncaptured "
           "inputs is not allowed: the function reads input "
        << it->second << " (shape " << shape_str(a.shape())
        << ") directly rather than through its argument (a closure over an "
           "array that is also an argument or captured input, or an "
           "unevaluated array computed from one). Pass it as an argument "
           "and use that, or eval it before calling.";
    throw std::invalid_argument(msg.str());
  };
  std::vector<std::pair<array, size_t>> stack;
  for (auto& out : outputs) {
    if (index.count(out.id())) {
      continue;
    }
    check_original(out);
    stack.emplace_back(out, 0);
    while (!stack.empty()) {
      auto& [a, next] = stack.back();
      bool leaf =
          !a.has_primitive() || (a.is_available() && !a.is_computed_node());
      if (!leaf && next < a.inputs().size()) {
        const array& in = a.inputs()[next++];
        if (!index.count(in.id())) {
          check_original(in);
          stack.emplace_back(in, 0);
        }
        continue;
      }
      array node = a;
      stack.pop_back();
      if (index.count(node.id())) {
        continue;  // reached again through a sibling
      }
      if (leaf) {
        int v = add_value(node);
        ir.values[v].constant = node;
        captures_tracer = captures_tracer || node.is_tracer();
        continue;
      }
      detail::IrNode n{node.primitive_ptr(), {}, {}};
      bool d = false;
      for (auto& in : node.inputs()) {
        n.inputs.push_back(index.at(in.id()));
        d = d || depends[n.inputs.back()];
      }
      if (!d && node.is_tracer()) {
        captures_tracer = true;
        for (auto& o : node.outputs()) {
          int v = add_value(o);
          ir.values[v].constant = o;
        }
        continue;
      }
      if (!d && !node.built_in_compile_trace() && closures_as_constants) {
        for (auto& o : node.outputs()) {
          int v = add_value(o);
          ir.values[v].constant = o;
        }
        continue;
      }
      for (auto& o : node.outputs()) {
        n.outputs.push_back(add_value(o));
        depends.back() = d;
      }
      ir.nodes.push_back(std::move(n));
    }
  }
  for (auto& out : outputs) {
    ir.outputs.push_back(index.at(out.id()));
  }
  return ir;
}

// Shapeless tapes may not hold primitives whose shapes were fixed when
// traced, unless they only see constants.
void check_shapeless(const detail::Ir& ir) {
  std::vector<bool> depends(ir.values.size(), false);
  for (int v : ir.inputs) {
    depends[v] = true;
  }
  for (auto& n : ir.nodes) {
    bool d = false;
    for (int v : n.inputs) {
      d = d || depends[v];
    }
    for (int v : n.outputs) {
      depends[v] = d;
    }
    if (d && !n.prim->shapeless_ok()) {
      std::ostringstream msg;
      msg << "[compile] Cannot compile with shapeless=True: the primitive "
          << n.prim->name()
          << " fixes its output shape when traced, so it cannot follow new "
             "input shapes. Compile without shapeless, or avoid the op.";
      throw std::invalid_argument(msg.str());
    }
  }
}

std::shared_ptr<const CacheEntry> trace(const detail::FnWithExtra& fun,
                                        const std::vector<array>& inputs,
                                        bool shapeless,
                                        std::vector<uint64_t> constants) {
  std::vector<array> tracers;
  for (auto& in : inputs) {
    array t(in.shape(), in.dtype(), nullptr, {});
    t.set_tracer(true);
    tracers.push_back(t);
  }
  std::vector<array> outputs;
  auto entry = std::make_shared<CacheEntry>();
  {
    detail::InTracing tracing;
    detail::CompileTraceScope marks;
    ShapelessTraceScope shapeless_ops(shapeless);
    auto traced = fun(tracers);
    outputs = std::move(traced.arrays);
    entry->extra = std::move(traced.extra);
  }
  entry->shapeless = shapeless;
  for (auto& in : inputs) {
    entry->dtypes.push_back(in.dtype());
    entry->shapes.push_back(in.shape());
  }
  entry->constants = std::move(constants);
  bool captures_tracer = false;
  // Under an enclosing transformation (tracer inputs) MLX does not compile
  // at all, so nothing is checked against the inputs there.
  bool tracer_inputs = std::any_of(inputs.begin(), inputs.end(),
                                   [](const array& a) { return a.is_tracer(); });
  entry->ir = build_ir(tracers, outputs, captures_tracer, false,
                       tracer_inputs ? nullptr : &inputs);
  entry->cacheable = !captures_tracer;
  if (shapeless) {
    check_shapeless(entry->ir);
  }
  detail::simplify_ir(entry->ir, shapeless);
  detail::fuse_ir(entry->ir, shapeless);
  return entry;
}

std::shared_ptr<const CacheEntry> find_or_trace(
    const detail::FnWithExtra& fun, std::uintptr_t id,
    const std::vector<array>& inputs,
    bool shapeless, const std::vector<uint64_t>& constants) {
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    for (auto& e : cache()[id].entries) {
      if (matches(*e, inputs, shapeless, constants)) {
        return e;
      }
    }
  }
  // Traced without the lock: `fun` may call other compiled functions.
  auto entry = trace(fun, inputs, shapeless, constants);
  if (entry->cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    cache()[id].entries.push_back(entry);
  }
  return entry;
}

}  // namespace

namespace detail {

Ir trace_to_ir(const Fn& fun, const std::vector<array>& inputs,
               bool shapeless) {
  std::vector<array> tracers;
  for (auto& in : inputs) {
    array t(in.shape(), in.dtype(), nullptr, {});
    t.set_tracer(true);
    tracers.push_back(t);
  }
  std::vector<array> outputs;
  {
    InTracing tracing;
    CompileTraceScope marks;
    // Export writes plain Broadcast nodes (its reader knows no other).
    ShapelessTraceScope plain_broadcasts(false);
    outputs = fun(tracers);
  }
  bool captures_tracer = false;
  Ir ir = build_ir(tracers, outputs, captures_tracer,
                   /*closures_as_constants=*/true);
  if (shapeless) {
    check_shapeless(ir);
  }
  simplify_ir(ir, shapeless);
  return ir;
}

}  // namespace detail

void disable_compile() { enabled_flag() = false; }
void enable_compile() { enabled_flag() = true; }
bool compile_enabled() { return enabled_flag(); }

namespace detail {

FnWithExtra compile_with_extra(FnWithExtra fun, std::uintptr_t fun_id,
                               bool shapeless,
                               std::vector<uint64_t> constants) {
  return [fun = std::move(fun), fun_id, shapeless,
          constants = std::move(constants)](const std::vector<array>& inputs) {
    if (!compile_enabled()) {
      return fun(inputs);
    }
    auto entry = find_or_trace(fun, fun_id, inputs, shapeless, constants);
    // The structure recorded by this very trace, not by the function's
    // latest one.
    return ArraysAndExtra{run_ir(entry->ir, inputs, shapeless), entry->extra};
  };
}

Fn compile(Fn fun, std::uintptr_t fun_id, bool shapeless,
           std::vector<uint64_t> constants) {
  auto compiled = compile_with_extra(
      [fun = std::move(fun)](const std::vector<array>& inputs) {
        return ArraysAndExtra{fun(inputs), nullptr};
      },
      fun_id, shapeless, std::move(constants));
  return [compiled = std::move(compiled)](const std::vector<array>& inputs) {
    return compiled(inputs).arrays;
  };
}

void compile_erase(std::uintptr_t fun_id) {
  FunctionCache dropped;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache().find(fun_id);
    if (it == cache().end()) {
      return;
    }
    dropped = std::move(it->second);
    cache().erase(it);
  }
  // `dropped` (and the bindings' data it holds) dies here, unlocked.
}

size_t compile_cache_size() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  size_t n = 0;
  for (auto& [id, c] : cache()) {
    n += c.entries.size() + 1;  // an entry per function too
  }
  return n;
}

}  // namespace detail

Fn compile(Fn fun, bool shapeless) {
  // A private id whose cache is erased with the last copy of the function.
  auto token = std::shared_ptr<int>(new int(0), [](int* p) {
    detail::compile_erase(reinterpret_cast<std::uintptr_t>(p));
    delete p;
  });
  auto id = reinterpret_cast<std::uintptr_t>(token.get());
  auto compiled = detail::compile(std::move(fun), id, shapeless, {});
  return [token, compiled](const std::vector<array>& inputs) {
    return compiled(inputs);
  };
}

}  // namespace fluxion
