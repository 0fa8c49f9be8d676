// CPU kernels of the unary primitives: generated from their op spec
// (ops/elementwise_spec.h: the dtypes each is instantiated for, the
// output dtype, vector math or not), each calling its functor
// (backend/common/unary_ops.h).
#include <algorithm>
#include <array>
#include <atomic>
#include <type_traits>

#include "fluxion/backend/common/unary_ops.h"
#include "fluxion/backend/cpu/elementwise.h"
#include "fluxion/backend/cpu/simd.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_list.h"

namespace fluxion {

namespace cpu::simd {

namespace {
std::atomic<bool> vector_kernels{true};
}  // namespace

void set_enabled(bool on) { vector_kernels.store(on); }
bool enabled() { return vector_kernels.load(std::memory_order_relaxed); }

}  // namespace cpu::simd

namespace {

// Transcendentals are compute-bound: split them over threads sooner.
constexpr int64_t kMathGrain = 1 << 13;

// Output dtype equals input dtype.
template <typename List, typename Op>
void same_type(const array& in, array& out, Op op, const char* name,
               int64_t grain = cpu::kElementwiseGrain) {
  dispatch<List>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::unary_kernel<T, T>(in, out, op, grain);
  });
}

// Runs a vectorized kernel `k` (null when the CPU has none) over contiguous
// input; returns false when it did not apply.
template <typename T, typename Kernel>
bool run_simd(const array& in, array& out, Kernel k) {
  if (k == nullptr || !in.flags().contiguous || in.dtype() != dtype_of<T>) {
    return false;
  }
  cpu::alloc_like<T>(in, out, true);
  const T* x = in.data<T>();
  T* y = out.data<T>();
  cpu::parallel_for(in.data_size(), kMathGrain,
                    [&](int64_t b, int64_t e) { k(x + b, y + b, e - b); });
  return true;
}

// Any other layout, and the half types: blocks of elements converted into
// a float (double) buffer, the vectorized kernel `k` on it, and back.
template <typename T, typename Kernel>
bool run_simd_blocked(const array& in, array& out, Kernel k) {
  if (k == nullptr || in.dtype() != dtype_of<T>) {
    return false;
  }
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  auto run = [k](const T* x, int64_t sx, T* y, int64_t sy, int64_t n) {
    constexpr int64_t kBlock = 256;
    C buf[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      int64_t m = std::min(kBlock, n - i);
      for (int64_t j = 0; j < m; ++j) {
        buf[j] = static_cast<C>(x[(i + j) * sx]);
      }
      k(buf, buf, m);
      for (int64_t j = 0; j < m; ++j) {
        y[(i + j) * sy] = static_cast<T>(buf[j]);
      }
    }
  };
  const T* x = in.data<T>();
  if (in.flags().contiguous) {
    cpu::alloc_like<T>(in, out, true);
    T* y = out.data<T>();
    cpu::parallel_for(in.data_size(), kMathGrain, [&](int64_t b, int64_t e) {
      run(x + b, 1, y + b, 1, e - b);
    });
    return true;
  }
  out.set_data(out.nbytes());
  T* y = out.data<T>();
  auto shape = cpu::to_dims(in.shape());
  std::array<Strides, 2> st{in.strides(), out.strides()};
  cpu::collapse_dims(shape, st);
  cpu::parallel_for(cpu::outer_rows(shape),
                    cpu::row_grain(kMathGrain, shape.back()),
                    [&](int64_t b, int64_t e) {
                      cpu::for_each_run<2>(shape, st, b, e,
                                           [&](auto& off, int64_t n, auto& s) {
                                             run(x + off[0], s[0], y + off[1],
                                                 s[1], n);
                                           });
                    });
  return true;
}

// Transcendental float ops take the vectorized kernel when there is one
// (simd.h): directly on contiguous float32/float64 data, through blocks
// for other layouts and the half types. The rest (complex, no AVX2, no
// vector library) takes the scalar functor.
template <typename List, typename Op>
void math_in(const array& in, array& out, const char* name) {
  auto f32 = cpu::simd::f32<Op>();
  auto f64 = cpu::simd::f64<Op>();
  if (run_simd<float>(in, out, f32) || run_simd<double>(in, out, f64) ||
      run_simd_blocked<float>(in, out, f32) ||
      run_simd_blocked<double>(in, out, f64) ||
      run_simd_blocked<float16_t>(in, out, f32) ||
      run_simd_blocked<bfloat16_t>(in, out, f32)) {
    return;
  }
  same_type<List>(in, out, Op{}, name, kMathGrain);
}

// Output dtype differs (bool predicates, real/imag/abs of complex).
template <typename Op, typename Out>
void to_type(const array& in, array& out, Op op, const char* name) {
  dispatch<AllTypes>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<Out, float> && !is_complex_v<T>) {
      // real/imag/abs keep the dtype of real inputs.
      cpu::unary_kernel<T, T>(in, out, op);
    } else {
      cpu::unary_kernel<T, Out>(in, out, op);
    }
  });
}

// The kernel of a primitive of the spec: its POLICY's output dtype, its
// KERNEL's math (vector math where there is one) or plain loop over its
// TYPES.
enum class UnaryKernel { math, plain };
template <typename Op, UnaryPolicy Policy, UnaryKernel Kernel, typename List>
void spec_kernel(const array& in, array& out, const char* name) {
  if constexpr (Policy == UnaryPolicy::to_real) {
    to_type<Op, float>(in, out, {}, name);
  } else if constexpr (Policy == UnaryPolicy::to_bool) {
    to_type<Op, bool>(in, out, {}, name);
  } else if constexpr (Kernel == UnaryKernel::math) {
    math_in<List, Op>(in, out, name);
  } else {
    same_type<List>(in, out, Op{}, name);
  }
}

}  // namespace

// The kernels of the spec's primitives (ops/elementwise_spec.h).
#define FLUXION_CPU_UNARY(A, CLASS, NAME, POLICY, KERNEL, TYPES, RULES, CPU, \
                          ...)                                               \
  FLUXION_IF_KERNEL(CPU)(                                                    \
      void CLASS::eval_cpu(const std::vector<array>& in,                     \
                           std::vector<array>& out) {                        \
        spec_kernel<detail::CLASS, UnaryPolicy::POLICY,                      \
                    UnaryKernel::KERNEL, TYPES>(in[0], out[0], #NAME);       \
      })
FLUXION_UNARY_SPEC(FLUXION_CPU_UNARY, _)
#undef FLUXION_CPU_UNARY

// No copy: the output shares the input's buffer.
void Copy::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<AllTypes>(in[0], out[0], detail::Identity{}, "copy");
}

}  // namespace fluxion
