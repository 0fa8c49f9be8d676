// Copies between the host and the GPU (the Backend's `copy`, residency's
// Data::ptr_on). Small host-to-device copies made while a kernel is being
// launched go onto the device's upload stream, followed by an event every
// GPU stream waits for before its next kernel (runtime.h, Uploads); other
// copies are blocking.
#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "fluxion/backend/cuda/runtime.h"

namespace fluxion {

namespace cu {

Uploads& uploads(int device) {
  static std::mutex mu;
  static auto* all = new std::unordered_map<int, Uploads*>();  // leaked
  std::lock_guard<std::mutex> lk(mu);
  Uploads*& u = (*all)[device];
  if (u == nullptr) {
    u = new Uploads();
  }
  return *u;
}

}  // namespace cu

namespace gpu {

using namespace cu;

void wait_for_uploads(StreamState& st) {
  if (st.uploads == nullptr) {
    st.uploads = &uploads(st.device);
  }
  Uploads& u = *st.uploads;
  uint64_t g = u.generation.load(std::memory_order_acquire);
  if (g == st.upload_generation) {
    return;
  }
  std::lock_guard<std::mutex> lk(u.mu);
  check(cudaStreamWaitEvent(st.stream, u.done, 0), "copy to gpu");
  st.upload_generation = u.generation.load(std::memory_order_relaxed);
}

namespace {

bool upload_async(void* dst, const void* src, size_t n) {
  if (t_state == nullptr || n > kAsyncUploadMax) {
    return false;  // not inside a launch, or a large copy
  }
  Uploads& u = uploads(t_state->device);
  {
    std::lock_guard<std::mutex> lk(u.mu);
    if (u.stream == nullptr) {
      check(cudaStreamCreateWithFlags(&u.stream, cudaStreamNonBlocking),
            "copy to gpu");
      check(cudaEventCreateWithFlags(&u.done, cudaEventDisableTiming),
            "copy to gpu");
    }
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, u.stream),
          "copy to gpu");
    check(cudaEventRecord(u.done, u.stream), "copy to gpu");
    u.generation.fetch_add(1, std::memory_order_release);
  }
  wait_for_uploads(*t_state);  // the kernel about to be launched reads it
  return true;
}

}  // namespace

void copy_memory(void* dst, Device dst_device, const void* src,
                 Device src_device, size_t n) {
  if (n == 0) {
    return;
  }
  if (!is_available()) {
    throw std::runtime_error("[copy_memory] No GPU is available.");
  }
  if (dst_device.type == Device::gpu && src_device.type == Device::cpu &&
      upload_async(dst, src, n)) {
    return;
  }
  // A blocking copy: the source's producer has finished (callers waited
  // on its event), and the copy is complete when this returns, so no
  // stream needs ordering with it.
  const char* op =
      dst_device.type == Device::cpu ? "copy to host" : "copy to gpu";
  check(cudaMemcpy(dst, src, n, cudaMemcpyDefault), op);
  // From pageable host memory cudaMemcpy returns once the bytes are staged,
  // before the DMA into device memory is done, and our non-blocking
  // streams are not ordered after the legacy stream that carries it: wait
  // for it, or a kernel launched next could read the buffer half written.
  check(cudaStreamSynchronize(cudaStreamLegacy), op);
}

}  // namespace gpu

}  // namespace fluxion
