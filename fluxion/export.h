// export_function / import_function (MLX's function export): a function is
// traced, once per call signature, into a tape of primitives; the tapes are
// written to a file (or handed to a callback) and read back as a callable
// that replays them on new inputs, without the original code.
//
// Semantics (MLX's):
// - A call signature is the number of positional inputs, the names of the
//   keyword inputs, and each input's dtype and shape (only its ndim when
//   exported with shapeless = true, which replays the tape with each
//   primitive's output_shapes rule). An imported function runs the first
//   trace whose signature matches its call, and raises
//   std::invalid_argument when none does.
// - Arrays the function closes over are stored as constants, once per file
//   even when several traces use them. Parts of the graph that depend on no
//   input and cannot be exported (a lazily loaded array, say) are evaluated
//   and stored as constants too.
// - Compiled sub-graphs are exported as the primitives they fuse;
//   custom_function / custom_vjp nodes cannot be exported (their rules are
//   host functions) and raise.
//
// File format (Fluxion's own, little-endian): "FXFN", a version, the
// metadata string, the shapeless flag, the constants (dtype, shape, raw
// row-major bytes), then per trace: the signature, the values (dtype,
// shape, constant index or -1), the input and output value ids and the
// nodes (primitive name, parameters as tagged values, input and output
// value ids).
//
// The work is split by job: export.cpp traces and flattens a function and
// writes its file, export_format.cpp turns traces into the file's bytes and
// back, export_registry.cpp names each primitive and rebuilds it (its table
// comes from fluxion/primitive_list.h and each primitive's state() /
// from_state), import.cpp reads a file into an ImportedFunction.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/compile_ir.h"
#include "fluxion/primitive.h"

namespace fluxion {

using Kwargs = std::map<std::string, array>;
using KwFn = std::function<std::vector<array>(const std::vector<array>&,
                                              const Kwargs&)>;

// One traced call: collected by an exporter, read back by an import.
struct ExportedTrace {
  int n_args = 0;
  std::vector<std::string> kwarg_names;  // sorted
  std::vector<Dtype> dtypes;             // args, then kwargs by name
  std::vector<Shape> shapes;
  detail::Ir ir;  // flattened: only exportable primitives
};

namespace detail {
// True while export_function traces a function on this thread (MLX's
// in_export_tracing: a Metal kernel call is recorded instead of raising).
bool in_export_tracing();
}  // namespace detail

// Traces `fun` on placeholders of the inputs' shapes and dtypes.
ExportedTrace export_trace(const KwFn& fun, const std::vector<array>& args,
                           const Kwargs& kwargs, bool shapeless);

// The name and parameters under which `p` is exported (MLX's names: the
// logarithms are "Log" with a base of 0 = 2, 1 = 10, 2 = e), and the
// primitive rebuilt from them on stream `s`. Both raise
// std::invalid_argument for primitives that cannot be exported.
std::pair<std::string, std::vector<PrimitiveArg>> export_primitive(
    const Primitive& p);
std::shared_ptr<Primitive> import_primitive(
    const std::string& name, const std::vector<PrimitiveArg>& args, Stream s);
// The names import_primitive accepts (those export_primitive writes),
// sorted.
std::vector<std::string> exported_primitive_names();

// Collects traces of one function and writes them to `path` after each
// (so the file is complete at any time); close() ends it.
class FunctionExporter {
 public:
  FunctionExporter(std::string path, KwFn fun, bool shapeless,
                   std::string metadata = "");
  // Traces a call (raises std::runtime_error once closed).
  void operator()(const std::vector<array>& args, const Kwargs& kwargs = {});
  // The same with the function given per call (for bindings whose function
  // object must stay visible to a garbage collector).
  void add_trace(const KwFn& fun, const std::vector<array>& args,
                 const Kwargs& kwargs);
  void close();
  bool closed() const { return closed_; }

 private:
  void write();

  std::string path_;
  KwFn fun_;
  bool shapeless_;
  std::string metadata_;
  bool closed_ = false;
  std::vector<ExportedTrace> traces_;
};

void export_function(const std::string& path, const KwFn& fun,
                     const std::vector<array>& args, const Kwargs& kwargs = {},
                     bool shapeless = false, const std::string& metadata = "");

class ImportedFunction {
 public:
  explicit ImportedFunction(const std::string& path);
  std::vector<array> operator()(const std::vector<array>& args,
                                const Kwargs& kwargs = {}) const;
  const std::string& metadata() const { return metadata_; }
  bool shapeless() const { return shapeless_; }

 private:
  std::string path_;
  std::string metadata_;
  bool shapeless_ = false;
  std::vector<ExportedTrace> traces_;
};

ImportedFunction import_function(const std::string& path);

}  // namespace fluxion
