// CPU kernels of the unary primitives: one line per op, choosing the dtypes
// it is instantiated for and the functor (backend/common/unary_ops.h).
#include <algorithm>
#include <array>
#include <atomic>
#include <type_traits>

#include "fluxion/backend/common/unary_ops.h"
#include "fluxion/backend/cpu/elementwise.h"
#include "fluxion/backend/cpu/simd.h"
#include "fluxion/ops/unary.h"

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

// Defined for real and complex inputs.
template <typename Op>
void inexact_math(const array& in, array& out, const char* name) {
  math_in<InexactTypes, Op>(in, out, name);
}

// Defined for real inputs only.
template <typename Op>
void real_math(const array& in, array& out, const char* name) {
  math_in<FloatTypes, Op>(in, out, name);
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

}  // namespace


void Abs::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  to_type<detail::Abs, float>(in[0], out[0], {}, "abs");
}
void Negative::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<AllTypes>(in[0], out[0], detail::Negative{}, "negative");
}
void Sign::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<AllTypes>(in[0], out[0], detail::Sign{}, "sign");
}
void Exp::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Exp>(in[0], out[0], "exp");
}
void Expm1::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  real_math<detail::Expm1>(in[0], out[0], "expm1");
}
void Log::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Log>(in[0], out[0], "log");
}
void Log1p::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Log1p>(in[0], out[0], "log1p");
}
void Log2::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Log2>(in[0], out[0], "log2");
}
void Log10::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Log10>(in[0], out[0], "log10");
}
void Sqrt::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Sqrt>(in[0], out[0], "sqrt");
}
void Rsqrt::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Rsqrt>(in[0], out[0], "rsqrt");
}
void Square::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<AllTypes>(in[0], out[0], detail::Square{}, "square");
}
void Reciprocal::eval_cpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  same_type<InexactTypes>(in[0], out[0], detail::Reciprocal{}, "reciprocal");
}
void Sin::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Sin>(in[0], out[0], "sin");
}
void Cos::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Cos>(in[0], out[0], "cos");
}
void Tan::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Tan>(in[0], out[0], "tan");
}
void ArcSin::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::ArcSin>(in[0], out[0], "arcsin");
}
void ArcCos::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::ArcCos>(in[0], out[0], "arccos");
}
void ArcTan::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::ArcTan>(in[0], out[0], "arctan");
}
void Sinh::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Sinh>(in[0], out[0], "sinh");
}
void Cosh::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Cosh>(in[0], out[0], "cosh");
}
void Tanh::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Tanh>(in[0], out[0], "tanh");
}
void ArcSinh::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::ArcSinh>(in[0], out[0], "arcsinh");
}
void ArcCosh::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::ArcCosh>(in[0], out[0], "arccosh");
}
void ArcTanh::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::ArcTanh>(in[0], out[0], "arctanh");
}
void Sigmoid::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  inexact_math<detail::Sigmoid>(in[0], out[0], "sigmoid");
}
void Erf::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  real_math<detail::Erf>(in[0], out[0], "erf");
}
void ErfInv::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  real_math<detail::ErfInv>(in[0], out[0], "erfinv");
}
void Floor::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<RealTypes>(in[0], out[0], detail::Floor{}, "floor");
}
void Ceil::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<RealTypes>(in[0], out[0], detail::Ceil{}, "ceil");
}
void Round::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<AllTypes>(in[0], out[0], detail::Round{}, "round");
}
void LogicalNot::eval_cpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  to_type<detail::LogicalNot, bool>(in[0], out[0], {}, "logical_not");
}
void IsNan::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  to_type<detail::IsNan, bool>(in[0], out[0], {}, "isnan");
}
void IsInf::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  to_type<detail::IsInf, bool>(in[0], out[0], {}, "isinf");
}
void IsFinite::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  to_type<detail::IsFinite, bool>(in[0], out[0], {}, "isfinite");
}
void Conjugate::eval_cpu(const std::vector<array>& in,
                         std::vector<array>& out) {
  same_type<AllTypes>(in[0], out[0], detail::Conjugate{}, "conjugate");
}
void Real::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  to_type<detail::Real, float>(in[0], out[0], {}, "real");
}
void Imag::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  to_type<detail::Imag, float>(in[0], out[0], {}, "imag");
}
// No copy: the output shares the input's buffer.
void Copy::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  same_type<AllTypes>(in[0], out[0], detail::Identity{}, "copy");
}

}  // namespace fluxion
