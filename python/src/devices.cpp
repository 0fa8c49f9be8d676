// Devices, streams, the `stream` context manager and synchronize.
#include <sstream>

#include "python/src/convert.h"

namespace {

template <typename T>
std::string to_string(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Within `with stream(s):` ops default to `s` (or to the device's default
// stream); leaving restores the previous defaults.
class StreamContext {
 public:
  explicit StreamContext(fx::StreamOrDevice s) : target_(s) {
    if (s.kind == fx::StreamOrDevice::Kind::none) {
      throw std::invalid_argument(
          "[stream] Expected a Stream or a Device; got None.");
    }
  }
  void enter() {
    prev_device_ = fx::default_device();
    fx::Device d = target_.kind == fx::StreamOrDevice::Kind::stream
                       ? target_.stream.device
                       : target_.device;
    prev_stream_ = fx::default_stream(d);
    if (target_.kind == fx::StreamOrDevice::Kind::stream) {
      fx::set_default_stream(target_.stream);
    } else {
      fx::set_default_device(target_.device);
    }
  }
  void exit() {
    if (prev_stream_) {
      fx::set_default_stream(*prev_stream_);
    }
    if (prev_device_) {
      fx::set_default_device(*prev_device_);
    }
  }

 private:
  fx::StreamOrDevice target_;
  std::optional<fx::Device> prev_device_;
  std::optional<fx::Stream> prev_stream_;
};

}  // namespace

void init_devices(py::module_& m) {
  py::class_<fx::Device> device(m, "Device",
                                "A device: ``Device(DeviceType.cpu, 0)``.");
  py::enum_<fx::Device::DeviceType>(m, "DeviceType")
      .value("cpu", fx::Device::DeviceType::cpu)
      .value("gpu", fx::Device::DeviceType::gpu);
  device.def(py::init<fx::Device::DeviceType, int>(), "type"_a, "index"_a = 0)
      .def_readonly("type", &fx::Device::type)
      .def_readonly("index", &fx::Device::index)
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
      .def_readonly("device", &fx::Stream::device)
      .def_readonly("index", &fx::Stream::index)
      .def("__repr__", &to_string<fx::Stream>)
      .def(
          "__eq__",
          [](const fx::Stream& a, const fx::Stream& b) { return a == b; },
          py::is_operator())
      .def("__hash__", [](const fx::Stream& s) { return s.index; });

  m.def("default_device", &fx::default_device,
        "The device ops run on when none is given.");
  m.def("set_default_device", &fx::set_default_device, "device"_a);
  m.def(
      "default_stream",
      [](const fx::Device& d) { return fx::default_stream(d); }, "device"_a,
      "The default stream of ``device``.");
  m.def("set_default_stream", &fx::set_default_stream, "stream"_a,
        "Make ``stream`` the default stream of its device, and that device "
        "the default device.");
  m.def(
      "new_stream", [](const fx::Device& d) { return fx::new_stream(d); },
      "device"_a, "A new stream on ``device``.");
  m.def(
      "is_available", [](const fx::Device& d) { return fx::is_available(d); },
      "device"_a, "Whether ``device`` can run operations.");
  m.def(
      "synchronize",
      [](std::optional<fx::Stream> s) {
        fx::Stream st = s.value_or(fx::default_stream(fx::default_device()));
        py::gil_scoped_release nogil;
        fx::synchronize(st);
      },
      "stream"_a = py::none(),
      "Wait until everything queued on ``stream`` (default: the default "
      "stream) has run.");

  py::class_<StreamContext>(m, "StreamContext",
                            "Context manager making a stream or device the "
                            "default.")
      .def(py::init<fx::StreamOrDevice>(), "s"_a)
      .def("__enter__", [](StreamContext& c) { c.enter(); })
      .def("__exit__", [](StreamContext& c, py::args) { c.exit(); });
  m.def(
      "stream", [](fx::StreamOrDevice s) { return StreamContext(s); }, "s"_a,
      "Context manager: ops inside ``with stream(s):`` run on ``s`` (a "
      "Stream or a Device).");
}
