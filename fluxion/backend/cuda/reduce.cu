// Reductions on the GPU: Reduce (sum, prod, max, min, all, any over any
// axes), ArgReduce and NumberOfElements, with the CPU's accumulator types
// (backend/cpu/reduce.cpp: sum_dtype for sums and products, float for the
// half types, a float32 sum straight from integers and half types for
// mean) and the shared combine functors (backend/common/reduce_ops.h).
//
// The input's dims are split into kept and reduced ones, each collapsed.
// When the reduced dims are innermost in memory (a row reduction, or all
// of the array) a block reduces each output, split over several blocks
// into partials when there are few outputs, then a second pass; otherwise
// (column-like reductions) each thread reduces one output, so consecutive
// threads read consecutive memory.
#include <algorithm>

#include "fluxion/backend/common/reduce_ops.h"
#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/ops/reduce.h"

namespace fluxion {

namespace {

using cu::Layout;

// Offsets of output `o`: operand 0 in the input, 1 in the output.
__device__ __forceinline__ void kept_offsets(const Layout& k, int64_t o,
                                             int64_t& in, int64_t& out) {
  in = out = 0;
  for (int d = k.ndim - 1; d >= 0; --d) {
    int64_t q = o % k.shape[d];
    o /= k.shape[d];
    in += q * k.strides[0][d];
    out += q * k.strides[1][d];
  }
}

// Acc-combination of the `count` elements of a run that starts at p,
// shared by `nt` threads (this one is `tid`): the unaligned head element
// by element, then 16-byte Packs, then the tail.
template <typename In, typename Acc, typename Op>
__device__ __forceinline__ Acc accumulate_run(const In* p, int64_t count,
                                              int tid, int nt) {
  constexpr int V = cu::pack_width<In>();
  Op op;
  Acc acc = Op::init();
  int64_t head = 0;
  if constexpr (V > 1) {
    const uintptr_t mis = reinterpret_cast<uintptr_t>(p) % 16;
    head = mis == 0 ? 0 : static_cast<int64_t>((16 - mis) / sizeof(In));
    head = head < count ? head : count;
  }
  for (int64_t j = tid; j < head; j += nt) {
    acc = op(acc, cu::convert<Acc>(p[j]));
  }
  using P = cu::Pack<In, V>;
  const P* q = reinterpret_cast<const P*>(p + head);
  const int64_t nv = (count - head) / V;
#pragma unroll 4
  for (int64_t j = tid; j < nv; j += nt) {
    P v = q[j];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      acc = op(acc, cu::convert<Acc>(v.v[k]));
    }
  }
  for (int64_t j = head + nv * V + tid; j < count; j += nt) {
    acc = op(acc, cu::convert<Acc>(p[j]));
  }
  return acc;
}

// Elements [lo, hi) of one output's reduced elements, which start at x:
// a contiguous run (`run`, the common case) or any collapsed layout.
template <typename In, typename Acc, typename Op>
__device__ __forceinline__ Acc accumulate(const In* x, const Layout& red,
                                          bool run, int64_t lo, int64_t hi,
                                          int tid, int nt) {
  if (run) {
    return accumulate_run<In, Acc, Op>(x + lo, hi - lo, tid, nt);
  }
  Op op;
  Acc acc = Op::init();
  for (int64_t j = lo + tid; j < hi; j += nt) {
    acc = op(acc, cu::convert<Acc>(x[cu::offset_of(red, 0, j)]));
  }
  return acc;
}

template <typename Acc, typename Op>
__device__ __forceinline__ Acc warp_reduce(Acc v) {
  Op op;
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    v = op(v, cu::shfl_down(v, d));
  }
  return v;
}

// The combination of every thread's `v`, in thread 0.
template <typename Acc, typename Op>
__device__ __forceinline__ Acc block_reduce(Acc v) {
  FLUXION_SHARED_ARRAY(Acc, part, 32);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce<Acc, Op>(v);
  if (lane == 0) {
    part[warp] = v;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : Op::init();
    v = warp_reduce<Acc, Op>(v);
  }
  __syncthreads();  // part is reused by the block's next output
  return v;
}

// Row reductions (the reduced elements innermost): one block per (output,
// split) for long rows, sweeping its share of the R reduced elements;
// `partial` outputs go to y[o * splits + split] as Acc, and a second pass
// converts to Out.
template <typename In, typename Acc, typename Out, typename Op>
__global__ void reduce_rows(const In* x, Out* y, int64_t n_out, int64_t r,
                            int splits, Layout kept, Layout red, bool run,
                            bool partial) {
  const int64_t chunk = (r + splits - 1) / splits;
  for (int64_t b = blockIdx.x; b < n_out * splits; b += gridDim.x) {
    int64_t o = b / splits;
    int64_t lo = (b % splits) * chunk;
    int64_t hi = lo + chunk < r ? lo + chunk : r;
    int64_t in_off, out_off;
    kept_offsets(kept, o, in_off, out_off);
    Acc acc = accumulate<In, Acc, Op>(x + in_off, red, run, lo, hi,
                                      threadIdx.x, blockDim.x);
    acc = block_reduce<Acc, Op>(acc);
    if (threadIdx.x == 0) {
      y[partial ? b : out_off] = cu::convert<Out>(acc);
    }
  }
}

// Short rows: one warp per output.
template <typename In, typename Acc, typename Out, typename Op>
__global__ void reduce_rows_warp(const In* x, Out* y, int64_t n_out,
                                 int64_t r, Layout kept, Layout red,
                                 bool run) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = cu::global_thread() / 32; o < n_out; o += warps) {
    int64_t in_off, out_off;
    kept_offsets(kept, o, in_off, out_off);
    Acc acc = accumulate<In, Acc, Op>(x + in_off, red, run, 0, r, lane, 32);
    acc = warp_reduce<Acc, Op>(acc);
    if (lane == 0) {
      y[out_off] = cu::convert<Out>(acc);
    }
  }
}

// Column reductions (the kept elements innermost): a block of 32 x 8
// threads takes 32 consecutive outputs, so a warp reads 32 neighbours of
// a row at once, and a share (blockIdx.y of `splits`) of their reduced
// elements, split over its 8 rows of threads and combined in shared
// memory. `partial` as reduce_rows.
constexpr int kColWidth = 32, kColRows = 8;
template <typename In, typename Acc, typename Out, typename Op>
__global__ void reduce_cols(const In* x, Out* y, int64_t n_out, int64_t r,
                            int splits, Layout kept, Layout red,
                            bool partial) {
  // part[ty * kColPitch + tx]: padded against bank conflicts.
  constexpr int kColPitch = kColWidth + 1;
  FLUXION_SHARED_ARRAY(Acc, part, kColRows * kColPitch);
  Op op;
  const int tx = threadIdx.x % kColWidth, ty = threadIdx.x / kColWidth;
  const int64_t o = blockIdx.x * int64_t(kColWidth) + tx;
  const int64_t chunk = (r + splits - 1) / splits;
  const int64_t lo = blockIdx.y * chunk;
  const int64_t hi = lo + chunk < r ? lo + chunk : r;
  Acc acc = Op::init();
  int64_t in_off = 0, out_off = 0;
  if (o < n_out) {
    kept_offsets(kept, o, in_off, out_off);
    const In* p = x + in_off;
    if (red.ndim == 1) {
      const int64_t st = red.strides[0][0];
#pragma unroll 8
      for (int64_t j = lo + ty; j < hi; j += kColRows) {
        acc = op(acc, cu::convert<Acc>(p[j * st]));
      }
    } else {
      for (int64_t j = lo + ty; j < hi; j += kColRows) {
        acc = op(acc, cu::convert<Acc>(p[cu::offset_of(red, 0, j)]));
      }
    }
  }
  part[ty * kColPitch + tx] = acc;
  __syncthreads();
  if (ty == 0 && o < n_out) {
    for (int k = 1; k < kColRows; ++k) {
      acc = op(acc, part[k * kColPitch + tx]);
    }
    y[partial ? o * splits + blockIdx.y : out_off] = cu::convert<Out>(acc);
  }
}

// The kept and reduced dims of `in` (reduced: `is_reduced[d]`), collapsed;
// the output's strides go with the kept ones.
void split_dims(const array& in, const array& out,
                const std::vector<bool>& is_reduced, Layout& kept,
                Layout& red, int64_t& r) {
  Shape ks, rs;
  Strides kin, kout, rin;
  r = 1;
  for (int d = 0; d < in.ndim(); ++d) {
    if (is_reduced[d]) {
      rs.push_back(in.shape(d));
      rin.push_back(in.strides()[d]);
      r *= in.shape(d);
    } else {
      ks.push_back(in.shape(d));
      kin.push_back(in.strides()[d]);
      kout.push_back(out.strides()[d]);
    }
  }
  kept = cu::collapse(ks, {kin, kout}, "reduce");
  red = cu::collapse(rs, {rin}, "reduce");
}

template <typename In, typename Acc, typename Out, typename Op>
void reduce_typed(const array& in, array& out, const std::vector<int>& axes) {
  cu::alloc(out);
  const int64_t n_out = out.size();
  if (n_out == 0) {
    return;
  }
  std::vector<bool> is_reduced(in.ndim(), false);
  for (int a : axes) {
    is_reduced[a] = true;
  }
  Layout kept, red;
  int64_t r;
  split_dims(in, out, is_reduced, kept, red, r);
  cudaStream_t s = cu::current_stream();
  const In* x = cu::ptr<const In>(in);
  Out* y = cu::ptr<Out>(out);
  const bool rows = red.ndim > 0 && red.strides[0][red.ndim - 1] == 1;
  const bool run = red.ndim == 1;  // each output's elements: one run
  auto grid = [](int64_t b) {
    return static_cast<unsigned>(std::min<int64_t>(b, 1 << 20));
  };
  // Enough blocks to fill the GPU (132 SMs on an H200, several blocks each):
  // with few outputs, each output's elements are split over `splits`
  // blocks into Acc partials, combined by a second pass.
  constexpr int64_t kFillBlocks = 2048;
  int64_t splits = 1;
  std::shared_ptr<Data> scratch;
  Acc* p = nullptr;
  auto make_scratch = [&] {
    scratch = std::make_shared<Data>(
        static_cast<size_t>(n_out * splits) * sizeof(Acc),
        Device{Device::gpu});
    p = static_cast<Acc*>(scratch->ptr());
  };
  if (!rows && red.ndim > 0) {
    const int64_t gx = (n_out + kColWidth - 1) / kColWidth;
    if (gx < kFillBlocks) {
      // Each block's threads keep at least 16 elements each.
      splits = std::clamp<int64_t>(kFillBlocks / gx, 1,
                                   std::max<int64_t>(r / (16 * kColRows), 1));
      splits = std::min<int64_t>(splits, 65535);
    }
    dim3 g(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
    if (splits == 1) {
      reduce_cols<In, Acc, Out, Op><<<g, kColWidth * kColRows, 0, s>>>(
          x, y, n_out, r, 1, kept, red, false);
    } else {
      make_scratch();
      reduce_cols<In, Acc, Acc, Op><<<g, kColWidth * kColRows, 0, s>>>(
          x, p, n_out, r, static_cast<int>(splits), kept, red, true);
    }
  } else if (r <= 1024) {
    // Short rows (or nothing reduced): a warp per output.
    reduce_rows_warp<In, Acc, Out, Op>
        <<<grid((n_out + 7) / 8), cu::kThreads, 0, s>>>(x, y, n_out, r, kept,
                                                        red, run);
    cu::check_launch("reduce");
    return;
  } else {
    if (n_out < kFillBlocks && r > 16 * cu::kThreads) {
      splits = std::min<int64_t>((kFillBlocks + n_out - 1) / n_out,
                                 (r + 8 * cu::kThreads - 1) /
                                     (8 * cu::kThreads));
    }
    if (splits == 1) {
      reduce_rows<In, Acc, Out, Op><<<grid(n_out), cu::kThreads, 0, s>>>(
          x, y, n_out, r, 1, kept, red, run, false);
    } else {
      make_scratch();
      reduce_rows<In, Acc, Acc, Op>
          <<<grid(n_out * splits), cu::kThreads, 0, s>>>(
              x, p, n_out, r, static_cast<int>(splits), kept, red, run, true);
    }
  }
  cu::check_launch("reduce");
  if (splits == 1) {
    return;
  }
  // Second pass: output o's `splits` partials are contiguous from
  // o * splits; the output is row-contiguous with its kept dims in order,
  // so output o sits at offset o.
  Layout red2;
  red2.ndim = 1;
  red2.shape[0] = splits;
  red2.strides[0][0] = 1;
  Layout k2;
  k2.ndim = 1;
  k2.shape[0] = n_out;
  k2.strides[0][0] = splits;
  k2.strides[1][0] = 1;
  if (splits <= 1024) {
    reduce_rows_warp<Acc, Acc, Out, Op>
        <<<grid((n_out + 7) / 8), cu::kThreads, 0, s>>>(p, y, n_out, splits,
                                                        k2, red2, true);
  } else {
    reduce_rows<Acc, Acc, Out, Op><<<grid(n_out), cu::kThreads, 0, s>>>(
        p, y, n_out, splits, 1, k2, red2, true, false);
  }
  cu::check_launch("reduce");
  cu::keep_alive(scratch);
}

}  // namespace

void Reduce::eval_gpu(const std::vector<array>& inputs,
                      std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  dispatch_all(in.dtype(), [&](auto tag) {
    using H = typename decltype(tag)::type;  // the host type
    using In = cu::device_t<H>;
    using SumT = cu::device_t<sum_type_t<H>>;
    using SumAcc = cu::compute_t<SumT>;
    using MaxAcc = cu::compute_t<In>;
    switch (type_) {
      case And:
        reduce_typed<In, bool, bool, detail::AndOp>(in, out, axes_);
        break;
      case Or:
        reduce_typed<In, bool, bool, detail::OrOp>(in, out, axes_);
        break;
      case Sum:
        if constexpr (!std::is_same_v<sum_type_t<H>, float>) {
          // mean of integers and half types: summed straight into float.
          if (out.dtype() == float32) {
            reduce_typed<In, float, float, detail::SumOp<float>>(in, out,
                                                                 axes_);
            break;
          }
        }
        reduce_typed<In, SumAcc, SumT, detail::SumOp<SumAcc>>(in, out,
                                                              axes_);
        break;
      case Prod:
        reduce_typed<In, SumAcc, SumT, detail::ProdOp<SumAcc>>(in, out,
                                                               axes_);
        break;
      case Max:
        reduce_typed<In, MaxAcc, In, detail::MaxOp<MaxAcc>>(in, out, axes_);
        break;
      case Min:
        reduce_typed<In, MaxAcc, In, detail::MinOp<MaxAcc>>(in, out, axes_);
        break;
    }
  });
}

namespace {

// First index of the extreme along the axis (a NaN wins at once), one
// thread per output, with the CPU's rule (detail::arg_better).
template <typename T, bool IsMax>
__global__ void arg_reduce_kernel(const T* x, uint32_t* y, int64_t n_out,
                                  int64_t n, int64_t ast, Layout kept) {
  using C = cu::compute_t<T>;
  FLUXION_GRID_LOOP(o, n_out) {
    int64_t in_off, out_off;
    kept_offsets(kept, o, in_off, out_off);
    C best = cu::convert<C>(x[in_off]);
    uint32_t idx = 0;
    detail::IsNan nan;
    for (int64_t j = 1; j < n && !nan(best); ++j) {
      C v = cu::convert<C>(x[in_off + j * ast]);
      if (detail::arg_better<IsMax>(v, best)) {
        best = v;
        idx = static_cast<uint32_t>(j);
      }
    }
    y[out_off] = idx;
  }
}

}  // namespace

void ArgReduce::eval_gpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  cu::alloc(out);
  const int64_t n_out = out.size();
  if (n_out == 0) {
    return;
  }
  Shape ks;
  Strides kin, kout;
  for (int d = 0; d < in.ndim(); ++d) {
    if (d != axis_) {
      ks.push_back(in.shape(d));
      kin.push_back(in.strides()[d]);
      kout.push_back(out.strides()[d]);
    }
  }
  Layout kept = cu::collapse(ks, {kin, kout}, "argreduce");
  cudaStream_t s = cu::current_stream();
  cu::dispatch_gpu<AllTypes>(in.dtype(), name(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel) {
      kernel<<<cu::blocks_for(n_out), cu::kThreads, 0, s>>>(
          cu::ptr<const T>(in), cu::ptr<uint32_t>(out), n_out,
          in.shape(axis_), in.strides()[axis_], kept);
    };
    if (type_ == ArgMax) {
      launch(arg_reduce_kernel<T, true>);
    } else {
      launch(arg_reduce_kernel<T, false>);
    }
  });
  cu::check_launch("argreduce");
}

namespace {
template <typename T>
__global__ void fill_one(T* y, double v) {
  *y = cu::convert<T>(v);
}
}  // namespace

void NumberOfElements::eval_gpu(const std::vector<array>& inputs,
                                std::vector<array>& outputs) {
  double n = 1;
  for (int ax : axes_) {
    n *= inputs[0].shape(ax);
  }
  auto& out = outputs[0];
  cu::alloc(out);
  cu::dispatch_gpu<AllTypes>(out.dtype(), "number_of_elements", [&](auto t) {
    using T = typename decltype(t)::type;
    fill_one<T><<<1, 1, 0, cu::current_stream()>>>(cu::ptr<T>(out), n);
  });
  cu::check_launch("number_of_elements");
}

}  // namespace fluxion
