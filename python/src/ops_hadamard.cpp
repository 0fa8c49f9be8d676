// Bindings of fluxion/ops/hadamard.h: hadamard_transform.
#include "fluxion/ops/hadamard.h"
#include "python/src/docs.h"
#include "python/src/ops_common.h"

void init_ops_hadamard(py::module_& m) {
  const auto s = "stream"_a = py::none();
  m.def(
      "hadamard_transform",
      [](const fx::array& a, std::optional<float> scale,
         fx::StreamOrDevice st) {
        return fx::hadamard_transform(a, scale, st);
      },
      "a"_a, "scale"_a = py::none(), py::kw_only(), s,
      R"doc(The Walsh-Hadamard transform along the last axis.

Args:
    a (array): Input; the last axis' size is a power of two.
    scale (float, optional): Multiplies the result; ``1 / sqrt(n)``
        when omitted.
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The transform.
)doc");
}
