#include "fluxion/backend/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fluxion::cpu {

namespace {

class Pool {
 public:
  Pool() {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* v = std::getenv("FLUXION_NUM_THREADS")) {
      n = std::atoi(v);
    }
    size_ = std::max(1, n);
    for (int i = 1; i < size_; ++i) {
      std::thread([this] { loop(); }).detach();
    }
  }
  int size() const { return size_; }

  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  // Run one queued job on the calling thread, if any.
  bool run_one() {
    std::function<void()> job;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (jobs_.empty()) {
        return false;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
    return true;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
};

Pool& pool() {
  static auto* p = new Pool();  // leaked: detached threads use it
  return *p;
}

}  // namespace

int num_threads() { return pool().size(); }

void parallel_for_split(int64_t n, int64_t grain,
                        const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) {
    return;
  }
  int64_t chunks = std::min<int64_t>(num_threads(), n / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    f(0, n);
    return;
  }
  struct Sync {
    std::atomic<int64_t> left;
    std::mutex mu;
    std::condition_variable cv;
    std::exception_ptr error;  // the first chunk's failure, rethrown below
  };
  auto sync = std::make_shared<Sync>();
  sync->left = chunks - 1;
  int64_t step = (n + chunks - 1) / chunks;
  std::exception_ptr own_error;
  auto run_inline = [&](int64_t b, int64_t e) {
    try {
      f(b, e);
    } catch (...) {
      if (!own_error) {
        own_error = std::current_exception();
      }
    }
    sync->left.fetch_sub(1);
  };
  for (int64_t c = 1; c < chunks; ++c) {
    int64_t b = c * step, e = std::min(n, b + step);
    try {
      pool().submit([&f, b, e, sync] {
        try {
          f(b, e);
        } catch (...) {
          std::lock_guard<std::mutex> lk(sync->mu);
          if (!sync->error) {
            sync->error = std::current_exception();
          }
        }
        if (sync->left.fetch_sub(1) == 1) {
          std::lock_guard<std::mutex> lk(sync->mu);
          sync->cv.notify_all();
        }
      });
    } catch (...) {
      // Out of memory for the job itself: the chunks not handed over run
      // here (those handed over still reference `f`, so we must not
      // leave before they finish either).
      for (; c < chunks; ++c) {
        run_inline(c * step, std::min(n, c * step + step));
      }
    }
  }
  try {
    f(0, std::min(n, step));
  } catch (...) {
    if (!own_error) {
      own_error = std::current_exception();
    }
  }
  // Help with queued jobs (maybe our own) rather than sleep. Every chunk must
  // finish before returning: they reference `f` and the caller's data.
  while (sync->left.load() > 0 && pool().run_one()) {
  }
  std::unique_lock<std::mutex> lk(sync->mu);
  sync->cv.wait(lk, [&] { return sync->left.load() == 0; });
  if (own_error) {
    std::rethrow_exception(own_error);
  }
  if (sync->error) {
    std::rethrow_exception(sync->error);
  }
}

}  // namespace fluxion::cpu
