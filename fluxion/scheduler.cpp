#include "fluxion/scheduler.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace fluxion::scheduler {

namespace {

// A batch bigger than this is handed over early so the worker can start
// while the caller keeps building the tape.
constexpr size_t kMaxBatch = 128;

std::atomic<int> g_active{0};

// Completion signal for wait_for_one. Leaked on purpose, like the worker
// registry: workers outlive static destruction, and one finishing a task
// at exit must not notify a destroyed condition variable (found by
// ThreadSanitizer).
struct Done {
  std::mutex mu;
  std::condition_variable cv;
};
Done& done() {
  static auto* d = new Done();
  return *d;
}

void finish_one() {
  {
    std::lock_guard<std::mutex> lk(done().mu);
    g_active.fetch_sub(1);
  }
  done().cv.notify_all();
}

class StreamWorker {
 public:
  StreamWorker() : thread_([this] { loop(); }) {}

  // Runs what is queued, then ends the thread.
  ~StreamWorker() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void push(std::vector<Task> tasks) {
    g_active.fetch_add(1);
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back(std::move(tasks));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::vector<Task> item;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return !queue_.empty() || stop_; });
        if (queue_.empty()) {
          return;  // stopping, and nothing left
        }
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      for (auto& t : item) {
        t();
        // Release the task (and the arrays it holds) before the next one,
        // so that buffers can be donated down a chain.
        t = nullptr;
      }
      item.clear();
      finish_one();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<Task>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<int, StreamWorker*> workers;
  std::unordered_map<int, std::exception_ptr> errors;
};

Registry& registry() {
  // Leaked on purpose: worker threads outlive static destruction.
  static auto* r = new Registry();
  return *r;
}

StreamWorker& worker(int index) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.workers.find(index);
  if (it == r.workers.end()) {
    it = r.workers.emplace(index, new StreamWorker()).first;
  }
  return *it->second;
}

struct ThreadBatch {
  int depth = 0;
  // Small: an eval touches one or two streams.
  std::vector<std::pair<int, std::vector<Task>>> per_stream;
};
thread_local ThreadBatch t_batch;

}  // namespace

void new_thread(const Stream& stream) { worker(stream.index); }

void end_thread(const Stream& stream) {
  StreamWorker* w = nullptr;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.workers.find(stream.index);
    if (it == r.workers.end()) {
      return;
    }
    w = it->second;
    r.workers.erase(it);
    r.errors.erase(stream.index);
  }
  delete w;  // joins after the queue drains
}

void enqueue(const Stream& stream, Task task) {
  if (t_batch.depth == 0) {
    std::vector<Task> one;
    one.push_back(std::move(task));
    worker(stream.index).push(std::move(one));
    return;
  }
  for (auto& [idx, tasks] : t_batch.per_stream) {
    if (idx == stream.index) {
      tasks.push_back(std::move(task));
      if (tasks.size() >= kMaxBatch) {
        worker(idx).push(std::move(tasks));
        tasks = std::vector<Task>();
      }
      return;
    }
  }
  t_batch.per_stream.emplace_back(stream.index, std::vector<Task>{});
  t_batch.per_stream.back().second.push_back(std::move(task));
}

void flush() {
  for (auto& [idx, tasks] : t_batch.per_stream) {
    if (!tasks.empty()) {
      worker(idx).push(std::move(tasks));
      tasks = std::vector<Task>();
    }
  }
}

Batch::Batch() { t_batch.depth++; }
Batch::~Batch() {
  if (--t_batch.depth == 0) {
    flush();
    t_batch.per_stream.clear();
  }
}

int n_active_tasks() { return g_active.load(); }

void notify_new_task() { g_active.fetch_add(1); }

void notify_task_completion() { finish_one(); }

void wait_for_one() {
  flush();
  std::unique_lock<std::mutex> lk(done().mu);
  int start = g_active.load();
  if (start == 0) {
    return;
  }
  done().cv.wait(lk, [start] { return g_active.load() < start; });
}

void set_stream_error(int stream_index, std::exception_ptr e) noexcept {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  // Called from a worker's exception handler, maybe out of memory: a
  // failed insertion must not escape (the process would terminate); the
  // failed outputs still carry the error to their consumers.
  try {
    auto& slot = r.errors[stream_index];
    if (!slot) {
      slot = e;
    }
  } catch (...) {
  }
}

std::exception_ptr peek_stream_error(int stream_index) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.errors.find(stream_index);
  return it == r.errors.end() ? nullptr : it->second;
}

void clear_error(const std::exception_ptr& e) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (auto it = r.errors.begin(); it != r.errors.end();) {
    it = it->second == e ? r.errors.erase(it) : std::next(it);
  }
}

}  // namespace fluxion::scheduler
