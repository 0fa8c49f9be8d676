// mx.distributed: groups of processes and their collectives
// (fluxion/distributed.h): MPI under mpirun, else the group of size 1.
#include "fluxion/distributed.h"

#include "fluxion/distributed_comm.h"
#include "python/src/convert.h"

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
      "Communication between processes: under mpirun, init() gives the MPI "
      "group of every process; otherwise the group of size 1, on which "
      "collectives are the identity.");
  py::class_<dist::Group>(m, "Group", "A group of processes that communicate.")
      .def("rank", &dist::Group::rank, "This process's rank in the group.")
      .def("size", &dist::Group::size, "The number of processes.")
      .def("split", &dist::Group::split, "color"_a, "key"_a = -1,
           "Sub-groups of the processes passing the same ``color``, ranked "
           "by ``key``.");
  m.def("is_available", &dist::is_available, "backend"_a = "any",
        "Whether ``backend`` (\"any\" or \"mpi\") can be used: whether "
        "libmpi loads.");
  m.def(
      "init",
      [](bool strict, const std::string& backend) {
        dist::Group g = dist::init(strict, backend);
        if (g.comm()) {
          abort_job_on_uncaught_exceptions();
        }
        return g;
      },
      "strict"_a = false, "backend"_a = "any",
      "The group of every process of this run: the MPI group under "
      "mpirun, else the group of size 1. With ``strict=True`` a "
      "multi-process group is required and this raises. In an MPI job an "
      "uncaught exception then ends the whole job (MPI_Abort), so that "
      "no peer waits for this process forever.");
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
