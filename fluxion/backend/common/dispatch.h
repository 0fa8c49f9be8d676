// Dtype dispatch for the kernels: the core's (fluxion/dtype_dispatch.h)
// plus what the kernel functors need of it, complex64 known as complex to
// their traits (backend/common/math.h, which has no std::complex: it is
// shared with device code).
#pragma once

#include "fluxion/backend/common/math.h"
#include "fluxion/dtype_dispatch.h"

template <>
struct fluxion::math::IsComplex<fluxion::complex64_t> {
  static constexpr bool value = true;
};

// The functors' trait and the core's agree on every dtype.
static_assert(fluxion::math::is_complex_v<fluxion::complex64_t> &&
              fluxion::is_complex_v<fluxion::complex64_t>);
static_assert(!fluxion::math::is_complex_v<float> &&
              !fluxion::is_complex_v<float>);
