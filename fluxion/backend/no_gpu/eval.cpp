// The GPU backend of a build without one (fluxion/backend_interface.h). No
// GPU stream can be had (default_stream(gpu) and new_stream(gpu) raise
// first), so nothing reaches it but a node built on an explicit
// Stream(…, gpu): its kernel raises a clear error (primitives.cpp), and the
// events of such an eval are reached at once so that nothing waits
// forever. Nothing here crashes or hangs.
#include <stdexcept>
#include <string>

#include "fluxion/backend_interface.h"
#include "fluxion/gpu_stats.h"
#include "fluxion/primitive.h"

namespace fluxion {

namespace {

[[noreturn]] void no_gpu(const char* op) {
  throw std::invalid_argument(
      std::string("[") + op +
      "] Cannot use the gpu: Fluxion was built without a GPU backend.");
}

class NoGpuBackend final : public Backend {
 public:
  bool built() const override { return false; }
  // As the CUDA backend: files are read on the CPU's stream.
  Device::DeviceType host_primitive_device() const override {
    return Device::cpu;
  }
  int device_count() override { return 0; }
  DeviceInfo device_info(int index) override {
    throw std::invalid_argument("[device_info] There is no gpu " +
                                std::to_string(index) +
                                ": Fluxion was built without a GPU backend.");
  }

  allocator::Allocator* device_allocator(int) override { return nullptr; }
  allocator::Allocator* host_copy_allocator() override { return nullptr; }
  void copy(void*, Device, const void*, Device, size_t) override {
    no_gpu("copy_memory");
  }

  void eval(array& arr) override {
    // The generated eval_gpu raises "[eval] Cannot run <Name> on the gpu:
    // Fluxion was built without a GPU backend." (eval's own Synchronizer
    // does nothing).
    std::vector<array> outputs = arr.outputs();
    arr.primitive().eval_gpu(arr.inputs(), outputs);
  }
  void finalize(Stream) override {}

  void new_stream(Stream) override { no_gpu("new_stream"); }
  void end_stream(Stream) override {}
  void synchronize(Stream) override { no_gpu("synchronize"); }
  void* native_stream(Stream) override { no_gpu("native_stream"); }

  std::shared_ptr<void> event_create(Stream) override { return nullptr; }
  // Nothing ever runs on a GPU stream here, so everything before a signal
  // has finished: the event is reached now.
  void event_signal(const Event& e, Stream) override { e.mark_reached(); }
  void event_wait(const Event&, Stream) override {}
  void event_wait(const Event& e) override { e.wait_reached(); }
  bool event_is_signaled(const Event& e) override { return e.reached(); }
  void fence_update(const Event& fence, Stream) override {
    fence.mark_reached();
  }
  void fence_wait(const Event&, Stream) override {}
};

// Constant-initialized and never destroyed (backend_interface.h).
constinit NoGpuBackend g_gpu_backend;

}  // namespace

Backend& gpu_backend() { return g_gpu_backend; }

gpu::FusedKernelStats gpu::fused_kernel_stats() { return {}; }

}  // namespace fluxion
