// Bindings of fluxion/graph_utils.h: print options (mx.set_printoptions,
// get_printoptions, the printoptions context) and the graph's printing
// (print_graph, export_to_dot).
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "fluxion/graph_utils.h"
#include "python/src/convert.h"

namespace {

using fxpy::arrays_of;

// `with printoptions(precision=p):` sets the options and restores the
// previous ones on exit.
struct PrintOptionsContext {
  fx::PrintOptions options;
  std::vector<fx::PrintOptions> saved;
};

}  // namespace

void init_graph_utils(py::module_& m) {
  py::class_<fx::PrintOptions>(m, "PrintOptions",
                               "How arrays are printed.")
      .def(py::init([](int precision) { return fx::PrintOptions{precision}; }),
           "precision"_a = -1)
      .def_readwrite("precision", &fx::PrintOptions::precision)
      .def("__repr__", [](const fx::PrintOptions& o) {
        return "PrintOptions(precision=" + std::to_string(o.precision) + ")";
      });
  m.def(
      "set_printoptions",
      [](int precision) { fx::set_printoptions({precision}); },
      "precision"_a = -1,
      R"doc(Set how arrays print.

Args:
    precision (int, optional): Decimals of floating-point values; -1 (the
        default) prints six significant digits.
)doc");
  m.def("get_printoptions", &fx::get_printoptions,
      R"doc(The current print options.

Returns:
    PrintOptions: Its ``precision`` is the number of decimals (-1: six
    significant digits).
)doc");
  py::class_<PrintOptionsContext>(m, "_PrintOptionsContext")
      .def("__enter__",
           [](PrintOptionsContext& c) {
             c.saved.push_back(fx::get_printoptions());
             fx::set_printoptions(c.options);
           })
      .def("__exit__", [](PrintOptionsContext& c, py::args) {
        if (!c.saved.empty()) {
          fx::set_printoptions(c.saved.back());
          c.saved.pop_back();
        }
      });
  m.def(
      "printoptions",
      [](int precision) {
        if (precision < -1) {
          throw std::invalid_argument(
              "[printoptions] precision must be -1 (default) or "
              "non-negative; got " +
              std::to_string(precision) + ".");
        }
        return PrintOptionsContext{{precision}, {}};
      },
      "precision"_a = -1,
      R"doc(Set print options inside a ``with`` block only.

Args:
    precision (int, optional): Decimals of floating-point values; -1 (the
        default) prints six significant digits.

Returns:
    A context manager restoring the previous options on exit.

Example:
    >>> with mx.printoptions(precision=2):
    ...     print(mx.array([1 / 3]))
)doc");
  m.def(
      "export_to_dot",
      [](py::object file, const py::args& args, const py::kwargs& kwargs) {
        std::ostringstream os;
        auto outputs = arrays_of(args);
        // Keyword-named outputs label their nodes with the keyword.
        std::unordered_map<uintptr_t, std::string> names;
        for (auto item : kwargs) {
          std::vector<fx::array> named;
          fxpy::flatten_arrays(item.second, named);
          auto key = py::str(item.first).cast<std::string>();
          for (size_t i = 0; i < named.size(); ++i) {
            names.emplace(named[i].id(), named.size() == 1
                                             ? key
                                             : key + "_" + std::to_string(i));
          }
          outputs.insert(outputs.end(), named.begin(), named.end());
        }
        fx::export_to_dot(os, outputs, names);
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
      R"doc(Write the graph that produces the given arrays as Graphviz source.

Args:
    file (str, path or file object): Where to write.
    *args (array or tree of arrays): The outputs whose graph is drawn.
    **kwargs (array or tree of arrays): More outputs; the keyword labels
        their nodes.
)doc");
  m.def(
      "print_graph",
      [](const py::args& args) {
        std::ostringstream os;
        fx::print_graph(os, arrays_of(args));
        py::print(os.str(), "end"_a = "");
      },
      R"doc(Print the graph that produces the given arrays, one node per line.

Args:
    *args (array or tree of arrays): The outputs whose graph is printed.
)doc");
}
