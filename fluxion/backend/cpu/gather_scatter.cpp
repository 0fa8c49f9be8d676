// Kernels of the multi-axis Gather and Scatter.
//
// Both walk the index rows (the broadcast index shape B, in row-major
// order), turning each row's indices into the element offset of its window.
// Negative indices wrap once; a window that does not fit is recorded (the
// first in row order) and raised as std::out_of_range after the parallel
// work, since pool threads must not throw. Scatter validates every row
// before it writes anything.
#include "fluxion/ops/gather_scatter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "fluxion/backend/common/dispatch.h"
#include "fluxion/backend/cpu/copy.h"
#include "fluxion/backend/cpu/strided.h"
#include "fluxion/backend/cpu/thread_pool.h"

namespace fluxion {

namespace {

class WindowError {
 public:
  template <typename I>
  void record(int64_t row, I raw, int axis, int64_t n, int64_t size) {
    std::lock_guard<std::mutex> lk(mu_);
    if (row < row_) {
      row_ = row;
      if constexpr (std::is_unsigned_v<I>) {
        value_ = std::to_string(static_cast<uint64_t>(raw));
      } else {
        value_ = std::to_string(static_cast<int64_t>(raw));
      }
      axis_ = axis;
      n_ = n;
      size_ = size;
    }
  }
  void throw_if_any(const char* op) const {
    if (row_ == std::numeric_limits<int64_t>::max()) {
      return;
    }
    std::string msg = std::string("[") + op + "] Index " + value_ +
                      " is out of bounds for axis " + std::to_string(axis_) +
                      " with size " + std::to_string(n_);
    if (size_ != 1) {
      msg += " (for a slice of size " + std::to_string(size_) + ")";
    }
    throw std::out_of_range(msg + ".");
  }

 private:
  std::mutex mu_;
  int64_t row_ = std::numeric_limits<int64_t>::max();
  std::string value_;
  int axis_ = 0;
  int64_t n_ = 0, size_ = 0;
};

// The windows' start offsets into an array with strides `stride`, for
// index rows [begin, end). f(row, offset) is called for valid rows only.
// The index shape is collapsed over all index arrays, so that rows run as
// tight inner loops; K > 0 fixes the number of index arrays at compile time.
struct Windows {
  std::vector<const void*> ptr;  // k index arrays' data
  std::vector<int> axes;
  Shape B;                               // collapsed index shape
  std::vector<Strides> st;               // per index, over collapsed B
  std::vector<int64_t> n, size, stride;  // per index: axis length, window

  Windows(const std::vector<array>& idx, std::vector<int> ax, const Shape& b)
      : axes(std::move(ax)) {
    // Drop unit dims, merge dims contiguous in every index array.
    for (size_t d = 0; d < b.size(); ++d) {
      if (b[d] == 1) {
        continue;
      }
      bool merge = !B.empty();
      for (size_t i = 0; i < idx.size() && merge; ++i) {
        merge = st[i].back() == idx[i].strides()[d] * b[d];
      }
      if (merge) {
        B.back() *= b[d];
        for (size_t i = 0; i < idx.size(); ++i) {
          st[i].back() = idx[i].strides()[d];
        }
      } else {
        B.push_back(b[d]);
        st.resize(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) {
          st[i].push_back(idx[i].strides()[d]);
        }
      }
    }
    if (B.empty()) {
      B.push_back(1);
      st.assign(idx.size(), Strides{0});
    }
    for (auto& x : idx) {
      ptr.push_back(x.raw_data());
    }
  }

  template <typename I, int K, typename F>
  void walk_k(int64_t begin, int64_t end, WindowError& err, F&& f) const {
    const size_t k = K > 0 ? K : ptr.size();
    const int nd = static_cast<int>(B.size());
    const int64_t inner = B[nd - 1];
    std::vector<const I*> p(k);
    std::vector<int64_t> lim(k), ist(k);
    std::vector<int32_t> pos(nd, 0);
    int64_t r = begin;
    for (int d = nd - 1; d >= 0; --d) {
      pos[d] = static_cast<int32_t>(r % B[d]);
      r /= B[d];
    }
    for (size_t i = 0; i < k; ++i) {
      p[i] = static_cast<const I*>(ptr[i]);
      for (int d = 0; d < nd - 1; ++d) {
        p[i] += pos[d] * st[i][d];
      }
      lim[i] = n[i] - size[i];  // last valid start
      ist[i] = st[i][nd - 1];
    }
    int64_t row = begin;
    while (row < end) {
      int64_t j0 = pos[nd - 1];
      int64_t j1 = std::min<int64_t>(inner, j0 + (end - row));
      for (int64_t j = j0; j < j1; ++j, ++row) {
        int64_t o = 0;
        bool ok = true;
        for (size_t i = 0; i < k; ++i) {
          I raw = p[i][j * ist[i]];
          int64_t v = static_cast<int64_t>(raw);
          if constexpr (std::is_unsigned_v<I>) {
            ok = lim[i] >= 0 &&
                 static_cast<uint64_t>(raw) <= static_cast<uint64_t>(lim[i]);
          } else {
            v += v < 0 ? n[i] : 0;
            ok = v >= 0 && v <= lim[i];
          }
          if (!ok) {
            err.record(row, raw, axes[i], n[i], size[i]);
            break;
          }
          o += v * stride[i];
        }
        if (ok) {
          f(row, o);
        }
      }
      // Next outer position.
      pos[nd - 1] = 0;
      for (int d = nd - 2; d >= 0; --d) {
        if (++pos[d] < B[d]) {
          for (size_t i = 0; i < k; ++i) {
            p[i] += st[i][d];
          }
          break;
        }
        for (size_t i = 0; i < k; ++i) {
          p[i] -= (B[d] - 1) * st[i][d];
        }
        pos[d] = 0;
      }
    }
  }

  template <typename I, typename F>
  void walk(int64_t begin, int64_t end, WindowError& err, F&& f) const {
    switch (ptr.size()) {
      case 1:
        return walk_k<I, 1>(begin, end, err, f);
      case 2:
        return walk_k<I, 2>(begin, end, err, f);
      default:
        return walk_k<I, 0>(begin, end, err, f);
    }
  }
};

Strides row_strides(const Shape& s) {
  Strides st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) {
    st[d] = st[d + 1] * s[d + 1];
  }
  return st;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) {
    n *= d;
  }
  return n;
}

template <typename F>
void dispatch_index(const std::vector<array>& idx, const char* op, F&& f) {
  dispatch<IntTypes>(idx.empty() ? int32 : idx[0].dtype(), op,
                     std::forward<F>(f));
}

// Combining one update into the output element.
template <typename T>
struct Combine {
  using M = opmath_t<T>;
  static void sum(T& d, T v) {
    if constexpr (std::is_same_v<T, bool>) {
      d = d || v;
    } else {
      d = static_cast<T>(static_cast<M>(d) + static_cast<M>(v));
    }
  }
  static void prod(T& d, T v) {
    if constexpr (std::is_same_v<T, bool>) {
      d = d && v;
    } else {
      d = static_cast<T>(static_cast<M>(d) * static_cast<M>(v));
    }
  }
  // NaN propagates, as in NumPy's maximum.at.
  static void max(T& d, T v) {
    if constexpr (!is_complex_v<T>) {
      M x = static_cast<M>(v);
      if (x > static_cast<M>(d) || x != x) {
        d = v;
      }
    }
  }
  static void min(T& d, T v) {
    if constexpr (!is_complex_v<T>) {
      M x = static_cast<M>(v);
      if (x < static_cast<M>(d) || x != x) {
        d = v;
      }
    }
  }
};

}  // namespace

// Rows run in parallel: each writes its own output block out[row, ...].
void Gather::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  o.set_data(o.nbytes());
  if (o.size() == 0) {
    return;
  }
  std::vector<array> idx(in.begin() + 1, in.end());
  Windows w(idx, axes_, idx.empty() ? Shape{} : idx[0].shape());
  for (size_t i = 0; i < axes_.size(); ++i) {
    w.n.push_back(a.shape(axes_[i]));
    w.size.push_back(slice_sizes_[axes_[i]]);
    w.stride.push_back(a.strides()[axes_[i]]);
  }
  const int64_t rows = o.size() / std::max<int64_t>(numel(slice_sizes_), 1);
  const int64_t S = numel(slice_sizes_);
  auto sl = cpu::to_dims(slice_sizes_);
  std::array<Strides, 2> st{a.strides(), row_strides(slice_sizes_)};
  cpu::collapse_dims(sl, st);
  const bool dense = sl.size() == 1 && st[0][0] == 1;
  const int64_t srows = cpu::outer_rows(sl);
  WindowError err;
  dispatch_index(idx, "gather", [&](auto itag) {
    using I = typename decltype(itag)::type;
    dispatch_bytes(o.dtype(), [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      const T* ap = a.data<T>();
      T* op = o.data<T>();
      auto work = [&](int64_t b, int64_t e) {
        w.walk<I>(b, e, err, [&](int64_t row, int64_t base) {
          const T* src = ap + base;
          T* dst = op + row * S;
          if (S == 1) {
            *dst = *src;
          } else if (dense) {
            std::memcpy(dst, src, S * sizeof(T));
          } else {
            cpu::for_each_run<2>(
                sl, st, 0, srows, [&](auto& off, int64_t cnt, auto& s) {
                  for (int64_t j = 0; j < cnt; ++j) {
                    dst[off[1] + j * s[1]] = src[off[0] + j * s[0]];
                  }
                });
          }
        });
      };
      cpu::parallel_for(rows, cpu::row_grain(cpu::kElementwiseGrain, S), work);
    });
  });
  err.throw_if_any("gather");
}

// The output starts as a copy of a (or a's donated buffer). Row offsets are
// computed and validated first (in parallel). Updates are then applied row
// by row in index order, which fixes the result with duplicates: the last
// write wins, and reductions combine in a fixed order. When every indexed
// axis has a window of 1, distinct slice positions can never reach the same
// output element, so the slice is split in chunks across threads, each
// chunk still visiting the rows in order.
void Scatter::eval_cpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  if (a.is_donatable() && a.flags().row_contiguous) {
    o.move_shared_buffer(a);
  } else {
    cpu::copy_to_row_contiguous(a, o);
  }
  const size_t k = axes_.size();
  std::vector<array> idx(in.begin() + 1, in.begin() + 1 + k);
  array upd = cpu::ensure_row_contiguous(in[k + 1]);
  const int nb = upd.ndim() - a.ndim();
  Shape B(upd.shape().begin(), upd.shape().begin() + nb);
  Shape U(upd.shape().begin() + nb, upd.shape().end());
  const int64_t rows = numel(B);
  const int64_t S = numel(U);
  if (rows == 0 || S == 0) {
    return;
  }
  const Strides ost = row_strides(o.shape());
  Windows w(idx, axes_, B);
  bool unit_windows = true;
  for (size_t i = 0; i < k; ++i) {
    w.n.push_back(o.shape(axes_[i]));
    w.size.push_back(U[axes_[i]]);
    w.stride.push_back(ost[axes_[i]]);
    unit_windows &= U[axes_[i]] == 1;
  }
  std::vector<int64_t> base(rows);
  WindowError err;
  const char* op = op_name();
  dispatch_index(idx, op, [&](auto itag) {
    using I = typename decltype(itag)::type;
    cpu::parallel_for(rows, cpu::kElementwiseGrain, [&](int64_t b, int64_t e) {
      w.walk<I>(b, e, err, [&](int64_t row, int64_t o) { base[row] = o; });
    });
  });
  err.throw_if_any(op);

  auto sl = cpu::to_dims(U);
  std::array<Strides, 2> st{ost, row_strides(U)};
  cpu::collapse_dims(sl, st);
  const int nd = static_cast<int>(sl.size());
  const int64_t inner = sl[nd - 1];
  const int64_t srows = cpu::outer_rows(sl);

  auto run = [&](auto ttag, auto store) {
    using T = typename decltype(ttag)::type;
    const T* vp = upd.data<T>();
    T* opp = o.data<T>();
    if (S == 1) {
      for (int64_t r = 0; r < rows; ++r) {
        store(opp[base[r]], vp[r]);
      }
      return;
    }
    if (!unit_windows || S < 2048 || cpu::num_threads() == 1) {
      for (int64_t r = 0; r < rows; ++r) {
        T* dst = opp + base[r];
        const T* src = vp + r * S;
        cpu::for_each_run<2>(
            sl, st, 0, srows, [&](auto& off, int64_t cnt, auto& s) {
              for (int64_t j = 0; j < cnt; ++j) {
                store(dst[off[0] + j * s[0]], src[off[1] + j * s[1]]);
              }
            });
      }
      return;
    }
    // Units: (slice row, chunk of its inner run).
    const int64_t chunk = std::min<int64_t>(inner, 4096);
    const int64_t nchunks = (inner + chunk - 1) / chunk;
    const int64_t per_unit = std::max<int64_t>(rows * chunk, 1);
    cpu::parallel_for(srows * nchunks,
                      std::max<int64_t>(1, cpu::kElementwiseGrain / per_unit),
                      [&](int64_t b, int64_t e) {
                        for (int64_t u = b; u < e; ++u) {
                          int64_t sr = u / nchunks;
                          int64_t p0 = (u - sr * nchunks) * chunk;
                          int64_t p1 = std::min(inner, p0 + chunk);
                          int64_t oo = 0, uo = 0, rem = sr;
                          for (int d = nd - 2; d >= 0; --d) {
                            int64_t c = rem % sl[d];
                            rem /= sl[d];
                            oo += c * st[0][d];
                            uo += c * st[1][d];
                          }
                          const int64_t so = st[0][nd - 1], su = st[1][nd - 1];
                          for (int64_t r = 0; r < rows; ++r) {
                            T* dst = opp + base[r] + oo;
                            const T* src = vp + r * S + uo;
                            for (int64_t p = p0; p < p1; ++p) {
                              store(dst[p * so], src[p * su]);
                            }
                          }
                        }
                      });
  };

  if (reduce_ == None) {
    dispatch_bytes(o.dtype(), [&](auto ttag) {
      run(ttag, [](auto& d, auto v) { d = v; });
    });
    return;
  }
  dispatch_all(o.dtype(), [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    using C = Combine<T>;
    if constexpr (is_complex_v<T>) {
      if (reduce_ == Max || reduce_ == Min) {
        throw std::invalid_argument(std::string("[") + op +
                                    "] complex64 arrays have no order.");
      }
    }
    switch (reduce_) {
      case Sum:
        run(ttag, [](T& d, T v) { C::sum(d, v); });
        break;
      case Prod:
        run(ttag, [](T& d, T v) { C::prod(d, v); });
        break;
      case Max:
        run(ttag, [](T& d, T v) { C::max(d, v); });
        break;
      default:
        run(ttag, [](T& d, T v) { C::min(d, v); });
    }
  });
}

}  // namespace fluxion
