// The GPU's memory: the shared caching allocator (backend/common) over
// plain cudaMalloc, never managed memory (design.md §5). Blocks are reused
// only after the kernels that used them have finished (eval.cpp keeps the
// buffers of queued kernels alive until then), so reuse across streams is
// safe without stream-ordered allocation.
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

}  // namespace

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
