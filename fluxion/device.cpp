#include "fluxion/device.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fluxion/allocator.h"
#include "fluxion/backend_interface.h"

namespace fluxion {

namespace {

// Who may run operations on a stream. The two default streams (0: cpu,
// 1: gpu) and new_thread_unsafe_stream's are shared; new_stream's belong to
// the thread that made them. clear_streams() ends a thread's streams.
struct StreamEntry {
  Stream stream;
  bool shared;
  std::thread::id owner;
  bool alive = true;
};

struct StreamRegistry {
  std::mutex mu;
  std::vector<StreamEntry> streams;  // by index
  Device default_device{Device::cpu};
  Stream default_cpu{0, Device::cpu};
  Stream default_gpu{1, Device::gpu};
  int next_thread_local_id = 0;
  // The default stream of the default device, packed as index * 2 + is_gpu,
  // for lock-free reads; updated under `mu`.
  std::atomic<int> default_packed{0};

  void update_packed() {
    const Stream& s =
        default_device.type == Device::cpu ? default_cpu : default_gpu;
    default_packed.store(s.index * 2 + (s.device.type == Device::gpu),
                         std::memory_order_release);
  }

  StreamRegistry() {
    streams.push_back({default_cpu, true, {}});
    streams.push_back({default_gpu, true, {}});
    cpu_backend().new_stream(default_cpu);
    if (gpu_backend().available()) {
      gpu_backend().new_stream(default_gpu);
      // The GPU is the default device when there is one (MLX);
      // FLUXION_DEFAULT_DEVICE=cpu keeps the CPU (make test-gpu runs the
      // CPU suite that way, next to the GPU tests).
      const char* env = std::getenv("FLUXION_DEFAULT_DEVICE");
      if (env == nullptr || std::string(env) != "cpu") {
        default_device = Device{Device::gpu};
      }
    }
    update_packed();
  }
};

StreamRegistry& registry() {
  static auto* r = new StreamRegistry();
  return *r;
}

// This thread's defaults, set by set_default_stream and `with stream(...)`
// (MLX: default streams are per thread). Unset fields fall back to the
// process-wide defaults.
struct ThreadDefaults {
  std::optional<Device> device;
  std::optional<Stream> cpu;
  std::optional<Stream> gpu;
  bool any() const { return device || cpu || gpu; }
};
thread_local ThreadDefaults t_defaults;
// This thread's stream of each thread-local stream, by its id.
thread_local std::unordered_map<int, Stream> t_local_streams;

void check_available(const Device& d, const char* op) {
  if (!is_available(d)) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] Cannot use the gpu: " + detail::no_gpu_reason());
  }
}

Stream make_stream(Device d, bool shared) {
  auto& r = registry();
  Stream s{0, d};
  {
    std::lock_guard<std::mutex> lk(r.mu);
    s.index = static_cast<int>(r.streams.size());
    r.streams.push_back({s, shared, std::this_thread::get_id()});
  }
  backend(s.device.type).new_stream(s);
  return s;
}

}  // namespace

Device default_device() {
  if (t_defaults.device) {
    return *t_defaults.device;
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return r.default_device;
}

namespace detail {
std::string no_gpu_reason() {
  return gpu_backend().built() ? "no GPU is visible."
                               : "Fluxion was built without a GPU backend.";
}
}  // namespace detail

// The cpu always is: no call for it (default_stream asks on every op).
bool is_available(const Device& d) {
  return d.type == Device::cpu || backend(d.type).available();
}

void set_default_device(const Device& d) {
  if (!is_available(d)) {
    throw std::invalid_argument(
        "[set_default_device] Cannot set the gpu device: " +
        detail::no_gpu_reason());
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.default_device = d;
  r.update_packed();
  t_defaults.device.reset();
}

int device_count(Device::DeviceType t) { return backend(t).device_count(); }

DeviceInfo device_info(const Device& d) {
  Backend& b = backend(d.type);
  int count = b.device_count();
  if (count == 0 || (d.index >= 0 && d.index < count)) {
    return b.device_info(d.index);  // with none, raises saying why
  }
  const char* type = d.type == Device::cpu ? "cpu" : "gpu";
  throw std::invalid_argument(
      std::string("[device_info] ") + type + " " + std::to_string(d.index) +
      " does not exist; there " +
      (count == 1 ? std::string("is one ") + type + " device."
                  : "are " + std::to_string(count) + "."));
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << "Device(" << (d.type == Device::cpu ? "cpu" : "gpu") << ", "
            << d.index << ")";
}

Stream default_stream(Device d) {
  if (!is_available(d)) {
    throw std::invalid_argument(
        "[default_stream] Cannot get the gpu stream: " +
        detail::no_gpu_reason());
  }
  auto& local = d.type == Device::cpu ? t_defaults.cpu : t_defaults.gpu;
  if (local) {
    return *local;
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return d.type == Device::cpu ? r.default_cpu : r.default_gpu;
}

void set_default_stream(Stream s) {
  if (!is_available(s.device)) {
    throw std::invalid_argument(
        "[set_default_stream] Cannot use a gpu stream: " +
        detail::no_gpu_reason());
  }
  (s.device.type == Device::cpu ? t_defaults.cpu : t_defaults.gpu) = s;
  t_defaults.device = s.device;
}

Stream new_stream(Device d) {
  check_available(d, "new_stream");
  return make_stream(d, false);
}

Stream new_thread_unsafe_stream(Device d) {
  check_available(d, "new_thread_unsafe_stream");
  return make_stream(d, true);
}

ThreadLocalStream new_thread_local_stream(Device d) {
  check_available(d, "new_thread_local_stream");
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return ThreadLocalStream{r.next_thread_local_id++, d};
}

Stream stream_from_thread_local_stream(const ThreadLocalStream& tls) {
  auto it = t_local_streams.find(tls.id);
  if (it != t_local_streams.end()) {
    return it->second;
  }
  Stream s = make_stream(tls.device, false);
  t_local_streams.emplace(tls.id, s);
  return s;
}

void clear_streams() {
  auto& r = registry();
  auto me = std::this_thread::get_id();
  std::vector<Stream> mine;
  {
    std::lock_guard<std::mutex> lk(r.mu);
    for (auto& e : r.streams) {
      if (e.alive && !e.shared && e.owner == me) {
        mine.push_back(e.stream);
      }
    }
  }
  for (auto& s : mine) {
    synchronize(s);
  }
  {
    std::lock_guard<std::mutex> lk(r.mu);
    for (auto& s : mine) {
      r.streams[s.index].alive = false;
    }
  }
  for (auto& s : mine) {
    backend(s.device.type).end_stream(s);
    for (auto* local : {&t_defaults.cpu, &t_defaults.gpu}) {
      if (*local && (*local)->index == s.index) {
        local->reset();
      }
    }
  }
  t_local_streams.clear();
}

void check_stream_usable(const Stream& s, const char* op) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  if (s.index < 0 || s.index >= static_cast<int>(r.streams.size())) {
    throw std::invalid_argument(std::string("[") + op + "] There is no stream " +
                                std::to_string(s.index) + ".");
  }
  const auto& e = r.streams[s.index];
  if (!e.alive) {
    throw std::runtime_error(
        std::string("[") + op + "] Stream " + std::to_string(s.index) +
        " was ended by clear_streams() on the thread that made it.");
  }
  if (!e.shared && e.owner != std::this_thread::get_id()) {
    throw std::runtime_error(
        std::string("[") + op + "] Stream " + std::to_string(s.index) +
        " belongs to the thread that made it (new_stream); use "
        "new_thread_local_stream for a stream per thread, or "
        "new_thread_unsafe_stream for one that any thread may use.");
  }
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", " << s.index << ")";
}

void synchronize(Stream s) {
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    if (s.index >= 0 && s.index < static_cast<int>(r.streams.size()) &&
        !r.streams[s.index].alive) {
      throw std::runtime_error(
          "[synchronize] Stream " + std::to_string(s.index) +
          " was ended by clear_streams().");
    }
  }
  Backend& b = backend(s.device.type);
  if (!b.available()) {
    throw std::invalid_argument("[synchronize] Cannot use the gpu: " +
                                detail::no_gpu_reason());
  }
  b.synchronize(s);
}

void synchronize() {
  std::vector<Stream> all;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    for (auto& e : r.streams) {
      // Without a GPU backend the default gpu stream never ran anything.
      if (e.alive && is_available(e.stream.device)) {
        all.push_back(e.stream);
      }
    }
  }
  for (auto& s : all) {
    synchronize(s);
  }
}

Stream to_stream(StreamOrDevice s) {
  switch (s.kind) {
    case StreamOrDevice::Kind::stream:
      return s.stream;
    case StreamOrDevice::Kind::device:
      return default_stream(s.device);
    default: {
      if (t_defaults.any()) {
        return default_stream(default_device());
      }
      // Lock-free: this runs for every op built.
      auto& r = registry();
      int packed = r.default_packed.load(std::memory_order_acquire);
      return Stream(packed >> 1, (packed & 1) ? Device::gpu : Device::cpu);
    }
  }
}

namespace detail {

ThreadDefaultsState save_thread_defaults() {
  return {t_defaults.device, t_defaults.cpu, t_defaults.gpu};
}

void restore_thread_defaults(const ThreadDefaultsState& st) {
  t_defaults.device = st.device;
  t_defaults.cpu = st.cpu;
  t_defaults.gpu = st.gpu;
}

void set_thread_default_device(const Device& d) {
  check_available(d, "stream");
  t_defaults.device = d;
}

}  // namespace detail

}  // namespace fluxion
