#include "fluxion/backend/common/caching_allocator.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace fluxion::common {

namespace {
constexpr size_t kMinBlock = 64;
}  // namespace

size_t CachingAllocator::bucket_size(size_t size) {
  if (size <= kMinBlock) {
    return kMinBlock;
  }
  if (size <= (1 << 16)) {
    size_t b = kMinBlock;
    while (b < size) {
      b <<= 1;
    }
    return b;
  }
  constexpr size_t step = 1 << 16;
  return (size + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(size_t memory_limit)
    : memory_limit_(memory_limit), cache_limit_(memory_limit) {}

void* CachingAllocator::malloc(size_t size) {
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

void CachingAllocator::free(void* p, size_t size) {
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
  for (auto& block : evicted) {
    system_free(block.first, block.second);
  }
}

void CachingAllocator::clear_cache() {
  std::map<size_t, std::vector<void*>> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    old.swap(free_);
    cache_memory_ = 0;
  }
  for (auto& bucket : old) {
    for (void* q : bucket.second) {
      system_free(q, bucket.first);
    }
  }
}

size_t CachingAllocator::active_memory() {
  std::lock_guard<std::mutex> lk(mu_);
  return active_memory_;
}

size_t CachingAllocator::peak_memory() {
  std::lock_guard<std::mutex> lk(mu_);
  return peak_memory_;
}

void CachingAllocator::reset_peak_memory() {
  // As MLX: the peak restarts from zero and is raised again by the next
  // allocation.
  std::lock_guard<std::mutex> lk(mu_);
  peak_memory_ = 0;
}

size_t CachingAllocator::cache_memory() {
  std::lock_guard<std::mutex> lk(mu_);
  return cache_memory_;
}

size_t CachingAllocator::memory_limit() {
  std::lock_guard<std::mutex> lk(mu_);
  return memory_limit_;
}

size_t CachingAllocator::set_memory_limit(size_t limit) {
  std::lock_guard<std::mutex> lk(mu_);
  std::swap(limit, memory_limit_);
  return limit;
}

size_t CachingAllocator::cache_limit() {
  std::lock_guard<std::mutex> lk(mu_);
  return cache_limit_;
}

size_t CachingAllocator::set_cache_limit(size_t limit) {
  size_t old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    old = cache_limit_;
    cache_limit_ = limit;
  }
  if (cache_memory() > limit) {
    clear_cache();
  }
  return old;
}

void CachingAllocator::add_active(size_t b) {
  active_memory_ += b;
  peak_memory_ = std::max(peak_memory_, active_memory_);
}

}  // namespace fluxion::common
