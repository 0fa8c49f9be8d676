// The CUDA runtime's internals, shared by its files (kernels include
// cuda.h, never this):
//   device.cpp        the GPUs found, their properties, and the GPU streams
//   faults.cpp        CUDA errors as exceptions, and the deferred faults of
//                     launched kernels (fault slots and their windows)
//   copies.cpp        host <-> device copies and the upload stream
//   kept_buffers.cpp  the buffers of launched kernels, kept alive until
//                     their kernels finish, and GPU donation
//   events.cpp        events and fences: CUDA events and host marks
//   eval.cpp          the launch of one node's kernel (gpu::eval, finalize)
//   backend.cpp       the GPU Backend, the table of the functions above
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/backend/cuda/batch.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend_interface.h"
#include "fluxion/device.h"
#include "fluxion/event.h"

namespace fluxion::cu {

// ---- The GPUs (device.cpp)

// Whether a GPU is visible, found once.
struct Devices {
  int count = 0;
  Devices();
};
Devices& devices();

// Makes `d` the calling thread's current device (cached per thread).
inline void set_device(int d) {
  thread_local int t_device = -1;
  if (t_device != d) {
    check(cudaSetDevice(d), "set_device");
    t_device = d;
  }
}

// ---- Deferred faults (faults.cpp)

// The fault slots of a stream's index kernels (cuda.h, IndexFault) and
// the arrays that depend on them. Guarded by its own mutex, never held
// while waiting on CUDA: the host function that checks slots takes it.
constexpr int kFaultSlots = 1024;
// A watched array: the output of an index kernel (`slot` >= 0) or of a
// kernel that read a watched array (`parent`, one of them).
struct Watch {
  array out;
  int slot = -1;
  std::optional<array> parent;
};
struct FaultWindow {
  std::vector<int> slots;      // taken since the last event_signal
  std::vector<Watch> watches;  // in launch order
};
struct Faults {
  std::mutex mu;
  IndexFault* slots = nullptr;  // mapped pinned memory, kFaultSlots
  IndexFault* device_slots = nullptr;  // the same, as the device sees it
  const char* ops[kFaultSlots] = {};
  // A status slot's failure text (status_fault); null for an index slot.
  const char* failures[kFaultSlots] = {};
  // Errors reported by the host for a slot (host_fault), and each slot's
  // generation, advanced when it is checked, so that a late report for a
  // reused slot is ignored.
  std::exception_ptr host_errors[kFaultSlots];
  uint64_t generation[kFaultSlots] = {};
  int next = 0, in_use = 0;
  FaultWindow open;
  // Arrays of windows not checked yet, by id: their dependents join the
  // open window, whichever eval computes them.
  std::unordered_map<uintptr_t, int> watched;
};

// Reads the slots of `w` (clearing them) and sets the error of a faulted
// slot on its kernel's outputs and, in launch order, on every array whose
// parent failed. Returns the first error, or null. Called with f.mu held.
std::exception_ptr check_window(Faults& f, FaultWindow& w);

// Whether the kernel being launched on this thread took a fault slot (set
// by index_fault, cleared by gpu::eval before the launch).
extern thread_local constinit bool t_took_fault_slot;
// Adds the outputs of the kernel just launched to the open fault window
// when it took a slot or reads an array of an unchecked window. Called by
// gpu::eval with the stream's lock held.
void watch_outputs(Faults& f, const std::vector<array>& inputs,
                   const std::vector<array>& outputs);

// ---- Uploads (copies.cpp)

// Small host-to-device copies made while a kernel is being launched (a
// scalar constant, a parameter block, read by a GPU kernel for the first
// time) are the common case, and a blocking copy costs a host wait each:
// they go onto one upload stream per device instead, asynchronous (from
// pageable memory CUDA stages the bytes before returning, so the source
// may go away), followed by an event that every GPU stream waits for
// before its next kernel (the stream launching now at once; the others
// when the upload generation moved past the one they waited for).
constexpr size_t kAsyncUploadMax = 64 << 10;
struct Uploads {
  std::mutex mu;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;  // recorded after each upload
  std::atomic<uint64_t> generation{0};
};
Uploads& uploads(int device);

// ---- Kept buffers (kept_buffers.cpp)

// The buffers a stream's launched kernels use, kept alive until an event
// recorded after those kernels has completed. Each buffer's holds are
// counted, so that the donation check can tell them from other owners: a
// buffer only this stream's kernels still use may be overwritten by the next
// kernel on the same stream, which runs after them (stream order).
struct KeptBuffers {
  using Buffers = std::vector<std::shared_ptr<Data>>;
  Buffers pending;  // since the last checkpoint
  std::deque<std::pair<cudaEvent_t, Buffers>> in_flight;
  std::unordered_map<const Data*, long> holds;

  void keep(std::shared_ptr<Data> d) {
    ++holds[d.get()];
    pending.push_back(std::move(d));
  }
  // Lets go of `bufs` (their kernels have finished).
  void release(Buffers& bufs) {
    for (auto& d : bufs) {
      auto it = holds.find(d.get());
      if (--it->second == 0) {
        holds.erase(it);
      }
    }
    bufs.clear();  // after the counts: a freed address may be reused
  }
  long held(const Data* d) const {
    auto it = holds.find(d);
    return it == holds.end() ? 0 : it->second;
  }
};

// ---- GPU streams (device.cpp)

// A GPU stream: its CUDA stream, and the buffers of the kernels queued on
// it since the last checkpoint. Buffers are released (to the caching
// allocator, where another stream may reuse them) only once a CUDA event
// recorded after their kernels has completed.
struct StreamState {
  Faults faults;
  cudaStream_t stream = nullptr;
  int device = 0;
  std::mutex mu;  // the buffers (a stream may be used by several threads)
  KeptBuffers kept;
  int launches = 0;
  MicroBatch batch;  // small elementwise kernels not launched yet
  uint64_t upload_generation = 0;  // of the uploads waited for
  Uploads* uploads = nullptr;      // its device's
};

// The state of GPU stream `s`; raises when it has none.
StreamState& stream_state(Stream s);

// Launches the stream's queued small kernels (batch.h), before anything
// else goes onto the stream. Called with st.mu held.
inline void flush_batch(StreamState& st) {
  if (!st.batch.empty()) {
    set_device(st.device);
    st.batch.flush(st.stream);
  }
}

// Release the buffers of the checkpoints that completed (all of them when
// `wait`). Called with st.mu held. (kept_buffers.cpp)
void release_completed(StreamState& st, bool wait);
// Close the pending buffers into a checkpoint. Called with st.mu held.
// (kept_buffers.cpp)
void checkpoint(StreamState& st);

// ---- The launch in progress on this thread (set by gpu::eval; eval.cpp)

// The CUDA stream and the state of the stream whose kernel is being
// launched on this thread.
extern thread_local constinit cudaStream_t t_current;
extern thread_local constinit StreamState* t_state;
// The pending buffers of the stream whose kernel is being launched on this
// thread (set by gpu::eval, which holds the stream's lock).
extern thread_local constinit KeptBuffers* t_keep;

}  // namespace fluxion::cu

// The operations of the GPU Backend (backend.cpp), as functions: they call
// one another.
namespace fluxion::gpu {

// device.cpp
bool is_available();
int device_count();
DeviceInfo device_info(int index);
allocator::Allocator* host_copy_allocator();
void* native_stream(Stream s);
void new_stream(Stream s);
void end_stream(Stream s);
void synchronize(Stream s);

// copies.cpp
// Makes `st`'s stream wait for the uploads made so far (when any were made
// since it last waited). Called with st.mu held.
void wait_for_uploads(cu::StreamState& st);
void copy_memory(void* dst, Device dst_device, const void* src,
                 Device src_device, size_t n);

// eval.cpp
void eval(array& arr);
void finalize(Stream s);

// events.cpp
std::shared_ptr<void> event_create(Stream s);
void event_signal(const Event& e, Stream s);
void event_wait(const Event& e, Stream s);
void event_wait(const Event& e);
bool event_is_signaled(const Event& e);
void fence_update(const Event& fence, Stream s);
void fence_wait(const Event& fence, Stream s);

}  // namespace fluxion::gpu
