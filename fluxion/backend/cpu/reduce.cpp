// Reduction kernels. The output keeps reduced axes as size 1, row-major.
// Paths: (1) contiguous input reduced over its trailing axes: each output is
// a contiguous run, summed with independent lanes so the compiler
// vectorizes; (2) reduced over leading axes: whole rows are combined into
// the output; (3) anything else: a strided walk over the reduced axes for
// each output element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/strided.h"
#include "fluxion/backend/cpu/thread_pool.h"
#include "fluxion/ops/reduce.h"

namespace fluxion {

namespace {

template <typename Acc>
struct SumOp {
  static Acc init() { return Acc(0); }
  Acc operator()(Acc a, Acc b) const { return a + b; }
};
template <typename Acc>
struct ProdOp {
  static Acc init() { return Acc(1); }
  Acc operator()(Acc a, Acc b) const { return a * b; }
};
template <typename Acc>
struct MaxOp {
  static Acc init() {
    if constexpr (is_complex_v<Acc>) {
      return Acc(-std::numeric_limits<float>::infinity(), 0);
    } else if constexpr (std::numeric_limits<Acc>::has_infinity) {
      return -std::numeric_limits<Acc>::infinity();
    } else {
      return std::numeric_limits<Acc>::lowest();
    }
  }
  Acc operator()(Acc a, Acc b) const {
    if constexpr (is_complex_v<Acc>) {
      return (b.real() > a.real() ||
              (b.real() == a.real() && b.imag() > a.imag()))
                 ? b
                 : a;
    } else if constexpr (std::is_floating_point_v<Acc>) {
      // NaN propagates.
      return (a > b || std::isnan(a)) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};
template <typename Acc>
struct MinOp {
  static Acc init() {
    if constexpr (is_complex_v<Acc>) {
      return Acc(std::numeric_limits<float>::infinity(), 0);
    } else if constexpr (std::numeric_limits<Acc>::has_infinity) {
      return std::numeric_limits<Acc>::infinity();
    } else {
      return std::numeric_limits<Acc>::max();
    }
  }
  Acc operator()(Acc a, Acc b) const {
    if constexpr (is_complex_v<Acc>) {
      return (b.real() < a.real() ||
              (b.real() == a.real() && b.imag() < a.imag()))
                 ? b
                 : a;
    } else if constexpr (std::is_floating_point_v<Acc>) {
      return (a < b || std::isnan(a)) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};
struct AndOp {
  static bool init() { return true; }
  bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  static bool init() { return false; }
  bool operator()(bool a, bool b) const { return a || b; }
};

// Combine a contiguous run with 16 independent lanes (vectorizable without
// reassociating the float additions of any one lane).
template <typename In, typename Acc, typename Op>
Acc reduce_run(const In* x, int64_t n, Op op) {
  constexpr int L = 16;
  int64_t i = 0;
  Acc acc = Op::init();
  if (n >= 2 * L) {
    Acc lanes[L];
    for (int k = 0; k < L; ++k) {
      lanes[k] = Op::init();
    }
    for (; i + L <= n; i += L) {
      for (int k = 0; k < L; ++k) {
        lanes[k] = op(lanes[k], cast_value<Acc>(x[i + k]));
      }
    }
    for (int k = 0; k < L; ++k) {
      acc = op(acc, lanes[k]);
    }
  }
  for (; i < n; ++i) {
    acc = op(acc, cast_value<Acc>(x[i]));
  }
  return acc;
}

template <typename In, typename Out, typename Acc, typename Op>
void reduce_typed(const array& in, array& out, const std::vector<int>& axes,
                  Op op) {
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  Out* dst = out.data<Out>();
  const In* src = in.data<In>();
  const int nd = in.ndim();
  const int64_t n_out = out.size();
  if (in.size() == 0) {
    std::fill(dst, dst + n_out, static_cast<Out>(Op::init()));
    return;
  }
  int64_t n_red = 1;
  for (int ax : axes) {
    n_red *= in.shape(ax);
  }
  bool trailing = true, leading = true;
  for (size_t i = 0; i < axes.size(); ++i) {
    trailing &= axes[i] == nd - static_cast<int>(axes.size()) + static_cast<int>(i);
    leading &= axes[i] == static_cast<int>(i);
  }
  if (in.flags().row_contiguous && trailing) {
    if (n_out == 1) {
      // One long run: split it over threads, then combine the partials.
      int nt = cpu::num_threads();
      // Not std::vector: vector<bool> packs bits, and threads write these.
      std::unique_ptr<Acc[]> partial(new Acc[nt]);
      std::fill(partial.get(), partial.get() + nt, Op::init());
      int64_t chunk = (n_red + nt - 1) / nt;
      cpu::parallel_for(nt, 1, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t lo = t * chunk, hi = std::min(n_red, lo + chunk);
          if (lo < hi) {
            partial[t] = reduce_run<In, Acc>(src + lo, hi - lo, op);
          }
        }
      });
      Acc acc = Op::init();
      for (int t = 0; t < nt; ++t) {
        acc = op(acc, partial[t]);
      }
      dst[0] = static_cast<Out>(acc);
      return;
    }
    cpu::parallel_for(n_out, std::max<int64_t>(1, (1 << 16) / n_red),
                      [&](int64_t b, int64_t e) {
                        for (int64_t o = b; o < e; ++o) {
                          dst[o] = static_cast<Out>(reduce_run<In, Acc>(
                              src + o * n_red, n_red, op));
                        }
                      });
    return;
  }
  if (in.flags().row_contiguous && leading) {
    // Combine n_red rows of n_out elements, splitting columns over threads.
    cpu::parallel_for(n_out, 1 << 12, [&](int64_t b, int64_t e) {
      std::unique_ptr<Acc[]> acc(new Acc[e - b]);
      std::fill(acc.get(), acc.get() + (e - b), Op::init());
      for (int64_t r = 0; r < n_red; ++r) {
        const In* row = src + r * n_out;
        for (int64_t j = b; j < e; ++j) {
          acc[j - b] = op(acc[j - b], cast_value<Acc>(row[j]));
        }
      }
      for (int64_t j = b; j < e; ++j) {
        dst[j] = static_cast<Out>(acc[j - b]);
      }
    });
    return;
  }
  // General: outer = kept axes, inner = reduced axes, both with input
  // strides; the output is row-major over the kept axes.
  Shape outer_shape, inner_shape;
  Strides outer_st, inner_st;
  for (int d = 0; d < nd; ++d) {
    if (std::binary_search(axes.begin(), axes.end(), d)) {
      inner_shape.push_back(in.shape(d));
      inner_st.push_back(in.strides()[d]);
    } else {
      outer_shape.push_back(in.shape(d));
      outer_st.push_back(in.strides()[d]);
    }
  }
  std::array<Strides, 1> ist{inner_st};
  cpu::collapse_dims(inner_shape, ist);
  if (outer_shape.empty()) {
    outer_shape.push_back(1);
    outer_st.push_back(0);
  }
  int64_t inner_rows = cpu::outer_rows(inner_shape);
  cpu::parallel_for(n_out, std::max<int64_t>(1, (1 << 14) / n_red),
                    [&](int64_t b, int64_t e) {
    // Decompose each output index into its input offset.
    for (int64_t idx = b; idx < e; ++idx) {
      int64_t rem = idx, base = 0;
      for (int d = static_cast<int>(outer_shape.size()) - 1; d >= 0; --d) {
        base += (rem % outer_shape[d]) * outer_st[d];
        rem /= outer_shape[d];
      }
      Acc acc = Op::init();
      cpu::for_each_run<1>(inner_shape, ist, 0, inner_rows,
                           [&](auto& off, int64_t n, auto& s) {
                             const In* x = src + base + off[0];
                             for (int64_t i = 0; i < n; ++i) {
                               acc = op(acc, cast_value<Acc>(x[i * s[0]]));
                             }
                           });
      dst[idx] = static_cast<Out>(acc);
    }
  });
}

template <typename In, typename Out>
void reduce_dispatch_op(const array& in, array& out, Reduce::ReduceType type,
                        const std::vector<int>& axes) {
  using Acc = opmath_t<Out>;
  switch (type) {
    case Reduce::Sum:
      reduce_typed<In, Out, Acc>(in, out, axes, SumOp<Acc>{});
      break;
    case Reduce::Prod:
      reduce_typed<In, Out, Acc>(in, out, axes, ProdOp<Acc>{});
      break;
    case Reduce::Max:
      reduce_typed<In, Out, Acc>(in, out, axes, MaxOp<Acc>{});
      break;
    case Reduce::Min:
      reduce_typed<In, Out, Acc>(in, out, axes, MinOp<Acc>{});
      break;
    default:
      break;
  }
}

}  // namespace

void Reduce::eval_cpu(const std::vector<array>& inputs,
                      std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (type_ == And || type_ == Or) {
    dispatch<AllTypes>(in.dtype(), name(), [&](auto tag) {
      using In = typename decltype(tag)::type;
      if (type_ == And) {
        reduce_typed<In, bool, bool>(in, out, axes_, AndOp{});
      } else {
        reduce_typed<In, bool, bool>(in, out, axes_, OrOp{});
      }
    });
    return;
  }
  dispatch<AllTypes>(in.dtype(), name(), [&](auto tag) {
    using In = typename decltype(tag)::type;
    dispatch_all(out.dtype(), [&](auto otag) {
      using Out = typename decltype(otag)::type;
      if constexpr (std::is_same_v<In, Out> ||
                    (std::is_integral_v<In> && std::is_integral_v<Out> &&
                     sizeof(Out) >= 4)) {
        reduce_dispatch_op<In, Out>(in, out, type_, axes_);
      } else {
        throw std::invalid_argument(std::string("[") + name() +
                                    "] Unsupported dtype pair.");
      }
    });
  });
}

void ArgReduce::eval_cpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  uint32_t* dst = out.data<uint32_t>();
  const int64_t n = in.shape(axis_);
  const int64_t st = in.strides()[axis_];
  // Outer index space: every axis but axis_, with input strides.
  Shape oshape;
  Strides ost;
  for (int d = 0; d < in.ndim(); ++d) {
    if (d != axis_) {
      oshape.push_back(in.shape(d));
      ost.push_back(in.strides()[d]);
    }
  }
  const bool is_max = type_ == ArgMax;
  dispatch<AllTypes>(in.dtype(), name(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    const T* src = in.data<T>();
    cpu::parallel_for(out.size(), std::max<int64_t>(1, (1 << 14) / n),
                      [&](int64_t b, int64_t e) {
      for (int64_t idx = b; idx < e; ++idx) {
        int64_t rem = idx, base = 0;
        for (int d = static_cast<int>(oshape.size()) - 1; d >= 0; --d) {
          base += (rem % oshape[d]) * ost[d];
          rem /= oshape[d];
        }
        const T* x = src + base;
        M best = static_cast<M>(x[0]);
        uint32_t arg = 0;
        for (int64_t i = 1; i < n; ++i) {
          M v = static_cast<M>(x[i * st]);
          bool better;
          if constexpr (is_complex_v<M>) {
            better = is_max ? (v.real() > best.real() ||
                               (v.real() == best.real() &&
                                v.imag() > best.imag()))
                            : (v.real() < best.real() ||
                               (v.real() == best.real() &&
                                v.imag() < best.imag()));
          } else if constexpr (std::is_floating_point_v<M>) {
            // The first NaN wins, as in NumPy.
            if (std::isnan(best)) {
              break;
            }
            better = std::isnan(v) || (is_max ? v > best : v < best);
          } else {
            better = is_max ? v > best : v < best;
          }
          if (better) {
            best = v;
            arg = static_cast<uint32_t>(i);
          }
        }
        dst[idx] = arg;
      }
    });
  });
}

}  // namespace fluxion
