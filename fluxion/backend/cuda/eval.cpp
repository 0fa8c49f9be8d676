// The CUDA backend's runtime: devices, streams, events, fences and the
// scheduling of kernels, the GPU backend of fluxion/backend_interface.h.
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
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "fluxion/backend/common/fail_outputs.h"
#include "fluxion/backend/common/node.h"
#include "fluxion/backend/cuda/allocator.h"
#include "fluxion/backend/cuda/batch.h"
#include "fluxion/backend/cuda/cuda.h"
#include "fluxion/backend_interface.h"
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
  auto& in_flight = st.kept.in_flight;
  while (!in_flight.empty()) {
    auto& [ev, bufs] = in_flight.front();
    cudaError_t r = wait ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
    if (r == cudaErrorNotReady) {
      cudaGetLastError();
      return;
    }
    cudaEventDestroy(ev);
    st.kept.release(bufs);
    in_flight.pop_front();
  }
}

void set_device(int d) {
  thread_local int t_device = -1;
  if (t_device != d) {
    check(cudaSetDevice(d), "set_device");
    t_device = d;
  }
}

// Launches the stream's queued small kernels (batch.h), before anything
// else goes onto the stream. Called with st.mu held.
void flush_batch(StreamState& st) {
  if (!st.batch.empty()) {
    set_device(st.device);
    st.batch.flush(st.stream);
  }
}

// Close the pending buffers into a checkpoint. Called with st.mu held.
void checkpoint(StreamState& st) {
  flush_batch(st);  // the event must follow the kernels using the buffers
  auto& kept = st.kept;
  if (kept.pending.empty()) {
    return;
  }
  cudaEvent_t ev;
  check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "eval");
  check(cudaEventRecord(ev, st.stream), "eval");
  kept.in_flight.emplace_back(ev, std::move(kept.pending));
  kept.pending.clear();
}

thread_local cudaStream_t t_current = nullptr;
thread_local StreamState* t_state = nullptr;

using common::fail_outputs;

// Set while CUDA runs one of our host functions on its thread, where no
// CUDA call is allowed.
thread_local bool t_in_host_function = false;

// CUDA events whose last reference went away inside a host function:
// destroyed by the next event_create, on a thread that may call CUDA.
std::mutex g_dead_mu;
std::vector<cudaEvent_t> g_dead_events;

// The CUDA event attached to a GPU stream's Event (Event::handle), for
// GPU-to-GPU waits without the host.
struct HostMark;
struct CudaEvent {
  cudaEvent_t ev = nullptr;
  std::atomic<bool> recorded{false};
  // The host mark of the latest signal (queued after ev's latest record),
  // which a host wait may run itself (event_wait). Weak: the mark holds
  // the Event, which holds this.
  std::mutex mu;
  std::weak_ptr<HostMark> last_mark;
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
// takes the event's mutex), or by a host wait that saw the CUDA event
// complete first: CUDA starts host functions tens of microseconds after
// the work before them is done, which every eval's final wait would pay.
// Whichever comes first runs it (`ran`), once.
struct HostMark {
  Event event;
  std::exception_ptr error;
  Faults* faults = nullptr;  // with the window closed by this mark
  FaultWindow window;
  int stream_index = 0;
  std::atomic<bool> ran{false};
  void run();
};

// Arrays whose last reference a host function held: released by the next
// event_create, on a thread that may call CUDA (as the events).
std::mutex g_dead_arrays_mu;
std::vector<array> g_dead_arrays;

// Reads the slots of `w` (clearing them) and sets the error of a faulted
// slot on its kernel's outputs and, in launch order, on every array whose
// parent failed. Returns the first error, or null. Called with f.mu held.
std::exception_ptr check_window(Faults& f, FaultWindow& w) {
  std::unordered_map<int, std::exception_ptr> faulted;
  for (int k : w.slots) {
    IndexFault& slot = f.slots[k];
    if (f.host_errors[k]) {
      faulted[k] = std::move(f.host_errors[k]);
      f.host_errors[k] = nullptr;
    } else if (slot.flag != 0 && f.failures[k] != nullptr) {
      // A library's info (status_fault): the CPU's LAPACK message.
      std::string msg = std::string("[") + f.ops[k] + "] ";
      msg += slot.value > 0 ? std::string(f.failures[k])
                            : "The solver rejected argument " +
                                  std::to_string(-slot.value) + ".";
      faulted[k] = std::make_exception_ptr(std::runtime_error(msg));
    } else if (slot.flag != 0) {
      std::string v = slot.is_unsigned
                          ? std::to_string(static_cast<unsigned long long>(
                                slot.value))
                          : std::to_string(slot.value);
      std::string msg = std::string("[") + f.ops[k] + "] Index " + v +
                        " is out of bounds for axis " +
                        std::to_string(slot.axis) + " with size " +
                        std::to_string(slot.n);
      if (slot.size != 1) {
        msg += " (for a slice of size " + std::to_string(slot.size) + ")";
      }
      faulted[k] = std::make_exception_ptr(std::out_of_range(msg + "."));
    }
    slot.flag = 0;
    ++f.generation[k];
    --f.in_use;
  }
  std::exception_ptr first;
  for (auto& w : w.watches) {
    std::exception_ptr e;
    if (auto it = faulted.find(w.slot); it != faulted.end()) {
      e = it->second;
    } else if (w.parent && w.parent->error()) {
      e = w.parent->error();
    }
    if (e && !w.out.error()) {
      w.out.set_error(e);
    }
    if (e && !first) {
      first = e;
    }
    auto it = f.watched.find(w.out.id());
    if (it != f.watched.end() && --it->second == 0) {
      f.watched.erase(it);
    }
  }
  return first;
}

void HostMark::run() {
  if (ran.exchange(true)) {
    return;
  }
  std::exception_ptr err = error;
  if (faults != nullptr) {
    std::exception_ptr fault;
    try {
      std::lock_guard<std::mutex> lk(faults->mu);
      fault = check_window(*faults, window);
    } catch (...) {
      fault = std::current_exception();  // a failed allocation of the message
    }
    if (fault) {
      scheduler::set_stream_error(stream_index, fault);
      if (!err) {
        err = fault;
      }
    }
    std::lock_guard<std::mutex> lk(g_dead_arrays_mu);
    for (auto& w : window.watches) {
      g_dead_arrays.push_back(std::move(w.out));
      if (w.parent) {
        g_dead_arrays.push_back(std::move(*w.parent));
      }
    }
  }
  event.mark_reached(err);
}

void CUDART_CB mark_host(void* p) {
  t_in_host_function = true;
  auto* m = static_cast<std::shared_ptr<HostMark>*>(p);
  (*m)->run();
  delete m;  // may drop the Event's last reference (see ~CudaEvent)
  t_in_host_function = false;
}

// Adds the outputs of the kernel just launched to the open fault window
// when it took a slot or reads an array of an unchecked window. Called by
// gpu::eval with the stream's lock held.
thread_local bool t_took_fault_slot = false;
void watch_outputs(Faults& f, const std::vector<array>& inputs,
                   const std::vector<array>& outputs) {
  const bool took_slot = t_took_fault_slot;
  t_took_fault_slot = false;
  if (!took_slot && f.watched.empty()) {
    return;  // the common case: no index kernel in flight
  }
  std::lock_guard<std::mutex> lk(f.mu);
  std::optional<array> parent;
  for (auto& in : inputs) {
    if (f.watched.count(in.id()) > 0) {
      parent = in;
      break;
    }
  }
  if (!took_slot && !parent) {
    return;
  }
  for (auto& o : outputs) {
    ++f.watched[o.id()];
    f.open.watches.push_back(
        Watch{o, took_slot ? f.open.slots.back() : -1, parent});
  }
}



}  // namespace

cudaStream_t stream_of(Stream s) { return state(s).stream; }

cudaStream_t current_stream() { return t_current; }

void alloc(array& out) { out.set_data(out.nbytes(), Device{Device::gpu}); }

namespace {
// The pending buffers of the stream whose kernel is being launched on this
// thread (set by gpu::eval, which holds the stream's lock).
thread_local KeptBuffers* t_keep = nullptr;
}  // namespace

IndexFault* index_fault(const char* op) {
  StreamState& st = *t_state;
  Faults& f = st.faults;
  std::unique_lock<std::mutex> lk(f.mu);
  if (f.slots == nullptr) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, sizeof(IndexFault) * kFaultSlots,
                        cudaHostAllocMapped | cudaHostAllocPortable),
          op);
    std::memset(p, 0, sizeof(IndexFault) * kFaultSlots);
    f.slots = static_cast<IndexFault*>(p);
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&f.device_slots),
                                   p, 0),
          op);
  }
  if (f.in_use == kFaultSlots) {
    // Every slot waits for a host mark: let the stream catch up.
    lk.unlock();
    check(cudaStreamSynchronize(st.stream), op);
    lk.lock();
  }
  int k = f.next;
  f.next = (f.next + 1) % kFaultSlots;
  ++f.in_use;
  f.ops[k] = op;
  f.failures[k] = nullptr;
  f.open.slots.push_back(k);
  t_took_fault_slot = true;
  return f.device_slots + k;
}

HostFault host_fault(const char* op) {
  IndexFault* slot = index_fault(op);
  StreamState& st = *t_state;
  Faults& f = st.faults;
  int k = static_cast<int>(slot - f.device_slots);
  std::lock_guard<std::mutex> lk(f.mu);
  return HostFault{&f, k, f.generation[k]};
}

IndexFault* status_fault(const char* op, const char* failure) {
  IndexFault* slot = index_fault(op);
  Faults& f = t_state->faults;
  std::lock_guard<std::mutex> lk(f.mu);
  f.failures[slot - f.device_slots] = failure;
  return slot;
}

void report_fault(const HostFault& h, std::exception_ptr e) {
  if (h.faults == nullptr) {
    return;
  }
  auto& f = *static_cast<Faults*>(h.faults);
  std::lock_guard<std::mutex> lk(f.mu);
  if (f.generation[h.slot] == h.generation && !f.host_errors[h.slot]) {
    f.host_errors[h.slot] = std::move(e);
  }
}

void keep_alive(const array& a) { keep_alive(a.data_shared_ptr()); }

void keep_alive(std::shared_ptr<Data> d) {
  if (d && t_keep != nullptr) {
    t_keep->keep(std::move(d));
  }
}

bool donatable(const array& a) {
  const Data* d = a.data_shared_ptr().get();
  long holds = t_keep != nullptr && d != nullptr ? t_keep->held(d) : 0;
  return a.is_donatable(Device{Device::gpu}, holds);
}

}  // namespace cu

namespace gpu {

using namespace cu;

// The operations of CudaBackend (at the end), as functions: they call one
// another.
namespace {

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

// Makes `st`'s stream wait for the uploads made so far (when any were made
// since it last waited). Called with st.mu held.
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

void eval(array& arr) {
  if (!is_available()) {
    // Only a node built on an explicit Stream(…, gpu) gets here.
    throw std::runtime_error(std::string("[eval] Cannot run ") +
                             arr.primitive().name() +
                             " on the gpu: no GPU is visible.");
  }
  auto [prim, inputs, outputs] = common::take_node(arr);
  auto s = prim->stream();
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
  t_state = &st;
  t_keep = &st.kept;
  t_took_fault_slot = false;
  bool queued = false;
  try {
    set_device(st.device);
    wait_for_uploads(st);
    queued = MicroBatch::enabled() &&
             st.batch.add(*prim, inputs, outputs, st.stream);
    if (!queued) {
      flush_batch(st);  // the queued kernels come first
      prim->eval_gpu(inputs, outputs);
    }
    watch_outputs(st.faults, inputs, outputs);
  } catch (...) {
    auto e = std::current_exception();
    fail_outputs(outputs, e);
    scheduler::set_stream_error(s.index, e);
  }
  t_keep = nullptr;
  t_state = nullptr;
  // The buffers the kernel reads and writes live until it has finished.
  for (auto* v : {&inputs, &outputs}) {
    for (auto& a : *v) {
      if (a.data_shared_ptr()) {
        st.kept.keep(a.data_shared_ptr());
      }
    }
  }
  if (!queued && ++st.launches % 64 == 0) {
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
  std::vector<array> dead;
  {
    std::lock_guard<std::mutex> lk(g_dead_arrays_mu);
    dead.swap(g_dead_arrays);
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
  if (MicroBatch::enabled()) {
    // The event follows the stream's queued kernels.
    StreamState& st = state(s);
    std::lock_guard<std::mutex> lk(st.mu);
    flush_batch(st);
  }
  cudaStream_t cs = stream_of(s);
  auto m = std::make_shared<HostMark>();
  m->event = e;
  m->error = scheduler::peek_stream_error(s.index);
  m->stream_index = s.index;
  {
    // The index kernels launched since the last mark are checked by this
    // one, after they have run.
    StreamState& st = state(s);
    std::lock_guard<std::mutex> lk(st.faults.mu);
    if (!st.faults.open.slots.empty() || !st.faults.open.watches.empty()) {
      m->faults = &st.faults;
      m->window = std::move(st.faults.open);
      st.faults.open = FaultWindow{};
    }
  }
  auto* ce = static_cast<CudaEvent*>(e.handle().get());
  std::unique_lock<std::mutex> lk;
  if (ce != nullptr) {
    // Recorded and published together, so a waiter that finds this mark
    // also finds the record it follows.
    lk = std::unique_lock<std::mutex>(ce->mu);
    check(cudaEventRecord(ce->ev, cs), "event_signal");
    ce->recorded.store(true, std::memory_order_release);
    ce->last_mark = m;
  }
  auto* held = new std::shared_ptr<HostMark>(m);
  cudaError_t r = cudaLaunchHostFunc(cs, mark_host, held);
  if (r != cudaSuccess) {
    // The stream is unusable (a sticky error): mark now rather than hang.
    delete held;
    if (lk.owns_lock()) {
      lk.unlock();
    }
    m->run();
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

void event_wait(const Event& e) {
  // When the CUDA event completes, the work before the mark is done: run
  // the mark here rather than wait for CUDA to start its host function.
  if (auto* ce = static_cast<CudaEvent*>(e.handle().get());
      ce != nullptr && !e.reached() &&
      ce->recorded.load(std::memory_order_acquire)) {
    std::shared_ptr<HostMark> m;
    {
      std::lock_guard<std::mutex> lk(ce->mu);
      m = ce->last_mark.lock();
    }
    // Not a mark that checks index kernels: its window may depend on an
    // earlier mark's, which must have run first (CUDA runs them in order).
    if (m && m->faults == nullptr && m->event.value() >= e.value() &&
        cudaEventSynchronize(ce->ev) == cudaSuccess) {
      m->run();
    }
    cudaGetLastError();  // a failed synchronize: the host mark still comes
  }
  e.wait_reached();
}

bool event_is_signaled(const Event& e) { return e.reached(); }

void fence_update(const Event& fence, Stream s) { event_signal(fence, s); }

void fence_wait(const Event& fence, Stream s) { event_wait(fence, s); }

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
