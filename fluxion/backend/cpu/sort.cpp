// Sort, partition and scan kernels. The input is made row-contiguous and
// viewed as (outer, n, inner) with the axis in the middle; the output is
// allocated row-major in the same layout. A row (fixed outer and inner
// index) is gathered into a contiguous buffer in the compute type (float
// for the half types), processed with the standard algorithms, and written
// back. Rows are spread over the threads.
#include "fluxion/ops/sort.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "fluxion/backend/common/reduce_ops.h"
#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

// Elements below which a kernel stays on one thread.
constexpr int64_t kSortGrain = 1 << 14;

struct Layout {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
  int64_t rows() const { return outer * inner; }
  // Offset of row r's first element; its elements are `inner` apart.
  int64_t base(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};

Layout layout(const array& a, int axis) {
  Layout l;
  for (int d = 0; d < axis; ++d) {
    l.outer *= a.shape(d);
  }
  l.n = a.shape(axis);
  for (int d = axis + 1; d < a.ndim(); ++d) {
    l.inner *= a.shape(d);
  }
  return l;
}

// A strict weak order with NaNs after everything (NumPy) and complex
// numbers compared lexicographically.
template <typename M>
struct Less {
  bool operator()(M a, M b) const {
    if constexpr (is_complex_v<M>) {
      detail::IsNan nan;
      bool na = nan(a), nb = nan(b);
      if (na || nb) {
        return !na && nb;
      }
      return detail::less_than(a, b);
    } else if constexpr (std::is_floating_point_v<M>) {
      return a < b || (b != b && a == a);
    } else {
      return a < b;
    }
  }
};

// Runs f(row_base, buffer) for each row, in parallel; `buffer` is scratch
// owned by the calling thread.
template <typename Buf, typename F>
void for_each_row(const Layout& l, F&& f) {
  if (l.n == 0 || l.rows() == 0) {
    return;
  }
  cpu::parallel_for(l.rows(), std::max<int64_t>(1, kSortGrain / l.n),
                    [&](int64_t b, int64_t e) {
                      // Not a vector: vector<bool> has no bool*.
                      auto buf = std::make_unique_for_overwrite<Buf[]>(l.n);
                      for (int64_t r = b; r < e; ++r) {
                        f(l.base(r), buf.get());
                      }
                    });
}

// Rows at least this long are radix sorted (when the type allows).
constexpr int64_t kRadixMin = 512;

template <typename M>
inline constexpr bool radix_sortable_v =
    (std::is_floating_point_v<M> ||
     std::is_integral_v<M>)&&!std::is_same_v<M, bool> &&
    (sizeof(M) == 4 || sizeof(M) == 8);

template <typename M>
using KeyBits = std::conditional_t<sizeof(M) == 8, uint64_t, uint32_t>;

// An unsigned key ordered as the value is (floats: no NaNs).
template <typename M>
inline KeyBits<M> to_key(M x) {
  using U = KeyBits<M>;
  constexpr U sign = U(1) << (8 * sizeof(U) - 1);
  U u = std::bit_cast<U>(x);
  if constexpr (std::is_floating_point_v<M>) {
    return (u & sign) ? ~u : (u | sign);
  } else if constexpr (std::is_signed_v<M>) {
    return u ^ sign;
  } else {
    return u;
  }
}
template <typename M>
inline M from_key(KeyBits<M> k) {
  using U = KeyBits<M>;
  constexpr U sign = U(1) << (8 * sizeof(U) - 1);
  if constexpr (std::is_floating_point_v<M>) {
    return std::bit_cast<M>((k & sign) ? (k ^ sign) : ~k);
  } else if constexpr (std::is_signed_v<M>) {
    return std::bit_cast<M>(static_cast<U>(k ^ sign));
  } else {
    return std::bit_cast<M>(k);
  }
}

// LSD radix sort of the keys in `a` (scratch `t` of the same size), a byte
// per pass, carrying the uint32 payload in `ia` (scratch `it`) when
// WithIdx. Stable. Passes where every key has the same byte are skipped.
// On return `a` (and `ia`) point at the sorted data.
template <typename U, bool WithIdx>
void radix_core(U*& a, U*& t, uint32_t*& ia, uint32_t*& it, int64_t n) {
  constexpr int kBytes = sizeof(U);
  std::vector<int64_t> count(kBytes * 256, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int b = 0; b < kBytes; ++b) {
      ++count[b * 256 + ((a[i] >> (8 * b)) & 0xff)];
    }
  }
  for (int b = 0; b < kBytes; ++b) {
    int64_t* c = count.data() + b * 256;
    if (c[(a[0] >> (8 * b)) & 0xff] == n) {
      continue;  // one bucket: the order stays
    }
    int64_t pos = 0;
    for (int v = 0; v < 256; ++v) {
      int64_t m = c[v];
      c[v] = pos;
      pos += m;
    }
    for (int64_t i = 0; i < n; ++i) {
      U k = a[i];
      int64_t dst = c[(k >> (8 * b)) & 0xff]++;
      t[dst] = k;
      if constexpr (WithIdx) {
        it[dst] = ia[i];
      }
    }
    std::swap(a, t);
    if constexpr (WithIdx) {
      std::swap(ia, it);
    }
  }
}

// Several times faster than std::sort on long rows.
template <typename M>
void radix_sort(M* data, int64_t n) {
  using U = KeyBits<M>;
  auto keys = std::make_unique_for_overwrite<U[]>(n);
  auto tmp = std::make_unique_for_overwrite<U[]>(n);
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = to_key(data[i]);
  }
  U* a = keys.get();
  U* t = tmp.get();
  uint32_t* none = nullptr;
  radix_core<U, false>(a, t, none, none, n);
  for (int64_t i = 0; i < n; ++i) {
    data[i] = from_key<M>(a[i]);
  }
}

// (value, index) pairs in index order, stably sorted by value.
template <typename M>
void radix_argsort(std::pair<M, uint32_t>* buf, int64_t n) {
  using U = KeyBits<M>;
  auto stop = buf + n;
  if constexpr (std::is_floating_point_v<M>) {
    stop = std::stable_partition(
        buf, buf + n,
        [](const std::pair<M, uint32_t>& p) { return p.first == p.first; });
  }
  const int64_t m = stop - buf;
  if (m == 0) {
    return;
  }
  auto keys = std::make_unique_for_overwrite<U[]>(2 * m);
  auto idx = std::make_unique_for_overwrite<uint32_t[]>(2 * m);
  for (int64_t i = 0; i < m; ++i) {
    // -0.0 and +0.0 tie under the comparison of the short rows (and
    // NumPy's), so they keep index order here too: +0.0's key for both
    // (the values are read back from the input, never from the keys).
    M v = buf[i].first;
    if constexpr (std::is_floating_point_v<M>) {
      v = v == M(0) ? M(0) : v;
    }
    keys[i] = to_key(v);
    idx[i] = buf[i].second;
  }
  U* a = keys.get();
  U* t = a + m;
  uint32_t* ia = idx.get();
  uint32_t* it = ia + m;
  radix_core<U, true>(a, t, ia, it, m);
  for (int64_t i = 0; i < m; ++i) {
    buf[i] = {from_key<M>(a[i]), ia[i]};
  }
}

template <typename M>
void sort_range(M* begin, M* end) {
  M* stop = end;
  if constexpr (std::is_floating_point_v<M>) {
    // NaNs first moved out of the way: plain < is then a total order.
    stop = std::partition(begin, end, [](M x) { return x == x; });
  }
  if constexpr (radix_sortable_v<M>) {
    if (stop - begin >= kRadixMin) {
      radix_sort(begin, stop - begin);
      return;
    }
  }
  if constexpr (std::is_floating_point_v<M>) {
    std::sort(begin, stop);
  } else {
    std::sort(begin, stop, Less<M>{});
  }
}

template <typename T>
void sort_kernel(const array& input, array& out, int axis) {
  using M = opmath_t<T>;
  array in = cpu::ensure_row_contiguous(input);
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  Layout l = layout(in, axis);
  if constexpr (std::is_same_v<T, M>) {
    if (l.inner == 1 && l.n > 0) {
      // Contiguous rows need no scratch: each is sorted in the output.
      const int64_t n = l.n;
      cpu::parallel_for(l.outer, std::max<int64_t>(1, kSortGrain / n),
                        [&](int64_t b, int64_t e) {
                          for (int64_t r = b; r < e; ++r) {
                            std::copy(src + r * n, src + (r + 1) * n,
                                      dst + r * n);
                            sort_range(dst + r * n, dst + (r + 1) * n);
                          }
                        });
      return;
    }
  }
  for_each_row<M>(l, [&](int64_t base, M* buf) {
    const int64_t st = l.inner;
    for (int64_t i = 0; i < l.n; ++i) {
      buf[i] = cast_value<M>(src[base + i * st]);
    }
    sort_range(buf, buf + l.n);
    for (int64_t i = 0; i < l.n; ++i) {
      dst[base + i * st] = cast_value<T>(buf[i]);
    }
  });
}

// Sorts (Partial = false) or partitions around `kth` each row's
// (value, index) pairs, ties broken by index (so the sort is stable and
// the partition deterministic); writes the indices, or the values when
// `Values`.
template <typename T, bool Partial, bool Values>
void arg_kernel(const array& input, array& out, int axis, int kth) {
  using M = opmath_t<T>;
  using P = std::pair<M, uint32_t>;
  array in = cpu::ensure_row_contiguous(input);
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  const T* src = in.data<T>();
  Layout l = layout(in, axis);
  auto cmp = [](const P& a, const P& b) {
    Less<M> less;
    return less(a.first, b.first) ||
           (!less(b.first, a.first) && a.second < b.second);
  };
  for_each_row<P>(l, [&](int64_t base, P* buf) {
    const int64_t st = l.inner;
    for (int64_t i = 0; i < l.n; ++i) {
      buf[i] = {cast_value<M>(src[base + i * st]), static_cast<uint32_t>(i)};
    }
    if constexpr (Partial) {
      std::nth_element(buf, buf + kth, buf + l.n, cmp);
    } else {
      if constexpr (radix_sortable_v<M>) {
        if (l.n >= kRadixMin) {
          radix_argsort(buf, l.n);
        } else {
          std::sort(buf, buf + l.n, cmp);
        }
      } else {
        std::sort(buf, buf + l.n, cmp);
      }
    }
    if constexpr (Values) {
      T* dst = out.data<T>();
      for (int64_t i = 0; i < l.n; ++i) {
        dst[base + i * st] = src[base + buf[i].second * st];
      }
    } else {
      uint32_t* dst = out.data<uint32_t>();
      for (int64_t i = 0; i < l.n; ++i) {
        dst[base + i * st] = buf[i].second;
      }
    }
  });
}

// --- scans ---

using detail::LogAddExpOp;
using detail::MaxOp;
using detail::MinOp;
using detail::ProdOp;
using detail::SumOp;

template <typename In, typename Out, typename Op>
void scan_kernel(const array& input, array& out, int axis, bool reverse,
                 bool inclusive, Op op) {
  using M = opmath_t<Out>;
  array in = cpu::ensure_row_contiguous(input);
  out.set_data(std::max<size_t>(out.nbytes(), 1));
  const In* src = in.data<In>();
  Out* dst = out.data<Out>();
  const Layout l = layout(in, axis);
  if (l.n == 0 || l.rows() == 0) {
    return;
  }
  const int64_t n = l.n;
  const int64_t step = reverse ? -1 : 1;
  const int64_t first = reverse ? n - 1 : 0;
  if (l.inner == 1) {
    // Contiguous rows: one running accumulator per row (the direction and
    // inclusiveness are template parameters, out of the loop).
    auto rows = [&]<bool Inclusive>(int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const In* x = src + r * n + first;
        Out* y = dst + r * n + first;
        M acc = Op::init();
        for (int64_t i = 0; i < n; ++i) {
          M v = cast_value<M>(x[i * step]);
          if constexpr (Inclusive) {
            acc = op(acc, v);
            y[i * step] = static_cast<Out>(acc);
          } else {
            y[i * step] = static_cast<Out>(acc);
            acc = op(acc, v);
          }
        }
      }
    };
    cpu::parallel_for(l.outer, std::max<int64_t>(1, kSortGrain / n),
                      [&](int64_t b, int64_t e) {
                        if (inclusive) {
                          rows.template operator()<true>(b, e);
                        } else {
                          rows.template operator()<false>(b, e);
                        }
                      });
    return;
  }
  // The axis strides over whole inner rows: sweep it with a block of
  // accumulators, one per inner column, so that memory is read in order.
  constexpr int64_t kBlock = 256;
  const int64_t inner = l.inner;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  cpu::parallel_for(
      l.outer * blocks,
      std::max<int64_t>(1, kSortGrain / (n * std::min(inner, kBlock))),
      [&](int64_t b, int64_t e) {
        M acc[kBlock];
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / blocks;
          int64_t j0 = (t % blocks) * kBlock;
          int64_t m = std::min(kBlock, inner - j0);
          for (int64_t j = 0; j < m; ++j) {
            acc[j] = Op::init();
          }
          for (int64_t i = 0; i < n; ++i) {
            int64_t off = (o * n + first + i * step) * inner + j0;
            const In* x = src + off;
            Out* y = dst + off;
            for (int64_t j = 0; j < m; ++j) {
              M v = cast_value<M>(x[j]);
              if (inclusive) {
                acc[j] = op(acc[j], v);
                y[j] = static_cast<Out>(acc[j]);
              } else {
                y[j] = static_cast<Out>(acc[j]);
                acc[j] = op(acc[j], v);
              }
            }
          }
        }
      });
}

}  // namespace

void Sort::eval_cpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  dispatch<AllTypes>(inputs[0].dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sort_kernel<T>(inputs[0], outputs[0], axis_);
  });
}

void ArgSort::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  dispatch<AllTypes>(inputs[0].dtype(), "argsort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    arg_kernel<T, false, false>(inputs[0], outputs[0], axis_, 0);
  });
}

void Partition::eval_cpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  dispatch<AllTypes>(inputs[0].dtype(), "partition", [&](auto tag) {
    using T = typename decltype(tag)::type;
    arg_kernel<T, true, true>(inputs[0], outputs[0], axis_, kth_);
  });
}

void ArgPartition::eval_cpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  dispatch<AllTypes>(inputs[0].dtype(), "argpartition", [&](auto tag) {
    using T = typename decltype(tag)::type;
    arg_kernel<T, true, false>(inputs[0], outputs[0], axis_, kth_);
  });
}

void Scan::eval_cpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (type_ == LogAddExp) {
    dispatch<InexactTypes>(in.dtype(), "logcumsumexp", [&](auto tag) {
      using T = typename decltype(tag)::type;
      scan_kernel<T, T>(in, out, axis_, reverse_, inclusive_,
                        LogAddExpOp<opmath_t<T>>{});
    });
    return;
  }
  dispatch<AllTypes>(in.dtype(), "scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using S = sum_type_t<T>;
    switch (type_) {
      case Sum:
        scan_kernel<T, S>(in, out, axis_, reverse_, inclusive_,
                          SumOp<opmath_t<S>>{});
        break;
      case Prod:
        scan_kernel<T, S>(in, out, axis_, reverse_, inclusive_,
                          ProdOp<opmath_t<S>>{});
        break;
      case Max:
        scan_kernel<T, T>(in, out, axis_, reverse_, inclusive_,
                          MaxOp<opmath_t<T>>{});
        break;
      case Min:
        scan_kernel<T, T>(in, out, axis_, reverse_, inclusive_,
                          MinOp<opmath_t<T>>{});
        break;
      default:
        break;
    }
  });
}

}  // namespace fluxion
