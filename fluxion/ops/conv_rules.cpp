// Transformation rules of Convolution and ConvolutionWeightGrad, written
// with public ops (and the convolution nodes themselves), so they
// differentiate again.
//
// Per spatial axis, with input length L, kernel K, output length O, stride
// s, padding lo, kernel dilation kd, input dilation id: output o reads the
// dilated, padded input at o * s + k * kd for kernel tap k (K - 1 - k when
// flipped).
#include <optional>

#include "fluxion/ops/binary.h"
#include "fluxion/ops/conv.h"
#include "fluxion/ops/conv_impl.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/rule_helpers.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

using conv_detail::ConvParams;
using conv_detail::input_grad;
using conv_detail::make_conv;
using conv_detail::weight_grad;

namespace {

ConvParams params_of(const Convolution& c) {
  return {
      c.stride(),         c.padding_lo(), c.padding_hi(), c.kernel_dilation(),
      c.input_dilation(), c.groups(),     c.flip()};
}

// ConvolutionWeightGrad c's parameters (padding_hi empty: the node has
// none).
ConvParams params_of(const ConvolutionWeightGrad& c) {
  return {c.stride(),         c.padding_lo(), {}, c.kernel_dilation(),
          c.input_dilation(), c.groups(),     c.flip()};
}

// The forward convolution of ConvolutionWeightGrad c whose input is shaped
// like x and output like ct: padding_hi the least that gives ct's length
// (a larger one only adds positions no output reads).
ConvParams params_of(const ConvolutionWeightGrad& c, const Shape& x,
                     const Shape& ct) {
  ConvParams p = params_of(c);
  const int d = static_cast<int>(x.size()) - 2;
  for (int i = 0; i < d; ++i) {
    const int L = x[i + 1], O = ct[i + 1], K = c.kernel_size()[i];
    p.padding_hi.push_back((O - 1) * p.stride[i] +
                           (K - 1) * p.kernel_dilation[i] -
                           (L - 1) * p.input_dilation[i] - p.padding_lo[i]);
  }
  return p;
}

// [B, N, L..., C] -> [N, L..., B, C] (d spatial axes).
std::vector<int> spatial_first(int d) {
  std::vector<int> perm;
  for (int i = 1; i <= d + 1; ++i) {
    perm.push_back(i);
  }
  perm.push_back(0);
  perm.push_back(d + 2);
  return perm;
}

// [B, N, L..., C] -> [N, L..., B C]: batch element j's channels become
// channels j C ... j C + C - 1 (with groups g, groups j g ... j g + g - 1).
array batch_into_channels(const array& a, Stream s) {
  const int d = a.ndim() - 3;
  Shape folded;
  for (int i = 1; i <= d + 1; ++i) {
    folded.push_back(a.shape(i));
  }
  folded.push_back(a.shape(0) * a.shape(d + 2));
  return reshape(transpose(a, spatial_first(d), s), folded, s);
}

// `a` reversed along axes [first, first + n).
array reverse_axes(const array& a, int first, int n, Stream s) {
  Shape start(a.ndim(), 0), stop = a.shape(), strides(a.ndim(), 1);
  for (int i = first; i < first + n; ++i) {
    start[i] = a.shape(i) - 1;
    stop[i] = -a.shape(i) - 1;
    strides[i] = -1;
  }
  return slice(a, start, stop, strides, s);
}

}  // namespace

namespace conv_detail {

// The cotangent of the input: the cotangent (dilated by the stride)
// correlated with the weight flipped and with its channel axes swapped
// within each group, taking every id-th position.
array input_grad(const array& x, const array& w, const array& ct,
                 const ConvParams& p, Stream s) {
  int d = x.ndim() - 2;
  int g = p.groups;
  int cout = w.shape(0), cin_g = w.shape(-1);
  // [C_out, K..., C_in/g] -> [g, C_in/g, K..., C_out/g] -> [C_in, K...,
  // C_out/g]
  Shape split{g, cout / g};
  for (int i = 0; i < d; ++i) {
    split.push_back(w.shape(i + 1));
  }
  split.push_back(cin_g);
  std::vector<int> perm{0, d + 2};
  for (int i = 0; i < d; ++i) {
    perm.push_back(i + 2);
  }
  perm.push_back(1);
  Shape merged{g * cin_g};
  for (int i = 0; i < d; ++i) {
    merged.push_back(w.shape(i + 1));
  }
  merged.push_back(cout / g);
  auto wt = reshape(transpose(reshape(w, split, s), perm, s), merged, s);

  ConvParams q;
  q.groups = g;
  q.flip = !p.flip;
  for (int i = 0; i < d; ++i) {
    int L = x.shape(i + 1), K = w.shape(i + 1), O = ct.shape(i + 1);
    int kspan = (K - 1) * p.kernel_dilation[i];
    int lo = kspan - p.padding_lo[i];
    q.stride.push_back(p.input_dilation[i]);
    q.padding_lo.push_back(lo);
    q.padding_hi.push_back((L - 1) * p.input_dilation[i] + kspan -
                           (O - 1) * p.stride[i] - lo);
    q.kernel_dilation.push_back(p.kernel_dilation[i]);
    q.input_dilation.push_back(p.stride[i]);
  }
  return make_conv(ct, wt, q, s);
}

// The cotangent of the weight: the input correlated with the cotangent,
// with the batch as channels (one group per convolution group) and the
// input channels as the batch.
array weight_grad_composite(const array& x, const array& ct,
                            const std::vector<int>& kernel,
                            const ConvParams& p, Stream s) {
  int d = x.ndim() - 2;
  int g = p.groups;
  int n = x.shape(0), cin_g = x.shape(-1) / g;
  // x [N, L..., C_in] -> [N, L..., g, C_in/g] -> [C_in/g, L..., g, N]
  Shape split = x.shape();
  split.back() = g;
  split.push_back(cin_g);
  std::vector<int> perm{d + 2};
  for (int i = 0; i < d; ++i) {
    perm.push_back(i + 1);
  }
  perm.push_back(d + 1);
  perm.push_back(0);
  Shape merged{cin_g};
  for (int i = 0; i < d; ++i) {
    merged.push_back(x.shape(i + 1));
  }
  merged.push_back(g * n);
  auto xin = reshape(transpose(reshape(x, split, s), perm, s), merged, s);
  // ct [N, O..., C_out] -> [C_out, O..., N]
  std::vector<int> cperm{d + 1};
  for (int i = 0; i < d; ++i) {
    cperm.push_back(i + 1);
  }
  cperm.push_back(0);
  auto kern = transpose(ct, cperm, s);

  ConvParams q;
  q.groups = g;
  q.flip = false;
  for (int i = 0; i < d; ++i) {
    int L = x.shape(i + 1), K = kernel[i], O = ct.shape(i + 1);
    q.stride.push_back(p.kernel_dilation[i]);
    q.padding_lo.push_back(p.padding_lo[i]);
    q.padding_hi.push_back((K - 1) * p.kernel_dilation[i] +
                           (O - 1) * p.stride[i] -
                           (L - 1) * p.input_dilation[i] - p.padding_lo[i]);
    q.kernel_dilation.push_back(p.stride[i]);
    q.input_dilation.push_back(p.input_dilation[i]);
  }
  // [C_in/g, K..., C_out] -> [C_out, K..., C_in/g]
  auto r = make_conv(xin, kern, q, s);
  std::vector<int> back{d + 1};
  for (int i = 0; i < d; ++i) {
    back.push_back(i + 1);
  }
  back.push_back(0);
  r = transpose(r, back, s);
  return p.flip ? reverse_axes(r, 1, d, s) : r;
}

array weight_grad(const array& x, const array& ct,
                  const std::vector<int>& kernel, const ConvParams& p,
                  Stream s) {
  if (p.groups == 1) {
    return weight_grad_composite(x, ct, kernel, p, s);
  }
  Shape out{ct.shape(-1)};
  out.insert(out.end(), kernel.begin(), kernel.end());
  out.push_back(x.shape(-1) / p.groups);
  return array(std::move(out), x.dtype(),
               std::make_shared<ConvolutionWeightGrad>(
                   s, kernel, p.stride, p.padding_lo, p.kernel_dilation,
                   p.input_dilation, p.groups, p.flip),
               {x, ct});
}

}  // namespace conv_detail

std::vector<array> Convolution::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<array>& outputs) {
  auto s = stream();
  const auto& x = primals[0];
  const auto& w = primals[1];
  auto ct = cotangents[0];
  auto p = params_of(*this);
  std::vector<array> grads;
  for (int a : argnums) {
    const auto& target = a == 0 ? x : w;
    if (ct.size() == 0 || x.size() == 0 || w.size() == 0) {
      grads.push_back(zeros_like(target, s));
    } else if (a == 0) {
      grads.push_back(input_grad(x, w, ct, p, s));
    } else {
      std::vector<int> kernel(w.shape().begin() + 1, w.shape().end() - 1);
      grads.push_back(weight_grad(x, ct, kernel, p, s));
    }
  }
  return grads;
}

std::vector<array> Convolution::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  auto s = stream();
  auto p = params_of(*this);
  std::optional<array> out;
  for (size_t k = 0; k < argnums.size(); ++k) {
    auto term = argnums[k] == 0 ? make_conv(tangents[k], primals[1], p, s)
                                : make_conv(primals[0], tangents[k], p, s);
    out = out ? add(*out, term, s) : term;
  }
  return {*out};
}

std::pair<std::vector<array>, std::vector<int>> Convolution::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto p = params_of(*this);
  int b = rules::batch_size(inputs, axes);
  int d = static_cast<int>(p.stride.size());
  if (axes[0] < 0 && axes[1] < 0) {
    return {{make_conv(inputs[0], inputs[1], p, s)}, {-1}};
  }
  if (axes[1] < 0) {
    // The batch folds into N.
    auto x = rules::to_front(inputs[0], axes[0], b, s);
    Shape folded = x.shape();
    folded.erase(folded.begin());
    folded[0] *= b;
    auto y = make_conv(reshape(x, folded, s), inputs[1], p, s);
    Shape ys = y.shape();
    ys[0] = x.shape(1);
    return {{reshape(y, rules::prepend(b, ys), s)}, {0}};
  }
  // A batched weight: batch element j becomes groups j * g ... j * g + g - 1
  // of one convolution over the channels of every batch element.
  auto x = rules::to_front(inputs[0], axes[0], b, s);  // [B, N, L..., C]
  auto w = rules::to_front(inputs[1], axes[1], b, s);  // [B, Co, K..., Ci/g]
  auto xf = batch_into_channels(x, s);
  Shape ws = w.shape();
  ws.erase(ws.begin());
  ws[0] *= b;
  auto wf = reshape(w, ws, s);
  auto q = p;
  q.groups = p.groups * b;
  auto y = make_conv(xf, wf, q, s);  // [N, O..., B * C_out]
  Shape ys = y.shape();
  ys.back() = b;
  ys.push_back(w.shape(1));
  return {{reshape(y, ys, s)}, {d + 1}};
}


// ------------------------------------------------ ConvolutionWeightGrad

std::vector<array> ConvolutionWeightGrad::vjp(
    const std::vector<array>& primals, const std::vector<array>& cotangents,
    const std::vector<int>& argnums, const std::vector<array>&) {
  // With W = wgrad(x, ct): <cw, W> = <ct, conv(x, cw)>, so the cotangent
  // of ct is conv(x, cw) and that of x the input gradient of conv(x, cw).
  auto s = stream();
  const auto& x = primals[0];
  const auto& ct = primals[1];
  const auto& cw = cotangents[0];
  auto p = params_of(*this, x.shape(), ct.shape());
  std::vector<array> grads;
  for (int a : argnums) {
    const auto& target = primals[a];
    if (cw.size() == 0 || x.size() == 0 || ct.size() == 0) {
      grads.push_back(zeros_like(target, s));
    } else if (a == 0) {
      grads.push_back(input_grad(x, cw, ct, p, s));
    } else {
      grads.push_back(make_conv(x, cw, p, s));
    }
  }
  return grads;
}

std::vector<array> ConvolutionWeightGrad::jvp(
    const std::vector<array>& primals, const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  auto s = stream();
  auto p = params_of(*this);
  std::optional<array> out;
  for (size_t k = 0; k < argnums.size(); ++k) {
    auto term = argnums[k] == 0
                    ? weight_grad(tangents[k], primals[1], kernel_size(), p, s)
                    : weight_grad(primals[0], tangents[k], kernel_size(), p, s);
    out = out ? add(*out, term, s) : term;
  }
  return {*out};
}

std::pair<std::vector<array>, std::vector<int>> ConvolutionWeightGrad::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  auto p = params_of(*this);
  if (axes[0] < 0 && axes[1] < 0) {
    return {{weight_grad(inputs[0], inputs[1], kernel_size(), p, s)}, {-1}};
  }
  // Batch element j becomes groups j g ... j g + g - 1 of one weight
  // gradient over the channels of every batch element (an unmapped operand
  // broadcast to each); its output channels come out batch-major.
  int b = rules::batch_size(inputs, axes);
  auto x = rules::to_front(inputs[0], axes[0], b, s);   // [B, N, L..., Ci]
  auto ct = rules::to_front(inputs[1], axes[1], b, s);  // [B, N, O..., Co]
  auto q = p;
  q.groups = p.groups * b;
  auto r = weight_grad(batch_into_channels(x, s), batch_into_channels(ct, s),
                       kernel_size(), q, s);  // [B Co, K..., Ci/g]
  Shape rs = r.shape();
  rs[0] = ct.shape(-1);
  return {{reshape(r, rules::prepend(b, rs), s)}, {0}};
}

}  // namespace fluxion
