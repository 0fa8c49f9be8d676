// The CUDA backend's allocators (allocator.cpp).
#pragma once

namespace fluxion::cu {
// Register a caching allocator for each of the first `count` GPUs.
void register_allocators(int count);
}  // namespace fluxion::cu
