// Bindings of fluxion/ops/custom.h: depends (custom_function, built on the
// same file's CustomTransforms, is bound with the transformations in
// transforms.cpp).
#include "python/src/docs.h"
#include "python/src/ops_common.h"

void init_ops_custom(py::module_& m) {
  m.def(
      "depends",
      [](py::handle inputs, py::handle dependencies) -> py::object {
        // An array is one input, not a sequence of its rows (an array
        // supports len() and indexing, so a sequence caster would iterate
        // it); a single array in gives a single array out, as MLX.
        bool single = fxpy::array_ptr(inputs) != nullptr;
        auto in = fxpy::array_or_arrays(inputs, "depends", "inputs");
        auto deps = fxpy::array_or_arrays(dependencies, "depends",
                                          "dependencies");
        auto out = fx::depends(in, deps);
        if (single) {
          return py::cast(out[0]);
        }
        return py::cast(out);
      },
      "inputs"_a, "dependencies"_a,
      R"doc(Return ``inputs`` unchanged, computed only after ``dependencies``.

Args:
    inputs (array or list(array)): The array or arrays to pass through.
    dependencies (array or list(array)): The array or arrays that must be
        evaluated first.

Returns:
    array or list(array): An array equal to ``inputs`` when it is an
    array, else a list of arrays equal to ``inputs``.
)doc");
}
