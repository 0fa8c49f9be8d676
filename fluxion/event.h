// Events: a timeline value signalled by a stream and awaited by the host or
// by another stream. Fences (synchronisation inside one eval) are events too.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>

#include "fluxion/device.h"

namespace fluxion {

class Event {
 public:
  Event() = default;
  explicit Event(Stream stream);

  // The value that `signal` will reach and `wait` waits for.
  void set_value(uint64_t v) { value_ = v; }
  uint64_t value() const { return value_; }
  // Enqueue on `stream` a task that marks this event reached.
  void signal(Stream stream);
  // Block the calling thread until the event is reached; rethrows an error
  // raised by a task of the signalling stream (and forgets it there).
  void wait() const;
  // Block until the event is reached and return the error it carries (the
  // first pending error of the signalling stream, maybe another graph's),
  // without raising or forgetting it: eval and array::wait raise only the
  // errors of their own arrays.
  std::exception_ptr wait_quietly() const;
  // Enqueue on `stream` a task that waits for this event.
  void wait(Stream stream) const;
  bool is_signaled() const;
  bool valid() const { return state_ != nullptr; }
  Stream stream() const { return stream_; }

  struct State;

 private:
  std::shared_ptr<State> state_;
  Stream stream_{0, Device::cpu};
  uint64_t value_ = 0;
};

// Orders work across streams within one eval: `update` after a producer,
// `wait` before a consumer on another stream.
class Fence {
 public:
  explicit Fence(Stream stream) : event_(stream) {}
  void update(Stream stream) {
    event_.set_value(++count_);
    event_.signal(stream);
  }
  void wait(Stream stream) { event_.wait(stream); }

 private:
  Event event_;
  uint64_t count_ = 0;
};

}  // namespace fluxion
