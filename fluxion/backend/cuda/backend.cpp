// The GPU Backend (fluxion/backend_interface.h) of the CUDA runtime: the
// table of the functions the core calls, defined in the files runtime.h
// lists.
#include <cstddef>
#include <memory>

#include "fluxion/allocator.h"
#include "fluxion/backend/cuda/runtime.h"
#include "fluxion/backend_interface.h"

namespace fluxion {

namespace gpu {

namespace {

class CudaBackend final : public Backend {
 public:
  bool built() const override { return true; }
  // No Load kernel here (primitive_list.h): files are read on the
  // CPU's stream, and the arrays uploaded by their first GPU op.
  Device::DeviceType host_primitive_device() const override {
    return Device::cpu;
  }
  int device_count() override { return gpu::device_count(); }
  DeviceInfo device_info(int index) override { return gpu::device_info(index); }

  allocator::Allocator* device_allocator(int index) override {
    // devices() registered one allocator per GPU when it found them
    // (register_allocators), before the count it returns is known.
    if (index < 0 || index >= gpu::device_count()) {
      return nullptr;
    }
    return &fluxion::allocator::get(Device(Device::gpu, index));
  }
  allocator::Allocator* host_copy_allocator() override {
    return gpu::host_copy_allocator();
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t n) override {
    copy_memory(dst, dst_device, src, src_device, n);
  }

  void eval(array& arr) override { gpu::eval(arr); }
  void finalize(Stream s) override { gpu::finalize(s); }

  void new_stream(Stream s) override { gpu::new_stream(s); }
  void end_stream(Stream s) override { gpu::end_stream(s); }
  void synchronize(Stream s) override { gpu::synchronize(s); }
  void* native_stream(Stream s) override { return gpu::native_stream(s); }

  std::shared_ptr<void> event_create(Stream s) override {
    return gpu::event_create(s);
  }
  void event_signal(const Event& e, Stream s) override {
    gpu::event_signal(e, s);
  }
  void event_wait(const Event& e, Stream s) override { gpu::event_wait(e, s); }
  void event_wait(const Event& e) override { gpu::event_wait(e); }
  bool event_is_signaled(const Event& e) override {
    return gpu::event_is_signaled(e);
  }
  void fence_update(const Event& fence, Stream s) override {
    gpu::fence_update(fence, s);
  }
  void fence_wait(const Event& fence, Stream s) override {
    gpu::fence_wait(fence, s);
  }
};

// Constant-initialized and never destroyed (backend_interface.h).
constinit CudaBackend g_cuda_backend;

}  // namespace

}  // namespace gpu

Backend& gpu_backend() { return gpu::g_cuda_backend; }

}  // namespace fluxion
