// Built when there is no GPU backend. No GPU stream can be had
// (default_stream(gpu) and new_stream(gpu) raise first), so nothing reaches
// these functions but a node built on an explicit Stream(…, gpu): its
// kernel raises a clear error (primitives.cpp), and the events of such an
// eval are reached at once so that nothing waits forever. Nothing here
// crashes or hangs.
#include <stdexcept>
#include <string>

#include "fluxion/backend/gpu.h"
#include "fluxion/primitive.h"

namespace fluxion::gpu {

namespace {
[[noreturn]] void no_gpu(const char* op) {
  throw std::invalid_argument(
      std::string("[") + op +
      "] Cannot use the gpu: Fluxion was built without a GPU backend.");
}
}  // namespace

bool backend_built() { return false; }

bool is_available() { return false; }

int device_count() { return 0; }

DeviceInfo device_info(int index) {
  throw std::invalid_argument(
      "[device_info] There is no gpu " + std::to_string(index) +
      ": Fluxion was built without a GPU backend.");
}

void copy_memory(void*, Device, const void*, Device, size_t) {
  no_gpu("copy_memory");
}

allocator::Allocator* host_copy_allocator() { return nullptr; }

void* native_stream(Stream) { no_gpu("native_stream"); }

void eval(array& arr) {
  // The generated eval_gpu raises "[eval] Cannot run <Name> on the gpu:
  // Fluxion was built without a GPU backend." (eval's own Synchronizer
  // does nothing).
  std::vector<array> outputs = arr.outputs();
  arr.primitive().eval_gpu(arr.inputs(), outputs);
}

void finalize(Stream) {}

void new_stream(Stream) { no_gpu("new_stream"); }

void end_stream(Stream) {}

void synchronize(Stream) { no_gpu("synchronize"); }

std::shared_ptr<void> event_create(Stream) { return nullptr; }

// Nothing ever runs on a GPU stream here, so everything before a signal has
// finished: the event is reached now.
void event_signal(const Event& e, Stream) { e.mark_reached(); }

void event_wait(const Event&, Stream) {}

void event_wait(const Event& e) { e.wait_reached(); }

bool event_is_signaled(const Event& e) { return e.reached(); }

void fence_update(const Event& fence, Stream) { fence.mark_reached(); }

void fence_wait(const Event&, Stream) {}

FusedKernelStats fused_kernel_stats() { return {}; }

}  // namespace fluxion::gpu
