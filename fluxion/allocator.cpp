#include "fluxion/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace fluxion {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHugeAlign = 2 << 20;
// Blocks at least this large are aligned to 2 MiB and marked for huge pages,
// so that touching a fresh 64 MiB buffer costs 32 faults rather than 16384.
constexpr size_t kHugeThreshold = 4 << 20;

// Round a request up to its bucket: small sizes to powers of two (so that
// a freed block serves many nearby requests), large ones to 64 KiB steps
// (so that the waste stays small).
size_t bucket_size(size_t size) {
  if (size <= kAlign) {
    return kAlign;
  }
  if (size <= (1 << 16)) {
    size_t b = kAlign;
    while (b < size) {
      b <<= 1;
    }
    return b;
  }
  constexpr size_t step = 1 << 16;
  return (size + step - 1) / step * step;
}

class CachingAllocator {
 public:
  CachingAllocator() {
    size_t pages = sysconf(_SC_PHYS_PAGES);
    size_t page_size = sysconf(_SC_PAGE_SIZE);
    memory_limit_ = pages * page_size / 10 * 9;
    cache_limit_ = memory_limit_;
  }

  void* malloc(size_t size) {
    size_t b = bucket_size(size);
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = free_.find(b);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cache_memory_ -= b;
        add_active(b);
        return p;
      }
    }
    void* p = system_malloc(b);
    if (p == nullptr) {
      // Give the cache back and try once more before failing.
      clear_cache();
      p = system_malloc(b);
      if (p == nullptr) {
        throw std::runtime_error("[malloc] Unable to allocate " +
                                 std::to_string(size) + " bytes.");
      }
    }
    std::lock_guard<std::mutex> lk(mu_);
    add_active(b);
    return p;
  }

  void free(void* p, size_t size) {
    if (p == nullptr) {
      return;
    }
    size_t b = bucket_size(size);
    std::vector<std::pair<void*, size_t>> evicted;
    {
      std::lock_guard<std::mutex> lk(mu_);
      active_memory_ -= b;
      if (b > cache_limit_) {
        evicted.emplace_back(p, b);
      } else {
        free_[b].push_back(p);
        cache_memory_ += b;
        // Evict the largest blocks first: they are the cheapest to redo
        // relative to what they free.
        while (cache_memory_ > cache_limit_) {
          auto it = std::prev(free_.end());
          while (it->second.empty()) {
            free_.erase(it);
            it = std::prev(free_.end());
          }
          evicted.emplace_back(it->second.back(), it->first);
          it->second.pop_back();
          cache_memory_ -= it->first;
        }
      }
    }
    for (auto& [q, s] : evicted) {
      std::free(q);
    }
  }

  void clear_cache() {
    std::map<size_t, std::vector<void*>> old;
    {
      std::lock_guard<std::mutex> lk(mu_);
      old.swap(free_);
      cache_memory_ = 0;
    }
    for (auto& [s, v] : old) {
      for (void* q : v) {
        std::free(q);
      }
    }
  }

  size_t active() {
    std::lock_guard<std::mutex> lk(mu_);
    return active_memory_;
  }
  size_t peak() {
    std::lock_guard<std::mutex> lk(mu_);
    return peak_memory_;
  }
  void reset_peak() {
    // As MLX: the peak restarts from zero and is raised again by the next
    // allocation.
    std::lock_guard<std::mutex> lk(mu_);
    peak_memory_ = 0;
  }
  size_t cache() {
    std::lock_guard<std::mutex> lk(mu_);
    return cache_memory_;
  }
  size_t set_memory_limit(size_t l) {
    std::lock_guard<std::mutex> lk(mu_);
    std::swap(l, memory_limit_);
    return l;
  }
  size_t memory_limit() {
    std::lock_guard<std::mutex> lk(mu_);
    return memory_limit_;
  }
  size_t set_cache_limit(size_t l) {
    size_t old;
    {
      std::lock_guard<std::mutex> lk(mu_);
      old = cache_limit_;
      cache_limit_ = l;
    }
    if (cache() > l) {
      clear_cache();
    }
    return old;
  }

 private:
  void add_active(size_t b) {
    active_memory_ += b;
    peak_memory_ = std::max(peak_memory_, active_memory_);
  }

  // More than the machine's RAM and swap together can never be backed: on
  // a system that overcommits (vm.overcommit_memory=1), malloc would still
  // succeed and the first touch would get the process killed, so such a
  // request fails here, as it does where the kernel refuses it.
  static size_t backable_bytes() {
    static const size_t limit = [] {
      long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
      size_t ram = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
      size_t swap = 0;
      if (FILE* f = std::fopen("/proc/meminfo", "r")) {
        char key[64];
        unsigned long long kb;
        while (std::fscanf(f, "%63s %llu kB", key, &kb) == 2) {
          if (std::string(key) == "SwapTotal:") {
            swap = size_t(kb) * 1024;
          }
        }
        std::fclose(f);
      }
      return ram == 0 ? SIZE_MAX : ram + swap;
    }();
    return limit;
  }

  static void* system_malloc(size_t b) {
    if (b > backable_bytes()) {
      return nullptr;
    }
    if (b >= kHugeThreshold) {
      size_t rounded = (b + kHugeAlign - 1) / kHugeAlign * kHugeAlign;
      void* p = std::aligned_alloc(kHugeAlign, rounded);
      if (p != nullptr) {
        madvise(p, rounded, MADV_HUGEPAGE);
      }
      return p;
    }
    return std::aligned_alloc(kAlign, b);
  }

  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t active_memory_ = 0;
  size_t peak_memory_ = 0;
  size_t cache_memory_ = 0;
  size_t memory_limit_;
  size_t cache_limit_;
};

CachingAllocator& instance() {
  // Leaked on purpose: arrays held in static storage may free after exit.
  static auto* a = new CachingAllocator();
  return *a;
}

}  // namespace

namespace allocator {
void* malloc(size_t size) { return instance().malloc(size); }
void free(void* ptr, size_t size) { instance().free(ptr, size); }
}  // namespace allocator

size_t get_active_memory() { return instance().active(); }
size_t get_peak_memory() { return instance().peak(); }
void reset_peak_memory() { instance().reset_peak(); }
size_t get_cache_memory() { return instance().cache(); }
size_t set_memory_limit(size_t limit) {
  return instance().set_memory_limit(limit);
}
size_t get_memory_limit() { return instance().memory_limit(); }
size_t set_cache_limit(size_t limit) {
  return instance().set_cache_limit(limit);
}
void clear_cache() { instance().clear_cache(); }

size_t physical_memory() {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
}

size_t set_wired_limit(size_t limit) {
  static std::atomic<size_t> wired_limit{0};
  size_t total = physical_memory();
  if (limit > total) {
    throw std::invalid_argument(
        "[set_wired_limit] Setting a wired limit of " + std::to_string(limit) +
        " bytes, larger than the physical memory (" + std::to_string(total) +
        " bytes), is not allowed.");
  }
  return wired_limit.exchange(limit);
}

}  // namespace fluxion
