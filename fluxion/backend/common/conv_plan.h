// How the GPU computes the Convolution and ConvolutionWeightGrad
// primitives (fluxion/ops/conv.h), as plain host code that
// tests/cpp/test_conv_plan.cpp checks without a GPU; backend/cuda/conv.cu
// and conv_cudnn.cpp run it (the CPU shares weight_grad_composite).
//
// Two things live here:
//  - the geometry and the index maps of the general path (a GPU im2col
//    into a scratch, then cuBLASLt; a direct kernel for one input channel
//    per group): which input element a column of the unfolded matrix
//    reads. The maps are host+device functions, so the test runs the very
//    code the kernels run;
//  - how a convolution maps onto cuDNN's three convolution operations
//    (forward, backward data, backward filter), channels-last tensors
//    described by their strides. The rules (ops/conv_rules.cpp) write
//    gradients as forward convolutions of transformed operands; those are
//    recognised by their shapes and strides and given to the operation
//    that computes them natively:
//      * input dilation > 1 with stride 1 (the input's gradient of a
//        strided convolution, conv_transpose), and a flipped convolution
//        with neither stride nor input dilation (the input's gradient of
//        a stride-1 convolution, conv_transpose at stride 1), is cuDNN's
//        backward data of a convolution whose stride is our input
//        dilation, with the weight rearranged (the latter also maps to
//        the forward, tried next);
//      * a weight-shaped result whose operands are transposed views of
//        channels-last arrays (the weight's gradient with groups = 1) is
//        cuDNN's backward filter on those arrays;
//      * anything else without input dilation is a forward convolution.
//    The weight's gradient with groups > 1 is its own node,
//    ConvolutionWeightGrad (weight_grad_mappings): cuDNN's backward filter
//    over the forward's input and the cotangent as they are (packed
//    channels-last), cuDNN reading the groups off the channel counts; with
//    input dilation (conv_transpose) backward filter with the operands'
//    roles swapped. Where neither applies the node computes
//    weight_grad_composite, the Convolution it stands for.
//    The test emulates each operation from cuDNN's documented formulas
//    over the very descriptors built here and compares with the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/array.h"
#include "fluxion/backend/common/math.h"

namespace fluxion::conv_plan {

// A convolution seen as 3-D: the primitive's 1 or 2 spatial axes are the
// last ones, the missing leading axes have size 1 (stride, dilations 1,
// padding 0). The input is [N, L0, L1, L2, C_in], the weight [C_out, K0,
// K1, K2, C_in / groups], the output [N, O0, O1, O2, C_out], all
// row-contiguous (the general path's operands are made so).
struct Geometry {
  int64_t n = 0, cin = 0, cout = 0, groups = 1, cin_g = 0, cout_g = 0;
  int64_t L[3] = {1, 1, 1}, K[3] = {1, 1, 1}, O[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, lo[3] = {0, 0, 0}, kd[3] = {1, 1, 1},
          id[3] = {1, 1, 1};
  bool flip = false;
  int spatial = 1;  // the primitive's own spatial axes

  FLUXION_HOST_DEVICE int64_t taps() const { return K[0] * K[1] * K[2]; }
  // Columns of the unfolded matrix: a group's receptive field.
  FLUXION_HOST_DEVICE int64_t cols() const { return taps() * cin_g; }
  FLUXION_HOST_DEVICE int64_t positions() const { return O[0] * O[1] * O[2]; }
  FLUXION_HOST_DEVICE int64_t rows() const { return n * positions(); }
  FLUXION_HOST_DEVICE int64_t in_positions() const {
    return L[0] * L[1] * L[2];
  }
};

// The geometry of input shape `x`, weight `w` and output `y` under the
// primitive's parameters (vectors of one entry per spatial axis).
Geometry geometry(const Shape& x, const Shape& w, const Shape& y,
                  const std::vector<int>& stride,
                  const std::vector<int>& padding_lo,
                  const std::vector<int>& kernel_dilation,
                  const std::vector<int>& input_dilation, int groups,
                  bool flip);

// Along axis a: the input index output o reads at tap k, or -1 where that
// falls on padding or between the elements of a dilated input. Output o
// reads the dilated, padded input at o * s + k' * kd, k' the tap (K - 1 -
// k when flipped); element i of the input sits at i * id + lo there.
FLUXION_HOST_DEVICE inline int64_t axis_source(const Geometry& g, int a,
                                               int64_t o, int64_t k) {
  const int64_t kk = g.flip ? g.K[a] - 1 - k : k;
  int64_t j = o * g.s[a] - g.lo[a] + kk * g.kd[a];
  if (j < 0) {
    return -1;
  }
  if (g.id[a] != 1) {
    if (j % g.id[a] != 0) {
      return -1;
    }
    j /= g.id[a];
  }
  return j < g.L[a] ? j : -1;
}

// Output row r of the unfolded matrix: the output position (n, o0, o1,
// o2), row-major.
struct Row {
  int64_t n, o[3];
};
FLUXION_HOST_DEVICE inline Row row_of(const Geometry& g, int64_t r) {
  Row w;
  w.o[2] = r % g.O[2];
  r /= g.O[2];
  w.o[1] = r % g.O[1];
  r /= g.O[1];
  w.o[0] = r % g.O[0];
  w.n = r / g.O[0];
  return w;
}

// The input element that tap t (k0, k1, k2 row-major: the weight's order)
// of output row `w` reads in channel 0 of group `grp`, or -1 where the tap
// falls on padding or a hole of the input dilation. The group's channels
// follow it.
FLUXION_HOST_DEVICE inline int64_t tap_source(const Geometry& g,
                                              int64_t grp, const Row& w,
                                              int64_t t) {
  const int64_t k2 = t % g.K[2];
  t /= g.K[2];
  const int64_t k1 = t % g.K[1];
  const int64_t k0 = t / g.K[1];
  const int64_t i0 = axis_source(g, 0, w.o[0], k0);
  const int64_t i1 = axis_source(g, 1, w.o[1], k1);
  const int64_t i2 = axis_source(g, 2, w.o[2], k2);
  if (i0 < 0 || i1 < 0 || i2 < 0) {
    return -1;
  }
  return (((w.n * g.L[0] + i0) * g.L[1] + i1) * g.L[2] + i2) * g.cin +
         grp * g.cin_g;
}

// The element of the row-contiguous input that entry (r, c) of group
// `grp`'s unfolded matrix holds, or -1 for a zero. Row r is the output
// position, column c the tap times cin_g plus the channel within the
// group, so that row r times the group's weight rows [cout_g, cols] is the
// output's row r, channels grp * cout_g ... (The kernel computes
// tap_source once per (row, tap) and adds the channel.)
FLUXION_HOST_DEVICE inline int64_t im2col_source(const Geometry& g,
                                                 int64_t grp, int64_t r,
                                                 int64_t c) {
  const int64_t src = tap_source(g, grp, row_of(g, r), c / g.cin_g);
  return src < 0 ? -1 : src + c % g.cin_g;
}

// One input channel per group (depthwise convolutions and their input
// gradients): the direct kernel's work item `item` is TW consecutive
// outputs along the last spatial axis of one output channel, of the
// row-contiguous output [n, O0, O1, O2, cout]; items are numbered with the
// channel fastest (consecutive threads read consecutive channels), then
// the tile, O1, O0, n. Each output is the sum over the taps, in the
// weight's row-major order (the CPU's depthwise order), of x(input
// element) * w(weight element) for the taps that read an input element
// (channel co / cout_g); store(output element, sum) writes it. I is the
// index type of the item's decomposition (32 bits when the items fit).
template <int TW, typename I>
FLUXION_HOST_DEVICE inline int64_t direct_items(const Geometry& g) {
  return g.n * g.O[0] * g.O[1] * ((g.O[2] + TW - 1) / TW) * g.cout;
}
template <int TW, typename Acc, typename I, typename X, typename W,
          typename Store>
FLUXION_HOST_DEVICE void direct_tile(const Geometry& g, I item, X x, W w,
                                     Store store) {
  const I cout = static_cast<I>(g.cout);
  const I tiles = static_cast<I>((g.O[2] + TW - 1) / TW);
  const I co = item % cout;
  I rest = item / cout;
  const int64_t tile = rest % tiles;
  rest /= tiles;
  const int64_t o1 = rest % static_cast<I>(g.O[1]);
  rest /= static_cast<I>(g.O[1]);
  const int64_t o0 = rest % static_cast<I>(g.O[0]);
  const int64_t n = rest / static_cast<I>(g.O[0]);
  const int64_t xbase = n * g.in_positions() * g.cin + co / g.cout_g;
  const int64_t wbase = int64_t{co} * g.taps();
  Acc acc[TW];
  for (int j = 0; j < TW; ++j) {
    acc[j] = Acc(0);
  }
  for (int64_t k0 = 0; k0 < g.K[0]; ++k0) {
    const int64_t i0 = axis_source(g, 0, o0, k0);
    if (i0 < 0) {
      continue;
    }
    for (int64_t k1 = 0; k1 < g.K[1]; ++k1) {
      const int64_t i1 = axis_source(g, 1, o1, k1);
      if (i1 < 0) {
        continue;
      }
      const int64_t xrow = xbase + (i0 * g.L[1] + i1) * g.L[2] * g.cin;
      const int64_t wrow = wbase + (k0 * g.K[1] + k1) * g.K[2];
      for (int64_t k2 = 0; k2 < g.K[2]; ++k2) {
        const Acc wv = w(wrow + k2);
        for (int j = 0; j < TW; ++j) {
          const int64_t o2 = tile * TW + j;
          const int64_t i2 = o2 < g.O[2] ? axis_source(g, 2, o2, k2) : -1;
          if (i2 >= 0) {
            acc[j] += x(xrow + i2 * g.cin) * wv;
          }
        }
      }
    }
  }
  const int64_t out = (((n * g.O[0] + o0) * g.O[1] + o1) * g.O[2]) * g.cout +
                      co;
  for (int j = 0; j < TW; ++j) {
    const int64_t o2 = tile * TW + j;
    if (o2 < g.O[2]) {
      store(out + o2 * g.cout, acc[j]);
    }
  }
}

// Rows of the unfolded matrix per chunk, so that the scratch of all groups
// [groups, rows, cols] stays within `max_bytes` (or holds the fewest rows
// that keep the next rule), and every chunk's output rows start 256 bytes
// apart from the output's start times a whole number (cuBLASLt's
// algorithms assume 256-byte aligned operands).
int64_t chunk_rows(const Geometry& g, int64_t itemsize, int64_t max_bytes);

// ------------------------------------------------------------------ cuDNN

enum class Op { forward, backward_data, backward_filter };
const char* op_name(Op op);

// A tensor as cuDNN is told it: dims [N, C, spatial...] and strides in
// elements; a 1-D convolution gets a unit H axis (cuDNN convolves 2-D and
// 3-D), so nd is 4 or 5.
struct Tensor {
  int nd = 0;
  int64_t dim[5] = {0, 0, 0, 0, 0};
  int64_t stride[5] = {0, 0, 0, 0, 0};
};

// A strided copy of `shape` elements from src (strides src) into dst
// (strides dst), both from their first element: cu::copy_region's terms.
struct Copy {
  Shape shape;
  Strides src, dst;
  int64_t src_offset = 0;  // where src's walk starts (negative strides)
};

// One cuDNN operation computing the convolution. Roles are cuDNN's:
//   forward:         Y  = conv(X, W)      X <- our input, W <- our weight,
//                                          Y <- our output
//   backward_data:   DX = conv^T(DY, W)   DY <- our input, W <- our weight
//                                          rearranged (weight_copy) into
//                                          a scratch, DX <- our output
//   backward_filter: DW = wgrad(X, DY)    X <- our input, DY <- our weight
//                                          (Convolution: both transposed
//                                          views, as they are; DW <- a
//                                          scratch copied into our output,
//                                          result_copy). ConvolutionWeight-
//                                          Grad: X <- x, DY <- ct, DW <- our
//                                          output (no scratch); swapped:
//                                          X <- ct, DY <- x, DW <- scratch
// x, w, y hold X / DX, W / DW and Y / DY. The operation's spatial
// parameters: pre/post paddings, strides and dilations (cuDNN's: output p
// reads input p * stride + r * dilation - pre at filter tap r, r reversed
// in CUDNN_CONVOLUTION mode, `convolution_mode`), over nd - 2 axes.
struct Mapping {
  Op op = Op::forward;
  Tensor x, w, y;
  int64_t pre[3] = {0, 0, 0}, post[3] = {0, 0, 0};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};
  bool convolution_mode = false;
  // Our input / weight must be copied row-contiguous first (their strides
  // do not make a packed channels-last tensor); the descriptors above are
  // then those of the copies.
  bool pack_input = false, pack_weight = false;
  // backward_data: the weight, row-contiguous [C_out, K..., C_in/g], into
  // a scratch of w's packed layout [C_in, K..., C_out/g].
  Copy weight_copy;
  // backward_filter: DW's scratch (packed KRSC) into our row-contiguous
  // output, when scratch_elems > 0 (else DW is our output).
  Copy result_copy;
  int64_t scratch_elems = 0;  // the rearranged weight's or DW's scratch
  // backward_filter: X <- our second operand, DY <- our first.
  bool swap_operands = false;
  std::string str() const;    // for messages and debug output
};

// The operations able to compute the convolution of input (shape xs,
// strides xst) and weight (ws, wst) into a row-contiguous output of shape
// ys, in the order to try them; empty when none can (negative padding, a
// stride with input dilation: the general path). Row-contiguous operands
// always get a mapping when one exists; others may be packed.
std::vector<Mapping> cudnn_mappings(const Shape& xs, const Strides& xst,
                                    const Shape& ws, const Strides& wst,
                                    const Shape& ys,
                                    const std::vector<int>& stride,
                                    const std::vector<int>& padding_lo,
                                    const std::vector<int>& padding_hi,
                                    const std::vector<int>& kernel_dilation,
                                    const std::vector<int>& input_dilation,
                                    int groups, bool flip);

// The operations able to compute ConvolutionWeightGrad of input x (shape
// xs, strides xst) and cotangent ct (cts, ctst) into its row-contiguous
// output of shape ys [C_out, K..., C_in/g], in the order to try them;
// empty when none can (negative padding at the start, or at the end of the
// cotangent's span; a stride with input dilation). Operands that are not
// packed channels-last are packed.
std::vector<Mapping> weight_grad_mappings(
    const Shape& xs, const Strides& xst, const Shape& cts,
    const Strides& ctst, const Shape& ys, const std::vector<int>& stride,
    const std::vector<int>& padding_lo,
    const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation, int groups, bool flip);

// ConvolutionWeightGrad as the Convolution it stands for (the CPU's way,
// and the GPU's where no cuDNN operation takes it): xin = x rearranged
// row-contiguous [C_in/g, L..., g N], xin(a, l..., j N + n) = x(n, l...,
// j C_in/g + a); kern = ct row-contiguous [C_out, O..., N]; r = the
// Convolution of xin and kern under conv's parameters, [C_in/g, K...,
// C_out]; our output(co, k..., a) = r(a, k'..., co), k' = k (K - 1 - k
// where the forward flips).
struct WeightGradComposite {
  Shape xin, kern, r;
  Copy input, cotangent, result;  // x -> xin, ct -> kern, r -> our output
  std::vector<int> stride, padding_lo, padding_hi, kernel_dilation,
      input_dilation;
  int groups = 1;
};
WeightGradComposite weight_grad_composite(
    const Shape& xs, const Strides& xst, const Shape& cts,
    const Strides& ctst, const std::vector<int>& kernel,
    const std::vector<int>& stride, const std::vector<int>& padding_lo,
    const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation, int groups, bool flip);

// The spatial output size cuDNN computes from input size `in` (the
// relation every operation's descriptors must satisfy), for checks.
inline int64_t cudnn_out_size(int64_t in, int64_t filter, int64_t pre,
                              int64_t post, int64_t stride,
                              int64_t dilation) {
  const int64_t span = in + pre + post - ((filter - 1) * dilation + 1);
  return span < 0 ? 0 : span / stride + 1;
}

}  // namespace fluxion::conv_plan
