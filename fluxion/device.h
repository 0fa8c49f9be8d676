#pragma once

#include <ostream>
#include <variant>

namespace fluxion {

struct Device {
  enum class DeviceType { cpu, gpu };
  static constexpr DeviceType cpu = DeviceType::cpu;
  static constexpr DeviceType gpu = DeviceType::gpu;

  DeviceType type;
  int index;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  bool operator==(const Device& o) const {
    return type == o.type && index == o.index;
  }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline bool operator==(const Device& d, Device::DeviceType t) {
  return d.type == t;
}
inline bool operator!=(const Device& d, Device::DeviceType t) {
  return d.type != t;
}

Device default_device();
void set_default_device(const Device& d);
bool is_available(const Device& d);
std::ostream& operator<<(std::ostream& os, const Device& d);

struct Stream {
  int index;
  Device device;
  Stream(int i, Device d) : index(i), device(d) {}
  bool operator==(const Stream& o) const { return index == o.index; }
  bool operator!=(const Stream& o) const { return index != o.index; }
};

Stream default_stream(Device d);
void set_default_stream(Stream s);
Stream new_stream(Device d);
std::ostream& operator<<(std::ostream& os, const Stream& s);

// Wait for everything queued so far on `s` (or on every stream) to finish.
void synchronize(Stream s);
void synchronize();

// A stream or a device, as ops accept either (MLX's StreamOrDevice).
struct StreamOrDevice {
  enum class Kind { none, stream, device } kind = Kind::none;
  Stream stream{0, Device::cpu};
  Device device{Device::cpu};
  StreamOrDevice() = default;
  StreamOrDevice(std::monostate) {}
  StreamOrDevice(Stream s) : kind(Kind::stream), stream(s) {}
  StreamOrDevice(Device d) : kind(Kind::device), device(d) {}
  StreamOrDevice(Device::DeviceType t) : kind(Kind::device), device(t) {}
};

// The stream an op runs on: the given stream, the default stream of the
// given device, or the default stream of the default device.
Stream to_stream(StreamOrDevice s);

}  // namespace fluxion
