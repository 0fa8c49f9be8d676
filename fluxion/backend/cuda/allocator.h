// The CUDA backend's allocators (allocator.cpp).
#pragma once

#include "fluxion/allocator.h"

namespace fluxion::cu {
// Register a caching allocator for each of the first `count` GPUs.
void register_allocators(int count);
// Pinned host memory for host copies of GPU buffers
// (Backend::host_copy_allocator).
allocator::Allocator& pinned_allocator();
}  // namespace fluxion::cu
