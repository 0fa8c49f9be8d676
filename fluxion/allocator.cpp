// The allocator slots per device and the memory API over them. The
// allocators themselves belong to the backends (Backend::device_allocator);
// a GPU backend also registers its own as it finds its devices
// (register_allocator), which makes the lookup one atomic load.
#include "fluxion/allocator.h"

#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "fluxion/backend_interface.h"

namespace fluxion {

namespace allocator {

namespace {

// GPU allocators by device index, registered by a GPU backend as it finds
// its devices (or by a test, for an index no backend serves).
constexpr int kMaxGpus = 64;
std::atomic<Allocator*> g_gpu[kMaxGpus] = {};

Allocator* find(Device d) {
  if (d.type == Device::gpu && d.index >= 0 && d.index < kMaxGpus) {
    if (Allocator* a = g_gpu[d.index].load(std::memory_order_acquire)) {
      return a;
    }
  }
  // Not registered (yet): the backend's answer, which may find its devices
  // first. The host's is then kept for get()'s fast path.
  Allocator* a = backend(d.type).device_allocator(d.index);
  if (a != nullptr && d.type == Device::cpu) {
    detail::host.store(a, std::memory_order_release);
  }
  return a;
}

}  // namespace

namespace detail {

std::atomic<Allocator*> host{nullptr};

Allocator& get_slow(Device d, const char* op) {
  if (Allocator* a = find(d)) {
    return *a;
  }
  if (d.type == Device::gpu && find(Device(Device::gpu, 0)) == nullptr) {
    throw std::invalid_argument(
        std::string("[") + op +
        "] Cannot use the gpu's memory: " + fluxion::detail::no_gpu_reason());
  }
  throw std::invalid_argument(std::string("[") + op + "] There is no " +
                              (d.type == Device::cpu ? "cpu " : "gpu ") +
                              std::to_string(d.index) + " allocator.");
}

}  // namespace detail

bool has_allocator(Device d) { return find(d) != nullptr; }

void register_allocator(Device d, Allocator* a) {
  if (d.type != Device::gpu || d.index < 0 || d.index >= kMaxGpus ||
      a == nullptr) {
    throw std::invalid_argument(
        "[register_allocator] Only a gpu (index below 64) takes a "
        "registered allocator; the cpu's is the host's.");
  }
  Allocator* expected = nullptr;
  if (!g_gpu[d.index].compare_exchange_strong(expected, a)) {
    throw std::invalid_argument(std::string("[register_allocator] gpu ") +
                                std::to_string(d.index) +
                                " already has an allocator.");
  }
}

void* malloc(size_t size) { return get(Device::cpu, "malloc").malloc(size); }
void free(void* ptr, size_t size) { get(Device::cpu, "free").free(ptr, size); }

}  // namespace allocator

namespace {

allocator::Allocator& of(Device d, const char* op) {
  return allocator::get(d, op);
}

// Every device that has an allocator.
template <typename F>
void for_each_allocator(F f) {
  f(allocator::get(Device::cpu));
  for (int i = 0;; ++i) {
    Device d(Device::gpu, i);
    if (!allocator::has_allocator(d)) {
      break;
    }
    f(allocator::get(d));
  }
}

}  // namespace

size_t get_active_memory() { return get_active_memory(default_device()); }
size_t get_active_memory(Device d) {
  return of(d, "get_active_memory").active_memory();
}
size_t get_peak_memory() { return get_peak_memory(default_device()); }
size_t get_peak_memory(Device d) {
  return of(d, "get_peak_memory").peak_memory();
}
void reset_peak_memory() {
  for_each_allocator([](allocator::Allocator& a) { a.reset_peak_memory(); });
}
void reset_peak_memory(Device d) {
  of(d, "reset_peak_memory").reset_peak_memory();
}
size_t get_cache_memory() { return get_cache_memory(default_device()); }
size_t get_cache_memory(Device d) {
  return of(d, "get_cache_memory").cache_memory();
}
size_t set_memory_limit(size_t limit) {
  return set_memory_limit(limit, default_device());
}
size_t set_memory_limit(size_t limit, Device d) {
  return of(d, "set_memory_limit").set_memory_limit(limit);
}
size_t get_memory_limit() { return get_memory_limit(default_device()); }
size_t get_memory_limit(Device d) {
  return of(d, "get_memory_limit").memory_limit();
}
size_t set_cache_limit(size_t limit) {
  return set_cache_limit(limit, default_device());
}
size_t set_cache_limit(size_t limit, Device d) {
  return of(d, "set_cache_limit").set_cache_limit(limit);
}
void clear_cache() {
  for_each_allocator([](allocator::Allocator& a) { a.clear_cache(); });
}
void clear_cache(Device d) { of(d, "clear_cache").clear_cache(); }

size_t physical_memory() {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
}

size_t set_wired_limit(size_t limit) {
  static std::atomic<size_t> wired_limit{0};
  size_t total = physical_memory();
  if (limit > total) {
    throw std::invalid_argument(
        "[set_wired_limit] Setting a wired limit of " + std::to_string(limit) +
        " bytes, larger than the physical memory (" + std::to_string(total) +
        " bytes), is not allowed.");
  }
  return wired_limit.exchange(limit);
}

}  // namespace fluxion
