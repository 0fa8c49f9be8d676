// Convolution on the GPU (issue 31 item 1). The CPU kernel is
// backend/cpu/conv.cpp; the primitive's contract is in ops/conv.h.
//
// First cuDNN (conv_cudnn.cpp: float32 / float16 / bfloat16, forward,
// backward-data and backward-filter operations chosen by
// backend/common/conv_plan.cpp), unless FLUXION_CUDNN_CONV=0, cuDNN is not
// loadable, or it has no plan for the shapes. Otherwise, and for float64,
// the general path here, which takes every form of the primitive, in the
// compute type (float for the half types, as on the CPU; double for
// float64):
//  - one input channel per group (depthwise convolutions, and the input
//    gradient of one): a direct kernel, a thread per 4 outputs along the
//    last axis of one channel (conv_plan::direct_tile), the taps summed in
//    the CPU's order;
//  - one output channel per group with sums of kLongSum terms or more
//    (the weight gradient of a depthwise convolution: few outputs, each
//    over the batch and every position): a block per output element
//    splitting its sum, nothing written but the output;
//  - otherwise im2col into a scratch from Fluxion's allocator, [groups,
//    rows, taps * C_in/g] with conv_plan::im2col_source mapping each entry
//    to its input element (dilations, padding, stride, flip), then one
//    cuBLASLt product batched over the groups (cu::matmul_into: float
//    accumulation for the half types, TF32 only with FLUXION_ENABLE_TF32=1)
//    straight into the output's columns of each group. Output rows are cut
//    into chunks so the scratch stays within 1 GiB; a 1x1 convolution
//    without stride, padding or dilation reads the input as its own
//    unfolded matrix.
// Empty outputs are allocated only; an empty input or weight (no term in
// any sum) gives zeros.
//
// ConvolutionWeightGrad (the grouped weight gradient): cuDNN's backward
// filter over the forward's input and the cotangent as they are
// (conv_plan::weight_grad_mappings); else, and for float64, the
// Convolution it stands for (conv_plan::weight_grad_composite: the input
// and the cotangent rearranged into scratches, that convolution run as
// above, its result rearranged into the output).
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fluxion/backend/common/conv_plan.h"
#include "fluxion/backend/common/views.h"
#include "fluxion/backend/cuda/conv_cudnn.h"
#include "fluxion/backend/cuda/kernels.cuh"
#include "fluxion/backend/cuda/norm.cuh"
#include "fluxion/gpu_stats.h"
#include "fluxion/ops/conv.h"

namespace fluxion {

namespace {

// The im2col scratch's bound (all groups of one chunk of rows): 1 GiB, or
// FLUXION_CONV_SCRATCH_BYTES (read at each call: the tests make it small
// to run many chunks).
int64_t max_scratch() {
  const char* e = std::getenv("FLUXION_CONV_SCRATCH_BYTES");
  const int64_t v = e && *e ? std::atoll(e) : 0;
  return v > 0 ? v : int64_t{1} << 30;
}

std::atomic<int64_t> g_direct{0}, g_reduce{0}, g_im2col{0}, g_composite{0};

// Sums at least this long with one output channel per group take
// reduce_kernel (shorter ones: im2col and a thin product).
constexpr int64_t kLongSum = 4096;

using conv_plan::Geometry;

// --- kernels ---------------------------------------------------------------

// Taps whose sources im2col_kernel keeps in shared memory (more: each
// entry computes its own).
constexpr int kTapTable = 2048;

// col[q][c], q = grp * R + (r - r0), = the input element of column c of
// output row r of group grp (conv_plan::im2col_source), 0 where there is
// none, for rows r0 .. r0 + R - 1. A block takes one (group, row) at a
// time: the row's tap sources go into shared memory once, then each entry
// is one division (c / cin_g) and a load, consecutive threads on
// consecutive channels (coalesced reads and writes).
// I: the column index's type (32 bits unless a row has 2^32 columns: its
// division is the per-entry cost).
template <typename T, typename I>
__global__ void im2col_kernel(const T* x, T* col, Geometry g, int64_t r0,
                              int64_t R) {
  __shared__ int64_t table[kTapTable];
  const I cols = static_cast<I>(g.cols()), cg = static_cast<I>(g.cin_g);
  const int64_t taps = g.taps();
  const bool tabled = taps <= kTapTable;
  const T zero = cu::convert<T>(0.0f);
  for (int64_t q = blockIdx.x; q < g.groups * R; q += gridDim.x) {
    const int64_t grp = q / R;
    const conv_plan::Row row = conv_plan::row_of(g, r0 + q % R);
    if (tabled) {
      for (int64_t t = threadIdx.x; t < taps; t += blockDim.x) {
        table[t] = conv_plan::tap_source(g, grp, row, t);
      }
      __syncthreads();
    }
    T* out = col + q * cols;
    for (I c = threadIdx.x; c < cols; c += blockDim.x) {
      const I t = c / cg;
      const int64_t src =
          tabled ? table[t] : conv_plan::tap_source(g, grp, row, t);
      out[c] = src >= 0 ? x[src + (c - t * cg)] : zero;
    }
    __syncthreads();  // the table is rewritten for the next row
  }
}

// One output channel per group and long sums (the weight gradient of a
// depthwise convolution: a few outputs, each a sum over the batch and
// every output position): a block per output element, its threads
// splitting the sum (im2col's entries, read in place: nothing is written
// but the output), then one block reduction. Blocks run channel by
// channel, so a channel's weight row and input stay in L2 across its
// rows. I as for im2col_kernel.
template <typename T, typename Acc, typename I>
__global__ void reduce_kernel(const T* x, const T* w, T* y, Geometry g) {
  __shared__ int64_t table[kTapTable];
  __shared__ Acc part[32];
  const I cols = static_cast<I>(g.cols()), cg = static_cast<I>(g.cin_g);
  const int64_t taps = g.taps(), rows = g.rows();
  const bool tabled = taps <= kTapTable;
  for (int64_t q = blockIdx.x; q < rows * g.cout; q += gridDim.x) {
    const int64_t co = q / rows, r = q % rows;  // cout_g == 1: group co
    const conv_plan::Row row = conv_plan::row_of(g, r);
    if (tabled) {
      for (int64_t t = threadIdx.x; t < taps; t += blockDim.x) {
        table[t] = conv_plan::tap_source(g, co, row, t);
      }
      __syncthreads();
    }
    const T* wr = w + co * int64_t{cols};
    Acc acc = Acc(0);
    for (I c = threadIdx.x; c < cols; c += blockDim.x) {
      const I t = c / cg;
      const int64_t src =
          tabled ? table[t] : conv_plan::tap_source(g, co, row, t);
      if (src >= 0) {
        acc += cu::convert<Acc>(x[src + (c - t * cg)]) *
               cu::convert<Acc>(wr[c]);
      }
    }
    acc = cu::block_sum(acc, part);  // ends with a barrier
    if (threadIdx.x == 0) {
      y[r * g.cout + co] = cu::convert<T>(acc);
    }
  }
}

// One input channel per group: conv_plan::direct_tile per thread, kTile
// outputs along the last axis each (their decomposition and weight loads
// shared).
constexpr int kTile = 4;
template <typename T, typename Acc, typename I>
__global__ void direct_kernel(const T* x, const T* w, T* y, Geometry g,
                              I items) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < items;
       i += static_cast<I>(blockDim.x) * gridDim.x) {
    conv_plan::direct_tile<kTile, Acc, I>(
        g, i, [&](int64_t k) { return cu::convert<Acc>(x[k]); },
        [&](int64_t k) { return cu::convert<Acc>(w[k]); },
        [&](int64_t k, Acc v) { y[k] = cu::convert<T>(v); });
  }
}

// --- host ------------------------------------------------------------------

// A fresh row-contiguous GPU array, kept alive until the stream ran.
array scratch(const Shape& shape, Dtype t) {
  array a(shape, t, nullptr, {});
  cu::alloc(a);
  a.set_status(array::Status::available);
  cu::keep_alive(a);
  return a;
}

bool aligned256(const array& a) {
  return reinterpret_cast<uintptr_t>(cu::ptr(a)) % 256 == 0;
}

// `a` row-contiguous in dtype t on the GPU (itself when it is), and with
// `align`, 256-byte aligned: cuBLASLt's algorithms assume their operands
// are (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*'s default), which a view with
// an offset need not be.
array prepared(const array& a, Dtype t, bool align) {
  if (a.dtype() == t && a.flags().row_contiguous &&
      (!align || aligned256(a))) {
    return a;
  }
  array c = scratch(a.shape(), t);
  cu::copy_into(a, c);
  return c;
}

// A view of `a`'s buffer.
array view(const array& a, const Shape& shape, const Strides& strides,
           int64_t offset) {
  array v(shape, a.dtype(), nullptr, {});
  common::make_view(a, v, strides, offset);
  v.set_status(array::Status::available);
  return v;
}

void general_path(const array& xin, const array& win, array& out,
                  const Convolution& c) {
  const Dtype t = out.dtype();
  // x is read by our kernels (the 1x1 case below, which hands it to
  // cuBLASLt, aligns it); w always goes to cuBLASLt or our kernels.
  array x = prepared(xin, t, false);
  array w = prepared(win, t, true);
  const Geometry g = conv_plan::geometry(
      x.shape(), w.shape(), out.shape(), c.stride(), c.padding_lo(),
      c.kernel_dilation(), c.input_dilation(), c.groups(), c.flip());
  cudaStream_t s = cu::current_stream();
  if (g.cin_g == 1) {
    ++g_direct;
    const int64_t items = conv_plan::direct_items<kTile, int64_t>(g);
    cu::dispatch_gpu<TypeList<float, double, float16_t, bfloat16_t>>(
        t, "conv", [&](auto tag) {
          using T = typename decltype(tag)::type;
          using Acc = cu::compute_t<T>;
          const T* px = cu::ptr<const T>(x);
          const T* pw = cu::ptr<const T>(w);
          T* py = cu::ptr<T>(out);
          if (items < (int64_t{1} << 31)) {
            direct_kernel<T, Acc, uint32_t>
                <<<cu::blocks_for(items), cu::kThreads, 0, s>>>(
                    px, pw, py, g, static_cast<uint32_t>(items));
          } else {
            direct_kernel<T, Acc, int64_t>
                <<<cu::blocks_for(items), cu::kThreads, 0, s>>>(px, pw, py, g,
                                                               items);
          }
        });
    cu::check_launch("conv");
    return;
  }
  if (g.cout_g == 1 && g.cols() >= kLongSum) {
    ++g_reduce;
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(out.size(), 1 << 20));
    cu::dispatch_gpu<TypeList<float, double, float16_t, bfloat16_t>>(
        t, "conv", [&](auto tag) {
          using T = typename decltype(tag)::type;
          using Acc = cu::compute_t<T>;
          const T* px = cu::ptr<const T>(x);
          const T* pw = cu::ptr<const T>(w);
          T* py = cu::ptr<T>(out);
          if (g.cols() < (int64_t{1} << 32)) {
            reduce_kernel<T, Acc, uint32_t>
                <<<blocks, cu::kThreads, 0, s>>>(px, pw, py, g);
          } else {
            reduce_kernel<T, Acc, int64_t>
                <<<blocks, cu::kThreads, 0, s>>>(px, pw, py, g);
          }
        });
    cu::check_launch("conv");
    return;
  }
  ++g_im2col;
  const int64_t G = g.groups, cols = g.cols(), rows = g.rows();
  const auto i32 = [](int64_t v) { return static_cast<int32_t>(v); };
  // The weight [G, cout_g, cols] as the product's [G, cols, cout_g].
  array wt = view(w, {i32(G), i32(cols), i32(g.cout_g)},
                  {g.cout_g * cols, 1, cols}, 0);
  // Output rows r0 .. r0 + R - 1 of every group: [G, R, cout_g], rows
  // cout apart.
  auto out_rows = [&](int64_t r0, int64_t R) {
    return view(out, {i32(G), i32(R), i32(g.cout_g)}, {g.cout_g, g.cout, 1},
                r0 * g.cout);
  };
  bool pointwise = g.taps() == 1 && rows <= INT32_MAX;
  for (int a = 0; a < 3 && pointwise; ++a) {
    pointwise = g.s[a] == 1 && g.lo[a] == 0 && g.id[a] == 1 && g.O[a] == g.L[a];
  }
  if (pointwise) {
    // The input [rows, C_in] is the unfolded matrix of every group.
    x = prepared(x, t, true);
    array a = view(x, {i32(G), i32(rows), i32(g.cin_g)}, {g.cin_g, g.cin, 1},
                   0);
    array o = out_rows(0, rows);
    cu::matmul_into(a, wt, o);
    return;
  }
  const int64_t R = conv_plan::chunk_rows(g, out.itemsize(), max_scratch());
  array col = scratch({i32(G), i32(R), i32(cols)}, t);
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const int64_t n = std::min(R, rows - r0);
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(G * n, 1 << 20));
    // A block per row: as many threads as the row has entries, in warps.
    const int threads =
        static_cast<int>(std::clamp<int64_t>((cols + 31) / 32 * 32, 32, 256));
    cu::dispatch_gpu<TypeList<float, double, float16_t, bfloat16_t>>(
        t, "conv", [&](auto tag) {
          using T = typename decltype(tag)::type;
          if (cols < (int64_t{1} << 32)) {
            im2col_kernel<T, uint32_t><<<blocks, threads, 0, s>>>(
                cu::ptr<const T>(x), cu::ptr<T>(col), g, r0, n);
          } else {
            im2col_kernel<T, int64_t><<<blocks, threads, 0, s>>>(
                cu::ptr<const T>(x), cu::ptr<T>(col), g, r0, n);
          }
        });
    cu::check_launch("conv");
    array a = view(col, {i32(G), i32(n), i32(cols)}, {n * cols, cols, 1}, 0);
    array o = out_rows(r0, n);
    cu::matmul_into(a, wt, o);
  }
}

// Checks the dtype and allocates `out`; true when nothing is left to
// compute: an empty output, or an empty operand (no term in any sum: no
// input channels, or every tap outside an empty input), which gives zeros.
bool trivial_output(array& out, const array& a, const array& b) {
  const Dtype t = out.dtype();
  if (t != float32 && t != float16 && t != bfloat16 && t != float64) {
    throw std::invalid_argument(std::string("[conv] ") + dtype_name(t) +
                                " is not supported on the gpu.");
  }
  cu::alloc(out);
  if (out.size() == 0) {
    return true;
  }
  if (a.size() == 0 || b.size() == 0) {
    cu::check(cudaMemsetAsync(cu::ptr(out), 0, out.nbytes(),
                              cu::current_stream()),
              "conv");
    return true;
  }
  return false;
}

}  // namespace

gpu::ConvStats gpu::conv_stats() {
  auto s = cu::cudnn_conv::status();
  ConvStats r;
  r.cudnn_loaded = s.loaded;
  r.cudnn_version = s.version;
  r.cudnn_error = s.error;
  r.cudnn_forward = s.forward_calls;
  r.cudnn_backward_data = s.backward_data_calls;
  r.cudnn_backward_filter = s.backward_filter_calls;
  r.cudnn_failed_plans = s.failed_plans;
  r.direct = g_direct.load();
  r.reduce = g_reduce.load();
  r.im2col = g_im2col.load();
  r.weight_grad_composite = g_composite.load();
  return r;
}

void Convolution::eval_gpu(const std::vector<array>& inputs,
                           std::vector<array>& outputs) {
  array& out = outputs[0];
  const array& x = inputs[0];
  const array& w = inputs[1];
  if (trivial_output(out, x, w)) {
    return;
  }
  // Long sums with one output channel per group (a depthwise weight
  // gradient's composite, run where cuDNN's backward filter did not take
  // the ConvolutionWeightGrad node: a few outputs per group, each over the
  // batch and every position) are offered to cuDNN's backward operations
  // only, else they stay on reduce_kernel: cuDNN's forward operation would
  // see a grouped forward
  // convolution with an image-sized filter and an output of a few pixels,
  // which tiles of output positions times output channels leave nearly
  // empty (FLUXION_CUDNN_CONV=all offers it anyway, for the comparison).
  // (The weight is [C_out, K..., C_in/g]: a sum has size / C_out terms.)
  const bool long_sums = w.shape(0) == groups_ &&
                         static_cast<int64_t>(w.size()) / w.shape(0) >= kLongSum;
  if (cu::cudnn_conv::run(x, w, out, *this,
                          !long_sums || cu::cudnn_conv::offer_all())) {
    return;
  }
  general_path(x, w, out, *this);
}

}  // namespace fluxion

namespace fluxion {

void ConvolutionWeightGrad::eval_gpu(const std::vector<array>& inputs,
                                     std::vector<array>& outputs) {
  array& out = outputs[0];
  const Dtype t = out.dtype();
  const array& x = inputs[0];
  const array& ct = inputs[1];
  if (trivial_output(out, x, ct)) {
    return;
  }
  if (cu::cudnn_conv::run_weight_grad(x, ct, out, *this)) {
    return;
  }
  ++g_composite;
  const auto c = conv_plan::weight_grad_composite(
      x.shape(), x.strides(), ct.shape(), ct.strides(), kernel_size(),
      stride(), padding_lo(), kernel_dilation(), input_dilation(), groups(),
      flip());
  array xin = scratch(c.xin, x.dtype());
  cu::copy_region(x, c.input.src, c.input.src_offset, xin, c.input.dst, 0,
                  c.input.shape);
  array kern = scratch(c.kern, ct.dtype());
  cu::copy_region(ct, c.cotangent.src, c.cotangent.src_offset, kern,
                  c.cotangent.dst, 0, c.cotangent.shape);
  Convolution conv(stream(), c.stride, c.padding_lo, c.padding_hi,
                   c.kernel_dilation, c.input_dilation, c.groups, false);
  std::vector<array> r{array(c.r, t, nullptr, {})};
  conv.eval_gpu({xin, kern}, r);
  cu::keep_alive(r[0]);
  cu::copy_region(r[0], c.result.src, c.result.src_offset, out, c.result.dst,
                  0, c.result.shape);
}

}  // namespace fluxion
