// A per-thread cache of small freed blocks in front of malloc, for the
// graph's own objects: an array's node (ArrayDesc with its shared_ptr
// control block) and its Data. A chain of a thousand tiny ops builds a
// thousand nodes and frees them together at eval; glibc's per-thread cache
// holds seven blocks of a size, so the rest took its slow path, and a node
// is past glibc's fast bins (callgrind: a quarter of a tiny op's
// instructions went to malloc and free). Blocks are plain malloc blocks, so
// one freed on another thread, or after its thread's cache is gone, is just
// cached there or freed.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace fluxion::detail {

// Largest block the cache serves; larger ones go straight to malloc.
inline constexpr size_t kSmallBlockMax = 512;

void* small_block_alloc(size_t bytes);
void small_block_free(void* p, size_t bytes) noexcept;

// A stateless allocator over the cache, for std::allocate_shared: the
// control block and the object come from one cached block.
template <typename T>
struct SmallBlockAllocator {
  using value_type = T;
  SmallBlockAllocator() = default;
  template <typename U>
  SmallBlockAllocator(const SmallBlockAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return static_cast<T*>(small_block_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    small_block_free(p, n * sizeof(T));
  }
  template <typename U>
  bool operator==(const SmallBlockAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T, typename... Args>
std::shared_ptr<T> make_small_shared(Args&&... args) {
  return std::allocate_shared<T>(SmallBlockAllocator<T>{},
                                 std::forward<Args>(args)...);
}

}  // namespace fluxion::detail
