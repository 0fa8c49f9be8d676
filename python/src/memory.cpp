// The memory API: usage counters and the allocator's limits.
#include "python/src/convert.h"

void init_backend_modules(py::module_& m);  // backend_modules.cpp

void init_memory(py::module_& m) {
  m.def("get_active_memory", &fx::get_active_memory,
        "Bytes in use by arrays (excluding the cache).");
  m.def("get_peak_memory", &fx::get_peak_memory,
        "The most active memory since the start or the last reset.");
  m.def("reset_peak_memory", &fx::reset_peak_memory,
        "Set the peak memory to the current active memory.");
  m.def("get_cache_memory", &fx::get_cache_memory,
        "Bytes held by the allocator's cache for reuse.");
  m.def("set_memory_limit", &fx::set_memory_limit, "limit"_a,
        "Limit on active memory that eval tries to stay under; returns the "
        "previous limit.");
  m.def("get_memory_limit", &fx::get_memory_limit, "The memory limit.");
  m.def("set_cache_limit", &fx::set_cache_limit, "limit"_a,
        "Limit on the cache's size; returns the previous limit.");
  m.def("clear_cache", &fx::clear_cache, "Free the allocator's cache.");
  m.def("set_wired_limit", &fx::set_wired_limit, "limit"_a,
        "MLX's wired-memory limit (a Metal notion): recorded and returned, "
        "but the CPU backend wires no memory. Raises ValueError above the "
        "physical memory. Returns the previous limit.");
  // mx.metal's deprecated aliases forward to the functions above.
  init_backend_modules(m);
}
