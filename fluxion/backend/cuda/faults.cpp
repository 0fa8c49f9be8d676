// Errors of the CUDA runtime: failed CUDA calls as C++ exceptions
// (throw_error, check_launch), and the deferred faults of launched kernels.
// A kernel cannot raise: an index kernel (or a library's status, or a
// host watchdog) reports into a fault slot of its stream, and the stream's
// next host mark (events.cpp) checks the window of slots taken since the
// last one, setting the errors on the kernels' outputs and, in launch
// order, on every array computed from them since (cuda.h, IndexFault).
#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "fluxion/backend/cuda/runtime.h"

namespace fluxion::cu {

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

thread_local constinit bool t_took_fault_slot = false;

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

}  // namespace fluxion::cu
