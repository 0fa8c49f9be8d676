// Reduction and scan functors, shared by the reduction kernels, the scans
// and every backend: an associative combine (the elementwise functor of
// binary_ops.h where there is one, so `max` reduces exactly as `maximum`
// combines) plus its identity, init(). NaN propagates through max and min
// (NumPy, MLX), complex values with a NaN part included.
#pragma once

// Host only.
#include "fluxion/backend/common/binary_ops.h"
#include "fluxion/backend/common/math.h"

namespace fluxion::detail {

template <typename Acc>
struct SumOp {
  FLUXION_HOST_DEVICE static Acc init() { return Acc(0); }
  FLUXION_HOST_DEVICE Acc operator()(Acc a, Acc b) const {
    if constexpr (math::is_signed_int_v<Acc>) {
      // Wraps on overflow as NumPy does, without signed-overflow UB.
      using U = math::make_unsigned_t<Acc>;
      return static_cast<Acc>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

template <typename Acc>
struct ProdOp {
  FLUXION_HOST_DEVICE static Acc init() { return Acc(1); }
  FLUXION_HOST_DEVICE Acc operator()(Acc a, Acc b) const {
    if constexpr (math::is_signed_int_v<Acc>) {
      using U = math::make_unsigned_t<Acc>;
      return static_cast<Acc>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

// The identities of max and min (and logaddexp's): -inf and inf for
// floats (complex: on the real axis), the type's extremes for integers.
template <typename Acc, bool Low>
FLUXION_HOST_DEVICE Acc extreme() {
  if constexpr (math::is_complex_v<Acc>) {
    using R = typename Acc::value_type;
    return Acc(Low ? math::lowest<R>() : math::highest<R>(), R(0));
  } else {
    return Low ? math::lowest<Acc>() : math::highest<Acc>();
  }
}

template <typename Acc>
struct MaxOp : Maximum {
  FLUXION_HOST_DEVICE static Acc init() { return extreme<Acc, true>(); }
};
template <typename Acc>
struct MinOp : Minimum {
  FLUXION_HOST_DEVICE static Acc init() { return extreme<Acc, false>(); }
};

struct AndOp {
  FLUXION_HOST_DEVICE static bool init() { return true; }
  FLUXION_HOST_DEVICE bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  FLUXION_HOST_DEVICE static bool init() { return false; }
  FLUXION_HOST_DEVICE bool operator()(bool a, bool b) const { return a || b; }
};

// logsumexp's combine (logcumsumexp): logaddexp itself, so that
// logcumsumexp([inf, inf]) is [inf, inf] as logaddexp(inf, inf) is inf.
template <typename Acc>
struct LogAddExpOp : LogAddExp {
  FLUXION_HOST_DEVICE static Acc init() { return extreme<Acc, true>(); }
};

// argmax/argmin's step: whether v replaces the extreme so far. A NaN is
// the extreme (the first one wins, as NumPy; complex: a NaN part) and ties
// keep the first index.
template <bool IsMax, typename M>
FLUXION_HOST_DEVICE bool arg_better(M v, M best) {
  IsNan nan;
  if (nan(best)) {
    return false;
  }
  return nan(v) || (IsMax ? less_than(best, v) : less_than(v, best));
}

}  // namespace fluxion::detail
