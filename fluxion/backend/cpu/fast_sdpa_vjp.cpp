// The CPU kernel of attention's fused backward
// (fast::ScaledDotProductAttentionVJP): operands made row-contiguous in
// float32 (float64 for float64), then the host routine of
// backend/common/sdpa_vjp.cpp.
#include <algorithm>
#include <memory>
#include <type_traits>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/sdpa_vjp.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/fast.h"

namespace fluxion::fast {

namespace {

// A row-contiguous copy of `a` (of dtype T) in M.
template <typename T, typename M>
std::unique_ptr<M[]> as_m(const array& a) {
  array c = cpu::ensure_row_contiguous(a);
  auto out = std::make_unique_for_overwrite<M[]>(std::max<size_t>(c.size(), 1));
  const T* src = c.data<T>();
  M* dst = out.get();
  cpu::parallel_for(c.size(), cpu::kElementwiseGrain,
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t i = lo; i < hi; ++i) {
                        dst[i] = static_cast<M>(src[i]);
                      }
                    });
  return out;
}

template <typename T>
void sdpa_vjp_kernel(const std::vector<array>& in, std::vector<array>& out,
                     float scale, bool causal) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  common::SdpaVjpDims dims{in[0].shape(0), in[0].shape(1), in[1].shape(1),
                           in[0].shape(2), in[1].shape(2), in[0].shape(3),
                           in[2].shape(3), causal,         scale};
  auto q = as_m<T, M>(in[0]), k = as_m<T, M>(in[1]), v = as_m<T, M>(in[2]),
       o = as_m<T, M>(in[3]), d_o = as_m<T, M>(in[5]);
  auto lse = as_m<M, M>(in[4]);
  std::unique_ptr<M[]> g[3];
  for (int i = 0; i < 3; ++i) {
    g[i] = std::make_unique_for_overwrite<M[]>(
        std::max<size_t>(out[i].size(), 1));
  }
  common::sdpa_vjp_host<M>(dims, q.get(), k.get(), v.get(), o.get(),
                           lse.get(), d_o.get(), g[0].get(), g[1].get(),
                           g[2].get());
  for (int i = 0; i < 3; ++i) {
    out[i].set_data(std::max<size_t>(out[i].nbytes(), 1));
    T* dst = out[i].data<T>();
    const M* src = g[i].get();
    for (size_t e = 0; e < out[i].size(); ++e) {
      dst[e] = static_cast<T>(src[e]);
    }
  }
}

}  // namespace

void ScaledDotProductAttentionVJP::eval_cpu(const std::vector<array>& inputs,
                                            std::vector<array>& outputs) {
  dispatch<FloatTypes>(
      inputs[0].dtype(), "scaled_dot_product_attention_vjp", [&](auto tag) {
        using T = typename decltype(tag)::type;
        sdpa_vjp_kernel<T>(inputs, outputs, scale_, causal_);
      });
}

}  // namespace fluxion::fast
