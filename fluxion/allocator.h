// A size-bucketed caching allocator for host memory, and the memory API.
#pragma once

#include <cstddef>

namespace fluxion {

namespace allocator {

// Returns at least `size` bytes aligned to 64 bytes. Throws std::bad_alloc
// (as std::runtime_error with a message) when memory cannot be had.
void* malloc(size_t size);
// Returns a block from `malloc`; `size` must be the size it was asked for.
void free(void* ptr, size_t size);

}  // namespace allocator

size_t get_active_memory();
size_t get_peak_memory();
void reset_peak_memory();
size_t get_cache_memory();
// Both setters return the previous limit.
size_t set_memory_limit(size_t limit);
size_t get_memory_limit();
size_t set_cache_limit(size_t limit);
void clear_cache();
// MLX's wired limit (memory kept resident, a Metal notion). The CPU backend
// pages nothing in or out itself, so the limit is recorded and returned but
// changes no allocation; over the machine's physical memory it raises
// std::invalid_argument. Returns the previous limit.
size_t set_wired_limit(size_t limit);
// Bytes of physical memory on this machine.
size_t physical_memory();

}  // namespace fluxion
