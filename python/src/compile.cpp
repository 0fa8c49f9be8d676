// mx.compile: arguments and captured state flattened into a C++ compiled
// function (fluxion/compile.h); the Python function is traced on tracers
// once per signature, and its output tree and captured outputs rebuilt.
#include <cstring>
#include <sstream>

#include "fluxion/compiled.h"
#include "python/src/gil_release.h"
#include "python/src/transform_utils.h"
#include "python/src/trees.h"

namespace {

using fxpy::rest;
using fxpy::type_name_str;
using fxpy::wrap;

// --- compile ---

void check_compile_args(py::handle obj) {
  if (PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr())) {
    for (auto item : obj) {
      check_compile_args(item);
    }
  } else if (PyDict_Check(obj.ptr())) {
    for (auto item : py::reinterpret_borrow<py::dict>(obj)) {
      check_compile_args(item.second);
    }
  } else if (!fxpy::array_ptr(obj) && !py::isinstance<py::str>(obj) &&
             !PyLong_Check(obj.ptr()) && !PyFloat_Check(obj.ptr()) &&
             !obj.is_none()) {
    std::ostringstream msg;
    msg << "[compile] Function arguments must be trees of arrays "
        << "or constants (floats, ints, strings, or None), but received "
        << "type " << type_name_str(obj) << ".";
    throw std::invalid_argument(msg.str());
  }
}

// The cache key's constants: the argument tree's shape and its non-array
// leaves (a different constant or structure means a new trace).
void hash_constants(py::handle obj, std::vector<uint64_t>& out) {
  auto str_hash = [](py::handle o) {
    return static_cast<uint64_t>(
        std::hash<std::string>{}(py::str(o).cast<std::string>()));
  };
  if (PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr())) {
    out.push_back(PyList_Check(obj.ptr()) ? 1 : 2);
    if (PyTuple_Check(obj.ptr()) && !PyTuple_CheckExact(obj.ptr())) {
      // A tuple subclass (NamedTuple) comes back as its type.
      out.push_back(reinterpret_cast<uintptr_t>(Py_TYPE(obj.ptr())));
    }
    out.push_back(py::len(obj));
    for (auto item : obj) {
      hash_constants(item, out);
    }
  } else if (PyDict_Check(obj.ptr())) {
    out.push_back(3);
    out.push_back(py::len(obj));
    for (auto item : py::reinterpret_borrow<py::dict>(obj)) {
      out.push_back(str_hash(item.first));
      hash_constants(item.second, out);
    }
  } else if (fxpy::array_ptr(obj)) {
    out.push_back(4);
  } else if (PyBool_Check(obj.ptr())) {
    out.push_back(5);
    out.push_back(obj.ptr() == Py_True);
  } else if (PyLong_Check(obj.ptr())) {
    // Any size of int (a cast to int64 threw "Unable to cast" for 2**64).
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    out.push_back(overflow ? 10 : 6);
    out.push_back(overflow ? str_hash(obj) : static_cast<uint64_t>(v));
  } else if (PyFloat_Check(obj.ptr())) {
    double d = obj.cast<double>();
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    out.push_back(7);
    out.push_back(bits);
  } else if (py::isinstance<py::str>(obj)) {
    out.push_back(8);
    out.push_back(str_hash(obj));
  } else {
    out.push_back(9);  // None
  }
}

// The output tree structure of one trace, kept by compile's cache with
// that trace (fx::detail::ArraysAndExtra), so that replaying a trace
// rebuilds the tree that trace returned (two traces of one function may
// return different trees: a branch on the input's dtype). Released under
// the GIL, since a cache entry may die on any thread.
struct OutputStructure {
  py::object tree;
  size_t count;
};
std::shared_ptr<void> hold_structure(py::object tree, size_t count) {
  auto* st = new OutputStructure{std::move(tree), count};
  return std::shared_ptr<void>(st, [](void* p) {
    auto* o = static_cast<OutputStructure*>(p);
    fxpy::release_under_gil([o] { delete o; });
  });
}

// One per compiled wrapper (the partial mx.compile returns holds it): its
// address keys the wrapper's traces, erased when the wrapper is released
// (MLX erases a compiled function's traces with it), so compiling the same
// Python callable again traces again instead of reusing a dead wrapper's
// tape (which may have captured since-rebound closures as constants).
struct CompileToken {
  CompileToken() = default;
  CompileToken(const CompileToken&) = delete;
  CompileToken& operator=(const CompileToken&) = delete;
  ~CompileToken() {
    fx::detail::compile_erase(reinterpret_cast<uintptr_t>(this));
  }
};

// all_args: fun, inputs, outputs, shapeless, token, then the call's
// arguments.
// Arguments and captured `inputs` become the traced function's inputs;
// its outputs and the captured `outputs` come back and are put in place.
py::object compiled_call(const py::args& all_args, const py::kwargs& kwargs) {
  py::object fun = all_args[0];
  py::object captured_in = all_args[1];
  py::object captured_out = all_args[2];
  bool shapeless = all_args[3].cast<bool>();
  auto id = reinterpret_cast<uintptr_t>(&all_args[4].cast<CompileToken&>());
  py::tuple args = rest(all_args, 5);
  check_compile_args(args);
  check_compile_args(kwargs);
  if (!fx::compile_enabled()) {
    return fun(*args, **kwargs);
  }
  py::tuple call = py::make_tuple(args, kwargs);
  auto arrays_structure_ = fxpy::tree_flatten_with_structure(call, false);
  [[maybe_unused]] auto& arrays = std::get<0>(arrays_structure_);
  [[maybe_unused]] auto& structure = std::get<1>(arrays_structure_);
  std::vector<uint64_t> constants;
  hash_constants(call, constants);
  size_t n_args = arrays.size();
  std::vector<fx::array> captured;
  if (!captured_in.is_none()) {
    captured = fxpy::tree_flatten(captured_in, false);
  }
  arrays.insert(arrays.end(), captured.begin(), captured.end());

  fx::detail::FnWithExtra traced = [&](const std::vector<fx::array>& tracers) {
    py::tuple rebuilt =
        fxpy::tree_unflatten_from_structure(structure, tracers, 0);
    std::vector<fx::array> captured_tracers(tracers.begin() + n_args,
                                            tracers.end());
    if (!captured_in.is_none()) {
      fxpy::tree_replace(captured_in, captured, captured_tracers);
    }
    py::object out;
    std::vector<fx::array> outs;
    std::shared_ptr<void> structure;
    try {
      out = fun(*rebuilt[0], **rebuilt[1]);
      auto out_arrays_out_tree_ = fxpy::tree_flatten_with_structure(out, false);
      [[maybe_unused]] auto& out_arrays = std::get<0>(out_arrays_out_tree_);
      [[maybe_unused]] auto& out_tree = std::get<1>(out_arrays_out_tree_);
      outs = std::move(out_arrays);
      structure = hold_structure(out_tree, outs.size());
      if (!captured_out.is_none()) {
        auto state = fxpy::tree_flatten(captured_out, false);
        outs.insert(outs.end(), state.begin(), state.end());
      }
    } catch (...) {
      // The call failed: the captured state goes back to what it was
      // before it (not to arrays of the abandoned trace).
      if (!captured_in.is_none()) {
        if (fxpy::tree_flatten(captured_in, false).size() == captured.size()) {
          fxpy::tree_fill(captured_in, captured);
        } else {
          fxpy::tree_replace(captured_in, captured_tracers, captured);
        }
      }
      throw;
    }
    if (!captured_in.is_none()) {
      fxpy::tree_replace(captured_in, captured_tracers, captured);
    }
    return fx::detail::ArraysAndExtra{std::move(outs), std::move(structure)};
  };
  auto [results, extra] =
      fx::detail::compile_with_extra(traced, id, shapeless, constants)(arrays);
  // `extra` keeps the structure alive while it is used, even if the
  // wrapper's traces are erased meanwhile.
  auto& st = *static_cast<OutputStructure*>(extra.get());
  std::vector<fx::array> own(results.begin(), results.begin() + st.count);
  if (!captured_out.is_none()) {
    std::vector<fx::array> state(results.begin() + st.count, results.end());
    fxpy::tree_fill(captured_out, state);
  }
  return fxpy::tree_unflatten_from_structure(st.tree, own, 0);
}

}  // namespace

void init_compile(py::module_& m) {
  m.def(
      "compile",
      [](const py::function& fun, const py::object& inputs,
         const py::object& outputs, bool shapeless) {
        return wrap(py::cpp_function(&compiled_call), fun, inputs, outputs,
                    shapeless, py::cast(new CompileToken(),
                                        py::return_value_policy::take_ownership));
      },
      "fun"_a, "inputs"_a = py::none(), "outputs"_a = py::none(),
      "shapeless"_a = false,
      R"doc(Compile a function: trace it once per signature, then replay the graph.

The traced graph is simplified and runs of elementwise ops are fused into
generated kernels. A signature is the arguments' dtypes and shapes (only
their ndims with ``shapeless``), their constants and tree structure; a new
one traces again.

Args:
    fun (Callable): The function. Its arguments are trees of arrays or
        constants (ints, floats, strings, ``None``).
    inputs (tree, optional): Arrays or modules that ``fun`` reads besides
        its arguments (captured state).
    outputs (tree, optional): Arrays or modules that ``fun`` updates
        besides its results (captured state).
    shapeless (bool, optional): Do not retrace for new shapes of the same
        ndims. Default ``False``.

Returns:
    Callable: A function with the same results as ``fun``.

Example:
    >>> f = mx.compile(lambda x, y: mx.exp(-x) * y + 1)
    >>> f(mx.ones((3,)), mx.ones((3,))).shape
    (3,)
)doc");
  // Test hook (not MLX's API): the number of traces and per-function
  // records held by compile's caches, for the leak tests.
  m.def("_compile_cache_size",
        [] { return fx::detail::compile_cache_size(); });
  // Test hook: how many Compiled nodes ran node by node (no generated
  // kernel), so tests can tell a fused kernel from its fallback.
  m.def("_compiled_fallbacks",
        [] { return fx::detail::compiled_fallbacks(); });
  py::class_<CompileToken>(m, "_CompileToken",
                           "The cache key of one compiled wrapper (private).");
  m.def(
      "disable_compile", [] { fx::disable_compile(); },
      R"doc(Disable compilation globally: compiled functions run uncompiled.

Setting the environment variable ``FLUXION_DISABLE_COMPILE`` does the
same.
)doc");
  m.def(
      "enable_compile", [] { fx::enable_compile(); },
      R"doc(Enable compilation globally, overriding ``FLUXION_DISABLE_COMPILE``.
)doc");
}
