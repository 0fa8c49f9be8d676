// Events and fences on GPU streams. An Event of a GPU stream carries a CUDA
// event (for GPU-to-GPU waits, cudaStreamWaitEvent) and is marked on the
// host-visible timeline (D5) by a host function queued after the stream's
// work, or by a host wait that saw the CUDA event complete first. A mark
// also checks the fault window closed by its signal (faults.cpp). Fences
// are events.
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "fluxion/backend/cuda/runtime.h"
#include "fluxion/scheduler.h"

namespace fluxion {

namespace cu {

namespace {

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

}  // namespace

}  // namespace cu

namespace gpu {

using namespace cu;

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
    StreamState& st = stream_state(s);
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
    StreamState& st = stream_state(s);
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

}  // namespace gpu

}  // namespace fluxion
