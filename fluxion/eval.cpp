// eval / async_eval: schedule a graph on its streams (design.md §3). The
// algorithm is the seed's eval_impl: count uses by DFS (count_consumers),
// build a breadth-first tape with a width limit (build_tape), then run it
// backwards with events and fences (per node: attach_stream_event,
// wait_for_inputs, the backend's eval, throttle, mark_evaluated; then
// signal_all).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <stack>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "fluxion/allocator.h"
#include "fluxion/backend_interface.h"
#include "fluxion/eager.h"
#include "fluxion/flat_map.h"
#include "fluxion/primitive.h"
#include "fluxion/schedule_lock.h"
#include "fluxion/scheduler.h"
#include "fluxion/transforms.h"

namespace fluxion {

namespace {

constexpr int kMaxActiveTasks = 10;

// Joins the outputs of one eval into a single node to wait on. Not an op,
// so not in the primitive registry: its kernels, which do nothing, are the
// same on every backend and written here.
class Synchronizer : public Primitive {
 public:
  explicit Synchronizer(Stream stream) : Primitive(stream) {}
  void eval_cpu(const std::vector<array>&, std::vector<array>&) override {}
  void eval_gpu(const std::vector<array>&, std::vector<array>&) override {}
  const char* name() const override { return "Synchronizer"; }
};

}  // namespace

namespace env {
int bfs_max_width() {
  static int width = [] {
    const char* v = std::getenv("FLUXION_BFS_MAX_WIDTH");
    int w = v ? std::atoi(v) : 20;
    return w > 0 ? w : 20;
  }();
  return width;
}
}  // namespace env

using ArrayRef = std::reference_wrapper<array>;

namespace {

// Arrays consumed on another stream than the one producing them (by id),
// and the index of the stream that produces them.
using FenceNeeds = std::unordered_map<uintptr_t, int>;

// The stream the synchronizer node runs on. Prefer the stream of an output
// that needs work.
Stream synchronizer_stream(const std::vector<array>& outputs) {
  Stream stream = default_stream(default_device());
  for (auto& o : outputs) {
    if (o.status() == array::Status::unscheduled && o.has_primitive()) {
      stream = o.primitive().stream();
      break;
    }
  }
  return stream;
}

// Raises for an unscheduled input that eval cannot run, before anything is
// scheduled: a tracer under async_eval, or an array without a primitive.
void check_schedulable(const array& in, bool async) {
  if (async && in.is_tracer()) {
    throw std::invalid_argument(
        "[async_eval] Not allowed inside a graph transformation.");
  }
  if (!in.has_primitive()) {
    if (in.is_tracer()) {
      throw std::invalid_argument(
          "[eval] Attempting to eval an array during function "
          "transformations like compile or vmap is not allowed.");
    }
    throw std::runtime_error(
        "[eval] Attempting to eval an array without a primitive.\n"
        "If you are compiling a function, make sure all the inputs "
        "and outputs are captured (see the compile documentation on "
        "pure functions).\nIf you are not using compile, this may be "
        "a bug in Fluxion: please report it.");
  }
}

// Count how many consumers each unscheduled node has (into `cache`: the
// tape is built from these counts), note the arrays that need a fence, and
// return the bytes the unscheduled nodes' outputs take (they choose the
// tape's width). Depth first with an explicit stack, from the synchronizer.
size_t count_consumers(array& synchronizer, bool async, FenceNeeds& needs_fence,
                       detail::IdCountMap& cache) {
  size_t graph_bytes = 0;
  std::stack<std::pair<ArrayRef, int>> dfs;
  dfs.emplace(synchronizer, 0);
  while (!dfs.empty()) {
    auto& [a_ref, idx] = dfs.top();
    auto& a = a_ref.get();
    if (idx < static_cast<int>(a.inputs().size())) {
      auto& in = a.inputs()[idx++];
      if (in.status() == array::Status::unscheduled) {
        check_schedulable(in, async);
        if (a.primitive().stream() != in.primitive().stream()) {
          needs_fence.emplace(in.id(), in.primitive().stream().index);
        }
      }
      // Siblings share one count.
      if (int* count = cache.find(in.id()); count == nullptr) {
        if (in.status() == array::Status::unscheduled) {
          graph_bytes += in.nbytes();
          for (auto& s : in.siblings()) {
            graph_bytes += s.nbytes();
          }
        }
        // An array already computed or scheduled needs none of its
        // inputs: its graph is only detached (below), not walked. (A node
        // above it may even be lazy again, its value dropped because
        // only the graph held it: backend/cpu/eval.cpp, eval_now. Counted
        // through here, it would wait for a consumer that never runs.)
        int first = in.status() == array::Status::unscheduled
                        ? 0
                        : static_cast<int>(in.inputs().size());
        dfs.emplace(in, first);
        cache.insert(in.id(), 1);
        for (auto& s : in.siblings()) {
          cache.insert(s.id(), 1);
        }
      } else {
        ++*count;
        for (auto& s : in.siblings()) {
          cache[s.id()]++;
        }
      }
      continue;
    }
    if (a.status() != array::Status::unscheduled && !a.is_tracer() &&
        a.has_primitive()) {
      // Already scheduled by an earlier eval: its graph is not needed.
      a.detach();
    }
    dfs.pop();
  }
  return graph_bytes;
}

// Breadth-first tape with a width limit, so independent branches
// interleave without the whole graph in flight. When the graph's
// outputs could not all fit under the memory limit, the tape goes
// depth first (width 1): each branch then finishes, and frees its
// temporaries, before the next starts, which is what lets eval stay
// near set_memory_limit (a breadth-first tape keeps a temporary of
// every branch of a level alive at once, whatever eval waits for).
// A node joins the tape when its last consumer has (its count in `cache`,
// from count_consumers, reaches 0), so it runs before all of them.
void build_tape(std::deque<array>& tape, array& synchronizer,
                detail::IdCountMap& cache, size_t graph_bytes) {
  const size_t max_width =
      get_active_memory() + graph_bytes > get_memory_limit()
          ? 1
          : env::bfs_max_width();
  std::stack<std::pair<ArrayRef, int>> dfs;
  tape.push_back(synchronizer);
  for (size_t i = 0; !cache.empty() && (i < tape.size() || !dfs.empty());) {
    auto& a = (i >= tape.size()) ? dfs.top().first.get() : tape[i];
    int j = 0;
    if (i >= tape.size()) {
      j = dfs.top().second;
      dfs.pop();
    } else {
      i++;
    }
    for (; j < static_cast<int>(a.inputs().size()); ++j) {
      auto& in = a.inputs()[j];
      if (in.status() != array::Status::unscheduled) {
        continue;
      }
      if (tape.size() - i >= max_width) {
        dfs.emplace(a, j);
        break;
      }
      int* count = cache.find(in.id());
      if (--*count != 0) {
        for (auto& s : in.siblings()) {
          cache[s.id()] -= 1;
        }
        continue;
      }
      cache.erase(in.id());
      for (auto& s : in.siblings()) {
        cache.erase(s.id());
      }
      tape.push_back(in);
    }
  }
}

// Attach to arr and its siblings this eval's event of their stream (made on
// first use, with its check that the stream can be used): waiting on them
// waits until signal_all signals it, after the eval's last task there.
void attach_stream_event(array& arr, const Stream& s,
                         std::unordered_map<int, Event>& events) {
  auto e = events.find(s.index);
  if (e == events.end()) {
    check_stream_usable(s, "eval");
    e = events.emplace(s.index, Event{s}).first;
  }
  e->second.set_value(1);
  arr.attach_event(e->second);
  for (auto& sib : arr.siblings()) {
    sib.attach_event(e->second);
  }
}

// Make stream s wait for arr's inputs computed on other streams (one on s
// itself is ordered by the stream).
void wait_for_inputs(array& arr, const Stream& s, const FenceNeeds& needs_fence,
                     std::unordered_map<int, Fence>& fences) {
  for (auto& in : arr.inputs()) {
    if (auto it = needs_fence.find(in.id()); it != needs_fence.end()) {
      // Produced on another stream within this eval.
      fences.at(it->second).wait(s);
    } else if (Event ie = in.event(); ie.valid()) {
      if (ie.is_signaled()) {
        in.detach_event();
      } else if (ie.stream() != s) {
        // Produced on another stream by an earlier eval (async, or of
        // another thread).
        ie.wait(s);
      }
    }
  }
}

// What the memory checks carry from node to node: the bytes of the tasks
// batched since the batch was last handed over, and the memory limit of the
// last node's device.
struct MemoryBudget {
  size_t pending_bytes = 0;
  Device limit_device{Device::cpu, -1};  // none yet
  size_t limit = 0;
};

// After scheduling arr (on s): wait for running work while the memory limit
// of s's device would be passed or more than kMaxActiveTasks items are in
// flight.
void throttle(const array& arr, const std::vector<array>& sibs, const Stream& s,
              std::unordered_map<int, Event>& events, MemoryBudget& m) {
  // Bytes the batched tasks will allocate: until the batch is handed
  // over their kernels have not run, so active memory alone would let
  // a whole batch of temporaries past the memory limit. Memory is the
  // node's device's (each device has its allocator).
  m.pending_bytes += arr.nbytes();
  for (auto& sib : sibs) {
    m.pending_bytes += sib.nbytes();
  }
  // The limit is read once per device and eval (each read, like the
  // active memory's, takes the allocator's lock, which the workers'
  // allocations contend for); active memory is read once per node.
  if (!(m.limit_device == s.device)) {
    m.limit_device = s.device;
    m.limit = get_memory_limit(s.device);
  }
  size_t active = get_active_memory(s.device);
  if (active + m.pending_bytes > m.limit) {
    // Hand the batch over and let it run before scheduling more, until
    // active memory is back under the limit or nothing is in flight
    // (the memory limit trades parallelism for memory, as MLX's).
    scheduler::flush();
    m.pending_bytes = 0;
    do {
      scheduler::wait_for_one();
    } while (get_active_memory(s.device) > m.limit &&
             scheduler::n_active_tasks() > 0);
    active = get_active_memory(s.device);
  }
  if (scheduler::n_active_tasks() > kMaxActiveTasks ||
      (active > m.limit && scheduler::n_active_tasks() > 0)) {
    for (auto& [_, ev] : events) {
      backend(ev.stream().device.type).finalize(ev.stream());
    }
    scheduler::wait_for_one();
    while (get_active_memory(s.device) > m.limit &&
           scheduler::n_active_tasks() > 0) {
      scheduler::wait_for_one();
    }
    m.pending_bytes = 0;
  }
}

// Mark arr and its siblings evaluated (their tasks are queued) and, for
// those another stream consumes in this eval, update s's fence after them:
// the consumer's wait_for_inputs waits on it.
void mark_evaluated(array& arr, std::vector<array>& sibs, const Stream& s,
                    const FenceNeeds& needs_fence,
                    std::unordered_map<int, Fence>& fences) {
  auto maybe_update_fence = [&](const array& a) {
    if (needs_fence.count(a.id())) {
      auto it = fences.find(s.index);
      if (it == fences.end()) {
        it = fences.emplace(s.index, Fence{s}).first;
      }
      it->second.update(s);
    }
  };
  arr.set_status(array::Status::evaluated);
  maybe_update_fence(arr);
  for (auto& sib : sibs) {
    sib.set_status(array::Status::evaluated);
    maybe_update_fence(sib);
  }
}

// Signal every stream's event of this eval after the tasks queued on it
// (and finalize the streams, which submits a GPU's work).
void signal_all(std::unordered_map<int, Event>& events) {
  for (auto& [_, e] : events) {
    e.signal(e.stream());
    backend(e.stream().device.type).finalize(e.stream());
  }
}

}  // namespace

static array eval_impl(std::vector<array> outputs, bool async) {
  std::deque<array> tape;
  Stream stream = synchronizer_stream(outputs);
  FenceNeeds needs_fence;
  auto synchronizer =
      array(Shape{}, bool_, std::make_shared<Synchronizer>(stream),
            std::move(outputs));
  std::unordered_map<int, Fence> fences;
  std::unordered_map<int, Event> events;
  check_stream_usable(stream, "eval");
  events.emplace(stream.index, Event{stream});

  {
    detail::IdCountMap cache;
    size_t graph_bytes =
        count_consumers(synchronizer, async, needs_fence, cache);
    build_tape(tape, synchronizer, cache, graph_bytes);
  }

  // Run the tape from the leaves up. Tasks are batched per stream and handed
  // to the workers when the batch closes or before any wait.
  scheduler::Batch batch;
  MemoryBudget memory;
  try {
    while (!tape.empty()) {
      auto arr = std::move(tape.back());
      tape.pop_back();
      auto s = arr.primitive().stream();
      attach_stream_event(arr, s, events);
      wait_for_inputs(arr, s, needs_fence, fences);

      // The backend detaches arr (common::take_node): what follows reads
      // the group from this copy.
      std::vector<array> sibs = arr.siblings();
      backend(arr.primitive().device().type).eval(arr);

      throttle(arr, sibs, s, events, memory);
      mark_evaluated(arr, sibs, s, needs_fence, fences);
    }
  } catch (...) {
    // Whatever was scheduled must still complete its events, or later waits
    // would hang.
    signal_all(events);
    throw;
  }
  signal_all(events);
  return synchronizer;
}

namespace {
bool any_unscheduled(const std::vector<array>& outputs) {
  return std::any_of(outputs.begin(), outputs.end(), [](const array& x) {
    return x.status() == array::Status::unscheduled;
  });
}
}  // namespace

// Evals of several threads take turns to build and schedule their tapes
// (kernels still run concurrently on the streams' workers). A graph node
// two threads share is then scheduled by the first eval that reaches it,
// and the later eval finds it scheduled, with its event attached and its
// tasks already queued: it waits for it like for an earlier async_eval's
// (FIFO on the same stream, an event wait on another). Recursive: nothing
// evaluates from inside eval_impl today, but a backend hook may.
namespace detail {
std::recursive_mutex& schedule_mutex() {
  static std::recursive_mutex m;
  return m;
}
}  // namespace detail
using detail::schedule_mutex;

void async_eval(std::vector<array> outputs) {
  std::lock_guard<std::recursive_mutex> lock(schedule_mutex());
  if (any_unscheduled(outputs)) {
    eval_impl(std::move(outputs), true);
  } else {
    detail::detach_computed(outputs);
  }
}

void eval(std::vector<array> outputs) {
  if (!any_unscheduled(outputs)) {
    for (auto& x : outputs) {
      x.wait();
    }
    // Computed nodes (small ops run when built, fluxion/eager.h) lose their
    // graph here, as the nodes eval runs do. Under the scheduling lock, as
    // eval_impl's detaches: two threads may eval one shared node.
    std::lock_guard<std::recursive_mutex> lock(schedule_mutex());
    detail::detach_computed(outputs);
    return;
  }
  array sync = [&] {
    std::lock_guard<std::recursive_mutex> lock(schedule_mutex());
    return eval_impl(std::move(outputs), false);
  }();
  // Only this graph's own failure is raised (the synchronizer node carries
  // the first error of its inputs): the event may also carry an earlier
  // error of the stream, raised by another thread's graph on a shared
  // stream or by an async_eval nobody waited for, which stays pending for
  // the arrays that failed and for synchronize().
  sync.event().wait_quietly();
  if (auto e = sync.error()) {
    scheduler::clear_error(e);
    std::rethrow_exception(e);
  }
}

}  // namespace fluxion
