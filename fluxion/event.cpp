#include "fluxion/event.h"

#include <condition_variable>
#include <mutex>

#include "fluxion/scheduler.h"

namespace fluxion {

struct Event::State {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t reached = 0;
  std::exception_ptr error;
};

Event::Event(Stream stream)
    : state_(std::make_shared<State>()), stream_(stream) {}

void Event::signal(Stream stream) {
  scheduler::enqueue(stream, [state = state_, v = value_, s = stream.index] {
    auto err = scheduler::peek_stream_error(s);
    {
      std::lock_guard<std::mutex> lk(state->mu);
      state->reached = std::max(state->reached, v);
      if (err && !state->error) {
        state->error = err;
      }
    }
    state->cv.notify_all();
  });
}

std::exception_ptr Event::wait_quietly() const {
  // Work batched on this thread may be what we are waiting for.
  scheduler::flush();
  std::unique_lock<std::mutex> lk(state_->mu);
  state_->cv.wait(lk, [this] { return state_->reached >= value_; });
  return state_->error;
}

void Event::wait() const {
  if (auto e = wait_quietly()) {
    scheduler::clear_error(e);
    std::rethrow_exception(e);
  }
}

void Event::wait(Stream stream) const {
  if (is_signaled()) {
    return;
  }
  scheduler::enqueue(stream, [state = state_, v = value_] {
    std::unique_lock<std::mutex> lk(state->mu);
    state->cv.wait(lk, [&] { return state->reached >= v; });
  });
}

bool Event::is_signaled() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->reached >= value_;
}

}  // namespace fluxion
