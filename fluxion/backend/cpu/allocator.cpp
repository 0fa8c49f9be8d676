// The host's allocator: the caching allocator over aligned_alloc, with
// 2 MiB alignment and huge pages for large blocks.
#include "fluxion/backend/cpu/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fluxion/backend/common/caching_allocator.h"

namespace fluxion::cpu {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHugeAlign = 2 << 20;
// Blocks at least this large are aligned to 2 MiB and marked for huge pages,
// so that touching a fresh 64 MiB buffer costs 32 faults rather than 16384.
constexpr size_t kHugeThreshold = 4 << 20;

class HostAllocator : public common::CachingAllocator {
 public:
  HostAllocator() : CachingAllocator(physical_memory() / 10 * 9) {}

 protected:
  void* system_malloc(size_t b) override {
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

  void system_free(void* p, size_t) override { std::free(p); }

 private:
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
};

}  // namespace

allocator::Allocator& host_allocator() {
  // Leaked on purpose: arrays held in static storage may free after exit.
  static auto* a = new HostAllocator();
  return *a;
}

}  // namespace fluxion::cpu
