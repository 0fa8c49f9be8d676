// The memory API: usage counters and the allocator's limits. MLX's
// signatures (no device argument): the default device's allocator, and
// every device's for clear_cache and reset_peak_memory (fluxion/allocator.h).
#include "python/src/convert.h"

void init_backend_modules(py::module_& m);  // backend_modules.cpp

void init_memory(py::module_& m) {
  m.def("get_active_memory", [] { return fx::get_active_memory(); },
      R"doc(Bytes in use by arrays, not counting the cache.

Returns:
    int: The active memory of the default device's allocator.
)doc");
  m.def("get_peak_memory", [] { return fx::get_peak_memory(); },
      R"doc(The largest active memory since the start or the last reset.

Returns:
    int: Bytes.
)doc");
  m.def("reset_peak_memory", [] { fx::reset_peak_memory(); },
      R"doc(Set the peak memory to the current active memory (every device).
)doc");
  m.def("get_cache_memory", [] { return fx::get_cache_memory(); },
      R"doc(Bytes the allocator's cache holds for reuse.

Returns:
    int: Bytes.
)doc");
  m.def("set_memory_limit", [](size_t limit) { return fx::set_memory_limit(limit); },
        "limit"_a,
      R"doc(Set the limit on active memory that evaluation tries to stay under.

Args:
    limit (int): Bytes.

Returns:
    int: The previous limit.
)doc");
  m.def("get_memory_limit", [] { return fx::get_memory_limit(); },
      R"doc(The limit on active memory (see :func:`set_memory_limit`).

Returns:
    int: Bytes.
)doc");
  m.def("set_cache_limit", [](size_t limit) { return fx::set_cache_limit(limit); },
        "limit"_a,
      R"doc(Set the limit on the size of the allocator's cache.

Args:
    limit (int): Bytes.

Returns:
    int: The previous limit.
)doc");
  m.def("clear_cache", [] { fx::clear_cache(); },
      R"doc(Free the memory held by the allocator's cache (every device).
)doc");
  m.def("set_wired_limit", &fx::set_wired_limit, "limit"_a,
      R"doc(MLX's wired-memory limit (a Metal notion), recorded only.

The CPU backend wires no memory.

Args:
    limit (int): Bytes; ``ValueError`` above the physical memory.

Returns:
    int: The previous limit.
)doc");
  // mx.metal's deprecated aliases forward to the functions above.
  init_backend_modules(m);
}
