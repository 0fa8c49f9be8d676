// Devices, streams, the `stream` context manager and synchronize.
#include <sstream>

#include "fluxion/backend_interface.h"
#include "fluxion/gpu_stats.h"
#include "fluxion/primitive_registry.h"
#include "python/src/convert.h"

namespace {

template <typename T>
std::string to_string(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Within `with stream(s):` ops of this thread default to `s` (or to the
// device's default stream); leaving restores this thread's previous
// defaults. Other threads are not affected.
class StreamContext {
 public:
  explicit StreamContext(fx::StreamOrDevice s) : target_(s) {
    if (s.kind == fx::StreamOrDevice::Kind::none) {
      throw std::invalid_argument(
          "[stream] Expected a Stream or a Device; got None.");
    }
  }
  void enter() {
    saved_.push_back(fx::detail::save_thread_defaults());
    if (target_.kind == fx::StreamOrDevice::Kind::stream) {
      fx::set_default_stream(target_.stream);
    } else {
      fx::detail::set_thread_default_device(target_.device);
    }
  }
  void exit() {
    if (!saved_.empty()) {
      fx::detail::restore_thread_defaults(saved_.back());
      saved_.pop_back();
    }
  }

 private:
  fx::StreamOrDevice target_;
  std::vector<fx::detail::ThreadDefaultsState> saved_;
};

py::dict device_info_dict(const fx::Device& d) {
  py::dict out;
  for (auto& [k, v] : fx::device_info(d)) {
    if (auto* str = std::get_if<std::string>(&v)) {
      out[py::str(k)] = py::str(*str);
    } else {
      out[py::str(k)] = py::int_(std::get<size_t>(v));
    }
  }
  return out;
}

}  // namespace

void init_devices(py::module_& m) {
  py::class_<fx::Device> device(m, "Device",
                                "A device: ``Device(DeviceType.cpu, 0)``.");
  py::enum_<fx::Device::DeviceType> device_type(m, "DeviceType");
  device_type.value("cpu", fx::Device::DeviceType::cpu)
      .value("gpu", fx::Device::DeviceType::gpu);
  // A type equals the device of that type with index 0 (MLX:
  // `default_device().type == Device(cpu)`).
  auto type_eq = [](fx::Device::DeviceType t, py::handle o) -> py::object {
    if (py::isinstance<fx::Device>(o)) {
      return py::bool_(fx::Device(t) == o.cast<fx::Device>());
    }
    if (py::isinstance<fx::Device::DeviceType>(o)) {
      return py::bool_(t == o.cast<fx::Device::DeviceType>());
    }
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  };
  // py::enum_ already defines __eq__/__ne__ (False for other types); they
  // are replaced, not overloaded (an overload would never be reached).
  device_type.attr("__eq__") = py::cpp_function(
      type_eq, py::name("__eq__"), py::is_method(device_type), py::arg("other"));
  device_type.attr("__ne__") = py::cpp_function(
      [type_eq](fx::Device::DeviceType t, py::handle o) -> py::object {
        py::object eq = type_eq(t, o);
        if (eq.ptr() == Py_NotImplemented) {
          return eq;
        }
        return py::bool_(!eq.cast<bool>());
      },
      py::name("__ne__"), py::is_method(device_type), py::arg("other"));
  device_type.attr("__hash__") = py::cpp_function(
      [](fx::Device::DeviceType t) { return static_cast<int>(t); },
      py::name("__hash__"), py::is_method(device_type));
  device.def(py::init<fx::Device::DeviceType, int>(), "type"_a, "index"_a = 0)
      .def_readonly("type", &fx::Device::type,
      R"doc(The kind of device: ``DeviceType.cpu`` or ``DeviceType.gpu``.
)doc")
      .def_readonly("index", &fx::Device::index,
      R"doc(Its number: which device of its type (Device), or which stream of its device (Stream).
)doc")
      .def("__repr__", &to_string<fx::Device>)
      .def(
          "__eq__",
          [](const fx::Device& d, py::handle o) -> py::object {
            if (py::isinstance<fx::Device>(o)) {
              return py::bool_(d == o.cast<fx::Device>());
            }
            if (py::isinstance<fx::Device::DeviceType>(o)) {
              return py::bool_(d ==
                               fx::Device(o.cast<fx::Device::DeviceType>()));
            }
            return py::reinterpret_borrow<py::object>(Py_NotImplemented);
          },
          py::is_operator())
      .def("__hash__", [](const fx::Device& d) {
        return static_cast<int>(d.type) * 1024 + d.index;
      });
  py::implicitly_convertible<fx::Device::DeviceType, fx::Device>();
  m.attr("cpu") = py::cast(fx::Device::DeviceType::cpu);
  m.attr("gpu") = py::cast(fx::Device::DeviceType::gpu);

  py::class_<fx::Stream>(m, "Stream", "A queue of operations on a device.")
      .def_readonly("device", &fx::Stream::device,
      R"doc(The :class:`Device` it runs on.
)doc")
      .def_readonly("index", &fx::Stream::index,
      R"doc(Its number: which device of its type (Device), or which stream of its device (Stream).
)doc")
      .def("__repr__", &to_string<fx::Stream>)
      .def(
          "__eq__",
          [](const fx::Stream& a, const fx::Stream& b) { return a == b; },
          py::is_operator())
      .def("__hash__", [](const fx::Stream& s) { return s.index; });

  m.def("default_device", &fx::default_device,
      R"doc(The device that ops run on when none is given.

Returns:
    Device: ``Device(cpu, 0)``, or the GPU where one is the default.
)doc");
  m.def("set_default_device", &fx::set_default_device, "device"_a,
      R"doc(Set the device that ops run on when none is given.

Args:
    device (Device or DeviceType): The new default device, for every
        thread (a thread inside ``with stream(...)`` keeps its own).

Raises:
    ValueError: For the GPU on a build or machine without one.

Example:
    >>> mx.set_default_device(mx.cpu)
)doc");
  m.def(
      "default_stream",
      [](const fx::Device& d) { return fx::default_stream(d); }, "device"_a,
      R"doc(The default stream of a device (on this thread).

Args:
    device (Device or DeviceType): The device.

Returns:
    Stream: Its default stream.
)doc");
  m.def("set_default_stream", &fx::set_default_stream, "stream"_a,
      R"doc(Make a stream the default of its device on this thread.

That device also becomes this thread's default device.

Args:
    stream (Stream): The stream.
)doc");
  m.def(
      "new_stream", [](const fx::Device& d) { return fx::new_stream(d); },
      "device"_a,
      R"doc(Make a new stream on a device, for the thread that makes it.

Evaluating on it from another thread raises ``RuntimeError`` (see
:func:`new_thread_unsafe_stream` and :func:`new_thread_local_stream`).

Args:
    device (Device or DeviceType): The device.

Returns:
    Stream: The new stream.

Example:
    >>> s = mx.new_stream(mx.cpu)
    >>> y = mx.exp(mx.ones((4,)), stream=s)
)doc");
  m.def(
      "new_thread_unsafe_stream",
      [](const fx::Device& d) { return fx::new_thread_unsafe_stream(d); },
      "device"_a,
      R"doc(Make a new stream on a device that any thread may use.

Keeping the graphs that threads queue on it apart is the caller's
business.

Args:
    device (Device or DeviceType): The device.

Returns:
    Stream: The new stream.
)doc");
  py::class_<fx::ThreadLocalStream>(
      m, "ThreadLocalStream",
      "A stream that is a different stream in each thread using it.")
      .def_readonly("device", &fx::ThreadLocalStream::device,
      R"doc(The :class:`Device` it runs on.
)doc")
      .def("__repr__", [](const fx::ThreadLocalStream& t) {
        return "ThreadLocalStream(" + to_string(t.device) + ")";
      });
  m.def(
      "new_thread_local_stream",
      [](const fx::Device& d) { return fx::new_thread_local_stream(d); },
      "device"_a,
      R"doc(Make a stream that each thread using it sees as its own.

Each thread's stream is made on its first use there.

Args:
    device (Device or DeviceType): The device.

Returns:
    ThreadLocalStream: Usable wherever a :class:`Stream` is.
)doc");
  m.def(
      "clear_streams",
      [] {
        py::gil_scoped_release nogil;
        fx::clear_streams();
      },
      R"doc(End the streams this thread made, after their queued work.

Includes this thread's streams of thread-local streams.
)doc");
  m.def("device_count", &fx::device_count, "device_type"_a,
      R"doc(The number of devices of a type.

Args:
    device_type (DeviceType): ``cpu`` or ``gpu``.

Returns:
    int: 1 for the CPU; the GPUs visible to a CUDA build, else 0.
)doc");
  m.def(
      "device_info",
      [](std::optional<fx::Device> d) {
        return device_info_dict(d.value_or(fx::default_device()));
      },
      "d"_a = py::none(),
      R"doc(Properties of a device.

Args:
    d (Device, optional): The device; the default device when omitted.

Returns:
    dict: ``device_name``, ``architecture`` and memory sizes in bytes.
)doc");
  m.def(
      "is_available", [](const fx::Device& d) { return fx::is_available(d); },
      "device"_a,
      R"doc(Whether a device can run operations.

Args:
    device (Device or DeviceType): The device.

Returns:
    bool: ``True`` for the CPU; for the GPU, on a CUDA build with one.
)doc");
  m.def(
      "synchronize",
      [](fx::StreamOrDevice s) {
        // A Device (or DeviceType) means its default stream, as MLX.
        fx::Stream st = fx::to_stream(s);
        py::gil_scoped_release nogil;
        fx::synchronize(st);
      },
      "stream"_a = py::none(),
      R"doc(Wait until everything queued on a stream has run.

Args:
    stream (Stream or Device, optional): The stream, or a device for its
        default stream; the default stream of the default device when
        omitted.
)doc");

  py::class_<StreamContext>(m, "StreamContext",
                            "Context manager making a stream or device the "
                            "default.")
      .def(py::init<fx::StreamOrDevice>(), "s"_a)
      .def("__enter__", [](StreamContext& c) { c.enter(); })
      .def("__exit__", [](StreamContext& c, py::args) { c.exit(); });

  m.def(
      "stream", [](fx::StreamOrDevice s) { return StreamContext(s); }, "s"_a,
      R"doc(Make a stream or device the default inside a ``with`` block.

Ops of this thread inside ``with mx.stream(s):`` run on ``s``; leaving
restores the previous defaults. Other threads are not affected.

Args:
    s (Stream or Device): The stream, or a device (its default stream).

Returns:
    StreamContext: The context manager.

Example:
    >>> with mx.stream(mx.cpu):
    ...     y = mx.ones((2,)) * 2
)doc");

  // The primitive registry (fluxion/primitive_list.h), for
  // tools/kernel_coverage.py and tests: private, not MLX API.
  m.def(
      "_primitive_registry",
      [] {
        py::list out;
        for (auto& p : fx::primitive_registry()) {
          py::dict d;
          d["name"] = p.name;
          d["class"] = p.cls;
          d["family"] = p.family;
          d["cpu"] = p.cpu;
          d["gpu"] = p.gpu;
          out.append(d);
        }
        return out;
      },
      "Every primitive: name, class, family, and whether the cpu and gpu "
      "backends have a kernel for it (the registry's columns).");
  m.def(
      "_gpu_backend_built", [] { return fx::gpu_backend().built(); },
      "Whether a GPU backend (CUDA) was compiled in, visible GPU or not.");
  m.def(
      "_cudnn_sdpa_info",
      [] {
        auto i = fx::gpu::cudnn_sdpa_info();
        py::dict d;
        d["loaded"] = i.loaded;
        d["version"] = i.version;
        d["library"] = i.library;
        d["error"] = i.error;
        d["forward_calls"] = i.forward_calls;
        d["backward_calls"] = i.backward_calls;
        d["failed_plans"] = i.failed_plans;
        return d;
      },
      "cuDNN's fused attention in this process (private, for tests and "
      "benchmarks): whether the library loaded (else why not), its version "
      "and path, how many forward and backward passes ran on it, and how "
      "many shapes' plans failed.");
  m.def(
      "_gpu_conv_stats",
      [] {
        auto i = fx::gpu::conv_stats();
        py::dict d;
        d["cudnn_loaded"] = i.cudnn_loaded;
        d["cudnn_version"] = i.cudnn_version;
        d["cudnn_error"] = i.cudnn_error;
        d["cudnn_forward"] = i.cudnn_forward;
        d["cudnn_backward_data"] = i.cudnn_backward_data;
        d["cudnn_backward_filter"] = i.cudnn_backward_filter;
        d["cudnn_failed_plans"] = i.cudnn_failed_plans;
        d["direct"] = i.direct;
        d["reduce"] = i.reduce;
        d["im2col"] = i.im2col;
        d["weight_grad_composite"] = i.weight_grad_composite;
        return d;
      },
      "The Convolution primitive's GPU paths in this process (private, for "
      "tests and benchmarks): whether cuDNN loaded (else why not), how many "
      "convolutions ran as each cuDNN operation, how many shapes' cuDNN "
      "plans failed, how many ran each kernel of the general path "
      "(direct, reduce, im2col + matmul), and how many grouped weight "
      "gradients no cuDNN operation took (weight_grad_composite: run as "
      "the convolution of copied operands).");
  m.def(
      "_gpu_fused_kernel_stats",
      [] {
        auto s = fx::gpu::fused_kernel_stats();
        py::dict d;
        d["launches"] = s.launches;
        d["fallbacks"] = s.fallbacks;
        d["unfused"] = s.unfused;
        d["compiles"] = s.compiles;
        d["disk_hits"] = s.disk_hits;
        d["disk_writes"] = s.disk_writes;
        d["loads"] = s.loads;
        return d;
      },
      "Counters of compile's generated GPU kernels since the process "
      "started (tests, benchmarks): launches, fallbacks (Compiled nodes "
      "run node by node for want of a kernel), unfused (... for their "
      "inputs' layout), compiles (NVRTC runs), disk_hits, disk_writes, "
      "loads; the last four count mx.fast.cuda_kernel's modules too. "
      "Zeros without a GPU backend.");
  m.def(
      "_kernels_missing",
      [](fx::Device::DeviceType t) { return fx::kernels_missing(t); },
      "device_type"_a,
      "Names of the primitives without a kernel on that device type's "
      "backend in this build (on the gpu: all of them without a GPU "
      "backend).");
}
