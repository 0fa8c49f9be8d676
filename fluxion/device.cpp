#include "fluxion/device.h"

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "fluxion/backend/gpu.h"
#include "fluxion/event.h"
#include "fluxion/scheduler.h"

namespace fluxion {

namespace {

struct StreamRegistry {
  std::mutex mu;
  std::vector<Stream> streams;
  Device default_device{Device::cpu};
  Stream default_cpu{0, Device::cpu};
  Stream default_gpu{1, Device::gpu};
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
    streams.push_back(default_cpu);
    streams.push_back(default_gpu);
    scheduler::new_thread(default_cpu);
  }
};

StreamRegistry& registry() {
  static auto* r = new StreamRegistry();
  return *r;
}

}  // namespace

Device default_device() {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return r.default_device;
}

bool is_available(const Device& d) {
  return d.type == Device::cpu || gpu::is_available();
}

void set_default_device(const Device& d) {
  if (!is_available(d)) {
    throw std::invalid_argument(
        "[set_default_device] Cannot set the gpu device: Fluxion was built "
        "without a GPU backend.");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.default_device = d;
  r.update_packed();
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << "Device(" << (d.type == Device::cpu ? "cpu" : "gpu") << ", "
            << d.index << ")";
}

Stream default_stream(Device d) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return d.type == Device::cpu ? r.default_cpu : r.default_gpu;
}

void set_default_stream(Stream s) {
  if (!is_available(s.device)) {
    throw std::invalid_argument(
        "[set_default_stream] Cannot use a gpu stream: Fluxion was built "
        "without a GPU backend.");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  if (s.device.type == Device::cpu) {
    r.default_cpu = s;
  } else {
    r.default_gpu = s;
  }
  r.default_device = s.device;
  r.update_packed();
}

Stream new_stream(Device d) {
  auto& r = registry();
  Stream s{0, d};
  {
    std::lock_guard<std::mutex> lk(r.mu);
    s.index = static_cast<int>(r.streams.size());
    r.streams.push_back(s);
  }
  scheduler::new_thread(s);
  return s;
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", " << s.index << ")";
}

void synchronize(Stream s) {
  Event e(s);
  e.set_value(1);
  e.signal(s);
  e.wait();
}

void synchronize() {
  std::vector<Stream> all;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    all = r.streams;
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
      // Lock-free: this runs for every op built.
      auto& r = registry();
      int packed = r.default_packed.load(std::memory_order_acquire);
      return Stream(packed >> 1, (packed & 1) ? Device::gpu : Device::cpu);
    }
  }
}

}  // namespace fluxion
