// Transformation rules of Convolution, written with public ops (and the
// Convolution node itself), so they differentiate again.
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
using conv_detail::make_conv;

namespace {

ConvParams params_of(const Convolution& c) {
  return {
      c.stride(),         c.padding_lo(), c.padding_hi(), c.kernel_dilation(),
      c.input_dilation(), c.groups(),     c.flip()};
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
array weight_grad(const array& x, const array& w, const array& ct,
                  const ConvParams& p, Stream s) {
  int d = x.ndim() - 2;
  int g = p.groups;
  int n = x.shape(0), cin_g = w.shape(-1);
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
    int L = x.shape(i + 1), K = w.shape(i + 1), O = ct.shape(i + 1);
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

}  // namespace

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
      grads.push_back(weight_grad(x, w, ct, p, s));
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
  std::vector<int> perm;
  for (int i = 1; i <= d + 1; ++i) {
    perm.push_back(i);
  }
  perm.push_back(0);
  perm.push_back(d + 2);
  Shape xs;
  for (int i = 1; i <= d + 1; ++i) {
    xs.push_back(x.shape(i));
  }
  xs.push_back(b * x.shape(d + 2));
  auto xf = reshape(transpose(x, perm, s), xs, s);
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

}  // namespace fluxion
