// The NCCL backend of mx.distributed: collectives on GPU memory, enqueued
// on the CUDA stream of the kernel being launched (no host synchronisation
// on the hot path).
//
// libnccl.so.2 is dlopen'ed and its functions resolved with dlsym (their
// types from the toolkit's nccl.h; a build without nccl.h has no NCCL), so
// Fluxion runs where NCCL is absent and is_available("nccl") says whether
// it loads.
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0): a call that
// returns ncclInProgress is polled with ncclCommGetAsyncError until it has
// been enqueued, against FLUXION_DIST_TIMEOUT. Once enqueued, a collective
// is watched by one watchdog thread: a CUDA event recorded before it
// starts the clock (work queued ahead of it on the stream does not count),
// one recorded after it ends its watch. A collective still running
// FLUXION_DIST_TIMEOUT seconds after it started, or a communicator whose
// ncclCommGetAsyncError reports an error (a peer that failed), is aborted
// (ncclCommAbort, which makes its kernels return); the error, naming the
// collective and the ranks, is set on the outputs through the CUDA
// backend's fault slots (cu::host_fault), so reading them, or eval, raises
// it. An aborted communicator raises at its next use.
#include "fluxion/backend/cuda/nccl.h"

#if FLUXION_HAVE_NCCL

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "fluxion/backend/cuda/cuda.h"

namespace fluxion::distributed::detail {

namespace nccl {

Lib::Lib() {
  // The loader's path first, then where CUDA toolkits put it (NCCL's
  // packages for the toolkit install into its lib folders, which the
  // loader's cache may not list).
  std::string first;
  for (const char* so :
       {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2",
        "/usr/local/cuda/lib/libnccl.so.2",
        "/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2"}) {
    handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      break;
    }
    if (first.empty()) {
      first = dlerror();
    }
  }
  if (!handle) {
    error = "cannot load libnccl.so.2 (" + first + ")";
    return;
  }
#define FLUXION_NCCL_RESOLVE(NAME)                                         \
  NAME = reinterpret_cast<decltype(&::NAME)>(dlsym(handle, #NAME));        \
  if (!NAME && error.empty()) {                                            \
    error = "libnccl lacks " #NAME " (Fluxion needs NCCL 2.18 or later)";  \
  }
  FLUXION_NCCL_FUNCTIONS(FLUXION_NCCL_RESOLVE)
#undef FLUXION_NCCL_RESOLVE
  if (!error.empty()) {
    dlclose(handle);
    handle = nullptr;
  }
}

Lib& lib() {
  static Lib* l = new Lib();  // never unloaded: communicators live to exit
  return *l;
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  return c;
}

std::string seconds(double t) { return std::to_string(t) + " s"; }

}  // namespace nccl

namespace {

using namespace nccl;
using Clock = std::chrono::steady_clock;

// A deadline FLUXION_DIST_TIMEOUT seconds from now; none when unset.
struct Deadline {
  double limit = 0;
  Clock::time_point at = Clock::time_point::max();
  explicit Deadline(double seconds_) : limit(seconds_) {
    if (limit > 0) {
      at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(limit));
    }
  }
  bool passed() const { return limit > 0 && Clock::now() > at; }
};

class NcclComm;

// The collectives enqueued and not yet seen completed, per communicator.
struct Watch {
  cudaEvent_t start = nullptr, done = nullptr;
  bool started = false;
  Clock::time_point deadline = Clock::time_point::max();
  cu::HostFault fault;
  const char* op = "";
};

// The watchdog thread and the communicators it watches (leaked: it runs
// to exit, and stops polling once exit begins).
struct Watchdog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<NcclComm*> comms;  // never destroyed
  std::atomic<bool> exiting{false};
  std::atomic<int> pending{0};
  void start();
  void loop();
};
Watchdog& watchdog() {
  static auto* w = [] {
    auto* w = new Watchdog();
    std::atexit([] { watchdog().exiting = true; });
    w->start();
    return w;
  }();
  return *w;
}

class NcclComm : public Comm {
 public:
  NcclComm(ncclComm_t comm, int device) : comm_(comm), device_(device) {
    auto& l = lib();
    check("init", l.ncclCommUserRank(comm_, &rank_));
    check("init", l.ncclCommCount(comm_, &size_));
    auto& w = watchdog();
    std::lock_guard<std::mutex> lk(w.mu);
    w.comms.push_back(this);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device{Device::gpu, device_}; }

  std::shared_ptr<Comm> split(int color, int key) override {
    std::lock_guard<std::mutex> lk(mu_);
    usable("Group.split");
    ncclConfig_t cfg = nonblocking_config();
    Deadline d(timeout_seconds());
    // A nonblocking split writes the new communicator into *slot from
    // NCCL's own thread once it completes (newer NCCLs leave it null until
    // then), so the slot is on the heap: leaked if the wait gives up
    // first, since NCCL may still write it.
    auto* slot = new ncclComm_t(nullptr);
    check("Group.split", lib().ncclCommSplit(comm_, color,
                                             key < 0 ? rank_ : key, slot,
                                             &cfg));
    wait_ready("Group.split", comm_, d, "splitting the communicator", [slot] {
      return __atomic_load_n(slot, __ATOMIC_ACQUIRE) != nullptr;
    });
    ncclComm_t sub = *slot;
    delete slot;
    wait_ready("Group.split", sub, d, "splitting the communicator");
    // Leaked with the watchdog's list: a group may be referenced by
    // primitives until exit.
    auto* c = new NcclComm(sub, device_);
    return std::shared_ptr<Comm>(c, [](Comm*) {});
  }

  void all_reduce(const char* op, const array& in, array& out,
                  ReduceOp r) override {
    auto [type, count, rop] = reduction(op, in, r);
    verify(op, in);
    if (count == 0) {
      return;
    }
    enqueue(op, [&, type = type, count = count, rop = rop](cudaStream_t s) {
      return lib().ncclAllReduce(cu::ptr(in), cu::ptr(out), count, type, rop,
                                 comm_, s);
    });
  }

  void all_gather(const char* op, const array& in, array& out) override {
    verify(op, in);
    if (in.nbytes() == 0) {
      return;
    }
    enqueue(op, [&](cudaStream_t s) {
      return lib().ncclAllGather(cu::ptr(in), cu::ptr(out), in.nbytes(),
                                 ncclUint8, comm_, s);
    });
  }

  void sum_scatter(const char* op, const array& in, array& out) override {
    auto [type, count, rop] = reduction(op, out, ReduceOp::sum);
    verify(op, in);
    if (count == 0) {
      return;
    }
    enqueue(op, [&, type = type, count = count, rop = rop](cudaStream_t s) {
      return lib().ncclReduceScatter(cu::ptr(in), cu::ptr(out), count, type,
                                     rop, comm_, s);
    });
  }

  void send(const char* op, const array& in, int dst) override {
    if (check_enabled(false)) {
      Descriptor d = describe(op, in);
      exchange_header(op, &d, dst, true);
    }
    if (in.nbytes() == 0) {
      return;
    }
    enqueue(op, [&](cudaStream_t s) {
      return lib().ncclSend(cu::ptr(in), in.nbytes(), ncclUint8, dst, comm_,
                            s);
    });
  }

  void recv(const char* op, array& out, int src) override {
    if (check_enabled(false)) {
      Descriptor sent{};
      exchange_header(op, &sent, src, false);
      Descriptor expected = describe(op, out);
      if (!std::equal(sent.begin() + 1, sent.end(), expected.begin() + 1)) {
        // Still take the sender's message, so that it is not left waiting.
        size_t bytes = static_cast<size_t>(std::max<int64_t>(sent[4], 0)) *
                       static_cast<size_t>(std::max<int64_t>(sent[2], 0));
        array scratch(Shape{static_cast<int>(bytes)}, uint8, nullptr, {});
        cu::alloc(scratch);
        cu::keep_alive(scratch);
        if (bytes > 0) {
          enqueue(op, [&](cudaStream_t s) {
            return lib().ncclRecv(cu::ptr(scratch), bytes, ncclUint8, src,
                                  comm_, s);
          });
        }
        check_transfer(op, sent, expected, src, rank_);
      }
    }
    if (out.nbytes() == 0) {
      return;
    }
    enqueue(op, [&](cudaStream_t s) {
      return lib().ncclRecv(cu::ptr(out), out.nbytes(), ncclUint8, src, comm_,
                            s);
    });
  }

  // Called by the watchdog: completes the watches whose collectives have
  // finished, and aborts the communicator on a timeout or an async error.
  void poll();

 private:
  friend struct Watchdog;

  std::string where() const {
    return "rank " + std::to_string(rank_) + " of a group of " +
           std::to_string(size_);
  }

  std::string nccl_message(ncclResult_t rc) const {
    auto& l = lib();
    std::string msg = l.ncclGetErrorString(rc);
    const char* last = comm_ ? l.ncclGetLastError(comm_) : nullptr;
    if (last && *last) {
      msg += ": ";
      msg += last;
    }
    return msg;
  }

  void check(const char* op, ncclResult_t rc) const {
    if (rc == ncclSuccess || rc == ncclInProgress) {
      return;
    }
    throw std::runtime_error(std::string("[") + op + "] NCCL failed on " +
                             where() + ": " + nccl_message(rc));
  }

  // Raises when an earlier error aborted the communicator. Called with mu_.
  void usable(const char* op) const {
    if (!aborted_.empty()) {
      throw std::runtime_error(std::string("[") + op +
                               "] The NCCL communicator of " + where() +
                               " was aborted after an earlier error (" +
                               aborted_ + "); create a new group.");
    }
  }

  // Polls a non-blocking call until NCCL has enqueued it (or created the
  // communicator) and `done` holds, when given; raises on c's error or at
  // the deadline. Called with mu_.
  void wait_ready(const char* op, ncclComm_t c, const Deadline& d,
                  const char* what,
                  const std::function<bool()>& done = nullptr) {
    auto& l = lib();
    for (int polls = 0;; ++polls) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t rc = l.ncclCommGetAsyncError(c, &state);
      if (rc != ncclSuccess) {
        state = rc;
      }
      if (state == ncclSuccess) {
        if (!done || done()) {
          return;
        }
        state = ncclInProgress;  // c is fine; what it runs is not done
      }
      if (state != ncclInProgress) {
        std::string msg = std::string("[") + op + "] NCCL failed on " +
                          where() + " " + what + ": " + nccl_message(state);
        if (c == comm_) {
          abort_locked(msg);
        } else {
          l.ncclCommAbort(c);
        }
        throw std::runtime_error(msg);
      }
      if (d.passed()) {
        std::string msg = std::string("[") + op + "] Timed out after " +
                          seconds(d.limit) + " (FLUXION_DIST_TIMEOUT) on " +
                          where() + " " + what +
                          ": a peer did not take part (it failed, exited or "
                          "is elsewhere).";
        if (c == comm_) {
          abort_locked(msg);  // fails the collectives enqueued before too
        } else {
          l.ncclCommAbort(c);
        }
        throw std::runtime_error(msg);
      }
      if (polls > 1000) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      } else {
        std::this_thread::yield();
      }
    }
  }

  // Enqueues `call` on the current CUDA stream between two events the
  // watchdog reads, with a fault slot for the error it may report.
  template <typename Call>
  void enqueue(const char* op, Call call) {
    cudaStream_t s = cu::current_stream();
    // The slot before the lock: taking one may wait for the stream.
    cu::HostFault fault = cu::host_fault(op);
    std::lock_guard<std::mutex> lk(mu_);
    usable(op);
    Watch w;
    w.op = op;
    w.fault = fault;
    w.start = event(op);
    w.done = event(op);
    try {
      cu::check(cudaEventRecord(w.start, s), op);
      Deadline d(timeout_seconds());
      check(op, call(s));
      wait_ready(op, comm_, d, "enqueueing it");
      cu::check(cudaEventRecord(w.done, s), op);
    } catch (...) {
      free_events_.push_back(w.start);
      free_events_.push_back(w.done);
      throw;
    }
    watches_.push_back(w);
    auto& dog = watchdog();
    // Under the watchdog's lock, so that the wake-up is not lost between
    // its check and its wait.
    std::lock_guard<std::mutex> wake(dog.mu);
    if (dog.pending++ == 0) {
      dog.cv.notify_one();
    }
  }


  cudaEvent_t event(const char* op) {
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    cu::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), op);
    return e;
  }

  // Aborts the communicator and fails every watched collective with `msg`.
  // Called with mu_.
  void abort_locked(const std::string& msg) {
    if (!aborted_.empty()) {
      return;
    }
    aborted_ = msg;
    auto e = std::make_exception_ptr(std::runtime_error(msg));
    // The errors first: the aborted kernels then return, and the streams'
    // next host marks find them.
    for (auto& w : watches_) {
      cu::report_fault(w.fault, e);
    }
    if (comm_) {
      lib().ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }

  // FLUXION_DIST_CHECK=1: every rank's descriptor gathered through NCCL
  // and compared on the host, which waits for it (a host synchronisation
  // per collective: a debugging aid, off by default).
  void verify(const char* op, const array& x) {
    if (!check_enabled(false) || size_ == 1) {
      return;
    }
    std::vector<Descriptor> all(size_);
    Descriptor mine = describe(op, x);
    cudaStream_t s = cu::current_stream();
    char* dev = scratch(op, sizeof(Descriptor) * (size_ + 1));
    cu::check(cudaMemcpyAsync(dev, mine.data(), sizeof mine,
                              cudaMemcpyHostToDevice, s),
              op);
    enqueue(op, [&](cudaStream_t st) {
      return lib().ncclAllGather(dev, dev + sizeof mine, sizeof mine,
                                 ncclUint8, comm_, st);
    });
    cu::check(cudaMemcpyAsync(all.data(), dev + sizeof mine,
                              sizeof(Descriptor) * size_,
                              cudaMemcpyDeviceToHost, s),
              op);
    wait_stream(op, s);
    check_descriptors(op, all, rank_);
  }

  // A point-to-point header (FLUXION_DIST_CHECK=1), waited for.
  void exchange_header(const char* op, Descriptor* d, int peer, bool sending) {
    cudaStream_t s = cu::current_stream();
    char* dev = scratch(op, sizeof(Descriptor));
    if (sending) {
      cu::check(cudaMemcpyAsync(dev, d->data(), sizeof *d,
                                cudaMemcpyHostToDevice, s),
                op);
    }
    enqueue(op, [&](cudaStream_t st) {
      return sending ? lib().ncclSend(dev, sizeof *d, ncclUint8, peer, comm_,
                                      st)
                     : lib().ncclRecv(dev, sizeof *d, ncclUint8, peer, comm_,
                                      st);
    });
    if (!sending) {
      cu::check(cudaMemcpyAsync(d->data(), dev, sizeof *d,
                                cudaMemcpyDeviceToHost, s),
                op);
    }
    wait_stream(op, s);
  }

  // Waits for the stream, bounded by the timeout (the watchdog aborts a
  // collective that hangs, which ends the wait).
  void wait_stream(const char* op, cudaStream_t s) {
    cudaError_t r;
    while ((r = cudaStreamQuery(s)) == cudaErrorNotReady) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    cu::check(r, op);
    std::lock_guard<std::mutex> lk(mu_);
    usable(op);
  }

  // Device memory for headers and descriptors, reused (each use is waited
  // for). Grows as needed.
  char* scratch(const char* op, size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    if (bytes > scratch_bytes_) {
      if (scratch_) {
        cudaFree(scratch_);
      }
      cu::check(cudaMalloc(&scratch_, bytes), op);
      scratch_bytes_ = bytes;
    }
    return static_cast<char*>(scratch_);
  }

  // The NCCL type, element count and operation of a reduction of `x`'s
  // dtype. bool is reduced as bytes (0/1: sum and max are "or", min
  // "and"); complex64 sums as pairs of float32. int16 / uint16 arrive as
  // int32 / uint32 (the GPU kernel widens them: NCCL has no 16-bit
  // integers).
  std::tuple<ncclDataType_t, size_t, ncclRedOp_t> reduction(
      const char* op, const array& x, ReduceOp r) const {
    ncclRedOp_t rop = r == ReduceOp::sum   ? ncclSum
                      : r == ReduceOp::max ? ncclMax
                                           : ncclMin;
    size_t n = x.size();
    switch (x.dtype()) {
      case Dtype::Val::bool_:
        return {ncclUint8, n, r == ReduceOp::min ? ncclMin : ncclMax};
      case Dtype::Val::int8:
        return {ncclInt8, n, rop};
      case Dtype::Val::uint8:
        return {ncclUint8, n, rop};
      case Dtype::Val::int32:
        return {ncclInt32, n, rop};
      case Dtype::Val::uint32:
        return {ncclUint32, n, rop};
      case Dtype::Val::int64:
        return {ncclInt64, n, rop};
      case Dtype::Val::uint64:
        return {ncclUint64, n, rop};
      case Dtype::Val::float16:
        return {ncclFloat16, n, rop};
      case Dtype::Val::bfloat16:
        return {ncclBfloat16, n, rop};
      case Dtype::Val::float32:
        return {ncclFloat32, n, rop};
      case Dtype::Val::float64:
        return {ncclFloat64, n, rop};
      case Dtype::Val::complex64:
        if (r == ReduceOp::sum) {
          return {ncclFloat32, 2 * n, ncclSum};
        }
        throw std::invalid_argument(
            std::string("[") + op +
            "] complex64 cannot be reduced by max or min over NCCL (its "
            "reductions are of real numbers); gather with all_gather and "
            "reduce.");
      default:
        break;
    }
    throw std::invalid_argument(std::string("[") + op + "] NCCL cannot reduce " +
                                dtype_name(x.dtype()) + " arrays.");
  }

  std::mutex mu_;  // the communicator: one call at a time, and the watches
  ncclComm_t comm_;
  int device_;
  int rank_ = 0, size_ = 1;
  std::string aborted_;  // why, once aborted
  std::deque<Watch> watches_;
  std::vector<cudaEvent_t> free_events_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

void NcclComm::poll() {
  // A communicator busy enqueueing (which may wait for its peers) is
  // skipped this round, so that it cannot hold up the others' watches.
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock() || watches_.empty()) {
    return;
  }
  cudaSetDevice(device_);
  double limit = 0;
  try {
    limit = timeout_seconds();
  } catch (...) {
    limit = 0;  // a malformed value raises at the next enqueue
  }
  auto now = Clock::now();
  // In stream order: a collective's start follows the previous one's end
  // on the same stream; across streams each is checked on its own.
  for (auto it = watches_.begin(); it != watches_.end();) {
    if (cudaEventQuery(it->done) == cudaSuccess) {
      free_events_.push_back(it->start);
      free_events_.push_back(it->done);
      it = watches_.erase(it);
      watchdog().pending--;
      continue;
    }
    cudaGetLastError();
    if (!it->started && cudaEventQuery(it->start) == cudaSuccess) {
      it->started = true;
      if (limit > 0) {
        it->deadline = now + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(limit));
      }
    }
    cudaGetLastError();
    if (it->started && now > it->deadline && aborted_.empty()) {
      abort_locked(std::string("[") + it->op + "] Timed out after " +
                   seconds(limit) + " (FLUXION_DIST_TIMEOUT) on " + where() +
                   ": the collective started on the GPU and did not finish "
                   "(a peer failed, exited or never called it); the "
                   "communicator was aborted.");
    }
    ++it;
  }
  if (comm_ && aborted_.empty()) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = lib().ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess) {
      state = rc;
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      const char* op = watches_.empty() ? "distributed" : watches_.front().op;
      abort_locked(std::string("[") + op + "] NCCL failed on " + where() +
                   ": " + nccl_message(state) +
                   "; the communicator was aborted.");
    }
  }
}

void Watchdog::start() {
  std::thread([this] { loop(); }).detach();
}

void Watchdog::loop() {
  while (!exiting) {
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_for(lk, std::chrono::milliseconds(100),
                  [&] { return pending > 0 || exiting; });
    }
    if (exiting) {
      return;
    }
    std::vector<NcclComm*> list;
    {
      std::lock_guard<std::mutex> lk(mu);
      list = comms;
    }
    for (auto* c : list) {
      c->poll();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

namespace nccl {
std::shared_ptr<Comm> make_comm(ncclComm_t comm, int device) {
  return std::shared_ptr<Comm>(new NcclComm(comm, device), [](Comm*) {});
}
}  // namespace nccl

}  // namespace fluxion::distributed::detail

#endif  // FLUXION_HAVE_NCCL
