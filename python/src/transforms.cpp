// eval / async_eval over pytrees, and graph printing. The function
// transformations (grad, vmap, ...) are bound separately.
#include <fstream>
#include <sstream>

#include "python/src/convert.h"

namespace {

std::vector<fx::array> arrays_of(const py::args& args) {
  std::vector<fx::array> out;
  for (auto a : args) {
    fxpy::flatten_arrays(a, out);
  }
  return out;
}

}  // namespace

void init_transforms(py::module_& m) {
  m.def(
      "eval",
      [](const py::args& args) {
        auto arrays = arrays_of(args);
        py::gil_scoped_release nogil;
        fx::eval(std::move(arrays));
      },
      "Evaluate arrays or trees (lists, tuples, dicts) of arrays; other "
      "leaves are ignored.");
  m.def(
      "async_eval",
      [](const py::args& args) {
        auto arrays = arrays_of(args);
        py::gil_scoped_release nogil;
        fx::async_eval(std::move(arrays));
      },
      "Schedule the evaluation of arrays or trees of arrays and return at "
      "once.");
  m.def(
      "export_to_dot",
      [](py::object file, const py::args& args) {
        std::ostringstream os;
        fx::export_to_dot(os, arrays_of(args));
        if (py::isinstance<py::str>(file) || py::hasattr(file, "__fspath__")) {
          auto path = py::module_::import("os").attr("fspath")(file);
          std::ofstream f(path.cast<std::string>());
          if (!f) {
            throw std::invalid_argument("[export_to_dot] Cannot open " +
                                        path.cast<std::string>() + ".");
          }
          f << os.str();
        } else {
          file.attr("write")(os.str());
        }
      },
      "file"_a,
      "Write the Graphviz source of the graph producing the given arrays to "
      "a path or a file object.");
  m.def(
      "print_graph",
      [](const py::args& args) {
        std::ostringstream os;
        fx::print_graph(os, arrays_of(args));
        py::print(os.str(), "end"_a = "");
      },
      "Print the graph producing the given arrays, one node per line.");
}
