// The CPU backend (fluxion/backend_interface.h): the host as a device, and
// its scheduling: kernels, streams, events and fences on the scheduler's
// worker threads.
#include <sys/utsname.h>

#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

#include "fluxion/backend/common/fail_outputs.h"
#include "fluxion/backend/common/node.h"
#include "fluxion/backend/cpu/allocator.h"
#include "fluxion/backend_interface.h"
#include "fluxion/graph_utils.h"
#include "fluxion/primitive.h"
#include "fluxion/scheduler.h"
#include "fluxion/tls.h"

namespace fluxion {

namespace cpu {

namespace {

using common::fail_outputs;

// An allocation failure names the size only ("[malloc] Unable to allocate
// N bytes."): the error the caller gets also names the op that needed it
// and the output it was computing, keeping the exception's type
// (std::runtime_error, or std::bad_alloc for other allocations, which
// Python raises as MemoryError). Anything else passes unchanged, and so
// does the original when the new message cannot be built.
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

std::exception_ptr with_op(const std::exception_ptr& e, const Primitive& p,
                           const std::vector<array>& outputs) noexcept {
  try {
    std::string context = std::string(" (in ") + p.name();
    if (!outputs.empty()) {
      std::ostringstream os;
      os << ", output shape " << outputs[0].shape() << " "
         << outputs[0].dtype();
      context += os.str();
    }
    context += ")";
    try {
      std::rethrow_exception(e);
    } catch (const std::runtime_error& err) {
      std::string what = err.what();
      if (what.rfind("[malloc]", 0) != 0) {
        return e;
      }
      if (!what.empty() && what.back() == '.') {
        what.pop_back();
      }
      return std::make_exception_ptr(std::runtime_error(what + context + "."));
    } catch (const OutOfMemory&) {
      return e;
    } catch (const std::bad_alloc&) {
      return std::make_exception_ptr(OutOfMemory(
          std::string("[") + p.name() + "] Out of memory" + context + "."));
    } catch (...) {
      return e;
    }
  } catch (...) {
    return e;
  }
}

// Kernels take vectors: these are reused between calls (allocations less
// per op), taken out while in use, so a nested call makes its own.
struct Scratch {
  std::vector<array> inputs;
  std::vector<array> outputs;
};
thread_local Scratch t_scratch;

std::string machine_architecture() {
  struct utsname u;
  if (uname(&u) == 0) {
    return u.machine;
  }
  return "unknown";
}

// The "model name" line of /proc/cpuinfo, else the architecture.
std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(" \t", colon + 1);
        if (start != std::string::npos) {
          return line.substr(start);
        }
      }
    }
  }
  return machine_architecture();
}

class CpuBackend final : public Backend {
 public:
  // ---- Devices: one, the host.

  bool built() const override { return true; }
  // Load and every other primitive run on the host's own streams.
  Device::DeviceType host_primitive_device() const override {
    return Device::cpu;
  }
  int device_count() override { return 1; }
  DeviceInfo device_info(int index) override {
    static const DeviceInfo info = {
        {"device_name", cpu_name()},
        {"architecture", machine_architecture()},
        {"memory_size", physical_memory()},
        {"total_memory", physical_memory()},
    };
    return info;
  }

  // ---- Memory.

  allocator::Allocator* device_allocator(int index) override {
    return index == 0 ? &host_allocator() : nullptr;
  }
  allocator::Allocator* host_copy_allocator() override { return nullptr; }
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t n) override {
    // A copy to or from another device is that device's backend's to make
    // (it knows how to reach its memory).
    if (dst_device.type != Device::cpu) {
      backend(dst_device.type).copy(dst, dst_device, src, src_device, n);
    } else if (src_device.type != Device::cpu) {
      backend(src_device.type).copy(dst, dst_device, src, src_device, n);
    } else if (n > 0) {
      std::memcpy(dst, src, n);
    }
  }

  // ---- Running.

  // Schedule `arr`'s primitive on its CPU stream's worker (eval_cpu runs
  // there; the inputs move into the task, which is the detach).
  void eval(array& arr) override {
    auto node = common::take_node(arr);
    auto stream = node.primitive->stream();
    scheduler::enqueue(
        stream,
        [prim = std::move(node.primitive), inputs = std::move(node.inputs),
         outputs = std::move(node.outputs), s = stream.index]() mutable {
          // An input whose kernel failed holds no result: skip this kernel
          // (it could run for long on zeros, or fail again allocating),
          // and carry the first error to this stream's event too, so that
          // an eval waiting here (maybe on another stream) raises it.
          for (auto& in : inputs) {
            if (in.error()) {
              fail_outputs(outputs, in.error());
              scheduler::set_stream_error(s, in.error());
              return;
            }
          }
          try {
            prim->eval_cpu(inputs, outputs);
          } catch (...) {
            auto e = with_op(std::current_exception(), *prim, outputs);
            fail_outputs(outputs, e);
            scheduler::set_stream_error(s, e);
          }
        });
  }

  bool eval_now(array& arr) override {
    Scratch& t = *detail::pin_tls(&t_scratch);  // one TLS call (tls.h)
    // The kernel reads copies of the input handles: an input only this
    // node holds (a temporary cast) would otherwise be donated, its buffer
    // taken over by the output, while the node keeps it in the graph that
    // printing, export and compile still read.
    std::vector<array> inputs = std::move(t.inputs);
    std::vector<array> outputs = std::move(t.outputs);
    inputs.assign(arr.inputs().begin(), arr.inputs().end());
    outputs.push_back(arr);
    bool ok = true;
    try {
      arr.primitive().eval_cpu(inputs, outputs);
    } catch (...) {
      ok = false;
    }
    inputs.clear();
    outputs.clear();
    t.inputs = std::move(inputs);
    t.outputs = std::move(outputs);
    if (ok) {
      // The node stays: to the graph (printing, export, compile, eval)
      // this array is unevaluated until an eval or detach
      // (fluxion/eager.h).
      arr.set_status(array::Status::available);
    }
    return ok;
  }

  // Tasks go to the workers as they are queued: nothing to submit.
  void finalize(Stream) override {}

  // ---- Streams: a worker thread with a task queue (the scheduler's).

  void new_stream(Stream s) override { scheduler::new_thread(s); }
  void end_stream(Stream s) override { scheduler::end_thread(s); }
  void synchronize(Stream s) override {
    Event e(s);
    e.set_value(1);
    e.signal(s);
    e.wait();
  }
  void* native_stream(Stream) override {
    throw std::invalid_argument(
        "[native_stream] A cpu stream has no native handle.");
  }

  // ---- Events: the host-visible timeline only (no backend object).

  std::shared_ptr<void> event_create(Stream) override { return nullptr; }
  void event_signal(const Event& e, Stream s) override {
    scheduler::enqueue(s, [e, s = s.index] {
      e.mark_reached(scheduler::peek_stream_error(s));
    });
  }
  void event_wait(const Event& e, Stream s) override {
    if (e.reached()) {
      return;
    }
    // The wait blocks s's worker until the signalling task has run. Hand
    // every task batched on this thread (the signal among them, when this
    // eval produces it) to the workers first: then, whatever the threads,
    // a blocking wait is always queued after the task it waits for, so no
    // two workers can end up waiting on each other.
    scheduler::flush();
    scheduler::enqueue(s, [e] { e.wait_reached(); });
  }
  void event_wait(const Event& e) override { e.wait_reached(); }
  bool event_is_signaled(const Event& e) override { return e.reached(); }
  // Fences inside one eval are events on CPU streams.
  void fence_update(const Event& fence, Stream s) override {
    event_signal(fence, s);
  }
  void fence_wait(const Event& fence, Stream s) override {
    event_wait(fence, s);
  }
};

// No data, a constexpr constructor and a trivial destructor: constant-
// initialized and never destroyed, so usable from any static initializer
// or destructor.
constinit CpuBackend g_cpu_backend;

}  // namespace

}  // namespace cpu

Backend& cpu_backend() { return cpu::g_cpu_backend; }

}  // namespace fluxion
