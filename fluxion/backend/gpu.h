// The interface the core uses to reach a GPU backend (backend/cuda, or
// backend/no_gpu when no GPU backend is built). The scheduling functions
// are the CPU backend's (fluxion/backend/cpu.h) for GPU streams: the core
// calls one or the other by the stream's device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/event.h"

namespace fluxion::gpu {

// Whether a GPU backend was compiled in, and whether it found a GPU.
bool backend_built();
bool is_available();
// GPUs this process can use, and the properties of one of them (device_name,
// architecture, total_memory, ...; `index` < device_count()).
int device_count();
DeviceInfo device_info(int index);

// Copy `n` bytes between devices (one of them a GPU), blocking until
// done: the residency copies of fluxion/array.h (Data::ptr_on).
void copy_memory(void* dst, Device dst_device, const void* src,
                 Device src_device, size_t n);

// Where a host copy of a GPU buffer is made (Data::ptr_on): pinned host
// memory, which a copy from the GPU fills at the bus's full bandwidth
// (from pageable memory the driver stages it through its own smaller
// buffers). Null without a GPU backend.
allocator::Allocator* host_copy_allocator();

// The backend's own handle of `s` (a cudaStream_t), for exchanges that
// name streams: a DLPack producer makes it wait for the tensor it hands
// over. Raises without a GPU backend.
void* native_stream(Stream s);

// Schedule `arr`'s primitive (eval_gpu) on its GPU stream.
void eval(array& arr);
// Submit work queued on `s` so far.
void finalize(Stream s);

// Streams: set up the queue of a new stream (the default gpu stream too,
// on first use), end it after what is queued (clear_streams), and wait for
// what is queued so far.
void new_stream(Stream s);
void end_stream(Stream s);
void synchronize(Stream s);

// Events. Every event has a host-visible timeline (Event::mark_reached,
// wait_reached, reached): the host and CPU streams wait on it, so whatever
// a GPU backend does, each signal must eventually mark it. `event_create`
// may attach the backend's own event object (Event::handle), for a faster
// GPU-to-GPU wait.
std::shared_ptr<void> event_create(Stream s);
// On `s`, after the work queued so far: mark `e` reached.
void event_signal(const Event& e, Stream s);
// Work queued on `s` from now on waits until `e` is reached.
void event_wait(const Event& e, Stream s);
// Block the calling thread until `e`, made for a GPU stream, is reached.
void event_wait(const Event& e);
bool event_is_signaled(const Event& e);
// Fences order streams within one eval (producer on `s` updates, consumer
// on `s` waits); a backend may use cheaper device-side fences for them.
void fence_update(const Event& fence, Stream s);
void fence_wait(const Event& fence, Stream s);

// cuDNN's fused attention (backend/cuda/sdpa_cudnn.cpp), for tests and
// benchmarks: whether it loads (`error` says why not; loading is tried on
// first use, which this call makes), its version and library, and how
// many forward and backward passes ran on it and how many shapes' plans
// failed (those run the other kernels) in this process.
struct CudnnSdpaInfo {
  bool loaded = false;
  int64_t version = 0;
  std::string library;
  std::string error;
  int64_t forward_calls = 0, backward_calls = 0, failed_plans = 0;
};
CudnnSdpaInfo cudnn_sdpa_info();

// The Convolution primitive's GPU paths in this process (backend/cuda/
// conv.cu, conv_cudnn.cpp), for tests and benchmarks: whether cuDNN loads
// for it (`cudnn_error` says why not; asking loads it), how many
// convolutions ran as each cuDNN operation, how many shapes' cuDNN plans
// failed (those run the general path), and how many ran each kernel of
// the general path: direct (one input channel per group), reduce (one
// output channel per group, long sums) or im2col + matmul.
struct ConvStats {
  bool cudnn_loaded = false;
  int64_t cudnn_version = 0;
  std::string cudnn_error;
  int64_t cudnn_forward = 0, cudnn_backward_data = 0,
          cudnn_backward_filter = 0, cudnn_failed_plans = 0;
  int64_t direct = 0, reduce = 0, im2col = 0;
};
ConvStats conv_stats();

// The generated kernels of compile on the GPU (backend/cuda/compiled.cpp),
// counted since the process started: for tests (is a fused group one
// kernel? did a second process reuse the disk cache?) and benchmarks.
// Zeros without a GPU backend.
struct FusedKernelStats {
  uint64_t launches = 0;     // generated kernels launched
  uint64_t fallbacks = 0;    // Compiled nodes run node by node: no kernel
  uint64_t unfused = 0;      // ... with a kernel, for their inputs' layout
  uint64_t compiles = 0;     // NVRTC compilations started
  uint64_t disk_hits = 0;    // images read back from the disk cache
  uint64_t disk_writes = 0;  // images written to the disk cache
  uint64_t loads = 0;        // modules loaded onto the GPU
};
FusedKernelStats fused_kernel_stats();

}  // namespace fluxion::gpu
