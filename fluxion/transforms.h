// Evaluation, and (in the transformations issue) vjp/jvp/vmap and friends.
#pragma once

#include <vector>

#include "fluxion/array.h"

namespace fluxion {

// Compute `outputs` and wait for them.
void eval(std::vector<array> outputs);
// Schedule `outputs` and return at once; read them later (item, wait, eval).
void async_eval(std::vector<array> outputs);

template <typename... Arrays>
void eval(Arrays&&... outputs) {
  eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}
template <typename... Arrays>
void async_eval(Arrays&&... outputs) {
  async_eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}

namespace env {
// Width limit of the breadth-first tape (FLUXION_BFS_MAX_WIDTH, default 20).
int bfs_max_width();
}  // namespace env

}  // namespace fluxion
