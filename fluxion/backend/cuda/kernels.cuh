// What the CUDA kernels share: the device type of each dtype, loads and
// stores through the compute type (float for the half types, as on the
// CPU), the dtype dispatch onto device types, and index arithmetic over a
// collapsed Layout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cuda/std/complex>

#include <cstdint>
#include <cstring>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cuda/cuda.h"

namespace fluxion::cu {

// complex64 in device code: libcu++'s complex (std::complex is host
// only), with the std interface the shared functors use (real(), imag(),
// value_type, and exp/log/abs/... found by argument lookup), laid out as
// float[2] like complex64_t.
using complex64_d = cuda::std::complex<float>;
static_assert(sizeof(complex64_d) == 8 && alignof(complex64_d) == 8);

}  // namespace fluxion::cu

template <>
struct fluxion::math::IsComplex<fluxion::cu::complex64_d> {
  static constexpr bool value = true;
};

namespace fluxion::cu {

// The type a dtype's elements have in device code.
template <typename T>
struct DeviceTypeOf {
  using type = T;
};
template <>
struct DeviceTypeOf<complex64_t> {
  using type = complex64_d;
};
template <>
struct DeviceTypeOf<float16_t> {
  using type = __half;
};
template <>
struct DeviceTypeOf<bfloat16_t> {
  using type = __nv_bfloat16;
};
template <typename T>
using device_t = typename DeviceTypeOf<T>::type;

// The type the shared functors compute in.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<__half> {
  using type = float;
};
template <>
struct ComputeOf<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeOf<T>::type;

// Conversion with the CPU's rules (cast_value): anything to bool is != 0;
// half types go through float.
template <typename Out, typename In>
__device__ __forceinline__ Out convert(In v) {
  if constexpr (math::is_same_v<In, Out>) {
    return v;
  } else if constexpr (math::is_same_v<In, complex64_d>) {
    // complex -> real takes the real part; -> bool is != 0 (NumPy).
    if constexpr (math::is_same_v<Out, bool>) {
      return v.real() != 0.0f || v.imag() != 0.0f;
    } else {
      return convert<Out>(v.real());
    }
  } else if constexpr (math::is_same_v<Out, complex64_d>) {
    return complex64_d{convert<float>(v), 0.0f};
  } else if constexpr (math::is_same_v<In, __half>) {
    return convert<Out>(__half2float(v));
  } else if constexpr (math::is_same_v<In, __nv_bfloat16>) {
    return convert<Out>(__bfloat162float(v));
  } else if constexpr (math::is_same_v<Out, bool>) {
    return v != In(0);
  } else if constexpr (math::is_same_v<Out, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (math::is_same_v<Out, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else {
    return static_cast<Out>(v);
  }
}

// Calls f(TypeTag<device type>{}) for the dtypes of `List`; others raise
// "[op] <dtype> is not supported on the gpu yet."
template <typename List, typename F>
void dispatch_gpu(Dtype t, const char* op, F&& f) {
  dispatch_all(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (InList<T, List>::value) {
      f(TypeTag<device_t<T>>{});
    } else {
      throw std::invalid_argument(std::string("[") + op + "] " +
                                  dtype_name(t) +
                                  " is not supported on the gpu yet.");
    }
  });
}

// Raw shared memory for n values of T: __shared__ arrays of a type with a
// constructor (complex64_d) are not allowed.
#define FLUXION_SHARED_ARRAY(T, name, n)                                  \
  __shared__ alignas(T) unsigned char name##_bytes[sizeof(T) * (n)];      \
  T* name = reinterpret_cast<T*>(name##_bytes)

// Grid-stride loop over [0, n).
#define FLUXION_GRID_LOOP(i, n)                                         \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;     \
       i < (n); i += int64_t(blockDim.x) * gridDim.x)

// 16-byte accesses: a Pack moves V elements in one load or store, which
// is what lets a memory-bound kernel keep enough bytes in flight to reach
// the memory's bandwidth (one 4-byte load per thread per iteration does
// not). V is set by the widest element type among the operands.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
template <typename... Ts>
constexpr int pack_width() {
  size_t widest = 1;
  ((widest = sizeof(Ts) > widest ? sizeof(Ts) : widest), ...);
  return widest >= 16 ? 1 : static_cast<int>(16 / widest);
}
// Whether `p` may be read or written as Packs of V elements of T.
template <typename T, int V>
inline bool pack_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * V) == 0;
}

// Index of this thread in the grid.
__device__ __forceinline__ int64_t global_thread() {
  return blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
}

// The combination by `op` of v over each aligned group of G lanes of the
// warp, in every lane of the group (a butterfly: all lanes agree, and
// offsets below G stay inside the group). Every lane of the warp must call
// it.
template <int G = 32, typename M, typename Op>
__device__ __forceinline__ M warp_all_reduce(M v, Op op) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

template <int G = 32, typename M>
__device__ __forceinline__ M warp_sum(M v) {
  return warp_all_reduce<G>(v, [](M a, M b) { return a + b; });
}

// The combination by `op` of v over the block, in every thread. `part`
// holds 32 values; the closing barrier lets the caller reuse it at once.
template <typename M, typename Op>
__device__ __forceinline__ M block_all_reduce(M v, M* part, Op op) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_all_reduce(v, op);
  if (lane == 0) {
    part[warp] = v;
  }
  __syncthreads();
  M s = part[0];
  const int nw = blockDim.x / 32;
  for (int i = 1; i < nw; ++i) {
    s = op(s, part[i]);
  }
  __syncthreads();
  return s;
}

template <typename M>
__device__ __forceinline__ M block_sum(M v, M* part) {
  return block_all_reduce(v, part, [](M a, M b) { return a + b; });
}

// Warp shuffle of any value of up to 8 bytes (bool and the 1- and 2-byte
// types included, which __shfl_down_sync has no overload for).
template <typename T>
__device__ __forceinline__ T shfl_down(T v, int delta) {
  static_assert(sizeof(T) <= 8, "shfl_down: values of up to 8 bytes");
  if constexpr (sizeof(T) == 8) {
    long long bits;
    memcpy(&bits, &v, 8);
    bits = __shfl_down_sync(0xffffffffu, bits, delta);
    memcpy(&v, &bits, 8);
  } else {
    int bits = 0;
    memcpy(&bits, &v, sizeof(T));
    bits = __shfl_down_sync(0xffffffffu, bits, delta);
    memcpy(&v, &bits, sizeof(T));
  }
  return v;
}

// Offset of row-major element `i` of `l` in operand `k`.
__device__ __forceinline__ int64_t offset_of(const Layout& l, int k,
                                             int64_t i) {
  int64_t off = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    int64_t q = i % l.shape[d];
    i /= l.shape[d];
    off += q * l.strides[k][d];
  }
  return off;
}

// Records a bad index in `f` (the first thread to find one wins); `size`
// is the window's length along the axis (1 for a single element).
template <typename I>
__device__ __forceinline__ void report_fault(IndexFault* f, I raw, int axis,
                                             int64_t n, int64_t size = 1) {
  if (atomicCAS(&f->flag, 0, 1) == 0) {
    f->axis = axis;
    f->is_unsigned = !(I(-1) < I(0));
    f->value = static_cast<long long>(raw);
    f->n = n;
    f->size = size;
    __threadfence_system();
    atomicExch(&f->flag, 2);
  }
}

// Negative indices wrap once; false when still out of range.
template <typename I>
__device__ __forceinline__ bool wrap_index(I raw, int64_t n, int64_t& idx) {
  int64_t v = static_cast<int64_t>(raw);
  if constexpr (I(-1) < I(0)) {
    if (v < 0) {
      v += n;
    }
  } else if (static_cast<uint64_t>(raw) >= static_cast<uint64_t>(n)) {
    return false;
  }
  if (v < 0 || v >= n) {
    return false;
  }
  idx = v;
  return true;
}

}  // namespace fluxion::cu
