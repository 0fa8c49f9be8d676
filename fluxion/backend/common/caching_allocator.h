// A size-bucketed caching allocator over some system memory: the host's
// (backend/cpu/allocator.cpp) and later a GPU's derive from it, each
// supplying only how a block is had from and given back to the system.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "fluxion/allocator.h"

namespace fluxion::common {

class CachingAllocator : public allocator::Allocator {
 public:
  // The cache limit starts equal to the memory limit (MLX).
  explicit CachingAllocator(size_t memory_limit);

  void* malloc(size_t size) override;
  void free(void* ptr, size_t size) override;
  size_t active_memory() override;
  size_t peak_memory() override;
  void reset_peak_memory() override;
  size_t cache_memory() override;
  size_t memory_limit() override;
  size_t set_memory_limit(size_t limit) override;
  size_t cache_limit() override;
  size_t set_cache_limit(size_t limit) override;
  void clear_cache() override;

  // The size a request of `size` bytes is served with: small sizes round
  // up to powers of two (so that a freed block serves many nearby
  // requests), large ones to 64 KiB steps (so that the waste stays small).
  static size_t bucket_size(size_t size);

 protected:
  // A block of `bytes` (a bucket size) from the system, or null when it
  // cannot be had; and giving one back.
  virtual void* system_malloc(size_t bytes) = 0;
  virtual void system_free(void* ptr, size_t bytes) = 0;

 private:
  void add_active(size_t b);

  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // by bucket size
  size_t active_memory_ = 0;
  size_t peak_memory_ = 0;
  size_t cache_memory_ = 0;
  size_t memory_limit_;
  size_t cache_limit_;
};

}  // namespace fluxion::common
