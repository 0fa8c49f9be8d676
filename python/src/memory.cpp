// The memory API: usage counters and the allocator's limits. MLX's
// signatures (no device argument): the default device's allocator, and
// every device's for clear_cache and reset_peak_memory (fluxion/allocator.h).
#include "python/src/convert.h"

void init_backend_modules(py::module_& m);  // backend_modules.cpp

void init_memory(py::module_& m) {
  m.def("get_active_memory", [] { return fx::get_active_memory(); },
        "Bytes in use by arrays (excluding the cache).");
  m.def("get_peak_memory", [] { return fx::get_peak_memory(); },
        "The most active memory since the start or the last reset.");
  m.def("reset_peak_memory", [] { fx::reset_peak_memory(); },
        "Set the peak memory to the current active memory.");
  m.def("get_cache_memory", [] { return fx::get_cache_memory(); },
        "Bytes held by the allocator's cache for reuse.");
  m.def("set_memory_limit", [](size_t limit) { return fx::set_memory_limit(limit); },
        "limit"_a,
        "Limit on active memory that eval tries to stay under; returns the "
        "previous limit.");
  m.def("get_memory_limit", [] { return fx::get_memory_limit(); }, "The memory limit.");
  m.def("set_cache_limit", [](size_t limit) { return fx::set_cache_limit(limit); },
        "limit"_a,
        "Limit on the cache's size; returns the previous limit.");
  m.def("clear_cache", [] { fx::clear_cache(); }, "Free the allocator's cache.");
  m.def("set_wired_limit", &fx::set_wired_limit, "limit"_a,
        "MLX's wired-memory limit (a Metal notion): recorded and returned, "
        "but the CPU backend wires no memory. Raises ValueError above the "
        "physical memory. Returns the previous limit.");
  // mx.metal's deprecated aliases forward to the functions above.
  init_backend_modules(m);
}
