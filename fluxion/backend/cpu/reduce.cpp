// Reduction kernels. The output keeps reduced axes as size 1, row-major.
//
// Every layout goes through one plan: each input dimension becomes a Dim
// (size, input stride, output stride; the output stride is 0 on reduced
// axes). Dims are ordered by input stride so the walk follows memory, and
// neighbours that are contiguous in both input and output merge. The two
// innermost dims form a block handled by a tight loop:
//  - innermost reduced: each run folds into one accumulator (lanes +
//    pairwise, so float sums vectorize and stay accurate);
//  - innermost kept: whole rows fold elementwise into a row of
//    accumulators (the "reduce over leading axes" case, also vectorized).
// Outer dims are walked with an odometer. Threads split one dim: a kept one
// when that gives each thread disjoint outputs and memory, else a reduced
// one with a private accumulator per thread, combined at the end.
#include "fluxion/ops/reduce.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/common/layout.h"
#include "fluxion/backend/common/reduce_ops.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Work (input elements) below which a reduction stays on one thread.
constexpr int64_t kReduceGrain = 1 << 16;
constexpr int kLanes = 16;
// Runs longer than this are split in halves (pairwise summation): float
// error grows with log(n) blocks rather than n.
constexpr int64_t kPairwiseBlock = 2048;

struct Dim {
  int64_t n;
  int64_t is;  // input stride
  int64_t os;  // output stride, 0 on reduced dims
};

using detail::AndOp;
using detail::MaxOp;
using detail::MinOp;
using detail::OrOp;
using detail::ProdOp;
using detail::SumOp;

// Fold n elements spaced `st` apart with kLanes independent accumulators:
// the compiler vectorizes the lanes without reassociating any one of them.
template <typename Acc, typename In, typename Op>
Acc fold_block(const In* x, int64_t n, int64_t st, Op op) {
  int64_t i = 0;
  Acc acc = Op::init();
  if (n >= 2 * kLanes) {
    Acc lanes[kLanes];
    for (int k = 0; k < kLanes; ++k) {
      lanes[k] = Op::init();
    }
    if (st == 1) {
      for (; i + kLanes <= n; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) {
          lanes[k] = op(lanes[k], cast_value<Acc>(x[i + k]));
        }
      }
    } else {
      for (; i + kLanes <= n; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) {
          lanes[k] = op(lanes[k], cast_value<Acc>(x[(i + k) * st]));
        }
      }
    }
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int k = 0; k < w; ++k) {
        lanes[k] = op(lanes[k], lanes[k + w]);
      }
    }
    acc = lanes[0];
  }
  for (; i < n; ++i) {
    acc = op(acc, cast_value<Acc>(x[i * st]));
  }
  return acc;
}

template <typename T>
using Vec16 [[gnu::vector_size(16)]] = T;
template <typename T>
using SameSizeInt = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

// max/min of a contiguous float run. The NaN-propagating select of MaxOp
// defeats the vectorizer (2x slower), so take plain vector max/min and note
// NaNs in a separate mask.
template <typename T, bool IsMax>
T fold_minmax(const T* x, int64_t n) {
  using V = Vec16<T>;
  using I = Vec16<SameSizeInt<T>>;
  constexpr int W = 16 / sizeof(T);
  constexpr int U = 4;
  const T init = IsMax ? -std::numeric_limits<T>::infinity()
                       : std::numeric_limits<T>::infinity();
  auto pick = [](auto a, auto b) {
    if constexpr (IsMax) {
      return a > b ? a : b;
    } else {
      return a < b ? a : b;
    }
  };
  V acc[U];
  I nan[U];
  for (int u = 0; u < U; ++u) {
    acc[u] = V{} + init;
    nan[u] = I{};
  }
  int64_t i = 0;
  for (; i + U * W <= n; i += U * W) {
    for (int u = 0; u < U; ++u) {
      V v;
      std::memcpy(&v, x + i + u * W, sizeof(V));
      acc[u] = pick(acc[u], v);
      nan[u] |= (v != v);
    }
  }
  T r = init;
  bool any_nan = false;
  for (int u = 0; u < U; ++u) {
    for (int w = 0; w < W; ++w) {
      r = pick(r, acc[u][w]);
      any_nan |= nan[u][w] != 0;
    }
  }
  for (; i < n; ++i) {
    r = pick(r, x[i]);
    any_nan |= x[i] != x[i];
  }
  return any_nan ? std::numeric_limits<T>::quiet_NaN() : r;
}

template <typename Acc, typename In, typename Op>
Acc fold(const In* x, int64_t n, int64_t st, Op op) {
  if constexpr (std::is_same_v<In, Acc> && std::is_floating_point_v<Acc>) {
    if (st == 1) {
      if constexpr (std::is_same_v<Op, MaxOp<Acc>>) {
        return fold_minmax<Acc, true>(x, n);
      } else if constexpr (std::is_same_v<Op, MinOp<Acc>>) {
        return fold_minmax<Acc, false>(x, n);
      }
    }
  }
  if (n <= kPairwiseBlock) {
    return fold_block<Acc>(x, n, st, op);
  }
  int64_t h = (n / 2 + kLanes - 1) / kLanes * kLanes;
  // Left half first: argument evaluation order is unspecified, and walking
  // the halves backwards defeats the hardware prefetcher (3x slower).
  Acc left = fold<Acc>(x, h, st, op);
  return op(left, fold<Acc>(x + h * st, n - h, st, op));
}

// The two innermost dims: rows `r` of columns `c`.
template <typename Acc, typename In, typename Op>
void reduce_block(const In* x, Acc* acc, Dim r, Dim c, Op op) {
  if (c.os == 0) {
    if (r.os == 0) {
      Acc a = acc[0];
      for (int64_t i = 0; i < r.n; ++i) {
        a = op(a, fold<Acc>(x + i * r.is, c.n, c.is, op));
      }
      acc[0] = a;
    } else if (c.n < 2 * kLanes) {
      // Short rows: a plain loop beats fold's set-up.
      for (int64_t i = 0; i < r.n; ++i) {
        const In* xr = x + i * r.is;
        Acc a = acc[i * r.os];
        for (int64_t j = 0; j < c.n; ++j) {
          a = op(a, cast_value<Acc>(xr[j * c.is]));
        }
        acc[i * r.os] = a;
      }
    } else {
      for (int64_t i = 0; i < r.n; ++i) {
        Acc& a = acc[i * r.os];
        a = op(a, fold<Acc>(x + i * r.is, c.n, c.is, op));
      }
    }
    return;
  }
  for (int64_t i = 0; i < r.n; ++i) {
    Acc* a = acc + i * r.os;
    const In* xr = x + i * r.is;
    if (c.is == 1 && c.os == 1) {
      for (int64_t j = 0; j < c.n; ++j) {
        a[j] = op(a[j], cast_value<Acc>(xr[j]));
      }
    } else {
      for (int64_t j = 0; j < c.n; ++j) {
        a[j * c.os] = op(a[j * c.os], cast_value<Acc>(xr[j * c.is]));
      }
    }
  }
}

// Folds every element of the region `dims` describes into `acc`.
template <typename Acc, typename In, typename Op>
void reduce_walk(const std::vector<Dim>& dims, const In* x, Acc* acc, Op op) {
  const int k = static_cast<int>(dims.size());
  const Dim c = dims[k - 1];
  const Dim r = k >= 2 ? dims[k - 2] : Dim{1, 0, 0};
  if (k <= 2) {
    reduce_block(x, acc, r, c, op);
    return;
  }
  const int outer = k - 2;
  int64_t total = 1;
  for (int d = 0; d < outer; ++d) {
    total *= dims[d].n;
  }
  std::vector<int64_t> idx(outer, 0);
  int64_t xo = 0, ao = 0;
  for (int64_t it = 0; it < total; ++it) {
    reduce_block(x + xo, acc + ao, r, c, op);
    for (int d = outer - 1; d >= 0; --d) {
      xo += dims[d].is;
      ao += dims[d].os;
      if (++idx[d] < dims[d].n) {
        break;
      }
      xo -= dims[d].is * dims[d].n;
      ao -= dims[d].os * dims[d].n;
      idx[d] = 0;
    }
  }
}

// Input dims of size > 1 (but `skip`), ordered outer to inner by |input
// stride| and merged where contiguous in both input and output.
std::vector<Dim> plan_dims(const array& in, const Strides& out_strides,
                           const std::vector<bool>& reduced, int skip = -1) {
  std::vector<Dim> dims;
  for (int d = 0; d < in.ndim(); ++d) {
    if (in.shape(d) != 1 && d != skip) {
      dims.push_back(
          {in.shape(d), in.strides()[d], reduced[d] ? 0 : out_strides[d]});
    }
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) {
    return std::abs(a.is) > std::abs(b.is);
  });
  detail::Dims n;
  std::array<Strides, 2> st;
  for (const Dim& d : dims) {
    n.push_back(d.n);
    st[0].push_back(d.is);
    st[1].push_back(d.os);
  }
  detail::collapse_dims(n, st);
  std::vector<Dim> merged;
  for (size_t d = 0; d < n.size(); ++d) {
    merged.push_back({n[d], st[0][d], st[1][d]});
  }
  return merged;
}

template <typename In, typename Out, typename Acc, typename Op>
void reduce_typed(const array& in, array& out, const std::vector<int>& axes,
                  Op op) {
  if (out.dtype() != dtype_of<Out>) {
    throw std::invalid_argument(std::string("[reduce] Unexpected output "
                                            "dtype ") +
                                dtype_name(out.dtype()) + ".");
  }
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  Out* dst = out.data<Out>();
  const int64_t n_out = out.size();
  if (in.size() == 0) {
    std::fill(dst, dst + n_out, static_cast<Out>(Op::init()));
    return;
  }
  std::vector<bool> reduced(in.ndim(), false);
  for (int ax : axes) {
    reduced[ax] = true;
  }
  std::vector<Dim> dims = plan_dims(in, out.strides(), reduced);
  const In* src = in.data<In>();

  // Accumulate in the output itself when it has the accumulator's type.
  std::unique_ptr<Acc[]> acc_buf;
  Acc* acc;
  if constexpr (std::is_same_v<Acc, Out>) {
    acc = dst;
  } else {
    acc_buf.reset(new Acc[n_out]);
    acc = acc_buf.get();
  }
  std::fill(acc, acc + n_out, Op::init());

  // Split the outermost dim that is large enough; a reduced one only if the
  // private accumulators stay small next to the input.
  const int64_t work = in.size();
  const int64_t chunks =
      std::min<int64_t>(cpu::num_threads(), work / kReduceGrain);
  int split = -1;
  bool priv = false;
  if (chunks > 1) {
    for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
      if (dims[d].n < chunks) {
        continue;
      }
      if (dims[d].os != 0) {
        split = d;
        break;
      }
      if (n_out * chunks * 8 <= work) {
        split = d;
        priv = true;
        break;
      }
    }
  }
  if (split < 0) {
    reduce_walk(dims, src, acc, op);
  } else {
    const int64_t n = dims[split].n;
    const int64_t step = (n + chunks - 1) / chunks;
    // Not std::vector: vector<bool> packs bits, and threads write these.
    std::unique_ptr<Acc[]> partial;
    if (priv) {
      partial.reset(new Acc[(chunks - 1) * n_out]);
      std::fill(partial.get(), partial.get() + (chunks - 1) * n_out,
                Op::init());
    }
    cpu::parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t lo = t * step, hi = std::min(n, lo + step);
        if (lo >= hi) {
          continue;
        }
        std::vector<Dim> part = dims;
        part[split].n = hi - lo;
        Acc* a = priv ? (t == 0 ? acc : partial.get() + (t - 1) * n_out)
                      : acc + lo * dims[split].os;
        reduce_walk(part, src + lo * dims[split].is, a, op);
      }
    });
    if (priv) {
      // Combine the chunks' partials as a tree, not one after another: a
      // float32 total of 16 chunks otherwise gathers up to 8 ulps of
      // rounding (as many machines have 16 threads as have 2).
      auto part = [&](int64_t t) {
        return t == 0 ? acc : partial.get() + (t - 1) * n_out;
      };
      for (int64_t w = 1; w < chunks; w *= 2) {
        for (int64_t t = 0; t + w < chunks; t += 2 * w) {
          Acc* a = part(t);
          const Acc* p = part(t + w);
          for (int64_t o = 0; o < n_out; ++o) {
            a[o] = op(a[o], p[o]);
          }
        }
      }
    }
  }
  if constexpr (!std::is_same_v<Acc, Out>) {
    for (int64_t o = 0; o < n_out; ++o) {
      dst[o] = static_cast<Out>(acc[o]);
    }
  }
}

// Index of the first extreme of n elements spaced `st` apart.
template <typename T, bool IsMax>
uint32_t arg_scan(const T* x, int64_t n, int64_t st) {
  using M = opmath_t<T>;
  if constexpr (std::is_floating_point_v<T>) {
    if (st == 1 && n >= 64) {
      // Two vectorized passes beat one branchy one: find the extreme (NaN
      // if any), then the first element equal to it, a block at a time.
      T m = fold_minmax<T, IsMax>(x, n);
      const bool nan = m != m;
      constexpr int64_t B = 16;
      int64_t i = 0;
      for (; i + B <= n; i += B) {
        bool hit = false;
        for (int64_t k = 0; k < B; ++k) {
          hit |= nan ? x[i + k] != x[i + k] : x[i + k] == m;
        }
        if (hit) {
          break;
        }
      }
      for (; i < n; ++i) {
        if (nan ? x[i] != x[i] : x[i] == m) {
          return static_cast<uint32_t>(i);
        }
      }
      return 0;  // not reached: m is one of the elements
    }
  }
  M best = static_cast<M>(x[0]);
  uint32_t arg = 0;
  for (int64_t r = 1; r < n; ++r) {
    M v = static_cast<M>(x[r * st]);
    if (detail::arg_better<IsMax>(v, best)) {
      best = v;
      arg = static_cast<uint32_t>(r);
    }
  }
  return arg;
}

template <typename T, bool IsMax>
void arg_reduce(const array& in, array& out, int axis) {
  using M = opmath_t<T>;
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  uint32_t* dst = out.data<uint32_t>();
  const T* src = in.data<T>();
  const int64_t n = in.shape(axis);
  const int64_t ast = in.strides()[axis];
  if (out.size() == 0) {
    return;
  }
  // The kept dims: the axis is walked separately, with stride `ast`.
  std::vector<Dim> kept =
      plan_dims(in, out.strides(), std::vector<bool>(in.ndim(), false), axis);
  const Dim c = kept.back();
  const int n_other = static_cast<int>(kept.size()) - 1;
  int64_t others = 1;
  for (int d = 0; d < n_other; ++d) {
    others *= kept[d].n;
  }
  auto offsets = [&](int64_t i, int64_t& xo, int64_t& oo) {
    xo = oo = 0;
    for (int d = n_other - 1; d >= 0; --d) {
      int64_t q = i % kept[d].n;
      i /= kept[d].n;
      xo += q * kept[d].is;
      oo += q * kept[d].os;
    }
  };
  if (std::abs(c.is) >= std::abs(ast) || n == 1) {
    // The axis is innermost in memory: scan it for each output.
    int64_t total = others * c.n;
    cpu::parallel_for(total, std::max<int64_t>(1, kReduceGrain / n),
                      [&](int64_t b, int64_t e) {
                        for (int64_t i = b; i < e; ++i) {
                          int64_t xo, oo;
                          offsets(i / c.n, xo, oo);
                          int64_t j = i % c.n;
                          const T* x = src + xo + j * c.is;
                          dst[oo + j * c.os] = arg_scan<T, IsMax>(x, n, ast);
                        }
                      });
    return;
  }
  // The axis strides over memory that the innermost kept dim walks: sweep
  // the axis outside, updating a block of candidates at each step.
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (c.n + kBlock - 1) / kBlock;
  cpu::parallel_for(others * blocks,
                    std::max<int64_t>(1, kReduceGrain / (n * kBlock)),
                    [&](int64_t b, int64_t e) {
                      M best[kBlock];
                      uint32_t arg[kBlock];
                      for (int64_t i = b; i < e; ++i) {
                        int64_t xo, oo;
                        offsets(i / blocks, xo, oo);
                        int64_t j0 = (i % blocks) * kBlock;
                        int64_t m = std::min(kBlock, c.n - j0);
                        const T* x = src + xo + j0 * c.is;
                        for (int64_t j = 0; j < m; ++j) {
                          best[j] = static_cast<M>(x[j * c.is]);
                          arg[j] = 0;
                        }
                        for (int64_t r = 1; r < n; ++r) {
                          const T* xr = x + r * ast;
                          for (int64_t j = 0; j < m; ++j) {
                            M v = static_cast<M>(xr[j * c.is]);
                            if (detail::arg_better<IsMax>(v, best[j])) {
                              best[j] = v;
                              arg[j] = static_cast<uint32_t>(r);
                            }
                          }
                        }
                        for (int64_t j = 0; j < m; ++j) {
                          dst[oo + (j0 + j) * c.os] = arg[j];
                        }
                      }
                    });
}

}  // namespace

void Reduce::eval_cpu(const std::vector<array>& inputs,
                      std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  dispatch<AllTypes>(in.dtype(), name(), [&](auto tag) {
    using In = typename decltype(tag)::type;
    using SumT = sum_type_t<In>;
    switch (type_) {
      case And:
        reduce_typed<In, bool, bool>(in, out, axes_, AndOp{});
        break;
      case Or:
        reduce_typed<In, bool, bool>(in, out, axes_, OrOp{});
        break;
      case Sum:
        if constexpr (!std::is_same_v<SumT, float> && !is_complex_v<In>) {
          // mean of integers and half types: summed straight into float32,
          // without a converted copy of the input.
          if (out.dtype() == float32) {
            reduce_typed<In, float, float>(in, out, axes_, SumOp<float>{});
            break;
          }
        }
        reduce_typed<In, SumT, opmath_t<SumT>>(in, out, axes_,
                                               SumOp<opmath_t<SumT>>{});
        break;
      case Prod:
        reduce_typed<In, SumT, opmath_t<SumT>>(in, out, axes_,
                                               ProdOp<opmath_t<SumT>>{});
        break;
      case Max:
        reduce_typed<In, In, opmath_t<In>>(in, out, axes_,
                                           MaxOp<opmath_t<In>>{});
        break;
      case Min:
        reduce_typed<In, In, opmath_t<In>>(in, out, axes_,
                                           MinOp<opmath_t<In>>{});
        break;
    }
  });
}

void ArgReduce::eval_cpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  dispatch<AllTypes>(inputs[0].dtype(), name(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (type_ == ArgMax) {
      arg_reduce<T, true>(inputs[0], outputs[0], axis_);
    } else {
      arg_reduce<T, false>(inputs[0], outputs[0], axis_);
    }
  });
}

void NumberOfElements::eval_cpu(const std::vector<array>& inputs,
                                std::vector<array>& outputs) {
  double n = 1;
  for (int ax : axes_) {
    n *= inputs[0].shape(ax);
  }
  auto& out = outputs[0];
  out.set_data(out.nbytes());
  dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    *out.data<T>() = cast_value<T>(n);
  });
}

}  // namespace fluxion
