// import_function: an exported file read back (export_format.cpp decodes
// it, export_registry.cpp rebuilds its primitives) into a callable that
// replays the first trace whose call signature matches its inputs.
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fluxion/export.h"
#include "fluxion/export_format.h"
#include "fluxion/ops/common.h"

namespace fluxion {

namespace {

// Whether a call fits a trace's signature: the same positional count and
// keyword names, and each input's dtype and shape (only its ndim when the
// file is shapeless).
bool signature_matches(int n_args, const std::vector<std::string>& names,
                       const std::vector<Dtype>& dtypes,
                       const std::vector<Shape>& shapes, bool shapeless,
                       const std::vector<array>& args, const Kwargs& kwargs) {
  if (static_cast<int>(args.size()) != n_args ||
      kwargs.size() != names.size()) {
    return false;
  }
  std::vector<array> all = args;
  for (auto& name : names) {
    auto it = kwargs.find(name);
    if (it == kwargs.end()) {
      return false;
    }
    all.push_back(it->second);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].dtype() != dtypes[i]) {
      return false;
    }
    if (shapeless ? all[i].ndim() != static_cast<int>(shapes[i].size())
                  : all[i].shape() != shapes[i]) {
      return false;
    }
  }
  return true;
}

// A call's inputs for the error message when no trace fits them.
std::string describe_call(const std::vector<array>& args,
                          const Kwargs& kwargs) {
  std::ostringstream os;
  os << "(";
  bool first = true;
  auto one = [&](const array& a) {
    os << (first ? "" : ", ") << dtype_name(a.dtype()) << shape_str(a.shape());
    first = false;
  };
  for (auto& a : args) {
    one(a);
  }
  for (auto& [k, a] : kwargs) {
    os << (first ? "" : ", ") << k << "=";
    first = true;
    one(a);
    first = false;
  }
  os << ")";
  return os.str();
}

}  // namespace

ImportedFunction::ImportedFunction(const std::string& path) : path_(path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw std::invalid_argument("[import_function] Cannot open '" + path +
                                "'.");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  detail::ExportedFunctionFile file =
      detail::decode_exported_function(ss.str(), path);
  metadata_ = std::move(file.metadata);
  shapeless_ = file.shapeless;
  traces_ = std::move(file.traces);
}

std::vector<array> ImportedFunction::operator()(const std::vector<array>& args,
                                                const Kwargs& kwargs) const {
  for (auto& t : traces_) {
    if (!signature_matches(t.n_args, t.kwarg_names, t.dtypes, t.shapes,
                           shapeless_, args, kwargs)) {
      continue;
    }
    std::vector<array> inputs = args;
    for (auto& name : t.kwarg_names) {
      inputs.push_back(kwargs.at(name));
    }
    return detail::run_ir(t.ir, inputs, shapeless_, /*check=*/true);
  }
  throw std::invalid_argument(
      "[import_function] No function exported to '" + path_ +
      "' accepts the inputs " + describe_call(args, kwargs) + " (" +
      std::to_string(traces_.size()) + " traced signature" +
      (traces_.size() == 1 ? "" : "s") + ").");
}

ImportedFunction import_function(const std::string& path) {
  return ImportedFunction(path);
}

}  // namespace fluxion
