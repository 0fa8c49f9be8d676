// Scan (cumsum, cumprod, cummax, cummin, logcumsumexp) on the GPU, with
// the CPU's types (backend/cpu/sort.cpp, scan_kernel): sums and products
// in sum_dtype (bool, int8, int16 -> int32; uint8, uint16 -> uint32), max
// and min in the input's type, logcumsumexp for the inexact types; half
// types accumulate in float and round each output once; the combine
// functors are the shared ones (backend/common/reduce_ops.h), always
// applied as op(earlier, later) in scan order, as the CPU's running
// accumulator does, so max/min pick the same tied element and integer
// results are bit-identical (float sums and products are reassociated:
// they round differently from the CPU's sequential loop).
//
// The input is made row-contiguous and seen as (outer, n, inner), the
// axis in the middle; the output is row-contiguous in the same layout.
//  - inner == 1 (the axis is last): rows. One block per row sweeps it in
//    tiles (cub::BlockScan over per-thread partial scans), carrying the
//    running value from tile to tile; 32-thread blocks for rows of up to
//    128. A few very long rows (one 256M cumsum) instead go through a
//    single-pass scan with decoupled look-back: for 4-byte accumulators
//    of sum, product, max and min, Fluxion's own (scan_tiles.cuh, all
//    rows in one launch) reading and writing packs of 4 elements where
//    rows allow; else CUB's on raw pointers for a forward inclusive scan
//    in the input's own type (it beat the unpacked kernel on the H200:
//    2.27 against 2.01 TB/s for a 256M float32 cumsum); else the
//    unpacked kernel; else CUB through index-mapping iterators, one call
//    per row.
//  - inner > 1: one thread per column (o, j), consecutive threads on
//    consecutive memory. With few columns and a long axis that leaves the
//    GPU idle, the input is transposed so the axis is last, scanned as
//    rows, and transposed back into the output.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/permutation_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "fluxion/backend/common/reduce_ops.h"
#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/scan_tiles.cuh"
#include "fluxion/ops/sort.h"

namespace fluxion {

namespace {

// The combine functor as CUB calls it (any two M, one M back).
template <typename M, typename Op>
struct Combine {
  __device__ __forceinline__ M operator()(const M& a, const M& b) const {
    return Op{}(a, b);
  }
};

// --- Rows: one block per row -----------------------------------------------

// Row r of x (n elements from r * n) scanned into y, in tiles of
// THREADS * IPT: a striped load (coalesced, forwards or backwards) into
// shared memory in scan order, a sequential scan of each thread's IPT
// consecutive elements, a block-wide exclusive scan of the threads'
// totals, then the carry from the tiles before.
template <typename In, typename Out, typename M, typename Op, int THREADS,
          int IPT>
__global__ void __launch_bounds__(THREADS)
    scan_rows(const In* x, Out* y, int64_t rows, int64_t n, bool reverse,
              bool inclusive) {
  constexpr int kTile = THREADS * IPT;
  using BlockScan = cub::BlockScan<M, THREADS>;
  __shared__ typename BlockScan::TempStorage scan_tmp;
  FLUXION_SHARED_ARRAY(M, buf, kTile + kTile / 32);
  Combine<M, Op> op;
  const int t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const In* xr = x + r * n;
    Out* yr = y + r * n;
    M carry = Op::init();
    for (int64_t base = 0; base < n; base += kTile) {
      M v[IPT];
      scan_tiles::load_scanned<THREADS, IPT, Op>(xr, n, base, reverse, buf, v,
                                                 op);
      M before, total;
      BlockScan(scan_tmp).ExclusiveScan(v[IPT - 1], before, op, total);
      // Thread 0's `before` is undefined (no initial value): the carry.
      const M prefix = t == 0 ? carry : op(carry, before);
      M o[IPT];
      scan_tiles::outputs<IPT, Op>(v, prefix, true, inclusive, o, op);
      scan_tiles::store_tile<THREADS, IPT>(yr, n, base, reverse, buf, o);
      carry = op(carry, total);
      __syncthreads();  // buf and scan_tmp are reused by the next tile
    }
  }
}

// --- Columns: one thread per (outer, inner) column --------------------------

template <typename In, typename Out, typename M, typename Op>
__global__ void scan_cols(const In* x, Out* y, int64_t outer, int64_t n,
                          int64_t inner, bool reverse, bool inclusive) {
  Op op;
  FLUXION_GRID_LOOP(c, outer * inner) {
    const int64_t o = c / inner, j = c % inner;
    const int64_t base = o * n * inner + j;
    M acc = Op::init();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t off = base + (reverse ? n - 1 - i : i) * inner;
      const M v = cu::convert<M>(x[off]);
      if (inclusive) {
        acc = op(acc, v);
        y[off] = cu::convert<Out>(acc);
      } else {
        y[off] = cu::convert<Out>(acc);
        acc = op(acc, v);
      }
    }
  }
}

// --- A few very long rows: single-pass scans -------------------------------

template <typename Op>
struct IsLogAddExp : std::false_type {};
template <typename M>
struct IsLogAddExp<detail::LogAddExpOp<M>> : std::true_type {};

// Fluxion's own look-back scans (scan_tiles.cuh) for 4-byte accumulators
// of sum, product, max and min, all rows in one launch: packed_scan when
// rows of a multiple of 4 elements start on 4-element boundaries (every
// row of an aligned buffer then does), else lookback_scan when `unpacked`
// asks for it; false when neither ran. FLUXION_SCAN_CUB=1 turns the
// packed kernel off, for measuring it against CUB's scan in one process.
template <typename In, typename Out, typename M, typename Op>
bool lookback_rows(const In* x, Out* y, int64_t rows, int64_t n, bool reverse,
                   bool inclusive, bool unpacked, cudaStream_t s) {
  if constexpr (sizeof(M) != 4 || IsLogAddExp<Op>::value) {
    return false;
  } else {
    using namespace scan_tiles;
    static const bool packed_off = [] {
      const char* v = std::getenv("FLUXION_SCAN_CUB");
      return v != nullptr && v[0] == '1';
    }();
    const bool packed = !packed_off && n % kPackItems == 0 &&
                        cu::pack_aligned<In, kPackItems>(x) &&
                        cu::pack_aligned<Out, kPackItems>(y);
    if (!packed && !unpacked) {
      return false;
    }
    const int64_t tile_elems = packed ? kPackTile : kTile;
    const int64_t per_row = (n + tile_elems - 1) / tile_elems;
    const int64_t tiles = rows * per_row;
    if (tiles > INT_MAX) {
      return false;
    }
    // The tiles' states, then the tile counter; zeroed for this scan.
    const size_t bytes = (tiles + 1) * sizeof(Word);
    auto tmp = std::make_shared<Data>(bytes, Device{Device::gpu});
    Word* status = static_cast<Word*>(tmp->ptr());
    unsigned* next = reinterpret_cast<unsigned*>(status + tiles);
    cu::check(cudaMemsetAsync(status, 0, bytes, s), "scan");
    const unsigned grid = static_cast<unsigned>(tiles);
    if (packed) {
      packed_scan<In, Out, M, Op, Combine<M, Op>><<<grid, kThreads, 0, s>>>(
          x, y, n, per_row, reverse, inclusive, status, next);
    } else {
      lookback_scan<In, Out, M, Op, Combine<M, Op>><<<grid, kThreads, 0, s>>>(
          x, y, n, per_row, reverse, inclusive, status, next);
    }
    cu::check_launch("scan");
    cu::keep_alive(tmp);
    return true;
  }
}

// The others: CUB's single-pass scan, one call per row.

// Element i of the scan sequence (memory position n - 1 - i backwards).
template <typename In, typename M>
struct LoadAt {
  const In* x;
  int64_t n;
  bool reverse;
  __device__ __forceinline__ M operator()(int64_t i) const {
    return cu::convert<M>(x[reverse ? n - 1 - i : i]);
  }
};
// Where the scan's output i goes: an exclusive scan is the inclusive scan
// of the first n - 1 elements written one position further on (its first
// output, the identity, is written apart).
struct StoreAt {
  int64_t n;
  bool reverse;
  int64_t shift;
  __device__ __forceinline__ int64_t operator()(int64_t i) const {
    const int64_t p = i + shift;
    return reverse ? n - 1 - p : p;
  }
};
template <typename M, typename Out>
struct ToOut {
  __device__ __forceinline__ Out operator()(const M& v) const {
    return cu::convert<Out>(v);
  }
};

template <typename Out, typename M>
__global__ void write_identity(Out* y, M v) {
  *y = cu::convert<Out>(v);
}

template <typename In, typename Out, typename M, typename Op>
void device_scan_rows(const In* x, Out* y, int64_t rows, int64_t n,
                      bool reverse, bool inclusive, cudaStream_t s) {
  const int64_t items = inclusive ? n : n - 1;
  auto in_at = [&](const In* xr) {
    return thrust::make_transform_iterator(
        thrust::counting_iterator<int64_t>(0), LoadAt<In, M>{xr, n, reverse});
  };
  auto out_at = [&](Out* yr) {
    return thrust::make_transform_output_iterator(
        thrust::make_permutation_iterator(
            yr, thrust::make_transform_iterator(
                    thrust::counting_iterator<int64_t>(0),
                    StoreAt{n, reverse, inclusive ? 0 : 1})),
        ToOut<M, Out>{});
  };
  // The common case (a forward inclusive scan computed in its own type,
  // cumsum of float32) on raw pointers: CUB then loads and stores in wide
  // vectors, which the index-mapping iterators prevent.
  if (lookback_rows<In, Out, M, Op>(x, y, rows, n, reverse, inclusive,
                                   /*unpacked=*/false, s)) {
    return;
  }
  constexpr bool kRaw = math::is_same_v<In, Out> && math::is_same_v<Out, M>;
  if constexpr (kRaw) {
    if (!reverse && inclusive) {
      size_t raw_bytes = 0;
      cu::check(cub::DeviceScan::InclusiveScan(nullptr, raw_bytes, x, y,
                                               Combine<M, Op>{}, n, s),
                "scan");
      auto tmp = std::make_shared<Data>(std::max<size_t>(raw_bytes, 1),
                                        Device{Device::gpu});
      for (int64_t r = 0; r < rows; ++r) {
        cu::check(
            cub::DeviceScan::InclusiveScan(tmp->ptr(), raw_bytes, x + r * n,
                                           y + r * n, Combine<M, Op>{}, n, s),
            "scan");
        cu::check_launch("scan");
      }
      cu::keep_alive(tmp);
      return;
    }
  }
  if (lookback_rows<In, Out, M, Op>(x, y, rows, n, reverse, inclusive,
                                   /*unpacked=*/true, s)) {
    return;
  }
  size_t bytes = 0;
  cu::check(cub::DeviceScan::InclusiveScan(nullptr, bytes, in_at(x), out_at(y),
                                           Combine<M, Op>{}, items, s),
            "scan");
  // Scratch from Fluxion's allocator, reused by each row's call (they
  // run in order on the stream).
  auto tmp =
      std::make_shared<Data>(std::max<size_t>(bytes, 1), Device{Device::gpu});
  for (int64_t r = 0; r < rows; ++r) {
    const In* xr = x + r * n;
    Out* yr = y + r * n;
    if (!inclusive) {
      write_identity<<<1, 1, 0, s>>>(yr + (reverse ? n - 1 : 0), Op::init());
      cu::check_launch("scan");
    }
    if (items > 0) {
      cu::check(cub::DeviceScan::InclusiveScan(tmp->ptr(), bytes, in_at(xr),
                                               out_at(yr), Combine<M, Op>{},
                                               items, s),
                "scan");
      cu::check_launch("scan");
    }
  }
  cu::keep_alive(tmp);
}

template <typename In, typename Out, typename M, typename Op>
void scan_rows_launch(const In* x, Out* y, int64_t rows, int64_t n,
                      bool reverse, bool inclusive, cudaStream_t s) {
  // One block per row leaves the GPU idle when rows are few and long.
  if (n >= (int64_t(1) << 18) && rows <= 64) {
    device_scan_rows<In, Out, M, Op>(x, y, rows, n, reverse, inclusive, s);
    return;
  }
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 1 << 30));
  if (n <= 128) {
    scan_rows<In, Out, M, Op, 32, 4>
        <<<grid, 32, 0, s>>>(x, y, rows, n, reverse, inclusive);
  } else {
    constexpr int kIpt = sizeof(M) > 4 ? 4 : 8;
    scan_rows<In, Out, M, Op, 256, kIpt>
        <<<grid, 256, 0, s>>>(x, y, rows, n, reverse, inclusive);
  }
  cu::check_launch("scan");
}

template <typename In, typename Out, typename M, typename Op>
void scan_typed(const array& input, array& out, int axis, bool reverse,
                bool inclusive) {
  cu::alloc(out);
  if (out.size() == 0) {
    return;
  }
  array in = cu::contiguous(input);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) {
    outer *= in.shape(d);
  }
  for (int d = axis + 1; d < in.ndim(); ++d) {
    inner *= in.shape(d);
  }
  const int64_t n = in.shape(axis);
  cudaStream_t s = cu::current_stream();
  const In* x = cu::ptr<const In>(in);
  Out* y = cu::ptr<Out>(out);
  if (inner == 1) {
    scan_rows_launch<In, Out, M, Op>(x, y, outer, n, reverse, inclusive, s);
    cu::keep_alive(in);  // a contiguous copy is read until the scan ran
    return;
  }
  const int64_t cols = outer * inner;
  // A thread per column fills the GPU with at least ~16k columns; with
  // fewer and a long axis, transposing twice costs less than the idle GPU.
  const bool transpose =
      cols < (1 << 14) && n >= 64 && outer <= INT_MAX && inner <= INT_MAX;
  if (!transpose) {
    scan_cols<In, Out, M, Op><<<cu::blocks_for(cols), cu::kThreads, 0, s>>>(
        x, y, outer, n, inner, reverse, inclusive);
    cu::check_launch("scan");
    cu::keep_alive(in);
    return;
  }
  // (outer, n, inner) -> rows (outer, inner, n), scanned, and back.
  const Shape rs{static_cast<int>(outer), static_cast<int>(inner),
                 static_cast<int>(n)};
  const Strides row_st{inner * n, n, 1};
  const Strides src_st{n * inner, 1, inner};  // in's and out's, permuted
  array xt(rs, in.dtype(), nullptr, {});
  array yt(rs, out.dtype(), nullptr, {});
  cu::alloc(xt);
  cu::alloc(yt);
  xt.set_status(array::Status::available);
  yt.set_status(array::Status::available);
  cu::copy_region(in, src_st, 0, xt, row_st, 0, rs);
  scan_rows_launch<In, Out, M, Op>(cu::ptr<const In>(xt), cu::ptr<Out>(yt),
                                   cols, n, reverse, inclusive, s);
  cu::copy_region(yt, row_st, 0, out, src_st, 0, rs);
  cu::keep_alive(in);
  cu::keep_alive(xt);
  cu::keep_alive(yt);
}

}  // namespace

void Scan::eval_gpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (type_ == LogAddExp) {
    cu::dispatch_gpu<InexactTypes>(in.dtype(), "logcumsumexp", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = cu::compute_t<T>;
      scan_typed<T, T, M, detail::LogAddExpOp<M>>(in, out, axis_, reverse_,
                                                  inclusive_);
    });
    return;
  }
  dispatch_all(in.dtype(), [&](auto tag) {
    using H = typename decltype(tag)::type;  // the host type
    using T = cu::device_t<H>;
    using S = cu::device_t<sum_type_t<H>>;
    using SM = cu::compute_t<S>;
    using TM = cu::compute_t<T>;
    switch (type_) {
      case Sum:
        scan_typed<T, S, SM, detail::SumOp<SM>>(in, out, axis_, reverse_,
                                                inclusive_);
        break;
      case Prod:
        scan_typed<T, S, SM, detail::ProdOp<SM>>(in, out, axis_, reverse_,
                                                 inclusive_);
        break;
      case Max:
        scan_typed<T, T, TM, detail::MaxOp<TM>>(in, out, axis_, reverse_,
                                                inclusive_);
        break;
      case Min:
        scan_typed<T, T, TM, detail::MinOp<TM>>(in, out, axis_, reverse_,
                                                inclusive_);
        break;
      default:
        break;
    }
  });
}

}  // namespace fluxion
