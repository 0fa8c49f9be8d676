// Task queues and the count of work in flight. Each CPU stream owns one
// worker thread that runs its tasks in order (the CPU backend's streams,
// backend/cpu/eval.cpp; a GPU backend may queue host work here too). To keep scheduling cheap, tasks enqueued while a Batch is open on the
// calling thread are collected and handed to each stream's worker as one item
// when the batch is flushed (design.md §9, "cheap scheduling").
#pragma once

#include <functional>

#include "fluxion/device.h"
#include "fluxion/small_function.h"

namespace fluxion::scheduler {

using Task = SmallFunction;

// Queue `task` on `stream` (into the open batch when there is one).
void enqueue(const Stream& stream, Task task);

// Hand every batched task of this thread to its stream's worker.
void flush();

// While alive, enqueue() on this thread batches. Nested batches are fine;
// the outermost one flushes when it closes.
class Batch {
 public:
  Batch();
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
};

// Queue items handed to workers and not finished yet (plus the GPU work a
// backend reported with notify_new_task and not yet finished).
int n_active_tasks();
// For a GPU backend: one more item in flight (a submitted command batch),
// and one finished (wakes wait_for_one).
void notify_new_task();
void notify_task_completion();
// Block until at least one active item finishes (flushes first).
void wait_for_one();

// Register a worker thread for a new stream (called by new_stream).
void new_thread(const Stream& stream);
// Run what is queued on `stream`, then end its worker (clear_streams).
void end_thread(const Stream& stream);

// Records an error raised by a task on `stream` (the first one wins): every
// event the stream signals from then on carries it, until a wait reports it
// (`clear_error`). eval and array::wait raise only their own arrays'
// errors (which every failed node carries), so such a pending error, of an
// async_eval nobody waited for or of another thread's graph on a shared
// stream, reaches synchronize() of that stream and the arrays that failed,
// not the next unrelated eval.
void set_stream_error(int stream_index, std::exception_ptr e) noexcept;
std::exception_ptr peek_stream_error(int stream_index);
// The error was raised to a caller: forget it on every stream holding it
// (a consumer on another stream records the same error on its own).
void clear_error(const std::exception_ptr& e);

}  // namespace fluxion::scheduler
