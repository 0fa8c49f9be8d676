// Sort, ArgSort, Partition and ArgPartition on the GPU, along any axis of
// any layout, for every dtype the CPU sorts (backend/cpu/sort.cpp).
//
// Every value becomes an unsigned radix key (SortKey) ordered as the CPU's
// comparison orders the values: NaNs after everything (all NaNs one key,
// so they tie), complex lexicographic. Ties must keep index order (argsort
// is stable, the CPU breaks ties by index), so argsort keys map -0.0 and
// +0.0 to one key; radix sorts are stable, which does the rest.
//
// Rows of up to kBlockMax elements: one block per row sorts (key, index)
// pairs in shared memory (cub::BlockRadixSort), reading the row through
// its strides and writing the indices or the values they pick. Longer
// rows: keys (and indices) are written to scratch in row order, CUB's
// device radix sort (one row) or segmented radix sort (several rows)
// orders them, and a last kernel writes them through the output's strides.
//
// Partition and ArgPartition are a full sort: a sorted row is a valid
// partition around every kth, and it is the one the CPU's ties-by-index
// order would give for the kth element itself (the op table compares the
// kth element and the sorted row, never the order of the sides).
#include <algorithm>
#include <climits>
#include <cub/block/block_exchange.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <limits>

#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/sort.h"

namespace fluxion {

namespace {

using cu::Layout;

// What a kernel writes for each sorted position.
enum class Emit {
  Indices,  // the uint32 index (ArgSort, ArgPartition)
  Gather,   // the input's value at that index (Partition, short Sort)
  Keys,     // the value decoded from the sorted key (long Sort, real types)
};

// --- Keys ---------------------------------------------------------------

template <typename U, typename F>
__device__ __forceinline__ U float_key(F bits_in, bool nan, bool canon_zero) {
  // Sign set: flip every bit (more negative, smaller key); else flip the
  // sign bit. NaN (any sign, any payload): the largest key. canon_zero
  // makes -0.0 the key of +0.0 (argsort: they tie, as `<` says).
  constexpr U sign = U(1) << (8 * sizeof(U) - 1);
  U u = static_cast<U>(bits_in);
  if (nan) {
    return static_cast<U>(~U(0));
  }
  if (canon_zero && (u & U(~sign)) == 0) {
    u = 0;
  }
  return (u & sign) ? static_cast<U>(~u) : static_cast<U>(u | sign);
}
template <typename U>
__device__ __forceinline__ U float_unkey(U k) {
  constexpr U sign = U(1) << (8 * sizeof(U) - 1);
  // The NaN key (all ones) decodes to a quiet NaN (0x7f..f).
  return (k & sign) ? static_cast<U>(k ^ sign) : static_cast<U>(~k);
}

// SortKey<T>: U (the key type), bits (significant low bits), key(x, canon)
// and, for real types, value(k) (key(x, false) decoded).
template <typename T>
struct SortKey;

template <>
struct SortKey<bool> {
  using U = uint8_t;
  static constexpr int bits = 1;
  __device__ static U key(bool x, bool) { return x ? 1 : 0; }
  __device__ static bool value(U k) { return k != 0; }
};

template <typename T>
struct IntKey {
  using U = math::make_unsigned_t<T>;
  static constexpr int bits = 8 * sizeof(T);
  static constexpr U flip = (T(-1) < T(0)) ? U(U(1) << (bits - 1)) : U(0);
  __device__ static U key(T x, bool) { return static_cast<U>(U(x) ^ flip); }
  __device__ static T value(U k) { return static_cast<T>(U(k ^ flip)); }
};
template <>
struct SortKey<uint8_t> : IntKey<uint8_t> {};
template <>
struct SortKey<uint16_t> : IntKey<uint16_t> {};
template <>
struct SortKey<uint32_t> : IntKey<uint32_t> {};
template <>
struct SortKey<uint64_t> : IntKey<uint64_t> {};
template <>
struct SortKey<int8_t> : IntKey<int8_t> {};
template <>
struct SortKey<int16_t> : IntKey<int16_t> {};
template <>
struct SortKey<int32_t> : IntKey<int32_t> {};
template <>
struct SortKey<int64_t> : IntKey<int64_t> {};

template <>
struct SortKey<float> {
  using U = uint32_t;
  static constexpr int bits = 32;
  __device__ static U key(float x, bool canon) {
    return float_key<U>(__float_as_uint(x), x != x, canon);
  }
  __device__ static float value(U k) { return __uint_as_float(float_unkey(k)); }
};
template <>
struct SortKey<double> {
  using U = uint64_t;
  static constexpr int bits = 64;
  __device__ static U key(double x, bool canon) {
    return float_key<U>(__double_as_longlong(x), x != x, canon);
  }
  __device__ static double value(U k) {
    return __longlong_as_double(static_cast<long long>(float_unkey(k)));
  }
};
// The half types sort on their own 16 bits: the order is float's (the
// CPU sorts them as floats), with half the radix passes.
template <>
struct SortKey<__half> {
  using U = uint16_t;
  static constexpr int bits = 16;
  __device__ static U key(__half x, bool canon) {
    U b = __half_as_ushort(x);
    return float_key<U>(b, (b & 0x7fff) > 0x7c00, canon);
  }
  __device__ static __half value(U k) {
    return __ushort_as_half(float_unkey(k));
  }
};
template <>
struct SortKey<__nv_bfloat16> {
  using U = uint16_t;
  static constexpr int bits = 16;
  __device__ static U key(__nv_bfloat16 x, bool canon) {
    U b = __bfloat16_as_ushort(x);
    return float_key<U>(b, (b & 0x7fff) > 0x7f80, canon);
  }
  __device__ static __nv_bfloat16 value(U k) {
    return __ushort_as_bfloat16(float_unkey(k));
  }
};
// complex64: the real part's key above the imaginary part's (lexicographic,
// as the CPU's less_than), both with -0.0 == +0.0 since `<` ties them; a
// NaN in either part: the largest key (the CPU's NaNs-last rule). Sorted
// values are always gathered (no value()).
template <>
struct SortKey<cu::complex64_d> {
  using U = uint64_t;
  static constexpr int bits = 64;
  __device__ static U key(cu::complex64_d x, bool) {
    float re = x.real(), im = x.imag();
    if (re != re || im != im) {
      return ~U(0);
    }
    U hi = float_key<uint32_t>(__float_as_uint(re), false, true);
    U lo = float_key<uint32_t>(__float_as_uint(im), false, true);
    return (hi << 32) | lo;
  }
};

// Real types decode a sorted key back to its value (complex64 does not).
template <typename T>
concept Decodable = requires(typename SortKey<T>::U k) {
  SortKey<T>::value(k);
};

// --- Rows -----------------------------------------------------------------

// The rows of `in` along `axis`: the other dims (collapsed) with the
// input's strides (operand 0) and the output's (operand 1); an element
// (r, i) sits at offset_of(rows, k, r) + i * ax[k].
struct Rows {
  Layout rows;
  int64_t count = 0;  // number of rows
  int64_t n = 0;      // row length
  int64_t in_ax = 0, out_ax = 0;
};

Rows rows_of(const array& in, const array& out, int axis) {
  Rows r;
  Shape s;
  Strides si, so;
  r.count = 1;
  for (int d = 0; d < in.ndim(); ++d) {
    if (d != axis) {
      s.push_back(in.shape(d));
      si.push_back(in.strides()[d]);
      so.push_back(out.strides()[d]);
      r.count *= in.shape(d);
    }
  }
  r.rows = cu::collapse(s, {si, so}, "sort");
  r.n = in.shape(axis);
  r.in_ax = in.strides()[axis];
  r.out_ax = out.strides()[axis];
  return r;
}

template <typename T>
__device__ __forceinline__ void emit(Emit how, const T* x, void* y, int64_t xin,
                                     int64_t yo, int64_t in_ax, uint32_t idx) {
  if (how == Emit::Indices) {
    static_cast<uint32_t*>(y)[yo] = idx;
  } else {
    static_cast<T*>(y)[yo] = x[xin + int64_t(idx) * in_ax];
  }
}

// --- Short rows: one block per row ---------------------------------------

constexpr int kBlockMax = 4096;

// A row of n <= THREADS * IPT elements: keys read striped (coalesced when
// the axis is contiguous), exchanged to the blocked arrangement the sort
// takes (position t * IPT + j, which is the index it carries, so ties keep
// index order), sorted, and written back striped. Positions past n get the
// largest key and sort after the row's NaNs (stable: they come last).
template <typename T, int THREADS, int IPT>
__global__ void __launch_bounds__(THREADS)
    block_sort(const T* x, void* y, int64_t rows, int n, Layout rl,
               int64_t in_ax, int64_t out_ax, Emit how) {
  using K = SortKey<T>;
  using U = typename K::U;
  using Sorter = cub::BlockRadixSort<U, THREADS, IPT, uint32_t>;
  using Exchange = cub::BlockExchange<U, THREADS, IPT>;
  __shared__ union {
    typename Sorter::TempStorage sort;
    typename Exchange::TempStorage exchange;
  } smem;
  const int t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t xin = cu::offset_of(rl, 0, r);
    const int64_t yo = cu::offset_of(rl, 1, r);
    U keys[IPT];
    uint32_t idx[IPT];
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const int i = j * THREADS + t;
      keys[j] = i < n ? K::key(x[xin + i * in_ax], true) : U(~U(0));
    }
    Exchange(smem.exchange).StripedToBlocked(keys);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      idx[j] = static_cast<uint32_t>(t * IPT + j);
    }
    Sorter(smem.sort).SortBlockedToStriped(keys, idx, 0, K::bits);
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const int i = j * THREADS + t;
      if (i < n) {
        emit(how, x, y, xin, yo + i * out_ax, in_ax, idx[j]);
      }
    }
    __syncthreads();  // smem is reused by the block's next row
  }
}

template <typename T, int THREADS, int IPT>
void launch_block_sort(const T* x, void* y, const Rows& r, Emit how,
                       cudaStream_t s) {
  const unsigned grid =
      static_cast<unsigned>(std::min<int64_t>(r.count, 1 << 30));
  block_sort<T, THREADS, IPT><<<grid, THREADS, 0, s>>>(
      x, y, r.count, static_cast<int>(r.n), r.rows, r.in_ax, r.out_ax, how);
}

// --- Long rows: CUB over scratch keys -------------------------------------

// keys[e] (and idx[e]) of element e = r * n + i.
template <typename T, typename U>
__global__ void make_keys(const T* x, U* keys, uint32_t* idx, int64_t total,
                          int64_t n, Layout rl, int64_t in_ax, bool canon) {
  FLUXION_GRID_LOOP(e, total) {
    const int64_t r = e / n, i = e % n;
    keys[e] = SortKey<T>::key(x[cu::offset_of(rl, 0, r) + i * in_ax], canon);
    if (idx != nullptr) {
      idx[e] = static_cast<uint32_t>(i);
    }
  }
}

template <typename T, typename U>
__global__ void write_sorted(const T* x, void* y, const U* keys,
                             const uint32_t* idx, int64_t total, int64_t n,
                             Layout rl, int64_t in_ax, int64_t out_ax,
                             Emit how) {
  FLUXION_GRID_LOOP(e, total) {
    const int64_t r = e / n, i = e % n;
    const int64_t yo = cu::offset_of(rl, 1, r) + i * out_ax;
    if constexpr (Decodable<T>) {
      if (how == Emit::Keys) {
        static_cast<T*>(y)[yo] = SortKey<T>::value(keys[e]);
        continue;
      }
    }
    emit(how, x, y, cu::offset_of(rl, 0, r), yo, in_ax, idx[e]);
  }
}

__global__ void segment_offsets(int* off, int64_t count, int64_t n) {
  FLUXION_GRID_LOOP(r, count + 1) { off[r] = static_cast<int>(r * n); }
}

// GPU scratch from Fluxion's allocator (a Data block: an array's Shape
// would cap it at 2^31 bytes), kept alive by the caller after its last
// launch until the stream has run them.
using Scratch = std::shared_ptr<Data>;
Scratch scratch(size_t bytes) {
  return std::make_shared<Data>(std::max<size_t>(bytes, 1),
                                Device{Device::gpu});
}

template <typename T>
void device_sort(const T* x, void* y, const Rows& r, Emit how, cudaStream_t s) {
  using K = SortKey<T>;
  using U = typename K::U;
  const int64_t total = r.count * r.n;
  const bool pairs = how != Emit::Keys;
  // Two buffers each for keys and indices: CUB's double-buffer mode
  // ping-pongs between them (less scratch than separate outputs).
  Scratch kbuf = scratch(2 * total * sizeof(U));
  U* k0 = static_cast<U*>(kbuf->ptr());
  U* k1 = k0 + total;
  Scratch ibuf = scratch(pairs ? 2 * total * sizeof(uint32_t) : 1);
  uint32_t* i0 = pairs ? static_cast<uint32_t*>(ibuf->ptr()) : nullptr;
  uint32_t* i1 = pairs ? i0 + total : nullptr;
  make_keys<<<cu::blocks_for(total, 4), cu::kThreads, 0, s>>>(
      x, k0, i0, total, r.n, r.rows, r.in_ax, /*canon=*/pairs);
  cu::check_launch("sort");
  cub::DoubleBuffer<U> keys(k0, k1);
  cub::DoubleBuffer<uint32_t> vals(i0, i1);
  std::vector<Scratch> temps;
  // CUB's calls return errors rather than raising: checked like launches.
  auto run = [&](auto&& call) {
    size_t bytes = 0;
    cu::check(call(nullptr, bytes), "sort");
    temps.push_back(scratch(bytes));
    cu::check(call(temps.back()->ptr(), bytes), "sort");
    cu::check_launch("sort");
  };
  if (r.count == 1) {
    run([&](void* tmp, size_t& bytes) {
      return pairs ? cub::DeviceRadixSort::SortPairs(tmp, bytes, keys, vals,
                                                     total, 0, K::bits, s)
                   : cub::DeviceRadixSort::SortKeys(tmp, bytes, keys, total, 0,
                                                    K::bits, s);
    });
  } else {
    // The segmented sort counts items in int: groups of rows of at most
    // INT_MAX elements, sharing one offsets table (rows are equal).
    const int64_t group = std::min<int64_t>(r.count, INT_MAX / r.n);
    Scratch offs = scratch((group + 1) * sizeof(int));
    int* off = static_cast<int*>(offs->ptr());
    segment_offsets<<<cu::blocks_for(group + 1), cu::kThreads, 0, s>>>(
        off, group, r.n);
    cu::check_launch("sort");
    temps.push_back(offs);
    int first_k = 0, first_v = 0;
    for (int64_t g0 = 0; g0 < r.count; g0 += group) {
      const int64_t g = std::min(group, r.count - g0);
      const int64_t base = g0 * r.n;
      // Each group sorts its part of both buffers of the pair.
      cub::DoubleBuffer<U> gk(keys.Current() + base, keys.Alternate() + base);
      cub::DoubleBuffer<uint32_t> gv(pairs ? vals.Current() + base : nullptr,
                                     pairs ? vals.Alternate() + base : nullptr);
      const int items = static_cast<int>(g * r.n);
      const int segs = static_cast<int>(g);
      run([&](void* tmp, size_t& bytes) {
        return pairs ? cub::DeviceSegmentedRadixSort::SortPairs(
                           tmp, bytes, gk, gv, items, segs, off, off + 1, 0,
                           K::bits, s)
                     : cub::DeviceSegmentedRadixSort::SortKeys(
                           tmp, bytes, gk, items, segs, off, off + 1, 0,
                           K::bits, s);
      });
      // Groups make the same passes, so their results land in the same
      // buffer; should one not, its part is copied where the first's is.
      if (g0 == 0) {
        first_k = gk.selector;
        first_v = gv.selector;
      }
      if (gk.selector != first_k) {
        cu::check(
            cudaMemcpyAsync(gk.Alternate(), gk.Current(), g * r.n * sizeof(U),
                            cudaMemcpyDeviceToDevice, s),
            "sort");
      }
      if (pairs && gv.selector != first_v) {
        cu::check(cudaMemcpyAsync(gv.Alternate(), gv.Current(),
                                  g * r.n * sizeof(uint32_t),
                                  cudaMemcpyDeviceToDevice, s),
                  "sort");
      }
    }
    keys.selector = first_k;
    vals.selector = first_v;
  }
  write_sorted<<<cu::blocks_for(total, 4), cu::kThreads, 0, s>>>(
      x, y, keys.Current(), pairs ? vals.Current() : nullptr, total, r.n,
      r.rows, r.in_ax, r.out_ax, how);
  cu::check_launch("sort");
  cu::keep_alive(kbuf);
  cu::keep_alive(ibuf);
  for (auto& a : temps) {
    cu::keep_alive(a);
  }
}

// Sorts `in` along `axis` into `out` (allocated here); `values` says
// whether out takes the values (Sort, Partition) or the indices.
void sort_gpu(const array& in, array& out, int axis, bool values, bool partial,
              const char* op) {
  cu::alloc(out);
  if (out.size() == 0) {
    return;
  }
  const Rows r = rows_of(in, out, axis);
  if (r.n > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument(std::string("[") + op +
                                "] rows longer than 2^32 elements are not "
                                "supported on the gpu yet.");
  }
  cudaStream_t s = cu::current_stream();
  cu::dispatch_gpu<AllTypes>(in.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = cu::ptr<const T>(in);
    void* y = values ? static_cast<void*>(cu::ptr<T>(out))
                     : static_cast<void*>(cu::ptr<uint32_t>(out));
    Emit how = values ? Emit::Gather : Emit::Indices;
    if (r.n <= 128) {
      launch_block_sort<T, 32, 4>(x, y, r, how, s);
    } else if (r.n <= 1024) {
      launch_block_sort<T, 128, 8>(x, y, r, how, s);
    } else if (r.n <= kBlockMax) {
      launch_block_sort<T, 512, 8>(x, y, r, how, s);
    } else {
      // A full Sort of a real type sorts keys alone and decodes them
      // (half the bytes moved); everything else carries indices.
      if constexpr (Decodable<T>) {
        if (values && !partial) {
          how = Emit::Keys;
        }
      }
      device_sort<T>(x, y, r, how, s);
      return;
    }
    cu::check_launch(op);
  });
}

}  // namespace

void Sort::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  sort_gpu(inputs[0], outputs[0], axis_, true, false, "sort");
}

void ArgSort::eval_gpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  sort_gpu(inputs[0], outputs[0], axis_, false, false, "argsort");
}

// A full sort is a valid partition (see the top of the file).
void Partition::eval_gpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  sort_gpu(inputs[0], outputs[0], axis_, true, true, "partition");
}

void ArgPartition::eval_gpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  sort_gpu(inputs[0], outputs[0], axis_, false, true, "argpartition");
}

}  // namespace fluxion
