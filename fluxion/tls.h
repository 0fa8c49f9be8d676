// Thread-locals on hot paths. In a shared library (the Python extension)
// every access to a thread-local is a __tls_get_addr call, and GCC
// recomputes the address at each use rather than keep it in a register
// (small_block_free made two calls for one cache). `pin_tls(&t_x)` hands
// back the same address through an empty asm, which the compiler cannot
// see through, so a function reads its thread-local state with one call.
#pragma once

namespace fluxion::detail {

template <typename T>
inline T* pin_tls(T* p) {
  asm("" : "+r"(p));
  return p;
}

}  // namespace fluxion::detail
