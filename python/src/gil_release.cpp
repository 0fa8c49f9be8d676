#include "python/src/gil_release.h"

#include <Python.h>

#include <mutex>
#include <vector>

namespace fxpy {

namespace {

struct Pending {
  std::mutex mu;
  std::vector<std::function<void()>> releases;
  bool drain_scheduled = false;
};

Pending& pending() {
  static auto* p = new Pending();  // leaked: used until the process ends
  return *p;
}

int drain(void*) {
  std::vector<std::function<void()>> now;
  {
    std::lock_guard<std::mutex> lk(pending().mu);
    now.swap(pending().releases);
    pending().drain_scheduled = false;
  }
  for (auto& r : now) {
    r();
  }
  return 0;
}

}  // namespace

void release_under_gil(std::function<void()> release) {
  if (!Py_IsInitialized()) {
    return;  // the interpreter is gone: nothing to release into
  }
  if (PyGILState_Check()) {
    release();
    return;
  }
  bool schedule = false;
  {
    std::lock_guard<std::mutex> lk(pending().mu);
    pending().releases.push_back(std::move(release));
    schedule = !pending().drain_scheduled;
    pending().drain_scheduled = true;
  }
  // Only one pending call is outstanding at a time; one that cannot be
  // queued (the interpreter's queue is full) is retried by the next
  // release.
  if (schedule && Py_AddPendingCall(drain, nullptr) != 0) {
    std::lock_guard<std::mutex> lk(pending().mu);
    pending().drain_scheduled = false;
  }
}

}  // namespace fxpy
