// Dtype dispatch: one templated visitor instead of per-op switches.
// `dispatch_all(dtype, f)` calls `f(TypeTag<T>{})` with the C++ type of dtype.
// Core code (array.cpp, graph_utils.cpp, the bindings) and the kernels
// share it; the kernels reach it through backend/common/dispatch.h, which
// adds the functors' complex trait. Nothing here names a backend.
#pragma once

#include <complex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "fluxion/dtype.h"

namespace fluxion {

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename F>
decltype(auto) dispatch_all(Dtype t, F&& f) {
  switch (t.val) {
    case Dtype::Val::bool_:
      return f(TypeTag<bool>{});
    case Dtype::Val::uint8:
      return f(TypeTag<uint8_t>{});
    case Dtype::Val::uint16:
      return f(TypeTag<uint16_t>{});
    case Dtype::Val::uint32:
      return f(TypeTag<uint32_t>{});
    case Dtype::Val::uint64:
      return f(TypeTag<uint64_t>{});
    case Dtype::Val::int8:
      return f(TypeTag<int8_t>{});
    case Dtype::Val::int16:
      return f(TypeTag<int16_t>{});
    case Dtype::Val::int32:
      return f(TypeTag<int32_t>{});
    case Dtype::Val::int64:
      return f(TypeTag<int64_t>{});
    case Dtype::Val::float16:
      return f(TypeTag<float16_t>{});
    case Dtype::Val::float32:
      return f(TypeTag<float>{});
    case Dtype::Val::float64:
      return f(TypeTag<double>{});
    case Dtype::Val::bfloat16:
      return f(TypeTag<bfloat16_t>{});
    case Dtype::Val::complex64:
      return f(TypeTag<complex64_t>{});
  }
  throw std::invalid_argument("[dispatch] Unknown dtype.");
}

// Dispatch on the element size only: for kernels that move bytes (copies,
// gathers, concatenation) and so need one instantiation per width.
template <typename F>
decltype(auto) dispatch_bytes(Dtype t, F&& f) {
  switch (t.size) {
    case 1:
      return f(TypeTag<uint8_t>{});
    case 2:
      return f(TypeTag<uint16_t>{});
    case 4:
      return f(TypeTag<uint32_t>{});
    default:
      return f(TypeTag<uint64_t>{});
  }
}

template <typename... Ts>
struct TypeList {};
using FloatTypes = TypeList<float16_t, bfloat16_t, float, double>;
using InexactTypes =
    TypeList<float16_t, bfloat16_t, float, double, complex64_t>;
using IntTypes = TypeList<uint8_t, uint16_t, uint32_t, uint64_t, int8_t,
                          int16_t, int32_t, int64_t>;
using IntBoolTypes = TypeList<bool, uint8_t, uint16_t, uint32_t, uint64_t,
                              int8_t, int16_t, int32_t, int64_t>;
// Everything but complex.
using RealTypes =
    TypeList<bool, uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t,
             int32_t, int64_t, float16_t, bfloat16_t, float, double>;
using AllTypes = TypeList<bool, uint8_t, uint16_t, uint32_t, uint64_t, int8_t,
                          int16_t, int32_t, int64_t, float16_t, bfloat16_t,
                          float, double, complex64_t>;

template <typename T, typename List>
struct InList;
template <typename T, typename... Ts>
struct InList<T, TypeList<Ts...>> {
  static constexpr bool value = (std::is_same_v<T, Ts> || ...);
};

// Like dispatch_all, but only instantiates `f` for the types in `List`; any
// other dtype raises "[op] <dtype> is not supported." (ops validate dtypes
// first, so this is a guard, not the user-facing check).
template <typename List, typename F>
void dispatch(Dtype t, const char* op, F&& f) {
  dispatch_all(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (InList<T, List>::value) {
      f(tag);
    } else {
      throw std::invalid_argument(std::string("[") + op + "] " + dtype_name(t) +
                                  " is not supported.");
    }
  });
}

// complex64 is the one complex dtype.
template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;
template <typename T>
inline constexpr bool is_half_v =
    std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

// The type host arithmetic on T is carried out in: float for the 16-bit
// floats (they have no arithmetic of their own; each result is rounded
// back to T), T itself otherwise.
template <typename T>
using compute_type_t = std::conditional_t<is_half_v<T>, float, T>;

// The C++ type sums and products of T return (sum_dtype in dtype.h).
template <typename T>
using sum_type_t = typename DtypeToType<sum_dtype(dtype_of<T>).val>::type;

// Value conversion with NumPy's rules for the cases C++ does not cover:
// complex -> real takes the real part, anything -> bool is `!= 0`.
template <typename Out, typename In>
inline Out cast_value(In v) {
  if constexpr (std::is_same_v<In, Out>) {
    return v;
  } else if constexpr (std::is_same_v<Out, bool>) {
    if constexpr (is_complex_v<In>) {
      return v != complex64_t(0);
    } else {
      if constexpr (is_half_v<In>) {
        return static_cast<float>(v) != 0.0f;
      } else {
        return v != In(0);
      }
    }
  } else if constexpr (is_complex_v<In>) {
    return cast_value<Out>(v.real());
  } else if constexpr (is_complex_v<Out>) {
    return complex64_t(static_cast<float>(v), 0.0f);
  } else if constexpr (is_half_v<In>) {
    return static_cast<Out>(static_cast<float>(v));
  } else {
    return static_cast<Out>(v);
  }
}

}  // namespace fluxion
