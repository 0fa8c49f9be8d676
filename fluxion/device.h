#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
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

// Properties of a device, as MLX's device_info: "device_name" and
// "architecture" always, memory sizes in bytes where known.
using DeviceInfo = std::unordered_map<std::string, std::variant<std::string, size_t>>;
namespace detail {
// Why the gpu cannot be used: "Fluxion was built without a GPU backend."
// or "no GPU is visible." (a CUDA build on a machine without a GPU).
std::string no_gpu_reason();
}  // namespace detail

// How many devices of a type there are (1 cpu; gpus of the GPU backend).
int device_count(Device::DeviceType t);
DeviceInfo device_info(const Device& d);

struct Stream {
  int index;
  Device device;
  Stream(int i, Device d) : index(i), device(d) {}
  bool operator==(const Stream& o) const { return index == o.index; }
  bool operator!=(const Stream& o) const { return index != o.index; }
};

// The default stream of a device; a device without a backend raises
// std::invalid_argument.
Stream default_stream(Device d);
// Make `s` the default stream of its device on this thread, and its device
// this thread's default device (MLX: defaults are per thread; threads that
// set none use the device's first stream).
void set_default_stream(Stream s);
// A new stream that runs operations for the thread that made it only:
// evaluating on it from another thread raises std::runtime_error (MLX).
Stream new_stream(Device d);
// A new stream any thread may use; keeping the graphs of several threads on
// it consistent is the caller's business.
Stream new_thread_unsafe_stream(Device d);
std::ostream& operator<<(std::ostream& os, const Stream& s);

// A stream that is a different Stream in each thread using it (created on
// first use there, owned by that thread).
struct ThreadLocalStream {
  int id;
  Device device;
};
ThreadLocalStream new_thread_local_stream(Device d);
// This thread's stream of `tls`.
Stream stream_from_thread_local_stream(const ThreadLocalStream& tls);
// End every stream made by this thread (new_stream, and this thread's
// streams of thread-local streams), after what is queued on them has run.
// Defaults that pointed at them go back to the device's first stream.
void clear_streams();
// Raises std::runtime_error naming `op` when `s` may not run operations on
// this thread: it belongs to another thread, or it was cleared.
void check_stream_usable(const Stream& s, const char* op);

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

namespace detail {
// This thread's default device and streams, as `with stream(...)` saves and
// restores them (unset: the process-wide defaults).
struct ThreadDefaultsState {
  std::optional<Device> device;
  std::optional<Stream> cpu;
  std::optional<Stream> gpu;
};
ThreadDefaultsState save_thread_defaults();
void restore_thread_defaults(const ThreadDefaultsState& st);
// This thread's default device (the process-wide one is set_default_device).
void set_thread_default_device(const Device& d);
}  // namespace detail

// The stream an op runs on: the given stream, the default stream of the
// given device, or the default stream of the default device.
Stream to_stream(StreamOrDevice s);

}  // namespace fluxion
