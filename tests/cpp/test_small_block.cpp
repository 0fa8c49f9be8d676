// The per-thread cache of small blocks (small_block.h): blocks are reused
// on their thread, freed on any thread, and drained when a thread ends.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "fluxion/small_block.h"

namespace fx = fluxion;
using fx::detail::small_block_alloc;
using fx::detail::small_block_free;

TEST(SmallBlock, AFreedBlockIsReusedForItsSizeClass) {
  void* a = small_block_alloc(100);
  std::memset(a, 0x5a, 100);
  small_block_free(a, 100);
  // 100 and 128 bytes share a 64-byte granule class: the freed block comes
  // back, and it is big enough for the whole class.
  void* b = small_block_alloc(128);
  EXPECT_EQ(a, b);
  std::memset(b, 0x3c, 128);
  small_block_free(b, 128);
  // Another class does not take it.
  void* c = small_block_alloc(200);
  EXPECT_NE(a, c);
  small_block_free(c, 200);
}

TEST(SmallBlock, SizesOutsideTheCacheGoToMalloc) {
  void* zero = small_block_alloc(0);
  ASSERT_NE(zero, nullptr);
  small_block_free(zero, 0);
  void* big = small_block_alloc(fx::detail::kSmallBlockMax + 1);
  std::memset(big, 1, fx::detail::kSmallBlockMax + 1);
  small_block_free(big, fx::detail::kSmallBlockMax + 1);
  small_block_free(nullptr, 64);
}

TEST(SmallBlock, BlocksFreedOnAnotherThreadAndAtThreadExit) {
  // Made here, freed by a worker (which caches them, then frees them as
  // it ends); the worker's own blocks outlive it and are freed here.
  constexpr int kCount = 20000;  // past the per-thread keep limit
  std::vector<void*> mine;
  for (int i = 0; i < kCount; ++i) {
    void* p = small_block_alloc(64 + i % 448);
    std::memset(p, i & 0xff, 64);
    mine.push_back(p);
  }
  std::vector<void*> theirs;
  std::thread worker([&] {
    for (int i = 0; i < kCount; ++i) {
      small_block_free(mine[i], 64 + i % 448);
    }
    for (int i = 0; i < 1000; ++i) {
      theirs.push_back(small_block_alloc(300));
    }
  });
  worker.join();
  for (void* p : theirs) {
    std::memset(p, 7, 300);
    small_block_free(p, 300);
  }
}

namespace {
std::atomic<int> g_alive{0};
struct Counted {
  explicit Counted(int v) : value(v) { ++g_alive; }
  ~Counted() { --g_alive; }
  int value;
  char pad[40];
};
}  // namespace

TEST(SmallBlock, SharedObjectsAreConstructedAndDestroyed) {
  {
    std::vector<std::shared_ptr<Counted>> all;
    for (int i = 0; i < 100; ++i) {
      all.push_back(fx::detail::make_small_shared<Counted>(i));
    }
    EXPECT_EQ(g_alive.load(), 100);
    std::thread([moved = std::move(all)]() mutable {
      EXPECT_EQ(moved[42]->value, 42);
      moved.clear();  // the last owner is another thread
    }).join();
  }
  EXPECT_EQ(g_alive.load(), 0);
}
