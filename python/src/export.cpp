// mx.export_function, mx.import_function and mx.exporter (fluxion/export.h):
// MLX's argument conventions, a callback in place of a file, and exporters
// whose function the garbage collector can see.
#include "fluxion/export.h"

#include "python/src/convert.h"

namespace {

std::string type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

std::optional<std::string> as_path(py::handle f) {
  if (py::isinstance<py::str>(f)) {
    return f.cast<std::string>();
  }
  if (py::hasattr(f, "__fspath__")) {
    py::object p = py::module_::import("os").attr("fspath")(f);
    if (py::isinstance<py::str>(p)) {
      return p.cast<std::string>();
    }
  }
  return std::nullopt;
}

fx::array input_array(py::handle h, const char* op, const std::string& what) {
  if (auto* a = fxpy::array_ptr(h)) {
    return *a;
  }
  throw std::invalid_argument(std::string("[") + op +
                              "] Inputs must be arrays; got " + type_name(h) +
                              " for " + what + ".");
}

// MLX's calling conventions: f(*arrays, **arrays), f([arrays]),
// f((arrays,), {name: array}) and f({name: array}).
std::pair<std::vector<fx::array>, fx::Kwargs> normalize(const py::tuple& args,
                                                        const py::dict& kwargs,
                                                        const char* op) {
  py::object pos = args;
  py::object kw = kwargs;
  auto seq = [](py::handle h) {
    return py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h);
  };
  if (kwargs.empty()) {
    if (args.size() == 1 && seq(args[0])) {
      pos = args[0];
    } else if (args.size() == 1 && py::isinstance<py::dict>(args[0])) {
      pos = py::tuple();
      kw = args[0];
    } else if (args.size() == 2 && seq(args[0]) &&
               py::isinstance<py::dict>(args[1])) {
      pos = args[0];
      kw = args[1];
    }
  }
  std::vector<fx::array> a;
  size_t i = 0;
  for (auto h : pos) {
    a.push_back(input_array(h, op, "argument " + std::to_string(i++)));
  }
  fx::Kwargs k;
  for (auto [name, v] : kw.cast<py::dict>()) {
    if (!py::isinstance<py::str>(name)) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] Keyword names must be str.");
    }
    std::string n = name.cast<std::string>();
    k.emplace(n, input_array(v, op, "keyword '" + n + "'"));
  }
  return {a, k};
}

std::vector<fx::array> outputs_of(py::handle out) {
  if (auto* a = fxpy::array_ptr(out)) {
    return {*a};
  }
  if (py::isinstance<py::list>(out) || py::isinstance<py::tuple>(out)) {
    std::vector<fx::array> v;
    for (auto h : out) {
      auto* a = fxpy::array_ptr(h);
      if (!a) {
        throw std::invalid_argument(
            "[export_function] The function must return an array or a flat "
            "list or tuple of arrays; got an element of type " +
            type_name(h) + ".");
      }
      v.push_back(*a);
    }
    return v;
  }
  throw std::invalid_argument(
      "[export_function] The function must return an array or a flat list "
      "or tuple of arrays; got " +
      type_name(out) + ".");
}

// The Python function as a KwFn (called with the GIL held).
fx::KwFn wrap(py::handle fun) {
  return [fun](const std::vector<fx::array>& args, const fx::Kwargs& kwargs) {
    py::tuple a(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      a[i] = py::cast(args[i]);
    }
    py::dict k;
    for (auto& [name, v] : kwargs) {
      k[py::str(name)] = py::cast(v);
    }
    return outputs_of(fun(*a, **k));
  };
}

py::list arg_list(const std::vector<fx::PrimitiveArg>& args) {
  py::list out;
  for (auto& a : args) {
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            out.append(py::cast(v));
          } else {
            out.append(py::cast(v));
          }
        },
        a);
  }
  return out;
}

// "v<index>", the name MLX's callback gives a traced value (appended rather
// than `"v" + ...`, which GCC 12's -Wrestrict misreads).
std::string value_name(size_t v) {
  std::string name = "v";
  name += std::to_string(v);
  return name;
}

py::tuple value_info(const fx::detail::Ir& ir, int v) {
  return py::make_tuple(value_name(v),
                        py::tuple(py::cast(ir.values[v].shape)),
                        ir.values[v].dtype);
}

// Hands one traced call to `callback` as MLX does: dicts of type "inputs",
// "keyword_inputs", "constants", one "primitive" per node, "outputs".
void to_callback(py::handle callback, const fx::ExportedTrace& t) {
  const auto& ir = t.ir;
  py::list inputs;
  for (int v : ir.inputs) {
    inputs.append(value_info(ir, v));
  }
  callback(py::dict("type"_a = "inputs", "inputs"_a = inputs));
  py::list keywords;
  for (size_t i = 0; i < t.kwarg_names.size(); ++i) {
    keywords.append(py::make_tuple(
        t.kwarg_names[i], value_name(ir.inputs[t.n_args + i])));
  }
  callback(py::dict("type"_a = "keyword_inputs", "keywords"_a = keywords));
  py::list constants;
  for (size_t v = 0; v < ir.values.size(); ++v) {
    if (ir.values[v].constant) {
      constants.append(py::make_tuple(value_name(v),
                                      py::cast(*ir.values[v].constant)));
    }
  }
  callback(py::dict("type"_a = "constants", "constants"_a = constants));
  for (auto& n : ir.nodes) {
    auto [name, args] = fx::export_primitive(*n.prim);
    py::list ins, outs;
    for (int v : n.inputs) {
      ins.append(value_name(v));
    }
    for (int v : n.outputs) {
      outs.append(value_info(ir, v));
    }
    callback(py::dict("type"_a = "primitive", "name"_a = name,
                      "arguments"_a = arg_list(args), "inputs"_a = ins,
                      "outputs"_a = outs));
  }
  py::list outputs;
  for (int v : ir.outputs) {
    outputs.append(value_info(ir, v));
  }
  callback(py::dict("type"_a = "outputs", "outputs"_a = outputs));
}

std::string metadata_of(py::handle metadata) {
  if (metadata.is_none()) {
    return "";
  }
  if (!py::isinstance<py::str>(metadata)) {
    throw py::type_error("[export_function] metadata must be a str; got " +
                         type_name(metadata) + ".");
  }
  return metadata.cast<std::string>();
}

// mx.exporter's object: the function (visible to the garbage collector),
// and either a file exporter or a callback.
struct PyExporter {
  py::object fun;
  py::object callback;  // None when exporting to a file
  std::shared_ptr<fx::FunctionExporter> file;
  bool shapeless = false;
  bool closed = false;
  const char* op = "exporter";

  void call(const py::args& args, const py::kwargs& kwargs) {
    if (closed) {
      throw std::runtime_error(
          "[exporter] The exporter is closed; make a new one to export more "
          "traces.");
    }
    auto [a, k] = normalize(args, kwargs, op);
    fx::KwFn f = wrap(fun);
    if (!callback.is_none()) {
      to_callback(callback, fx::export_trace(f, a, k, shapeless));
    } else {
      file->add_trace(f, a, k);
    }
  }
  void close() {
    closed = true;
    if (file) {
      file->close();
    }
    fun = py::none();
    callback = py::none();
  }
};

PyExporter make_exporter(py::handle file, py::object fun, bool shapeless,
                         py::handle metadata) {
  std::string meta = metadata_of(metadata);
  PyExporter e{fun, py::none(), nullptr, shapeless, false};
  if (auto path = as_path(file)) {
    e.file = std::make_shared<fx::FunctionExporter>(*path, nullptr, shapeless,
                                                    meta);
  } else if (PyCallable_Check(file.ptr())) {
    if (!meta.empty()) {
      throw std::invalid_argument(
          "[export_function] metadata cannot be given with a callback "
          "(it is stored in exported files only).");
    }
    e.callback = py::reinterpret_borrow<py::object>(file);
  } else {
    throw py::type_error(
        "[export_function] file must be a str, a pathlib.Path or a "
        "callback; got " +
        type_name(file) + ".");
  }
  return e;
}

int exporter_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  auto vh = inst->get_value_and_holder();
  if (!vh.holder_constructed()) {
    return 0;
  }
  auto* p = vh.value_ptr<PyExporter>();
  Py_VISIT(p->fun.ptr());
  Py_VISIT(p->callback.ptr());
  return 0;
}

int exporter_clear(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  auto vh = inst->get_value_and_holder();
  if (!vh.holder_constructed()) {
    return 0;
  }
  auto* p = vh.value_ptr<PyExporter>();
  p->fun = py::none();
  p->callback = py::none();
  return 0;
}

py::object call_imported(const fx::ImportedFunction& f, const py::args& args,
                         const py::kwargs& kwargs) {
  auto [a, k] = normalize(args, kwargs, "import_function");
  auto outs = f(a, k);
  py::tuple t(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    t[i] = py::cast(outs[i]);
  }
  return t;
}

}  // namespace

void init_export(py::module_& m) {
  py::class_<PyExporter>(
      m, "FunctionExporter",
      py::custom_type_setup([](PyHeapTypeObject* heap_type) {
        auto* type = &heap_type->ht_type;
        type->tp_flags |= Py_TPFLAGS_HAVE_GC;
        type->tp_traverse = exporter_traverse;
        type->tp_clear = exporter_clear;
      }),
      "Exports one trace of its function per call (see mx.exporter).")
      .def("__call__", &PyExporter::call)
      .def("close", &PyExporter::close,
      R"doc(Finish exporting: write the file; later calls raise.
)doc")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyExporter& e, py::args) {
             e.close();
             return false;
           });
  m.def(
      "exporter",
      [](py::handle file, py::object fun, bool shapeless, py::handle metadata) {
        return make_exporter(file, fun, shapeless, metadata);
      },
      "file"_a, "fun"_a, py::kw_only(), "shapeless"_a = false,
      "metadata"_a = py::none(),
      R"doc(Make an exporter that writes one trace of ``fun`` per call.

Each call ``exporter(*args, **kwargs)`` adds a trace for that signature.
Use it as a context manager, or call :meth:`FunctionExporter.close`.

Args:
    file (str, pathlib.Path or Callable): The file, or a callback that
        receives the bytes.
    fun (Callable): The function to export.
    shapeless (bool, optional): The imported function accepts other
        shapes of the same ndims. Default ``False``.
    metadata (str, optional): Stored with the function.

Returns:
    FunctionExporter: The exporter.
)doc");
  m.def(
      "export_function",
      [](py::handle file, py::object fun, py::args args, bool shapeless,
         py::object metadata, py::kwargs kwargs) {
        PyExporter e = make_exporter(file, fun, shapeless, metadata);
        e.op = "export_function";
        e.call(args, kwargs);
        e.close();
      },
      "file"_a, "fun"_a, "shapeless"_a = false, "metadata"_a = py::none(),
      R"doc(Trace ``fun(*args, **kwargs)`` and write it to a file.

The file holds the graph; :func:`import_function` reads it back, here or
in a C++ program.

Args:
    file (str, pathlib.Path or Callable): The file, or a callback that
        receives the bytes.
    fun (Callable): The function to export.
    *args (array): Example positional inputs (or one list/tuple of
        them).
    shapeless (bool, optional): The imported function accepts other
        shapes of the same ndims. Default ``False``.
    metadata (str, optional): Stored with the function.
    **kwargs (array): Example keyword inputs.

Example:
    >>> mx.export_function("f.fxfn", lambda x: x * 2, mx.ones((3,)))
    >>> f = mx.import_function("f.fxfn")
    >>> f(mx.ones((3,)))[0].tolist()
    [2.0, 2.0, 2.0]
)doc");
  py::class_<fx::ImportedFunction>(
      m, "ImportedFunction",
      "A function read by mx.import_function: call it like the exported "
      "one; it returns a tuple of arrays.")
      .def("__call__", &call_imported);
  m.def(
      "import_function",
      [](py::handle file, bool return_metadata) -> py::object {
        auto path = as_path(file);
        if (!path) {
          throw py::type_error(
              "[import_function] file must be a str or a pathlib.Path; "
              "got " +
              type_name(file) + ".");
        }
        fx::ImportedFunction f(*path);
        if (return_metadata) {
          std::string meta = f.metadata();
          return py::make_tuple(py::cast(std::move(f)), meta);
        }
        return py::cast(std::move(f));
      },
      "file"_a, py::kw_only(), "return_metadata"_a = false,
      R"doc(Read a function written by :func:`export_function`.

Args:
    file (str or pathlib.Path): The file.
    return_metadata (bool, optional): Also return its metadata string.
        Default ``False``.

Returns:
    ImportedFunction: Called like the exported function, it returns a
    tuple of arrays; ``(function, metadata)`` with ``return_metadata``.
)doc");
}
