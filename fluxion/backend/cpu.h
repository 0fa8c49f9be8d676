// The interface the core uses to reach the CPU backend (backend/cpu). A GPU
// backend implements the same scheduling functions in fluxion/backend/gpu.h;
// the core (eval, streams, events, fences, synchronize, memory) calls one or
// the other by the stream's or the buffer's device.
#pragma once

#include "fluxion/allocator.h"
#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/event.h"

namespace fluxion::cpu {

// The host's memory (the cpu's allocator).
allocator::Allocator& host_allocator();

// Schedule `arr`'s primitive on its CPU stream's worker (eval_cpu runs
// there; the inputs move into the task, which is the detach).
void eval(array& arr);

// Run `arr`'s kernel now, on the calling thread (the small-op fast path,
// fluxion/eager.h; its inputs are available host arrays). True when it
// ran: `arr` is then available but keeps its primitive and inputs (a
// computed node, until an eval detaches it). False when the kernel threw:
// `arr` is left a lazy node (its error is raised where eval raises it).
bool eval_now(array& arr);

// Streams: a CPU stream is a worker thread with a task queue (the
// scheduler's); new_stream starts it, end_stream runs what is queued and
// ends it, synchronize waits for what is queued so far.
void new_stream(Stream s);
void end_stream(Stream s);
void synchronize(Stream s);

// Events made for a CPU stream carry no backend handle.
std::shared_ptr<void> event_create(Stream s);
// Queue on `s`: mark `e` reached (with the stream's pending error, if any).
void event_signal(const Event& e, Stream s);
// Queue on `s`: wait until `e` is reached (nothing queued when it already
// is).
void event_wait(const Event& e, Stream s);
// Block the calling thread until `e` is reached.
void event_wait(const Event& e);
bool event_is_signaled(const Event& e);
// Fences inside one eval are events on CPU streams.
void fence_update(const Event& fence, Stream s);
void fence_wait(const Event& fence, Stream s);

}  // namespace fluxion::cpu
