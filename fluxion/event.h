// Events: a timeline value signalled by a stream and awaited by the host or
// by another stream. Fences (synchronisation inside one eval) are events too.
// Each operation is carried out by the backend of the stream involved
// (fluxion/backend_interface.h: backend(stream.device.type)).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>

#include "fluxion/device.h"

namespace fluxion {

class Event {
 public:
  Event() = default;
  // An event of `stream` (its backend may attach an object of its own).
  explicit Event(Stream stream);

  // The value that `signal` will reach and `wait` waits for.
  void set_value(uint64_t v) { value_ = v; }
  uint64_t value() const { return value_; }
  // Enqueue on `stream` (the event's own) a task that marks this event
  // reached.
  void signal(Stream stream);
  // Block the calling thread until the event is reached; rethrows an error
  // raised by a task of the signalling stream (and forgets it there).
  void wait() const;
  // Block until the event is reached and return the error it carries (the
  // first pending error of the signalling stream, maybe another graph's),
  // without raising or forgetting it: eval and array::wait raise only the
  // errors of their own arrays.
  std::exception_ptr wait_quietly() const;
  // Make `stream` wait for this event before its later work.
  void wait(Stream stream) const;
  bool is_signaled() const;
  bool valid() const { return state_ != nullptr; }
  Stream stream() const { return stream_; }

  // For backends: the event's host-visible timeline. `mark_reached` raises
  // it to value() (a first error is kept and rethrown by wait()) and wakes
  // the waiters; it allocates nothing and never throws. `wait_reached`
  // blocks until value() is reached, without rethrowing.
  void mark_reached(std::exception_ptr error = nullptr) const noexcept;
  void wait_reached() const;
  bool reached() const;
  // The object the backend attached when the event was made (null on the
  // CPU).
  const std::shared_ptr<void>& handle() const;

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
  void update(Stream stream);
  void wait(Stream stream);

 private:
  Event event_;
  uint64_t count_ = 0;
};

}  // namespace fluxion
