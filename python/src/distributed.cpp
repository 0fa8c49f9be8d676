// mx.distributed: the singleton group of one process (fluxion/distributed.h).
#include "fluxion/distributed.h"
#include "python/src/convert.h"

namespace dist = fluxion::distributed;

void init_distributed(py::module_& parent) {
  auto m = parent.def_submodule(
      "distributed",
      "Communication between processes. Fluxion runs one process: init() "
      "gives the group of size 1, on which collectives are the identity.");
  py::class_<dist::Group>(m, "Group",
                          "A group of processes that communicate.")
      .def("rank", &dist::Group::rank, "This process's rank in the group.")
      .def("size", &dist::Group::size, "The number of processes.")
      .def("split", &dist::Group::split, "color"_a, "key"_a = -1,
           "Sub-groups of the processes passing the same ``color``, ranked "
           "by ``key``.");
  m.def("is_available", &dist::is_available,
        "Whether a multi-process backend is built in (none is).");
  m.def("init", &dist::init, "strict"_a = false, "backend"_a = "any",
        "The group of every process of this run: of size 1. With "
        "``strict=True`` a multi-process group is required and this raises.");
  using Collective = fx::array (*)(const fx::array&, std::optional<dist::Group>,
                                   fx::StreamOrDevice);
  auto collective = [&](const char* name, Collective fn, const char* doc) {
    m.def(
        name,
        [fn](py::handle x, std::optional<dist::Group> group,
             fx::StreamOrDevice s) { return fn(fxpy::to_array(x), group, s); },
        "x"_a, py::pos_only(), py::kw_only(), "group"_a = py::none(),
        "stream"_a = py::none(), doc);
  };
  collective("all_sum", &dist::all_sum,
             "The sum of ``x`` over the processes of the group.");
  collective("all_max", &dist::all_max,
             "The maximum of ``x`` over the processes of the group.");
  collective("all_min", &dist::all_min,
             "The minimum of ``x`` over the processes of the group.");
  collective("all_gather", &dist::all_gather,
             "Every process's ``x`` concatenated along axis 0.");
  collective("sum_scatter", &dist::sum_scatter,
             "The sum over processes, split along axis 0: this process's "
             "part.");
  m.def(
      "send",
      [](py::handle x, int dst, std::optional<dist::Group> group,
         fx::StreamOrDevice s) {
        return dist::send(fxpy::to_array(x), dst, group, s);
      },
      "x"_a, "dst"_a, py::pos_only(), py::kw_only(), "group"_a = py::none(),
      "stream"_a = py::none(), "Send ``x`` to process ``dst``.");
  m.def(
      "recv",
      [](fxpy::ShapeArg shape, fx::Dtype dtype, int src,
         std::optional<dist::Group> group, fx::StreamOrDevice s) {
        return dist::recv(fxpy::to_shape(shape), dtype, src, group, s);
      },
      "shape"_a, "dtype"_a, "src"_a, py::pos_only(), py::kw_only(),
      "group"_a = py::none(), "stream"_a = py::none(),
      "Receive an array of ``shape`` and ``dtype`` from process ``src``.");
  m.def(
      "recv_like",
      [](py::handle x, int src, std::optional<dist::Group> group,
         fx::StreamOrDevice s) {
        return dist::recv_like(fxpy::to_array(x), src, group, s);
      },
      "x"_a, "src"_a, py::pos_only(), py::kw_only(), "group"_a = py::none(),
      "stream"_a = py::none(),
      "Receive an array shaped like ``x`` from process ``src``.");
}
