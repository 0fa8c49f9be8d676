// A small pool for splitting one kernel's work over the cores. Callers take
// part in the work, so nested or concurrent use cannot deadlock.
#pragma once

#include <cstdint>
#include <functional>

namespace fluxion::cpu {

int num_threads();

// Run f(begin, end) over [0, n) in chunks of at least `grain` elements.
// Small work runs inline without waking any thread.
void parallel_for(int64_t n, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& f);

// Elements below which elementwise work stays on one thread.
inline constexpr int64_t kElementwiseGrain = 1 << 16;

}  // namespace fluxion::cpu
