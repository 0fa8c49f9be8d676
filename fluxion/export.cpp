// export_function's tracing and writing: a function is traced once per
// call signature (compile's tracer), its tape flattened into primitives
// that have an exported form (Compiled nodes inlined, input-independent
// parts that cannot be exported evaluated into constants), and the traces
// collected so far written to the file after each one. The primitives'
// names and parameters come from export_registry.cpp, the bytes from
// export_format.cpp.
#include "fluxion/export.h"

#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "fluxion/compile.h"
#include "fluxion/compiled.h"
#include "fluxion/export_format.h"
#include "fluxion/transforms.h"

namespace fluxion {

namespace {

[[noreturn]] void export_error(const std::string& what) {
  throw std::invalid_argument("[export_function] " + what);
}

// A traced tape rewritten into exportable primitives only.
struct Flattener {
  detail::Ir out;
  // Concrete (lazy) arrays of values that depend on no input.
  std::vector<std::optional<array>> concrete;
  std::vector<bool> depends;

  int add_value(const Shape& shape, Dtype dtype, std::optional<array> c,
                bool dep) {
    out.values.push_back({shape, dtype, c});
    concrete.push_back(c);
    depends.push_back(dep);
    return static_cast<int>(out.values.size()) - 1;
  }

  bool exportable(const Primitive& p) {
    try {
      export_primitive(p);
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  }

  // Appends the nodes of `ir` with its inputs bound to `bound` (values of
  // `out`); returns the values of its outputs.
  std::vector<int> inline_ir(const detail::Ir& ir,
                             const std::vector<int>& bound) {
    std::vector<int> map(ir.values.size(), -1);
    for (size_t i = 0; i < ir.inputs.size(); ++i) {
      map[ir.inputs[i]] = bound[i];
    }
    for (size_t v = 0; v < ir.values.size(); ++v) {
      if (map[v] < 0 && ir.values[v].constant) {
        map[v] = add_value(ir.values[v].shape, ir.values[v].dtype,
                           ir.values[v].constant, false);
      }
    }
    for (auto& node : ir.nodes) {
      std::vector<int> ins;
      for (int v : node.inputs) {
        ins.push_back(map.at(v));
      }
      auto outs = add_node(node, ir, ins);
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        map[node.outputs[k]] = outs[k];
      }
    }
    std::vector<int> result;
    for (int v : ir.outputs) {
      result.push_back(map.at(v));
    }
    return result;
  }

  std::vector<int> add_node(const detail::IrNode& node, const detail::Ir& ir,
                            const std::vector<int>& ins) {
    if (auto* c = dynamic_cast<const Compiled*>(node.prim.get())) {
      return inline_ir(c->tape(), ins);
    }
    bool dep = false, all_concrete = true;
    for (int v : ins) {
      dep = dep || depends[v];
      all_concrete = all_concrete && concrete[v].has_value();
    }
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (int v : node.outputs) {
      shapes.push_back(ir.values[v].shape);
      dtypes.push_back(ir.values[v].dtype);
    }
    std::vector<array> lazy;
    if (!dep && all_concrete) {
      std::vector<array> in_arrays;
      for (int v : ins) {
        in_arrays.push_back(*concrete[v]);
      }
      lazy = array::make_arrays(shapes, dtypes, node.prim, in_arrays);
    }
    if (!exportable(*node.prim)) {
      if (dep || lazy.empty()) {
        export_error("Cannot export the primitive " +
                     std::string(node.prim->name()) +
                     ": it has no exported form (custom_function and "
                     "custom_vjp rules are host code).");
      }
      // Depends on no input: evaluate it now and keep its values.
      eval(lazy);
      std::vector<int> outs;
      for (size_t k = 0; k < lazy.size(); ++k) {
        outs.push_back(add_value(shapes[k], dtypes[k], lazy[k], false));
      }
      return outs;
    }
    detail::IrNode n{node.prim, ins, {}};
    for (size_t k = 0; k < shapes.size(); ++k) {
      int v = add_value(shapes[k], dtypes[k], std::nullopt, dep);
      if (!lazy.empty()) {
        concrete[v] = lazy[k];
      }
      n.outputs.push_back(v);
    }
    out.nodes.push_back(n);
    return n.outputs;
  }
};

// export_function traces running on this thread, for
// detail::in_export_tracing.
thread_local int t_export_tracing = 0;
struct ExportTracingScope {
  ExportTracingScope() { ++t_export_tracing; }
  ~ExportTracingScope() { --t_export_tracing; }
  ExportTracingScope(const ExportTracingScope&) = delete;
  ExportTracingScope& operator=(const ExportTracingScope&) = delete;
};
}  // namespace

bool detail::in_export_tracing() { return t_export_tracing > 0; }

ExportedTrace export_trace(const KwFn& fun, const std::vector<array>& args,
                           const Kwargs& kwargs, bool shapeless) {
  ExportTracingScope tracing;
  ExportedTrace t;
  t.n_args = static_cast<int>(args.size());
  std::vector<array> inputs = args;
  for (auto& [k, v] : kwargs) {
    t.kwarg_names.push_back(k);
    inputs.push_back(v);
  }
  for (auto& in : inputs) {
    t.dtypes.push_back(in.dtype());
    t.shapes.push_back(in.shape());
  }
  int n_args = t.n_args;
  auto names = t.kwarg_names;
  Fn flat = [&](const std::vector<array>& xs) {
    std::vector<array> a(xs.begin(), xs.begin() + n_args);
    Kwargs kw;
    for (size_t i = 0; i < names.size(); ++i) {
      kw.emplace(names[i], xs[n_args + i]);
    }
    return fun(a, kw);
  };
  detail::Ir ir = detail::trace_to_ir(flat, inputs, shapeless);
  Flattener f;
  std::vector<int> bound;
  for (int v : ir.inputs) {
    int nv =
        f.add_value(ir.values[v].shape, ir.values[v].dtype, std::nullopt, true);
    f.out.inputs.push_back(nv);
    bound.push_back(nv);
  }
  f.out.outputs = f.inline_ir(ir, bound);
  t.ir = std::move(f.out);
  return t;
}

FunctionExporter::FunctionExporter(std::string path, KwFn fun, bool shapeless,
                                   std::string metadata)
    : path_(std::move(path)),
      fun_(std::move(fun)),
      shapeless_(shapeless),
      metadata_(std::move(metadata)) {}

void FunctionExporter::operator()(const std::vector<array>& args,
                                  const Kwargs& kwargs) {
  add_trace(fun_, args, kwargs);
}

void FunctionExporter::add_trace(const KwFn& fun,
                                 const std::vector<array>& args,
                                 const Kwargs& kwargs) {
  if (closed_) {
    throw std::runtime_error(
        "[export_function] The exporter of '" + path_ +
        "' is closed; make a new one to export more traces.");
  }
  traces_.push_back(export_trace(fun, args, kwargs, shapeless_));
  write();
}

void FunctionExporter::close() {
  closed_ = true;
  fun_ = nullptr;  // release what the function holds
}

void FunctionExporter::write() {
  std::string bytes =
      detail::encode_exported_function(metadata_, shapeless_, traces_);
  // Write to a temporary name and rename, so a reader never sees half a
  // file.
  std::string tmp = path_ + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      export_error("Cannot open '" + path_ + "' for writing.");
    }
    f.write(bytes.data(), bytes.size());
    if (!f) {
      export_error("Failed to write '" + path_ + "'.");
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    export_error("Failed to write '" + path_ + "'.");
  }
}

void export_function(const std::string& path, const KwFn& fun,
                     const std::vector<array>& args, const Kwargs& kwargs,
                     bool shapeless, const std::string& metadata) {
  FunctionExporter e(path, fun, shapeless, metadata);
  e(args, kwargs);
  e.close();
}

}  // namespace fluxion
