// The GPU's memory: the shared caching allocator (backend/common) over
// plain cudaMalloc, never managed memory (design.md §5). Blocks are reused
// only after the kernels that used them have finished (kept_buffers.cpp
// keeps the buffers of queued kernels alive until then), so reuse across
// streams is safe without stream-ordered allocation. Host copies of GPU
// buffers go to pinned host memory, cached the same way (pinning is slow: a
// reused block costs nothing).
#include "fluxion/backend/cuda/allocator.h"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "fluxion/backend/common/caching_allocator.h"

namespace fluxion::cu {

namespace {

class CudaAllocator : public common::CachingAllocator {
 public:
  CudaAllocator(int device, size_t limit)
      : common::CachingAllocator(limit), device_(device) {}

  void* malloc(size_t size) override {
    try {
      return common::CachingAllocator::malloc(size);
    } catch (const std::runtime_error&) {
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      cudaGetLastError();
      throw std::runtime_error(
          "[malloc] out of GPU memory: asked " + std::to_string(size) +
          " bytes, " + std::to_string(free_bytes) + " free.");
    }
  }

  // mx.clear_cache gives back the pinned host blocks too.
  void clear_cache() override {
    common::CachingAllocator::clear_cache();
    pinned_allocator().clear_cache();
  }

 protected:
  void* system_malloc(size_t bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      // Out of memory is not a sticky error: clear it, so the next call
      // does not report it again.
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void system_free(void* ptr, size_t) override { cudaFree(ptr); }

 private:
  int device_;
};

// Page-locked host memory, portable (any GPU may copy into it). What it
// caches is capped: pinned pages are taken from the system's pageable pool.
class PinnedAllocator : public common::CachingAllocator {
 public:
  PinnedAllocator() : common::CachingAllocator(kCacheLimit) {}

 protected:
  void* system_malloc(size_t bytes) override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return nullptr;
    }
    return p;
  }
  void system_free(void* ptr, size_t) override { cudaFreeHost(ptr); }

 private:
  static constexpr size_t kCacheLimit = size_t(1) << 30;
};

}  // namespace

allocator::Allocator& pinned_allocator() {
  static auto* a = new PinnedAllocator();  // leaked, as the others
  return *a;
}

void register_allocators(int count) {
  for (int i = 0; i < count; ++i) {
    size_t free_bytes = 0, total = 0;
    cudaSetDevice(i);
    cudaMemGetInfo(&free_bytes, &total);
    // As MLX: the memory limit eval keeps under is most of the device.
    auto* a = new CudaAllocator(i, total / 100 * 95);  // leaked on purpose
    allocator::register_allocator(Device(Device::gpu, i), a);
  }
  cudaSetDevice(0);
}

}  // namespace fluxion::cu
