// Gathers and scatters on the GPU: along one axis (take_along_axis,
// put_along_axis, scatter_add_axis) and over several axes with windows
// (Gather, Scatter: integer-array indexing). One thread per output element
// (gathers) or per update (scatters). A bad index cannot raise from a
// kernel: it is reported into the launch's fault slot (cuda.h,
// IndexFault) and raised when the stream's next host mark reads it, with
// the CPU's message. Scatters combine through atomics, so with duplicate
// indices `None` keeps the last update in index order (the CPU's rule,
// with a claiming pass) and float sums may round in any order.
#include <limits>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"

namespace fluxion {

namespace cu {

namespace {

// --- Atomic combination of one update into an output element -----------

template <typename T, typename F>
__device__ void atomic_apply(T* addr, F f) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    using W = std::conditional_t<sizeof(T) == 4, unsigned int,
                                 unsigned long long>;
    W* w = reinterpret_cast<W*>(addr);
    W old = *w, assumed;
    do {
      assumed = old;
      T cur;
      memcpy(&cur, &assumed, sizeof(T));
      T next = f(cur);
      W bits;
      memcpy(&bits, &next, sizeof(T));
      old = atomicCAS(w, assumed, bits);
    } while (assumed != old);
  } else {
    // 1- and 2-byte elements: CAS the aligned 32-bit word holding it.
    auto a = reinterpret_cast<uintptr_t>(addr);
    auto* w = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
    const int shift = static_cast<int>(a & 3) * 8;
    const unsigned int mask = ((1u << (8 * sizeof(T))) - 1u) << shift;
    unsigned int old = *w, assumed;
    do {
      assumed = old;
      unsigned int bits = (assumed & mask) >> shift;
      T cur;
      memcpy(&cur, &bits, sizeof(T));
      T next = f(cur);
      unsigned int nb = 0;
      memcpy(&nb, &next, sizeof(T));
      old = atomicCAS(w, assumed, (assumed & ~mask) | (nb << shift));
    } while (assumed != old);
  }
}

enum class Reduce { None, Sum, Prod, Max, Min };

template <typename T, Reduce R>
__device__ __forceinline__ T combine(T d, T v) {
  using C = compute_t<T>;
  if constexpr (math::is_same_v<T, bool>) {
    return R == Reduce::Sum || R == Reduce::Max ? (d || v) : (d && v);
  } else if constexpr (math::is_same_v<T, complex64_d>) {
    return R == Reduce::Sum ? d + v : d * v;
  } else if constexpr (R == Reduce::Sum) {
    return convert<T>(convert<C>(d) + convert<C>(v));
  } else if constexpr (R == Reduce::Prod) {
    return convert<T>(convert<C>(d) * convert<C>(v));
  } else {
    // NaN propagates, as in NumPy's maximum.at.
    C x = convert<C>(v), y = convert<C>(d);
    bool take = R == Reduce::Max ? (x > y || x != x) : (x < y || x != x);
    return take ? v : d;
  }
}

// Overwrites keep the CPU's rule, the last update in index order wins, in
// two passes over the updates: each claims its target element with
// atomicMax of its update number (in index order) into `winner`, then
// only the winner writes. Reductions combine in one pass (winner null).
template <Reduce R, typename T>
__device__ __forceinline__ void store(T* out, int64_t off, T v, int64_t e,
                                      int* winner, bool claim) {
  T* dst = out + off;
  if constexpr (R == Reduce::None) {
    if (claim) {
      atomicMax(winner + off, static_cast<int>(e));
    } else if (winner[off] == static_cast<int>(e)) {
      *dst = v;
    }
  } else if constexpr (R == Reduce::Sum &&
                       (math::is_same_v<T, float> ||
                        math::is_same_v<T, double> ||
                        math::is_same_v<T, __half> ||
                        math::is_same_v<T, __nv_bfloat16> ||
                        math::is_same_v<T, int32_t> ||
                        math::is_same_v<T, uint32_t>)) {
    atomicAdd(dst, v);
  } else if constexpr (R == Reduce::Sum && (math::is_same_v<T, int64_t> ||
                                            math::is_same_v<T, uint64_t>)) {
    // Two's complement: unsigned addition is signed addition.
    atomicAdd(reinterpret_cast<unsigned long long*>(dst),
              static_cast<unsigned long long>(v));
  } else if constexpr (R == Reduce::Sum &&
                       math::is_same_v<T, complex64_d>) {
    float* parts = reinterpret_cast<float*>(dst);  // {re, im}
    atomicAdd(parts, v.real());
    atomicAdd(parts + 1, v.imag());
  } else {
    atomic_apply(dst, [v](T d) { return combine<T, R>(d, v); });
  }
}

// --- Along one axis ----------------------------------------------------

// Output element i (row-major over the indices' shape): operand 0 of `l`
// walks a (its axis stride 0), operand 1 the indices.
template <typename T, typename I>
__global__ void gather_axis(const T* a, const I* ind, T* out, int64_t total,
                            Layout l, int64_t n, int64_t a_ax, int axis,
                            IndexFault* fault) {
  FLUXION_GRID_LOOP(i, total) {
    int64_t oa = 0, oi = 0, r = i;
    for (int d = l.ndim - 1; d >= 0; --d) {
      int64_t q = r % l.shape[d];
      r /= l.shape[d];
      oa += q * l.strides[0][d];
      oi += q * l.strides[1][d];
    }
    I raw = ind[oi];
    int64_t idx;
    if (!wrap_index(raw, n, idx)) {
      report_fault(fault, raw, axis, n);
      continue;
    }
    out[i] = a[oa + idx * a_ax];
  }
}

// Update i (row-major over the indices' shape): operand 0 walks the output
// (axis stride 0), 1 the indices, 2 the values.
template <Reduce R, typename T, typename I>
__global__ void scatter_axis(T* out, const I* ind, const T* vals,
                             int64_t total, Layout l, int64_t n, int64_t o_ax,
                             int axis, IndexFault* fault, int* winner,
                             bool claim) {
  FLUXION_GRID_LOOP(i, total) {
    int64_t oo = 0, oi = 0, ov = 0, r = i;
    for (int d = l.ndim - 1; d >= 0; --d) {
      int64_t q = r % l.shape[d];
      r /= l.shape[d];
      oo += q * l.strides[0][d];
      oi += q * l.strides[1][d];
      ov += q * l.strides[2][d];
    }
    I raw = ind[oi];
    int64_t idx;
    if (!wrap_index(raw, n, idx)) {
      report_fault(fault, raw, axis, n);
      continue;
    }
    store<R>(out, oo + idx * o_ax, vals[ov], i, winner, claim);
  }
}

// The layout of an along-axis kernel: `shape` (the indices') with the
// strides of `first` (its axis stride zeroed: the index supplies it) and
// of the others.
Layout axis_layout(const Shape& shape, Strides first, int axis,
                   std::vector<Strides> rest, const char* op) {
  first[axis] = 0;
  rest.insert(rest.begin(), std::move(first));
  return collapse(shape, rest, op);
}

// --- Over several axes, with windows -----------------------------------

constexpr int kMaxIndices = kMaxDims;

// The index arrays of a Gather/Scatter over their (broadcast) shape B:
// row r's window starts at sum_i wrap(idx_i[r]) * stride_i.
struct Indices {
  int k = 0, nb = 0;
  int64_t B[kMaxDims];
  int64_t st[kMaxIndices][kMaxDims];
  const void* p[kMaxIndices];
  int64_t n[kMaxIndices], size[kMaxIndices], stride[kMaxIndices];
  int axis[kMaxIndices];
};

// The offset of row `row`'s window, or -1 (reported) when an index is out
// of range for its window.
template <typename I>
__device__ int64_t window_base(const Indices& ix, int64_t row,
                               IndexFault* fault) {
  int64_t base = 0;
  for (int i = 0; i < ix.k; ++i) {
    int64_t off = 0, r = row;
    for (int d = ix.nb - 1; d >= 0; --d) {
      off += (r % ix.B[d]) * ix.st[i][d];
      r /= ix.B[d];
    }
    I raw = static_cast<const I*>(ix.p[i])[off];
    // Negative indices wrap once by the axis length; the window must fit.
    const int64_t last = ix.n[i] - ix.size[i];
    int64_t v = static_cast<int64_t>(raw);
    bool ok;
    if constexpr (I(-1) < I(0)) {
      v += v < 0 ? ix.n[i] : 0;
      ok = v >= 0 && v <= last;
    } else {
      ok = last >= 0 &&
           static_cast<uint64_t>(raw) <= static_cast<uint64_t>(last);
    }
    if (!ok) {
      report_fault(fault, raw, ix.axis[i], ix.n[i], ix.size[i]);
      return -1;
    }
    base += v * ix.stride[i];
  }
  return base;
}

// Element e = row * S + w: window element w of a (operand 0 of `win`: a's
// strides over the slice sizes).
template <typename T, typename I>
__global__ void gather_windows(const T* a, T* out, int64_t total, int64_t S,
                               Indices ix, Layout win, IndexFault* fault) {
  FLUXION_GRID_LOOP(e, total) {
    int64_t base = window_base<I>(ix, e / S, fault);
    if (base >= 0) {
      out[e] = a[base + offset_of(win, 0, e % S)];
    }
  }
}

// Update e = row * S + w (updates row-contiguous): into window element w
// of the output (operand 0 of `win`: its strides over U).
template <Reduce R, typename T, typename I>
__global__ void scatter_windows(T* out, const T* upd, int64_t total,
                                int64_t S, Indices ix, Layout win,
                                IndexFault* fault, int* winner, bool claim) {
  FLUXION_GRID_LOOP(e, total) {
    int64_t base = window_base<I>(ix, e / S, fault);
    if (base >= 0) {
      store<R>(out, base + offset_of(win, 0, e % S), upd[e], e, winner,
               claim);
    }
  }
}

Indices make_indices(const std::vector<array>& idx, const std::vector<int>& axes,
                     const Shape& B, const array& target, const Shape& window,
                     const Strides& target_strides, const char* op) {
  if (idx.size() > static_cast<size_t>(kMaxIndices) ||
      B.size() > static_cast<size_t>(kMaxDims)) {
    throw std::invalid_argument(std::string("[") + op + "] More than " +
                                std::to_string(kMaxDims) +
                                " index arrays or index dimensions are not "
                                "supported on the gpu yet.");
  }
  Indices ix;
  ix.k = static_cast<int>(idx.size());
  ix.nb = static_cast<int>(B.size());
  for (int d = 0; d < ix.nb; ++d) {
    ix.B[d] = B[d];
  }
  for (int i = 0; i < ix.k; ++i) {
    ix.p[i] = ptr<const void>(idx[i]);
    for (int d = 0; d < ix.nb; ++d) {
      ix.st[i][d] = idx[i].shape(d) == 1 ? 0 : idx[i].strides()[d];
    }
    ix.axis[i] = axes[i];
    ix.n[i] = target.shape(axes[i]);
    ix.size[i] = window[axes[i]];
    ix.stride[i] = target_strides[axes[i]];
  }
  return ix;
}

Strides row_strides(const Shape& s) {
  Strides st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) {
    st[d] = st[d + 1] * s[d + 1];
  }
  return st;
}

// Calls f(reduce constant) for a Scatter/ScatterAxis reduction.
template <typename F>
void dispatch_reduce(Reduce r, F&& f) {
  switch (r) {
    case Reduce::None:
      return f(std::integral_constant<Reduce, Reduce::None>{});
    case Reduce::Sum:
      return f(std::integral_constant<Reduce, Reduce::Sum>{});
    case Reduce::Prod:
      return f(std::integral_constant<Reduce, Reduce::Prod>{});
    case Reduce::Max:
      return f(std::integral_constant<Reduce, Reduce::Max>{});
    default:
      return f(std::integral_constant<Reduce, Reduce::Min>{});
  }
}

// Element types of a scatter: bytes for an overwrite, the dtype for a
// reduction (complex64 has no order: max/min refuse it).
template <typename F>
void dispatch_scatter(Dtype t, Reduce r, const char* op, F&& f) {
  if (r == Reduce::None) {
    dispatch_bytes(t, [&](auto tag) { f(tag); });
    return;
  }
  if (t == complex64 && (r == Reduce::Max || r == Reduce::Min)) {
    throw std::invalid_argument(std::string("[") + op +
                                "] complex64 arrays have no order.");
  }
  dispatch_gpu<AllTypes>(t, op, [&](auto tag) { f(tag); });
}

// Runs `launch(winner, claim)`: once for a reduction, twice (claim, then
// write) for an overwrite, with a winner per output element (-1: none).
template <typename F>
void scatter_passes(Reduce r, const array& o, int64_t updates, const char* op,
                    F&& launch) {
  if (r != Reduce::None) {
    launch(static_cast<int*>(nullptr), false);
    return;
  }
  if (updates > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(std::string("[") + op + "] More than 2^31 "
                                "updates are not supported on the gpu yet.");
  }
  array winner(Shape{static_cast<int32_t>(1)}, int32, nullptr, {});
  winner.set_data(o.size() * sizeof(int), Device{Device::gpu});
  keep_alive(winner);
  int* w = ptr<int>(winner);
  check(cudaMemsetAsync(w, 0xff, o.size() * sizeof(int), current_stream()),
        op);
  launch(w, true);
  launch(w, false);
}

// The output of a scatter starts as a's values: its buffer donated, or a
// row-contiguous copy.
void scatter_output(const array& a, array& o) {
  if (donatable(a) && a.flags().row_contiguous) {
    o.move_shared_buffer(a);
  } else {
    copy_general(a, o);
  }
}

}  // namespace

}  // namespace cu

using namespace cu;

void GatherAxis::eval_gpu(const std::vector<array>& in,
                          std::vector<array>& out) {
  const array& a = in[0];
  const array& ind = in[1];
  array& o = out[0];
  alloc(o);
  const int64_t total = o.size();
  if (total == 0) {
    return;
  }
  const int ax = axis_;
  Layout l = axis_layout(ind.shape(), a.strides(), ax, {ind.strides()}, op_);
  IndexFault* fault = index_fault(op_);
  cudaStream_t s = current_stream();
  dispatch<IntTypes>(ind.dtype(), op_, [&](auto itag) {
    using I = typename decltype(itag)::type;
    dispatch_bytes(o.dtype(), [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      gather_axis<<<blocks_for(total, 4), kThreads, 0, s>>>(
          ptr<const T>(a), ptr<const I>(ind), ptr<T>(o), total, l,
          a.shape(ax), a.strides()[ax], ax, fault);
    });
  });
  check_launch(op_);
}

void ScatterAxis::eval_gpu(const std::vector<array>& in,
                           std::vector<array>& out) {
  const array& ind = in[1];
  const array& vals = in[2];
  array& o = out[0];
  scatter_output(in[0], o);
  const int64_t total = ind.size();
  if (total == 0 || o.size() == 0) {
    return;
  }
  const int ax = axis_;
  Layout l = axis_layout(ind.shape(), o.strides(), ax,
                         {ind.strides(), vals.strides()}, op_);
  IndexFault* fault = index_fault(op_);
  cudaStream_t s = current_stream();
  Reduce r = reduce_ == Sum ? Reduce::Sum : Reduce::None;
  dispatch<IntTypes>(ind.dtype(), op_, [&](auto itag) {
    using I = typename decltype(itag)::type;
    dispatch_scatter(o.dtype(), r, op_, [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      dispatch_reduce(r, [&](auto rc) {
        scatter_passes(r, o, total, op_, [&](int* winner, bool claim) {
          scatter_axis<decltype(rc)::value>
              <<<blocks_for(total, 4), kThreads, 0, s>>>(
                  ptr<T>(o), ptr<const I>(ind), ptr<const T>(vals), total, l,
                  o.shape(ax), o.strides()[ax], ax, fault, winner, claim);
        });
      });
    });
  });
  check_launch(op_);
}

void Gather::eval_gpu(const std::vector<array>& in, std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  alloc(o);
  if (o.size() == 0) {
    return;
  }
  std::vector<array> idx(in.begin() + 1, in.end());
  int64_t S = 1;
  for (auto d : slice_sizes_) {
    S *= d;
  }
  const int64_t total = o.size();
  Shape B = idx.empty() ? Shape{} : idx[0].shape();
  Indices ix = make_indices(idx, axes_, B, a, slice_sizes_, a.strides(),
                            "gather");
  Layout win = collapse(slice_sizes_, {a.strides()}, "gather");
  IndexFault* fault = index_fault("gather");
  cudaStream_t s = current_stream();
  dispatch<IntTypes>(idx.empty() ? int32 : idx[0].dtype(), "gather",
                     [&](auto itag) {
    using I = typename decltype(itag)::type;
    dispatch_bytes(o.dtype(), [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      gather_windows<T, I><<<blocks_for(total, 4), kThreads, 0, s>>>(
          ptr<const T>(a), ptr<T>(o), total, S, ix, win, fault);
    });
  });
  check_launch("gather");
}

void Scatter::eval_gpu(const std::vector<array>& in,
                       std::vector<array>& out) {
  const array& a = in[0];
  array& o = out[0];
  scatter_output(a, o);
  const size_t k = axes_.size();
  std::vector<array> idx(in.begin() + 1, in.begin() + 1 + k);
  array upd = contiguous(in[k + 1]);
  const int nb = upd.ndim() - a.ndim();
  Shape B(upd.shape().begin(), upd.shape().begin() + nb);
  Shape U(upd.shape().begin() + nb, upd.shape().end());
  int64_t S = 1;
  for (auto d : U) {
    S *= d;
  }
  const int64_t total = upd.size();
  if (total == 0) {
    return;
  }
  const char* op = op_name();
  const Strides ost = row_strides(o.shape());
  Indices ix = make_indices(idx, axes_, B, o, U, ost, op);
  Layout win = collapse(U, {ost}, op);
  IndexFault* fault = index_fault(op);
  cudaStream_t s = current_stream();
  Reduce r = static_cast<Reduce>(reduce_);
  dispatch<IntTypes>(idx.empty() ? int32 : idx[0].dtype(), op,
                     [&](auto itag) {
    using I = typename decltype(itag)::type;
    dispatch_scatter(o.dtype(), r, op, [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      dispatch_reduce(r, [&](auto rc) {
        scatter_passes(r, o, total, op, [&](int* winner, bool claim) {
          scatter_windows<decltype(rc)::value, T, I>
              <<<blocks_for(total, 4), kThreads, 0, s>>>(
                  ptr<T>(o), ptr<const T>(upd), total, S, ix, win, fault,
                  winner, claim);
        });
      });
    });
  });
  check_launch(op);
}

}  // namespace fluxion
