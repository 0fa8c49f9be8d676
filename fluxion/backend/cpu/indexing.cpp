// Gather and scatter along one axis.
//
// Index values are only seen here, so this is where an out-of-range index
// is caught. parallel_for runs chunks on pool threads that must not throw:
// chunks record the first bad index (in output order) and skip it, and the
// kernel throws std::out_of_range once every chunk has finished.
#include "fluxion/ops/indexing.h"

#include <algorithm>
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

// Negative indices wrap once; false when the index is still out of range.
template <typename I>
inline bool wrap_index(I raw, int64_t n, int64_t& idx) {
  if constexpr (std::is_unsigned_v<I>) {
    if (static_cast<uint64_t>(raw) >= static_cast<uint64_t>(n)) {
      return false;
    }
    idx = static_cast<int64_t>(raw);
  } else {
    int64_t v = raw;
    if (v < 0) {
      v += n;
    }
    if (v < 0 || v >= n) {
      return false;
    }
    idx = v;
  }
  return true;
}

class IndexError {
 public:
  template <typename I>
  void record(int64_t pos, I raw) {
    std::lock_guard<std::mutex> lk(mu_);
    if (pos < pos_) {
      pos_ = pos;
      if constexpr (std::is_unsigned_v<I>) {
        value_ = std::to_string(static_cast<uint64_t>(raw));
      } else {
        value_ = std::to_string(static_cast<int64_t>(raw));
      }
    }
  }
  void throw_if_any(const char* op, int axis, int64_t n) const {
    if (pos_ != std::numeric_limits<int64_t>::max()) {
      throw std::out_of_range(std::string("[") + op + "] Index " + value_ +
                              " is out of bounds for axis " +
                              std::to_string(axis) + " with size " +
                              std::to_string(n) + ".");
    }
  }

 private:
  std::mutex mu_;
  int64_t pos_ = std::numeric_limits<int64_t>::max();
  std::string value_;
};

int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) {
    n *= s[i];
  }
  return n;
}

}  // namespace

// The output is viewed as (outer, m, inner): outer runs over the dimensions
// before the axis, m over the indices along it, inner over those after it.
// Each (outer, j) unit copies one block out[o, j, :] from a[o, idx, :]; when
// the index is the same for the whole block (take: the indices are broadcast
// with stride 0 over the inner dimensions) that is one read of the index
// and, for a contiguous block, one memcpy.
void GatherAxis::eval_cpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  const array& a = in[0];
  const array& ind = in[1];
  array& o = out[0];
  o.set_data(o.nbytes());
  if (o.size() == 0) {
    return;
  }
  const int ax = axis_;
  const size_t nd = o.ndim();
  cpu::Dims pre(o.shape().begin(), o.shape().begin() + ax);
  std::array<Strides, 2> pre_st{
      Strides(a.strides().begin(), a.strides().begin() + ax),
      Strides(ind.strides().begin(), ind.strides().begin() + ax)};
  const int64_t outer = product(o.shape(), 0, ax);
  cpu::collapse_dims(pre, pre_st);
  cpu::Dims post(o.shape().begin() + ax + 1, o.shape().end());
  std::array<Strides, 3> post_st{
      Strides(a.strides().begin() + ax + 1, a.strides().end()),
      Strides(ind.strides().begin() + ax + 1, ind.strides().end()),
      Strides(o.strides().begin() + ax + 1, o.strides().end())};
  const int64_t inner = product(o.shape(), ax + 1, nd);
  cpu::collapse_dims(post, post_st);
  const int64_t post_rows = cpu::outer_rows(post);
  const int64_t n = a.shape(ax);
  const int64_t m = o.shape(ax);
  const int64_t a_ax = a.strides()[ax];
  const int64_t i_ax = ind.strides()[ax];
  const bool per_block = std::all_of(post_st[1].begin(), post_st[1].end(),
                                     [](int64_t s) { return s == 0; });
  const bool dense_block =
      inner == 1 || (post.size() == 1 && post_st[0][0] == 1);
  IndexError err;

  dispatch<IntTypes>(ind.dtype(), op_, [&](auto itag) {
    using I = typename decltype(itag)::type;
    dispatch_bytes(o.dtype(), [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      const T* ap = a.data<T>();
      const I* ip = ind.data<I>();
      T* op = o.data<T>();
      auto work = [&](int64_t b, int64_t e) {
        int64_t cur = -1, a_pre = 0, i_pre = 0;
        for (int64_t u = b; u < e; ++u) {
          int64_t oo = u / m;
          int64_t j = u - oo * m;
          if (oo != cur) {
            cur = oo;
            a_pre = i_pre = 0;
            int64_t r = oo;
            for (int d = static_cast<int>(pre.size()) - 1; d >= 0; --d) {
              int64_t k = r % pre[d];
              r /= pre[d];
              a_pre += k * pre_st[0][d];
              i_pre += k * pre_st[1][d];
            }
          }
          T* dst = op + u * inner;
          if (per_block) {
            I raw = ip[i_pre + j * i_ax];
            int64_t idx;
            if (!wrap_index(raw, n, idx)) {
              err.record(u * inner, raw);
              continue;
            }
            const T* src = ap + a_pre + idx * a_ax;
            if (inner == 1) {
              *dst = *src;
            } else if (dense_block) {
              std::memcpy(dst, src, inner * sizeof(T));
            } else {
              cpu::for_each_run<3>(post, post_st, 0, post_rows,
                                   [&](auto& off, int64_t cnt, auto& s) {
                                     for (int64_t k = 0; k < cnt; ++k) {
                                       dst[off[2] + k * s[2]] =
                                           src[off[0] + k * s[0]];
                                     }
                                   });
            }
          } else {
            const T* abase = ap + a_pre;
            const I* ibase = ip + i_pre + j * i_ax;
            cpu::for_each_run<3>(post, post_st, 0, post_rows,
                                 [&](auto& off, int64_t cnt, auto& s) {
                                   for (int64_t k = 0; k < cnt; ++k) {
                                     I raw = ibase[off[1] + k * s[1]];
                                     int64_t idx;
                                     if (!wrap_index(raw, n, idx)) {
                                       err.record(u * inner + off[2] + k * s[2],
                                                  raw);
                                       continue;
                                     }
                                     dst[off[2] + k * s[2]] =
                                         abase[idx * a_ax + off[0] + k * s[0]];
                                   }
                                 });
          }
        }
      };
      cpu::parallel_for(outer * m,
                        std::max<int64_t>(1, cpu::kElementwiseGrain /
                                                 std::max<int64_t>(inner, 1)),
                        work);
    });
  });
  err.throw_if_any(op_, ax, n);
}

// The output is a copy of `a` (or a's buffer, donated). Indices and values
// are made row-contiguous, so with the same (outer, m, inner) view as the
// gather their element (o, j, p) is at (o*m + j)*inner + p. Work is split
// over outer rows and chunks of the inner block, which write disjoint
// outputs; within a unit the indices are visited in order along the axis,
// so the last duplicate wins (or, adding, duplicates accumulate in a fixed
// order, which keeps float sums reproducible).
void ScatterAxis::eval_cpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  if (a.is_donatable()) {
    o.move_shared_buffer(a);
  } else {
    cpu::copy_to_row_contiguous(a, o);
  }
  if (in[1].size() == 0 || o.size() == 0) {
    return;
  }
  array ind = cpu::ensure_row_contiguous(in[1]);
  array vals = cpu::ensure_row_contiguous(in[2]);
  const int ax = axis_;
  const int64_t outer = product(o.shape(), 0, ax);
  const int64_t inner = product(o.shape(), ax + 1, o.ndim());
  const int64_t n = o.shape(ax);
  const int64_t m = ind.shape(ax);
  constexpr int64_t kChunk = 4096;
  const int64_t chunk =
      outer >= 4 * cpu::num_threads() ? inner : std::min(inner, kChunk);
  const int64_t nchunks = (inner + chunk - 1) / chunk;
  IndexError err;

  // `store(dst, v)` writes or accumulates one value.
  auto run = [&](auto itag, auto ttag, auto store) {
    using I = typename decltype(itag)::type;
    using T = typename decltype(ttag)::type;
    const I* ip = ind.data<I>();
    const T* vp = vals.data<T>();
    T* op = o.data<T>();
    auto work = [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        int64_t oo = u / nchunks;
        int64_t p0 = (u - oo * nchunks) * chunk;
        int64_t p1 = std::min(inner, p0 + chunk);
        T* orow = op + oo * n * inner;
        for (int64_t j = 0; j < m; ++j) {
          int64_t base = (oo * m + j) * inner;
          for (int64_t p = p0; p < p1; ++p) {
            I raw = ip[base + p];
            int64_t idx;
            if (!wrap_index(raw, n, idx)) {
              err.record(base + p, raw);
              continue;
            }
            store(orow[idx * inner + p], vp[base + p]);
          }
        }
      }
    };
    cpu::parallel_for(outer * nchunks,
                      std::max<int64_t>(1, cpu::kElementwiseGrain /
                                               std::max<int64_t>(m * chunk, 1)),
                      work);
  };

  dispatch<IntTypes>(ind.dtype(), op_, [&](auto itag) {
    if (reduce_ == None) {
      // Overwriting only moves bytes: one instantiation per width.
      dispatch_bytes(o.dtype(), [&](auto ttag) {
        run(itag, ttag, [](auto& dst, auto v) { dst = v; });
      });
      return;
    }
    dispatch_all(o.dtype(), [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      run(itag, ttag, [](T& dst, T v) {
        if constexpr (std::is_same_v<T, bool>) {
          dst = dst || v;  // NumPy's bool addition
        } else {
          // Half types add in float and round once per element.
          using M = opmath_t<T>;
          dst = static_cast<T>(static_cast<M>(dst) + static_cast<M>(v));
        }
      });
    });
  });
  err.throw_if_any(op_, ax, n);
}

}  // namespace fluxion
