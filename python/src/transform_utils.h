// Helpers shared by the transformation bindings (transforms.cpp,
// compile.cpp).
#pragma once

#include <string>
#include <utility>

#include "python/src/convert.h"

namespace fxpy {

inline std::string type_name_str(py::handle o) {
  return py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>();
}

// `impl` bound to `bound...` as a functools.partial that looks like `fun`.
template <typename... Bound>
py::object wrap(const py::object& impl, py::handle fun, Bound&&... bound) {
  auto functools = py::module_::import("functools");
  auto p = functools.attr("partial")(impl, fun, std::forward<Bound>(bound)...);
  functools.attr("update_wrapper")(p, fun);
  return p;
}

// The arguments after the `n` bound ones.
inline py::tuple rest(const py::args& args, size_t n) {
  return py::reinterpret_steal<py::tuple>(
      PyTuple_GetSlice(args.ptr(), n, args.size()));
}

}  // namespace fxpy
