// mx.metal and mx.cuda: what MLX programs ask of their GPU backends. There
// is no Metal on Linux; mx.cuda reports the GPU backend of this build.
#include <deque>
#include <string>

#include "python/src/convert.h"

namespace {

// MLX keeps the memory functions under mx.metal as deprecated aliases of the
// top-level ones: they warn, then forward.
template <typename F>
void deprecated_alias(py::module_& metal, py::module_& top, const char* name,
                      F&& sig) {
  std::string msg = std::string("mx.metal.") + name +
                    " is deprecated and will be removed in a future "
                    "version. Use mx." + name + " instead.";
  py::object target = top.attr(name);
  sig(metal, name, [msg, target](py::tuple args) {
    if (PyErr_WarnEx(PyExc_DeprecationWarning, msg.c_str(), 1) < 0) {
      throw py::error_already_set();
    }
    return target(*args);
  });
}

[[noreturn]] void no_metal(const char* op) {
  throw std::runtime_error(std::string("[metal.") + op +
                           "] Metal is not available: Fluxion runs on Linux "
                           "(CPU, and CUDA when built with it).");
}

}  // namespace

void init_backend_modules(py::module_& m) {
  auto metal = m.def_submodule("metal", "Apple's Metal backend (absent).");
  metal.def(
      "is_available", [] { return false; },
      "Whether the Metal backend is available: never, on Linux.\n\n"
      "Returns:\n    bool: ``False``.\n");
  metal.def(
      "device_info", []() -> py::dict { no_metal("device_info"); },
      "Properties of the Metal device; raises, since there is none.\n\n"
      "Raises:\n    RuntimeError: Always.\n");
  metal.def(
      "start_capture", [](const std::string&) { no_metal("start_capture"); },
      "path"_a,
      "Start a Metal capture; raises, since there is no Metal.\n\n"
      "Args:\n    path (str): Where the capture would be written.\n\n"
      "Raises:\n    RuntimeError: Always.\n");
  metal.def(
      "stop_capture", [] { no_metal("stop_capture"); },
      "Stop a Metal capture; raises, since there is no Metal.\n\n"
      "Raises:\n    RuntimeError: Always.\n");
  // The aliases' docstrings name their target; pybind11 keeps a pointer
  // to each, so they live as long as the module.
  static std::deque<std::string> alias_docs;
  auto alias_doc = [](const char* name, const char* args) {
    alias_docs.push_back(std::string("Deprecated alias of :func:`fluxion.core.") +
                         name + "`: warns, then calls it." + args);
    return alias_docs.back().c_str();
  };
  auto no_args = [alias_doc](py::module_& mod, const char* name, auto fn) {
    mod.def(
        name, [fn]() { return fn(py::tuple()); },
        alias_doc(name, "\n\nReturns:\n    The result of the function it "
                        "aliases.\n"));
  };
  auto one_arg = [alias_doc](py::module_& mod, const char* name, auto fn) {
    mod.def(
        name, [fn](py::object limit) { return fn(py::make_tuple(limit)); },
        "limit"_a,
        alias_doc(name, "\n\nArgs:\n    limit (int): Bytes.\n\nReturns:\n"
                        "    int: The previous limit.\n"));
  };
  deprecated_alias(metal, m, "get_active_memory", no_args);
  deprecated_alias(metal, m, "get_peak_memory", no_args);
  deprecated_alias(metal, m, "reset_peak_memory", no_args);
  deprecated_alias(metal, m, "get_cache_memory", no_args);
  deprecated_alias(metal, m, "clear_cache", no_args);
  deprecated_alias(metal, m, "set_memory_limit", one_arg);
  deprecated_alias(metal, m, "set_cache_limit", one_arg);
  deprecated_alias(metal, m, "set_wired_limit", one_arg);

  auto cuda = m.def_submodule("cuda", "The CUDA backend.");
  cuda.def(
      "is_available",
      [] { return fx::is_available(fx::Device(fx::Device::gpu)); },
      "Whether this build has a CUDA backend with a usable GPU.\n\n"
      "Returns:\n    bool: ``True`` on a CUDA build (``FLUXION_CUDA``) "
      "with a GPU.\n");
}
