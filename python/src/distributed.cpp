// mx.distributed: groups of processes and their collectives
// (fluxion/distributed.h): MPI or NCCL under a launcher, else the group of
// size 1.
#include "fluxion/distributed.h"

#include "fluxion/distributed_comm.h"
#include "python/src/convert.h"
#include "python/src/docs.h"

namespace dist = fluxion::distributed;

namespace {

// Once this process is in an MPI job, an uncaught exception ends the whole
// job (after printing the traceback) instead of leaving the interpreter's
// exit to MPI_Finalize, which would wait for peers that may be waiting for
// this process in a collective: so a rank that raises never hangs the
// others (what `python -m mpi4py` does for mpi4py).
void abort_job_on_uncaught_exceptions() {
  static bool installed = false;
  if (installed) {
    return;
  }
  installed = true;
  auto sys = py::module_::import("sys");
  py::object previous = sys.attr("excepthook");
  sys.attr("excepthook") = py::cpp_function(
      [previous](py::object type, py::object value, py::object tb) {
        previous(type, value, tb);
        auto sys = py::module_::import("sys");
        sys.attr("stdout").attr("flush")();
        sys.attr("stderr").attr("flush")();
        dist::detail::mpi_abort(1);
      });
}

}  // namespace

void init_distributed(py::module_& parent) {
  auto m = parent.def_submodule(
      "distributed",
      "Communication between processes: under a launcher (mpirun, or "
      "torchrun-style RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT), init() "
      "gives the group of every process, over NCCL on GPUs or MPI on the "
      "CPU; otherwise the group of size 1, on which collectives are the "
      "identity.");
  py::class_<dist::Group>(m, "Group", "A group of processes that communicate.")
      .def("rank", &dist::Group::rank,
      R"doc(This process's rank in the group.

Returns:
    int: The rank, from 0.
)doc")
      .def("size", &dist::Group::size,
      R"doc(The number of processes in the group.

Returns:
    int: The group's size (1 outside ``mpirun``).
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
  m.def("is_available", &dist::is_available, "backend"_a = "any",
      R"doc(Whether a distributed backend can be used here.

Args:
    backend (str, optional): ``"mpi"`` (Open MPI's libmpi loads),
        ``"nccl"`` (libnccl.so.2 loads and a GPU is visible) or ``"any"``
        (either). Default ``"any"``.

Returns:
    bool: Whether the backend can be used.
)doc");
  m.def(
      "init",
      [](bool strict, const std::string& backend,
         py::object all_gather_factory) {
        // MLX's side-channel factory for its jaccl backend (which Fluxion
        // does not have: "jaccl" gives the group of size 1 like MLX's
        // other unsupported names); checked as MLX checks it.
        if (!all_gather_factory.is_none()) {
          if (backend != "jaccl") {
            throw std::invalid_argument(
                "[distributed.init] all_gather_factory is only valid with "
                "backend='jaccl'; got backend='" + backend + "'.");
          }
          if (!PyCallable_Check(all_gather_factory.ptr())) {
            throw py::type_error(
                std::string("[distributed.init] all_gather_factory must be "
                            "callable; got ") +
                Py_TYPE(all_gather_factory.ptr())->tp_name + ".");
          }
        }
        dist::Group g = dist::init(strict, backend);
        if (g.comm()) {
          abort_job_on_uncaught_exceptions();
        }
        return g;
      },
      "strict"_a = false, "backend"_a = "any",
      "all_gather_factory"_a = py::none(),
      R"doc(The group of every process of this run.

``"mpi"``: the MPI group under ``mpirun``. ``"nccl"``: a NCCL communicator
on the GPU of every process started by ``mpirun`` or with torchrun-style
``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``, or of this
process alone without a launcher; its collectives run on GPU streams.
``"any"``: NCCL when a launcher gave ranks and each rank has a GPU of its
own, else MPI. Without a launcher (or an available backend), the group of
size 1. In an MPI job an uncaught exception then ends the whole job
(``MPI_Abort``), so that no peer waits for this process forever.

Args:
    strict (bool, optional): Require a multi-process group (raise
        without one). Default ``False``.
    backend (str, optional): ``"any"``, ``"mpi"`` or ``"nccl"`` (MLX's
        other names give the group of size 1). Default ``"any"``.
    all_gather_factory (Callable, optional): MLX's side channel for its
        ``"jaccl"`` backend: accepted (and checked to be callable) only
        with ``backend="jaccl"``, which Fluxion runs as a group of size 1.
        Default ``None``.

Returns:
    Group: The group.
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
)doc" FXDOC_STREAM R"doc(
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
)doc" FXDOC_STREAM R"doc(
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
)doc" FXDOC_STREAM R"doc(
Returns:
    array: The received array.
)doc");
}
