#include "fluxion/event.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "fluxion/backend_interface.h"
#include "fluxion/scheduler.h"

namespace fluxion {

struct Event::State {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t reached = 0;
  std::exception_ptr error;
  std::shared_ptr<void> handle;
};

Event::Event(Stream stream)
    : state_(std::make_shared<State>()), stream_(stream) {
  state_->handle = backend(stream.device.type).event_create(stream);
}

void Event::signal(Stream stream) {
  backend(stream.device.type).event_signal(*this, stream);
}

std::exception_ptr Event::wait_quietly() const {
  // Work batched on this thread may be what we are waiting for.
  scheduler::flush();
  backend(stream_.device.type).event_wait(*this);
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->error;
}

void Event::wait() const {
  if (auto e = wait_quietly()) {
    scheduler::clear_error(e);
    std::rethrow_exception(e);
  }
}

void Event::wait(Stream stream) const {
  backend(stream.device.type).event_wait(*this, stream);
}

bool Event::is_signaled() const {
  return backend(stream_.device.type).event_is_signaled(*this);
}

void Event::mark_reached(std::exception_ptr error) const noexcept {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->reached = std::max(state_->reached, value_);
    if (error && !state_->error) {
      state_->error = std::move(error);
    }
  }
  state_->cv.notify_all();
}

void Event::wait_reached() const {
  std::unique_lock<std::mutex> lk(state_->mu);
  state_->cv.wait(lk, [this] { return state_->reached >= value_; });
}

bool Event::reached() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->reached >= value_;
}

const std::shared_ptr<void>& Event::handle() const { return state_->handle; }

void Fence::update(Stream stream) {
  event_.set_value(++count_);
  backend(stream.device.type).fence_update(event_, stream);
}

void Fence::wait(Stream stream) {
  backend(stream.device.type).fence_wait(event_, stream);
}

}  // namespace fluxion
