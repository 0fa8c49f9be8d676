// The scheduling lock (defined in eval.cpp): evals take turns building and
// scheduling their tapes under it, and every detach of a graph node happens
// under it, so that two threads never detach one shared node at once. The
// small-op path (eager.cpp) takes it for the detaches and releases it does.
#pragma once

#include <mutex>

namespace fluxion::detail {

std::recursive_mutex& schedule_mutex();

}  // namespace fluxion::detail
