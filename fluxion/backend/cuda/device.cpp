// The GPUs and the GPU streams of the CUDA runtime (runtime.h): whether a
// GPU is visible and its properties, and each Fluxion GPU stream's state
// (a non-blocking CUDA stream, its kept buffers, fault slots and batch
// queue), made by new_stream and ended by end_stream.
#include <cuda_runtime_api.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "fluxion/allocator.h"
#include "fluxion/backend/cuda/allocator.h"
#include "fluxion/backend/cuda/runtime.h"

namespace fluxion {

namespace cu {

Devices::Devices() {
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  if (count > 0) {
    register_allocators(count);
  }
}
Devices& devices() {
  static auto* d = new Devices();
  return *d;
}

namespace {
std::mutex g_streams_mu;
std::unordered_map<int, StreamState*> g_streams;  // by stream index
}  // namespace

StreamState& stream_state(Stream s) {
  std::lock_guard<std::mutex> lk(g_streams_mu);
  auto it = g_streams.find(s.index);
  if (it == g_streams.end()) {
    throw std::runtime_error("[gpu] Stream " + std::to_string(s.index) +
                             " has no CUDA stream.");
  }
  return *it->second;
}

cudaStream_t stream_of(Stream s) { return stream_state(s).stream; }

}  // namespace cu

namespace gpu {

using namespace cu;

void* native_stream(Stream s) { return stream_of(s); }

bool is_available() { return devices().count > 0; }

int device_count() { return devices().count; }

allocator::Allocator* host_copy_allocator() {
  return is_available() ? &cu::pinned_allocator() : nullptr;
}

DeviceInfo device_info(int index) {
  if (index < 0 || index >= device_count()) {
    throw std::invalid_argument("[device_info] There is no gpu " +
                                std::to_string(index) + ".");
  }
  cudaDeviceProp p;
  check(cudaGetDeviceProperties(&p, index), "device_info");
  DeviceInfo info;
  info["device_name"] = std::string(p.name);
  info["architecture"] =
      "sm_" + std::to_string(p.major) + std::to_string(p.minor);
  info["total_memory"] = static_cast<size_t>(p.totalGlobalMem);
  info["memory_size"] = static_cast<size_t>(p.totalGlobalMem);
  info["multi_processor_count"] = static_cast<size_t>(p.multiProcessorCount);
  info["max_buffer_length"] = static_cast<size_t>(p.totalGlobalMem);
  return info;
}

void new_stream(Stream s) {
  if (!is_available()) {
    throw std::invalid_argument(
        "[new_stream] Cannot use the gpu: no GPU is visible.");
  }
  auto* st = new StreamState();
  st->device = s.device.index;
  set_device(st->device);
  check(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking),
        "new_stream");
  std::lock_guard<std::mutex> lk(g_streams_mu);
  g_streams[s.index] = st;
}

void end_stream(Stream s) {
  StreamState* st = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_streams_mu);
    auto it = g_streams.find(s.index);
    if (it == g_streams.end()) {
      return;
    }
    st = it->second;
    g_streams.erase(it);
  }
  {
    std::lock_guard<std::mutex> lk(st->mu);
    try {
      flush_batch(*st);
    } catch (...) {
      // The stream ends anyway; its queued kernels' error was sticky.
    }
    cudaStreamSynchronize(st->stream);
    checkpoint(*st);
    release_completed(*st, true);
  }
  cudaStreamDestroy(st->stream);
  delete st;
}

void synchronize(Stream s) {
  Event e(s);
  e.set_value(1);
  e.signal(s);
  e.wait();
  StreamState& st = stream_state(s);
  std::lock_guard<std::mutex> lk(st.mu);
  checkpoint(st);
  release_completed(st, true);
}

}  // namespace gpu

}  // namespace fluxion
