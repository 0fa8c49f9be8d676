// Memory: the allocator interface (one allocator per device), and the
// memory API (MLX's names).
//
// The host's allocator is the CPU backend's caching allocator
// (backend/cpu/allocator.cpp, over backend/common/caching_allocator.h); a
// GPU backend registers its own for each GPU with `register_allocator`.
// Without a GPU backend (backend/no_gpu) there is none, and asking for the
// gpu's memory raises std::invalid_argument.
#pragma once

#include <atomic>
#include <cstddef>

#include "fluxion/device.h"

namespace fluxion {

namespace allocator {

// The memory of one device. Thread-safe: kernels on every stream allocate
// and free concurrently.
class Allocator {
 public:
  Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  virtual ~Allocator() = default;

  // At least `size` bytes (64-byte aligned on the host). Raises
  // std::runtime_error("[malloc] Unable to allocate N bytes.") when the
  // memory cannot be had.
  virtual void* malloc(size_t size) = 0;
  // Takes back a block from `malloc`; `size` is the size asked for.
  virtual void free(void* ptr, size_t size) = 0;

  // Bytes held by live blocks, the most since the start or the last reset
  // (which restarts it from 0, as MLX), and bytes kept for reuse.
  virtual size_t active_memory() = 0;
  virtual size_t peak_memory() = 0;
  virtual void reset_peak_memory() = 0;
  virtual size_t cache_memory() = 0;
  // The limit eval tries to keep active memory under, and the cache's
  // limit; the setters return the previous value.
  virtual size_t memory_limit() = 0;
  virtual size_t set_memory_limit(size_t limit) = 0;
  virtual size_t cache_limit() = 0;
  virtual size_t set_cache_limit(size_t limit) = 0;
  // Give the cached blocks back to the system.
  virtual void clear_cache() = 0;
};

namespace detail {
// The host's allocator once made: get()'s fast path, inline since every
// buffer of a kernel takes it.
extern std::atomic<Allocator*> host;
Allocator& get_slow(Device d, const char* op);
}  // namespace detail

// The allocator of `d`'s memory. Raises std::invalid_argument naming `op`
// when `d` has none (a gpu without a GPU backend, or an index with no
// registered allocator).
inline Allocator& get(Device d, const char* op = "allocator") {
  if (d.type == Device::cpu && d.index == 0) {
    if (Allocator* a = detail::host.load(std::memory_order_acquire)) {
      return *a;
    }
  }
  return detail::get_slow(d, op);
}
bool has_allocator(Device d);
// For a GPU backend: `a` serves gpu `index` from now on. It must outlive
// every buffer it hands out (backends leak it on purpose, as the host's).
// Registering twice for one gpu raises std::invalid_argument.
void register_allocator(Device d, Allocator* a);

// Host memory (the cpu's allocator), for kernels' scratch and external
// buffers copied in.
void* malloc(size_t size);
void free(void* ptr, size_t size);

}  // namespace allocator

// The memory API. Without a device argument it reports on the default
// device's allocator (the cpu in a build without GPU backend), as MLX's
// functions report on its one allocator; clear_cache() and
// reset_peak_memory() act on every device. With a device, on that device's
// allocator (std::invalid_argument when it has none).
size_t get_active_memory();
size_t get_active_memory(Device d);
size_t get_peak_memory();
size_t get_peak_memory(Device d);
void reset_peak_memory();
void reset_peak_memory(Device d);
size_t get_cache_memory();
size_t get_cache_memory(Device d);
// The setters return the previous limit.
size_t set_memory_limit(size_t limit);
size_t set_memory_limit(size_t limit, Device d);
size_t get_memory_limit();
size_t get_memory_limit(Device d);
size_t set_cache_limit(size_t limit);
size_t set_cache_limit(size_t limit, Device d);
void clear_cache();
void clear_cache(Device d);
// MLX's wired limit (memory kept resident, a Metal notion). The CPU backend
// pages nothing in or out itself, so the limit is recorded and returned but
// changes no allocation; over the machine's physical memory it raises
// std::invalid_argument. Returns the previous limit.
size_t set_wired_limit(size_t limit);
// Bytes of physical memory on this machine.
size_t physical_memory();

}  // namespace fluxion
