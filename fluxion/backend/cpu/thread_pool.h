// A small pool for splitting one kernel's work over the cores. Callers take
// part in the work, so nested or concurrent use cannot deadlock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

namespace fluxion::cpu {

int num_threads();

// Runs f over [0, n) split across the pool (parallel_for's large case).
void parallel_for_split(int64_t n, int64_t grain,
                        const std::function<void(int64_t, int64_t)>& f);

// Run f(begin, end) over [0, n) in chunks of at least `grain` elements.
// Work under two grains runs inline, without waking any thread or wrapping
// f in a std::function (a tiny op's kernel is called as is).
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n < 2 * std::max<int64_t>(grain, 1)) {
    if (n > 0) {
      f(int64_t{0}, n);
    }
    return;
  }
  parallel_for_split(n, grain, std::function<void(int64_t, int64_t)>(f));
}

// Elements below which elementwise work stays on one thread.
inline constexpr int64_t kElementwiseGrain = 1 << 16;

}  // namespace fluxion::cpu
