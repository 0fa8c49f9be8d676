// mx.distributed: the singleton group of one process (fluxion/distributed.h).
#include "fluxion/distributed.h"
#include "python/src/convert.h"
#include "python/src/docs.h"

namespace dist = fluxion::distributed;

void init_distributed(py::module_& parent) {
  auto m = parent.def_submodule(
      "distributed",
      "Communication between processes. Fluxion runs one process: init() "
      "gives the group of size 1, on which collectives are the identity.");
  py::class_<dist::Group>(m, "Group",
                          "A group of processes that communicate.")
      .def("rank", &dist::Group::rank,
      R"doc(This process's rank in the group.

Returns:
    int: 0 in Fluxion's group of one.
)doc")
      .def("size", &dist::Group::size,
      R"doc(The number of processes in the group.

Returns:
    int: 1 in Fluxion.
)doc")
      .def("split", &dist::Group::split, "color"_a, "key"_a = -1,
      R"doc(Split the group into sub-groups.

Args:
    color (int): Processes passing the same color share a sub-group.
    key (int, optional): Orders the ranks in the sub-group; the current
        rank when -1. Default -1.

Returns:
    Group: This process's sub-group.
)doc");
  m.def("is_available", &dist::is_available,
      R"doc(Whether a multi-process backend is built in.

Returns:
    bool: ``False``: Fluxion runs one process.
)doc");
  m.def("init", &dist::init, "strict"_a = false, "backend"_a = "any",
      R"doc(The group of every process of this run.

Args:
    strict (bool, optional): Require a multi-process group (then this
        raises, as there is none). Default ``False``.
    backend (str, optional): The backend to use. Default ``"any"``.

Returns:
    Group: A group of size 1.
)doc");
  using Collective = fx::array (*)(const fx::array&, std::optional<dist::Group>,
                                   fx::StreamOrDevice);
  // The arguments every collective takes, after its summary.
#define FLUXION_COLLECTIVE_DOC(SUMMARY, RESULT)                              \
  SUMMARY FXDOC_ARGS "    x (array): This process's array.\n"               \
          "    group (Group, optional): The group; that of :func:`init`\n" \
          "        when omitted.\n" FXDOC_STREAM FXDOC_RET_ARRAY RESULT "\n"
  auto collective = [&](const char* name, Collective fn, const char* doc) {
    m.def(
        name,
        [fn](py::handle x, std::optional<dist::Group> group,
             fx::StreamOrDevice s) { return fn(fxpy::to_array(x), group, s); },
        "x"_a, py::pos_only(), py::kw_only(), "group"_a = py::none(),
        "stream"_a = py::none(), doc);
  };
  collective("all_sum", &dist::all_sum,
             FLUXION_COLLECTIVE_DOC("The sum of ``x`` over the processes of the group.",
                                    "The result (``x`` itself in a group of one)."));
  collective("all_max", &dist::all_max,
             FLUXION_COLLECTIVE_DOC("The maximum of ``x`` over the processes of the group.",
                                    "The result (``x`` itself in a group of one)."));
  collective("all_min", &dist::all_min,
             FLUXION_COLLECTIVE_DOC("The minimum of ``x`` over the processes of the group.",
                                    "The result (``x`` itself in a group of one)."));
  collective("all_gather", &dist::all_gather,
             FLUXION_COLLECTIVE_DOC("Every process's ``x`` concatenated along axis 0.",
                                    "The result (``x`` itself in a group of one)."));
  collective("sum_scatter", &dist::sum_scatter,
             FLUXION_COLLECTIVE_DOC("The sum over processes, split along axis 0: this process's "
             "part.",
                                    "The result (``x`` itself in a group of one)."));
#undef FLUXION_COLLECTIVE_DOC
  m.def(
      "send",
      [](py::handle x, int dst, std::optional<dist::Group> group,
         fx::StreamOrDevice s) {
        return dist::send(fxpy::to_array(x), dst, group, s);
      },
      "x"_a, "dst"_a, py::pos_only(), py::kw_only(), "group"_a = py::none(),
      "stream"_a = py::none(),
      R"doc(Send an array to another process.

Args:
    x (array): The array.
    dst (int): The rank of the receiver.
    group (Group, optional): The group; that of :func:`init` when omitted.
    stream (Stream or Device, optional): Where the op runs; the default
    stream of the default device when omitted.

Returns:
    array: An array to evaluate so that the send happens.
)doc");
  m.def(
      "recv",
      [](fxpy::ShapeArg shape, fx::Dtype dtype, int src,
         std::optional<dist::Group> group, fx::StreamOrDevice s) {
        return dist::recv(fxpy::to_shape(shape), dtype, src, group, s);
      },
      "shape"_a, "dtype"_a, "src"_a, py::pos_only(), py::kw_only(),
      "group"_a = py::none(), "stream"_a = py::none(),
      R"doc(Receive an array from another process.

Args:
    shape (tuple(int)): Its shape.
    dtype (Dtype): Its dtype.
    src (int): The rank of the sender.
    group (Group, optional): The group; that of :func:`init` when omitted.
    stream (Stream or Device, optional): Where the op runs; the default
    stream of the default device when omitted.

Returns:
    array: The received array.
)doc");
  m.def(
      "recv_like",
      [](py::handle x, int src, std::optional<dist::Group> group,
         fx::StreamOrDevice s) {
        return dist::recv_like(fxpy::to_array(x), src, group, s);
      },
      "x"_a, "src"_a, py::pos_only(), py::kw_only(), "group"_a = py::none(),
      "stream"_a = py::none(),
      R"doc(Receive an array shaped like ``x`` from another process.

Args:
    x (array): Gives the shape and dtype.
    src (int): The rank of the sender.
    group (Group, optional): The group; that of :func:`init` when omitted.
    stream (Stream or Device, optional): Where the op runs; the default
    stream of the default device when omitted.

Returns:
    array: The received array.
)doc");
}
