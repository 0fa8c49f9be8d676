#include "fluxion/small_block.h"

#include <cstdlib>

#include "fluxion/tls.h"

namespace fluxion::detail {
namespace {

constexpr size_t kGranule = 64;
constexpr size_t kClasses = kSmallBlockMax / kGranule;
// Blocks kept per size class and thread: enough for a long chain of tiny
// ops (a few MB at most), so memory freed by a large graph goes back.
constexpr unsigned kKeep = 8192;

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable while the thread (or the
// process) tears down; `Drain` empties it and marks it closed.
struct Cache {
  FreeBlock* head[kClasses];
  unsigned count[kClasses];
  bool open;
  bool closed;
};
thread_local Cache t_cache{};

struct Drain {
  ~Drain() {
    t_cache.closed = true;
    for (size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = t_cache.head[c]) {
        t_cache.head[c] = b->next;
        std::free(b);
      }
      t_cache.count[c] = 0;
    }
  }
};

size_t class_of(size_t bytes) { return (bytes - 1) / kGranule; }

void* checked_malloc(size_t bytes) {
  if (void* p = std::malloc(bytes)) {
    return p;
  }
  throw std::bad_alloc();
}

}  // namespace

// Each entry point reads the thread's cache address once (fluxion/tls.h).
void* small_block_alloc(size_t bytes) {
  if (bytes == 0 || bytes > kSmallBlockMax) {
    return checked_malloc(bytes == 0 ? 1 : bytes);
  }
  Cache& cache = *pin_tls(&t_cache);
  size_t c = class_of(bytes);
  if (FreeBlock* b = cache.head[c]) {
    cache.head[c] = b->next;
    --cache.count[c];
    return b;
  }
  return checked_malloc((c + 1) * kGranule);
}

void small_block_free(void* p, size_t bytes) noexcept {
  if (p == nullptr) {
    return;
  }
  Cache& cache = *pin_tls(&t_cache);
  if (bytes == 0 || bytes > kSmallBlockMax || cache.closed) {
    std::free(p);
    return;
  }
  if (!cache.open) [[unlikely]] {
    // First block kept on this thread: arrange for the cache to be drained
    // when the thread ends.
    static thread_local Drain drain;
    (void)drain;
    cache.open = true;
  }
  size_t c = class_of(bytes);
  if (cache.count[c] >= kKeep) {
    std::free(p);
    return;
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = cache.head[c];
  cache.head[c] = b;
  ++cache.count[c];
}

}  // namespace fluxion::detail
