// The CUDA backend's runtime: devices, streams, events, fences and the
// scheduling of kernels (fluxion/backend/gpu.h).
//
// Kernels are launched from the thread that runs eval, in tape order, onto
// the node's CUDA stream (asynchronous; no worker thread): the scheduling
// cost per primitive is one launch. A kernel's errors (an unsupported
// dtype, a failed launch, out of memory) are raised while launching, on
// this thread; like the CPU backend's, they are stored on the outputs and
// on the stream, and rethrown by the wait on the stream's event.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fluxion/backend/common/fail_outputs.h"
#include "fluxion/backend/cuda/allocator.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend/gpu.h"
#include "fluxion/primitive.h"
#include "fluxion/scheduler.h"

namespace fluxion {

namespace cu {

[[noreturn]] void throw_error(const char* op, cudaError_t err) {
  // Clear a non-sticky error so that later calls start clean.
  cudaGetLastError();
  std::string msg = std::string("[") + op + "] CUDA error: " +
                    cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    cudaGetLastError();
    msg += " (" + std::to_string(free_bytes) + " bytes free)";
  }
  throw std::runtime_error(msg);
}

void check_launch(const char* op) { check(cudaGetLastError(), op); }

namespace {

// Whether a GPU is visible, found once.
struct Devices {
  int count = 0;
  Devices() {
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      count = 0;
    }
    if (count > 0) {
      register_allocators(count);
    }
  }
};
Devices& devices() {
  static auto* d = new Devices();
  return *d;
}

// A GPU stream: its CUDA stream, and the buffers of the kernels queued on
// it since the last checkpoint. Buffers are released (to the caching
// allocator, where another stream may reuse them) only once a CUDA event
// recorded after their kernels has completed.
struct StreamState {
  cudaStream_t stream = nullptr;
  int device = 0;
  std::mutex mu;  // the buffers (a stream may be used by several threads)
  std::vector<std::shared_ptr<Data>> pending;
  std::deque<std::pair<cudaEvent_t, std::vector<std::shared_ptr<Data>>>>
      in_flight;
  int launches = 0;
};

std::mutex g_streams_mu;
std::unordered_map<int, StreamState*> g_streams;  // by stream index

StreamState& state(Stream s) {
  std::lock_guard<std::mutex> lk(g_streams_mu);
  auto it = g_streams.find(s.index);
  if (it == g_streams.end()) {
    throw std::runtime_error("[gpu] Stream " + std::to_string(s.index) +
                             " has no CUDA stream.");
  }
  return *it->second;
}

// Release the buffers of the checkpoints that completed (all of them when
// `wait`). Called with st.mu held.
void release_completed(StreamState& st, bool wait) {
  while (!st.in_flight.empty()) {
    auto& [ev, bufs] = st.in_flight.front();
    cudaError_t r = wait ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
    if (r == cudaErrorNotReady) {
      cudaGetLastError();
      return;
    }
    cudaEventDestroy(ev);
    st.in_flight.pop_front();
  }
}

// Close the pending buffers into a checkpoint. Called with st.mu held.
void checkpoint(StreamState& st) {
  if (st.pending.empty()) {
    return;
  }
  cudaEvent_t ev;
  check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "eval");
  check(cudaEventRecord(ev, st.stream), "eval");
  st.in_flight.emplace_back(ev, std::move(st.pending));
  st.pending.clear();
}

thread_local cudaStream_t t_current = nullptr;

using common::fail_outputs;

void set_device(int d) {
  thread_local int t_device = -1;
  if (t_device != d) {
    check(cudaSetDevice(d), "set_device");
    t_device = d;
  }
}

// Set while CUDA runs one of our host functions on its thread, where no
// CUDA call is allowed.
thread_local bool t_in_host_function = false;

// CUDA events whose last reference went away inside a host function:
// destroyed by the next event_create, on a thread that may call CUDA.
std::mutex g_dead_mu;
std::vector<cudaEvent_t> g_dead_events;

// The CUDA event attached to a GPU stream's Event (Event::handle), for
// GPU-to-GPU waits without the host.
struct CudaEvent {
  cudaEvent_t ev = nullptr;
  std::atomic<bool> recorded{false};
  ~CudaEvent() {
    if (ev == nullptr) {
      return;
    }
    if (t_in_host_function) {
      std::lock_guard<std::mutex> lk(g_dead_mu);
      g_dead_events.push_back(ev);
    } else {
      cudaEventDestroy(ev);
    }
  }
};

// The host-visible timeline of an event, marked by a host function queued
// after the work of the stream (CUDA runs it on its own thread; it only
// takes the event's mutex).
struct HostMark {
  Event event;
  std::exception_ptr error;
};
void CUDART_CB mark_host(void* p) {
  t_in_host_function = true;
  auto* m = static_cast<HostMark*>(p);
  m->event.mark_reached(m->error);
  delete m;  // may drop the Event's last reference (see ~CudaEvent)
  t_in_host_function = false;
}



}  // namespace

cudaStream_t stream_of(Stream s) { return state(s).stream; }

cudaStream_t current_stream() { return t_current; }

void alloc(array& out) { out.set_data(out.nbytes(), Device{Device::gpu}); }

namespace {
// The pending buffers of the stream whose kernel is being launched on this
// thread (set by gpu::eval, which holds the stream's lock).
thread_local std::vector<std::shared_ptr<Data>>* t_keep = nullptr;
}  // namespace

void keep_alive(const array& a) { keep_alive(a.data_shared_ptr()); }

void keep_alive(std::shared_ptr<Data> d) {
  if (d && t_keep != nullptr) {
    t_keep->push_back(std::move(d));
  }
}

}  // namespace cu

namespace gpu {

using namespace cu;

bool backend_built() { return true; }

bool is_available() { return devices().count > 0; }

int device_count() { return devices().count; }

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

void copy_memory(void* dst, Device dst_device, const void* src,
                 Device src_device, size_t n) {
  if (n == 0) {
    return;
  }
  if (!is_available()) {
    throw std::runtime_error("[copy_memory] No GPU is available.");
  }
  // A blocking copy: the source's producer has finished (callers waited
  // on its event), and the copy is complete when this returns, so no
  // stream needs ordering with it.
  check(cudaMemcpy(dst, src, n, cudaMemcpyDefault),
        dst_device.type == Device::cpu ? "copy to host" : "copy to gpu");
}

void eval(array& arr) {
  if (!is_available()) {
    // Only a node built on an explicit Stream(…, gpu) gets here.
    throw std::runtime_error(std::string("[eval] Cannot run ") +
                             arr.primitive().name() +
                             " on the gpu: no GPU is visible.");
  }
  std::vector<array> inputs =
      arr.is_tracer() ? arr.inputs() : arr.take_inputs();
  std::vector<array> outputs = arr.outputs();
  auto s = arr.primitive().stream();
  StreamState& st = state(s);
  std::lock_guard<std::mutex> lk(st.mu);
  for (auto& in : inputs) {
    if (in.error()) {
      fail_outputs(outputs, in.error());
      scheduler::set_stream_error(s.index, in.error());
      return;
    }
  }
  t_current = st.stream;
  t_keep = &st.pending;
  try {
    set_device(st.device);
    arr.primitive().eval_gpu(inputs, outputs);
  } catch (...) {
    auto e = std::current_exception();
    fail_outputs(outputs, e);
    scheduler::set_stream_error(s.index, e);
  }
  t_keep = nullptr;
  // The buffers the kernel reads and writes live until it has finished.
  for (auto* v : {&inputs, &outputs}) {
    for (auto& a : *v) {
      if (a.data_shared_ptr()) {
        st.pending.push_back(a.data_shared_ptr());
      }
    }
  }
  if (++st.launches % 64 == 0) {
    try {
      checkpoint(st);
    } catch (...) {
      scheduler::set_stream_error(s.index, std::current_exception());
    }
    release_completed(st, false);
  }
}

void finalize(Stream s) {
  if (!is_available()) {
    return;
  }
  StreamState& st = state(s);
  std::lock_guard<std::mutex> lk(st.mu);
  checkpoint(st);
  release_completed(st, false);
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
  StreamState& st = state(s);
  std::lock_guard<std::mutex> lk(st.mu);
  checkpoint(st);
  release_completed(st, true);
}

std::shared_ptr<void> event_create(Stream s) {
  if (!is_available()) {
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lk(g_dead_mu);
    for (cudaEvent_t ev : g_dead_events) {
      cudaEventDestroy(ev);
    }
    g_dead_events.clear();
  }
  auto ce = std::make_shared<CudaEvent>();
  check(cudaEventCreateWithFlags(&ce->ev, cudaEventDisableTiming),
        "event_create");
  return ce;
}

void event_signal(const Event& e, Stream s) {
  if (!is_available()) {
    // Nothing can run on a gpu stream here: everything before is done.
    e.mark_reached(scheduler::peek_stream_error(s.index));
    return;
  }
  cudaStream_t cs = stream_of(s);
  if (auto* ce = static_cast<CudaEvent*>(e.handle().get())) {
    check(cudaEventRecord(ce->ev, cs), "event_signal");
    ce->recorded.store(true, std::memory_order_release);
  }
  auto* m = new HostMark{e, scheduler::peek_stream_error(s.index)};
  cudaError_t r = cudaLaunchHostFunc(cs, mark_host, m);
  if (r != cudaSuccess) {
    // The stream is unusable (a sticky error): mark now rather than hang.
    m->event.mark_reached(m->error);
    delete m;
    throw_error("event_signal", r);
  }
}

void event_wait(const Event& e, Stream s) {
  if (e.reached() || !is_available()) {
    return;
  }
  if (e.stream().device == Device::gpu) {
    auto* ce = static_cast<CudaEvent*>(e.handle().get());
    if (ce != nullptr && ce->recorded.load(std::memory_order_acquire)) {
      check(cudaStreamWaitEvent(stream_of(s), ce->ev, 0), "event_wait");
      return;
    }
  }
  // A CPU stream's event (or one not yet recorded): kernels are launched
  // from this thread, so the wait is here. Hand the batched CPU tasks to
  // their workers first, or the event could never be reached.
  scheduler::flush();
  e.wait_reached();
}

void event_wait(const Event& e) { e.wait_reached(); }

bool event_is_signaled(const Event& e) { return e.reached(); }

void fence_update(const Event& fence, Stream s) { event_signal(fence, s); }

void fence_wait(const Event& fence, Stream s) { event_wait(fence, s); }

}  // namespace gpu

}  // namespace fluxion
