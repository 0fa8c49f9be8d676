#include "fluxion/ops/conv.h"

#include <algorithm>
#include <ostream>
#include <stdexcept>
#include <string>

#include "fluxion/ops/astype.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/conv_impl.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/primitive_args.h"

namespace fluxion {

namespace conv_detail {

int dilated_size(int n, int dilation) {
  return n == 0 ? 0 : (n - 1) * dilation + 1;
}

Shape output_shape(const Shape& in, const Shape& wt, const ConvParams& p) {
  int d = static_cast<int>(in.size()) - 2;
  Shape out{in[0]};
  for (int i = 0; i < d; ++i) {
    int span = dilated_size(in[i + 1], p.input_dilation[i]) + p.padding_lo[i] +
               p.padding_hi[i];
    int k = dilated_size(wt[i + 1], p.kernel_dilation[i]);
    out.push_back(span < k ? 0 : (span - k) / p.stride[i] + 1);
  }
  out.push_back(wt[0]);
  return out;
}

array make_conv(const array& in, const array& wt, const ConvParams& p,
                Stream s) {
  return array(output_shape(in.shape(), wt.shape(), p), in.dtype(),
               std::make_shared<Convolution>(
                   s, p.stride, p.padding_lo, p.padding_hi, p.kernel_dilation,
                   p.input_dilation, p.groups, p.flip),
               {in, wt});
}

namespace {

std::string prefix(const char* op) { return std::string("[") + op + "] "; }

// One value per spatial axis: an empty vector means `fill`, a single value
// applies to all axes.
std::vector<int> per_axis(std::vector<int> v, int d, int fill, const char* what,
                          const char* op) {
  if (v.empty()) {
    return std::vector<int>(d, fill);
  }
  if (v.size() == 1 && d != 1) {
    return std::vector<int>(d, v[0]);
  }
  if (static_cast<int>(v.size()) != d) {
    throw std::invalid_argument(prefix(op) + "Received " + what + " " +
                                vec_str(v) + " for a convolution with " +
                                std::to_string(d) + " spatial dimensions.");
  }
  return v;
}

}  // namespace

// Validates everything but the padding's sign (conv_transpose may crop)
// and builds the node; inputs are promoted to their common float type.
array checked_conv(array in, array wt, ConvParams p, int spatial,
                   const char* op, Stream s) {
  auto t = promote_types(in.dtype(), wt.dtype());
  if (!is_floating_point(t)) {
    throw std::invalid_argument(
        prefix(op) + "Received input and weight of dtypes " +
        dtype_name(in.dtype()) + " and " + dtype_name(wt.dtype()) +
        ": convolutions need floating-point arrays.");
  }
  int d = spatial;
  if (d < 1 || d > 3) {
    throw std::invalid_argument(
        prefix(op) + "Received an input of shape " + shape_str(in.shape()) +
        ": convolutions have 1 to 3 spatial dimensions (arrays of 3 to 5 "
        "dimensions).");
  }
  if (in.ndim() != d + 2) {
    throw std::invalid_argument(
        prefix(op) + "Received an input of shape " + shape_str(in.shape()) +
        " for a " + std::to_string(d) + "-D convolution: it needs " +
        std::to_string(d + 2) + " dimensions [N, spatial..., C_in].");
  }
  if (wt.ndim() != d + 2) {
    throw std::invalid_argument(
        prefix(op) + "Received a weight of shape " + shape_str(wt.shape()) +
        " for a " + std::to_string(d) + "-D convolution: it needs " +
        std::to_string(d + 2) +
        " dimensions [C_out, kernel spatial..., C_in / groups].");
  }
  p.stride = per_axis(std::move(p.stride), d, 1, "stride", op);
  p.padding_lo = per_axis(std::move(p.padding_lo), d, 0, "padding", op);
  p.padding_hi = per_axis(std::move(p.padding_hi), d, 0, "padding", op);
  p.kernel_dilation =
      per_axis(std::move(p.kernel_dilation), d, 1, "kernel dilation", op);
  p.input_dilation =
      per_axis(std::move(p.input_dilation), d, 1, "input dilation", op);
  auto positive = [&](const std::vector<int>& v, const char* what) {
    for (int x : v) {
      if (x < 1) {
        throw std::invalid_argument(prefix(op) + "Received " + what + " " +
                                    vec_str(v) + ": it must be positive.");
      }
    }
  };
  positive(p.stride, "stride");
  positive(p.kernel_dilation, "dilation");
  positive(p.input_dilation, "input dilation");
  int cin = in.shape(-1);
  int cout = wt.shape(0);
  if (p.groups < 1) {
    throw std::invalid_argument(
        prefix(op) + "Received groups = " + std::to_string(p.groups) +
        ": it must be positive.");
  }
  if (cin % p.groups != 0 || cout % p.groups != 0) {
    throw std::invalid_argument(
        prefix(op) + "Received groups = " + std::to_string(p.groups) +
        " with " + std::to_string(cin) + " input channels and " +
        std::to_string(cout) +
        " output channels: groups must divide both channel counts.");
  }
  if (wt.shape(-1) * p.groups != cin) {
    throw std::invalid_argument(
        prefix(op) + "Received an input of shape " + shape_str(in.shape()) +
        " (" + std::to_string(cin) + " channels) and a weight of shape " +
        shape_str(wt.shape()) + " with groups = " + std::to_string(p.groups) +
        ": the weight's last dimension must be C_in / groups = " +
        std::to_string(cin / p.groups) + ".");
  }
  for (int i = 0; i < d; ++i) {
    if (wt.shape(i + 1) < 1) {
      throw std::invalid_argument(prefix(op) + "Received a weight of shape " +
                                  shape_str(wt.shape()) +
                                  " with an empty spatial dimension.");
    }
    int span = dilated_size(in.shape(i + 1), p.input_dilation[i]) +
               p.padding_lo[i] + p.padding_hi[i];
    int k = dilated_size(wt.shape(i + 1), p.kernel_dilation[i]);
    if (span < k) {
      throw std::invalid_argument(
          prefix(op) + "Received an input of shape " + shape_str(in.shape()) +
          " and a weight of shape " + shape_str(wt.shape()) +
          ": along spatial dimension " + std::to_string(i) +
          " the dilated kernel (size " + std::to_string(k) +
          ") is larger than the dilated, padded input (size " +
          std::to_string(span) + ").");
    }
  }
  in = astype(in, t, s);
  wt = astype(wt, t, s);
  return make_conv(in, wt, p, s);
}

void check_padding(const std::vector<int>& lo, const std::vector<int>& hi,
                   const char* op) {
  for (auto* v : {&lo, &hi}) {
    for (int x : *v) {
      if (x < 0) {
        throw std::invalid_argument(prefix(op) + "Received padding " +
                                    vec_str(*v) +
                                    ": padding must be non-negative.");
      }
    }
  }
}

}  // namespace conv_detail

using conv_detail::check_padding;
using conv_detail::checked_conv;
using conv_detail::ConvParams;

namespace {

array conv_nd(const array& in, const array& wt, std::vector<int> stride,
              std::vector<int> padding, std::vector<int> dilation, int groups,
              int d, const char* op, StreamOrDevice s) {
  check_padding(padding, padding, op);
  ConvParams p{std::move(stride),
               padding,
               padding,
               std::move(dilation),
               {},
               groups,
               false};
  return checked_conv(in, wt, std::move(p), d, op, to_stream(s));
}

std::vector<int> vec(const std::pair<int, int>& v) {
  return {v.first, v.second};
}
std::vector<int> vec(const std::tuple<int, int, int>& v) {
  return {std::get<0>(v), std::get<1>(v), std::get<2>(v)};
}

// conv_general with a flipped kernel over the input dilated by the stride:
// the transpose of conv with these parameters.
array conv_transpose_nd(const array& in, const array& wt,
                        std::vector<int> stride, std::vector<int> padding,
                        std::vector<int> dilation,
                        std::vector<int> output_padding, int groups, int d,
                        const char* op, StreamOrDevice s) {
  check_padding(padding, padding, op);
  for (size_t i = 0; i < output_padding.size(); ++i) {
    int limit = std::max(stride[i], dilation[i]);
    if (output_padding[i] < 0 || output_padding[i] >= limit) {
      throw std::invalid_argument(
          std::string("[") + op + "] Received output_padding " +
          vec_str(output_padding) + " with stride " + vec_str(stride) +
          " and dilation " + vec_str(dilation) +
          ": output_padding must be non-negative and smaller than the stride "
          "or the dilation.");
    }
  }
  std::vector<int> lo(d), hi(d);
  if (wt.ndim() == d + 2) {
    for (int i = 0; i < d; ++i) {
      int span = dilation[i] * (wt.shape(i + 1) - 1);
      lo[i] = span - padding[i];
      hi[i] = span - padding[i] + output_padding[i];
    }
  }
  ConvParams p{std::vector<int>(d, 1), lo,     hi,  std::move(dilation),
               std::move(stride),      groups, true};
  for (int x : p.input_dilation) {
    if (x < 1) {
      throw std::invalid_argument(std::string("[") + op + "] Received stride " +
                                  vec_str(p.input_dilation) +
                                  ": it must be positive.");
    }
  }
  return checked_conv(in, wt, std::move(p), d, op, to_stream(s));
}

}  // namespace

array conv1d(const array& input, const array& weight, int stride, int padding,
             int dilation, int groups, StreamOrDevice s) {
  // MLX's conv1d is conv_general with one stride/padding/dilation value:
  // an input with more spatial axes (and a weight to match) is convolved
  // over all of them, the values applying to each.
  int d = input.ndim() > 3 ? input.ndim() - 2 : 1;
  return conv_nd(input, weight, {stride}, {padding}, {dilation}, groups, d,
                 "conv1d", s);
}

array conv2d(const array& input, const array& weight,
             const std::pair<int, int>& stride,
             const std::pair<int, int>& padding,
             const std::pair<int, int>& dilation, int groups,
             StreamOrDevice s) {
  return conv_nd(input, weight, vec(stride), vec(padding), vec(dilation),
                 groups, 2, "conv2d", s);
}
array conv2d(const array& input, const array& weight, int stride, int padding,
             int dilation, int groups, StreamOrDevice s) {
  return conv_nd(input, weight, {stride, stride}, {padding, padding},
                 {dilation, dilation}, groups, 2, "conv2d", s);
}

array conv3d(const array& input, const array& weight,
             const std::tuple<int, int, int>& stride,
             const std::tuple<int, int, int>& padding,
             const std::tuple<int, int, int>& dilation, int groups,
             StreamOrDevice s) {
  return conv_nd(input, weight, vec(stride), vec(padding), vec(dilation),
                 groups, 3, "conv3d", s);
}
array conv3d(const array& input, const array& weight, int stride, int padding,
             int dilation, int groups, StreamOrDevice s) {
  return conv_nd(input, weight, std::vector<int>(3, stride),
                 std::vector<int>(3, padding), std::vector<int>(3, dilation),
                 groups, 3, "conv3d", s);
}

array conv_general(array input, array weight, std::vector<int> stride,
                   std::vector<int> padding_lo, std::vector<int> padding_hi,
                   std::vector<int> kernel_dilation,
                   std::vector<int> input_dilation, int groups, bool flip,
                   StreamOrDevice s) {
  check_padding(padding_lo, padding_hi, "conv_general");
  ConvParams p{std::move(stride),
               std::move(padding_lo),
               std::move(padding_hi),
               std::move(kernel_dilation),
               std::move(input_dilation),
               groups,
               flip};
  return checked_conv(input, weight, std::move(p), input.ndim() - 2,
                      "conv_general", to_stream(s));
}
array conv_general(const array& input, const array& weight,
                   std::vector<int> stride, std::vector<int> padding,
                   std::vector<int> kernel_dilation,
                   std::vector<int> input_dilation, int groups, bool flip,
                   StreamOrDevice s) {
  return conv_general(input, weight, std::move(stride), padding, padding,
                      std::move(kernel_dilation), std::move(input_dilation),
                      groups, flip, s);
}

array conv_transpose1d(const array& input, const array& weight, int stride,
                       int padding, int dilation, int output_padding,
                       int groups, StreamOrDevice s) {
  return conv_transpose_nd(input, weight, {stride}, {padding}, {dilation},
                           {output_padding}, groups, 1, "conv_transpose1d", s);
}
array conv_transpose2d(const array& input, const array& weight,
                       const std::pair<int, int>& stride,
                       const std::pair<int, int>& padding,
                       const std::pair<int, int>& dilation,
                       const std::pair<int, int>& output_padding, int groups,
                       StreamOrDevice s) {
  return conv_transpose_nd(input, weight, vec(stride), vec(padding),
                           vec(dilation), vec(output_padding), groups, 2,
                           "conv_transpose2d", s);
}
array conv_transpose2d(const array& input, const array& weight, int stride,
                       int padding, int dilation, int output_padding,
                       int groups, StreamOrDevice s) {
  return conv_transpose2d(input, weight, {stride, stride}, {padding, padding},
                          {dilation, dilation},
                          {output_padding, output_padding}, groups, s);
}
array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride,
                       const std::tuple<int, int, int>& padding,
                       const std::tuple<int, int, int>& dilation,
                       const std::tuple<int, int, int>& output_padding,
                       int groups, StreamOrDevice s) {
  return conv_transpose_nd(input, weight, vec(stride), vec(padding),
                           vec(dilation), vec(output_padding), groups, 3,
                           "conv_transpose3d", s);
}
array conv_transpose3d(const array& input, const array& weight, int stride,
                       int padding, int dilation, int output_padding,
                       int groups, StreamOrDevice s) {
  auto v = [](int x) { return std::tuple<int, int, int>{x, x, x}; };
  return conv_transpose3d(input, weight, v(stride), v(padding), v(dilation),
                          v(output_padding), groups, s);
}

array convolve(const array& a, const array& v, const std::string& mode,
               StreamOrDevice s) {
  if (a.ndim() != 1 || v.ndim() != 1) {
    throw std::invalid_argument("[convolve] Received arrays of shapes " +
                                shape_str(a.shape()) + " and " +
                                shape_str(v.shape()) + ": both must be 1-D.");
  }
  if (a.size() == 0 || v.size() == 0) {
    throw std::invalid_argument(
        "[convolve] Received arrays of shapes " + shape_str(a.shape()) +
        " and " + shape_str(v.shape()) + ": inputs cannot be empty.");
  }
  if (mode != "full" && mode != "same" && mode != "valid") {
    throw std::invalid_argument("[convolve] Received mode '" + mode +
                                "': it must be 'full', 'same' or 'valid'.");
  }
  auto st = to_stream(s);
  // The longer array slides under the shorter one (NumPy swaps them).
  const array& x = a.size() >= v.size() ? a : v;
  const array& k = a.size() >= v.size() ? v : a;
  int m = k.shape(0);
  int lo = 0, hi = 0;
  if (mode == "full") {
    lo = hi = m - 1;
  } else if (mode == "same") {
    hi = (m - 1) / 2;
    lo = m - 1 - hi;
  }
  ConvParams p{{1}, {lo}, {hi}, {1}, {1}, 1, true};
  auto out =
      checked_conv(reshape(x, {1, -1, 1}, st), reshape(k, {1, -1, 1}, st),
                   std::move(p), 1, "convolve", st);
  return reshape(out, {-1}, st);
}

bool Convolution::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& c = static_cast<const Convolution&>(o);
  return c.stride_ == stride_ && c.padding_lo_ == padding_lo_ &&
         c.padding_hi_ == padding_hi_ &&
         c.kernel_dilation_ == kernel_dilation_ &&
         c.input_dilation_ == input_dilation_ && c.groups_ == groups_ &&
         c.flip_ == flip_;
}

std::vector<PrimitiveArg> Convolution::state() const {
  return export_state(export_ints(stride_), export_ints(padding_lo_),
                      export_ints(padding_hi_), export_ints(kernel_dilation_),
                      export_ints(input_dilation_), int64_t{groups_}, flip_);
}

std::shared_ptr<Primitive> Convolution::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "Convolution");
  return std::make_shared<Convolution>(s, a.ints(0), a.ints(1), a.ints(2),
                                       a.ints(3), a.ints(4), a.i32(5), a.b(6));
}

std::vector<Shape> Convolution::output_shapes(const std::vector<array>& in) {
  ConvParams p{stride_,         padding_lo_, padding_hi_, kernel_dilation_,
               input_dilation_, groups_,     flip_};
  return {conv_detail::output_shape(in[0].shape(), in[1].shape(), p)};
}

void Convolution::print(std::ostream& os) const {
  os << "Convolution(stride=" << vec_str(stride_)
     << ", padding=" << vec_str(padding_lo_) << vec_str(padding_hi_)
     << ", kernel_dilation=" << vec_str(kernel_dilation_)
     << ", input_dilation=" << vec_str(input_dilation_)
     << ", groups=" << groups_ << (flip_ ? ", flip" : "") << ")";
}

}  // namespace fluxion

namespace fluxion {

bool ConvolutionWeightGrad::is_equivalent(const Primitive& o) const {
  if (typeid(o) != typeid(*this)) {
    return false;
  }
  auto& c = static_cast<const ConvolutionWeightGrad&>(o);
  return c.kernel_size_ == kernel_size_ && c.stride_ == stride_ &&
         c.padding_lo_ == padding_lo_ &&
         c.kernel_dilation_ == kernel_dilation_ &&
         c.input_dilation_ == input_dilation_ && c.groups_ == groups_ &&
         c.flip_ == flip_;
}

std::vector<PrimitiveArg> ConvolutionWeightGrad::state() const {
  return export_state(export_ints(kernel_size_), export_ints(stride_),
                      export_ints(padding_lo_), export_ints(kernel_dilation_),
                      export_ints(input_dilation_), int64_t{groups_}, flip_);
}

std::shared_ptr<Primitive> ConvolutionWeightGrad::from_state(
    Stream s, const std::vector<PrimitiveArg>& args) {
  PrimitiveArgs a(args, "ConvolutionWeightGrad");
  return std::make_shared<ConvolutionWeightGrad>(
      s, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.ints(4), a.i32(5),
      a.b(6));
}

std::vector<Shape> ConvolutionWeightGrad::output_shapes(
    const std::vector<array>& in) {
  // Checked, as an imported node's parameters are only as sound as this
  // rule makes them: the kernels index with them.
  const auto& x = in[0].shape();
  const auto& ct = in[1].shape();
  const size_t d = kernel_size_.size();
  bool ok = d >= 1 && x.size() == d + 2 && ct.size() == d + 2 &&
            x[0] == ct[0] && groups_ > 0 && x.back() % groups_ == 0 &&
            ct.back() % groups_ == 0;
  for (const auto* v : {&stride_, &padding_lo_, &kernel_dilation_,
                        &input_dilation_}) {
    ok = ok && v->size() == d;
  }
  for (size_t i = 0; i < d && ok; ++i) {
    ok = kernel_size_[i] >= 1 && stride_[i] >= 1 &&
         kernel_dilation_[i] >= 1 && input_dilation_[i] >= 1;
  }
  if (!ok) {
    throw std::invalid_argument(
        "[ConvolutionWeightGrad] Received inputs of shapes " + shape_str(x) +
        " and " + shape_str(ct) + " that do not fit its parameters.");
  }
  Shape out{ct.back()};
  out.insert(out.end(), kernel_size_.begin(), kernel_size_.end());
  out.push_back(x.back() / groups_);
  return {out};
}

void ConvolutionWeightGrad::print(std::ostream& os) const {
  os << "ConvolutionWeightGrad(kernel=" << vec_str(kernel_size_)
     << ", stride=" << vec_str(stride_) << ", padding=" << vec_str(padding_lo_)
     << ", kernel_dilation=" << vec_str(kernel_dilation_)
     << ", input_dilation=" << vec_str(input_dilation_)
     << ", groups=" << groups_ << (flip_ ? ", flip" : "") << ")";
}

}  // namespace fluxion
