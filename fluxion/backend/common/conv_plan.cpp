// Host side of the GPU's convolution plan (design in conv_plan.h).
#include "fluxion/backend/common/conv_plan.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace fluxion::conv_plan {

Geometry geometry(const Shape& x, const Shape& w, const Shape& y,
                  const std::vector<int>& stride,
                  const std::vector<int>& padding_lo,
                  const std::vector<int>& kernel_dilation,
                  const std::vector<int>& input_dilation, int groups,
                  bool flip) {
  Geometry g;
  const int d = static_cast<int>(x.size()) - 2;
  g.spatial = d;
  g.n = x[0];
  g.cin = x.back();
  g.cout = w[0];
  g.groups = groups;
  g.cin_g = g.cin / groups;
  g.cout_g = g.cout / groups;
  g.flip = flip;
  for (int i = 0; i < d; ++i) {
    const int a = 3 - d + i;
    g.L[a] = x[i + 1];
    g.K[a] = w[i + 1];
    g.O[a] = y[i + 1];
    g.s[a] = stride[i];
    g.lo[a] = padding_lo[i];
    g.kd[a] = kernel_dilation[i];
    g.id[a] = input_dilation[i];
  }
  return g;
}

int64_t chunk_rows(const Geometry& g, int64_t itemsize, int64_t max_bytes) {
  const int64_t rows = std::max<int64_t>(g.rows(), 1);
  const int64_t per_row = std::max<int64_t>(g.groups * g.cols() * itemsize, 1);
  int64_t r = std::clamp<int64_t>(max_bytes / per_row, 1, rows);
  if (r < rows) {
    // Every chunk's output rows start 256-byte aligned: m rows of cout
    // elements are a multiple of 256 bytes.
    const int64_t m = 256 / std::gcd<int64_t>(g.cout * itemsize, 256);
    r = std::min(rows, std::max(m, r / m * m));
  }
  return r;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::forward:
      return "forward";
    case Op::backward_data:
      return "backward data";
    case Op::backward_filter:
      return "backward filter";
  }
  return "?";
}

namespace {

// The packed channels-last strides of t's dims (NHWC / NDHWC): C fastest,
// then the spatial axes from the last, then N.
void pack(Tensor& t) {
  int64_t s = t.dim[1];
  t.stride[1] = 1;
  for (int i = t.nd - 1; i >= 2; --i) {
    t.stride[i] = s;
    s *= t.dim[i];
  }
  t.stride[0] = s;
}

// Whether t's strides are the packed channels-last ones, ignoring unit
// dims (their stride is never stepped); when they are, t gets exactly the
// packed strides (cuDNN matches layouts by their strides).
bool packed(Tensor& t) {
  Tensor p = t;
  pack(p);
  for (int i = 0; i < t.nd; ++i) {
    if (t.dim[i] != 1 && t.stride[i] != p.stride[i]) {
      return false;
    }
  }
  t = p;
  return true;
}

// A tensor [N, C, spatial...] over an array axis each: n and c are the
// array's axes for N and C, spatial axes are 1 .. d. 1-D convolutions get
// a unit H axis before the array's one.
Tensor tensor(const Shape& shape, const Strides& strides, int n, int c) {
  const int d = static_cast<int>(shape.size()) - 2;
  Tensor t;
  t.nd = std::max(d, 2) + 2;
  t.dim[0] = shape[n];
  t.stride[0] = strides[n];
  t.dim[1] = shape[c];
  t.stride[1] = strides[c];
  const int first = t.nd - d;  // the first array spatial axis' slot
  for (int i = 0; i < d; ++i) {
    t.dim[first + i] = shape[i + 1];
    t.stride[first + i] = strides[i + 1];
  }
  if (d == 1) {
    t.dim[2] = 1;
    t.stride[2] = t.dim[3] * t.stride[3];
  }
  return t;
}

Strides row_major(const Shape& s) {
  Strides st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) {
    st[i] = st[i + 1] * s[i + 1];
  }
  return st;
}

bool row_contiguous(const Shape& s, const Strides& st) {
  Strides rm = row_major(s);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != 1 && st[i] != rm[i]) {
      return false;
    }
  }
  return true;
}

// The post-padding under which cuDNN's size relation gives `want` outputs
// from `in` inputs: `hint` (the padding the primitive has) when it is not
// negative and fits, else the least one that fits; -1 when none does.
int64_t fit_post(int64_t in, int64_t filter, int64_t pre, int64_t want,
                 int64_t stride, int64_t dilation, int64_t hint) {
  if (hint >= 0 &&
      cudnn_out_size(in, filter, pre, hint, stride, dilation) == want) {
    return hint;
  }
  const int64_t least = std::max<int64_t>(
      0, (want - 1) * stride + (filter - 1) * dilation + 1 - in - pre);
  return cudnn_out_size(in, filter, pre, least, stride, dilation) == want
             ? least
             : -1;
}

// The spatial parameters' slot for array axis i (1-D: after the unit H).
int slot(int d, int i) { return d == 1 ? 1 : i; }

// Sets array axis i's spatial parameters of m (of d axes); false where
// cuDNN cannot take them (a negative padding).
bool set_axis(Mapping& m, int d, int i, int64_t pre, int64_t post,
              int64_t stride, int64_t dilation) {
  const int j = slot(d, i);
  m.pre[j] = pre;
  m.post[j] = post;
  m.stride[j] = stride;
  m.dilation[j] = dilation;
  return pre >= 0 && post >= 0;
}

// Whether any entry is not 1 (a stride or an input dilation in use).
bool any_not_one(const std::vector<int>& v) {
  return std::any_of(v.begin(), v.end(), [](int e) { return e != 1; });
}

}  // namespace

std::string Mapping::str() const {
  std::ostringstream os;
  auto dims = [&](const char* name, const Tensor& t) {
    os << " " << name << "[";
    for (int i = 0; i < t.nd; ++i) {
      os << (i ? "," : "") << t.dim[i];
    }
    os << "]/[";
    for (int i = 0; i < t.nd; ++i) {
      os << (i ? "," : "") << t.stride[i];
    }
    os << "]";
  };
  os << op_name(op);
  dims("x", x);
  dims("w", w);
  dims("y", y);
  const int cs = x.nd - 2;
  auto list = [&](const char* name, const int64_t* v) {
    os << " " << name << "=";
    for (int i = 0; i < cs; ++i) {
      os << (i ? "," : "") << v[i];
    }
  };
  list("pre", pre);
  list("post", post);
  list("stride", stride);
  list("dilation", dilation);
  os << (convolution_mode ? " convolution" : " cross-correlation");
  if (swap_operands) {
    os << " (operands swapped)";
  }
  return os.str();
}

std::vector<Mapping> cudnn_mappings(const Shape& xs, const Strides& xst,
                                    const Shape& ws, const Strides& wst,
                                    const Shape& ys,
                                    const std::vector<int>& stride,
                                    const std::vector<int>& padding_lo,
                                    const std::vector<int>& padding_hi,
                                    const std::vector<int>& kernel_dilation,
                                    const std::vector<int>& input_dilation,
                                    int groups, bool flip) {
  std::vector<Mapping> out;
  const int d = static_cast<int>(xs.size()) - 2;
  if (d < 1 || d > 3) {
    return out;
  }
  const bool dilated = any_not_one(input_dilation),
             strided = any_not_one(stride);
  const int64_t cin = xs.back(), cout = ws[0];
  const int64_t cin_g = cin / groups, cout_g = cout / groups;
  const Strides yst = row_major(ys);

  if (dilated && strided) {
    return out;  // no cuDNN operation strides a dilated input
  }

  // Backward data of the convolution (stride = our input dilation) that
  // takes our output's shape to our input's. The rule writes the input's
  // gradient (ops/conv_rules.cpp, input_grad) as a convolution of the
  // cotangent with input dilation = the forward's stride, stride = the
  // forward's input dilation and flip = !the forward's flip. So it is
  //  - input dilation > 1 (and no stride) after a strided convolution
  //    (conv_transpose is the same form): backward data is the only
  //    operation taking it;
  //  - no stride, no input dilation, flipped after a stride-1 unflipped
  //    convolution (the training step's usual case; conv_transpose at
  //    stride 1 too): also a forward convolution in CUDNN_CONVOLUTION
  //    mode, which follows as the fallback.
  // Backward data at stride 1 is the same sum as the forward (cuDNN's
  // formula with stride 1), so either gives the right values.
  if (!strided && (dilated || flip)) {
    Mapping m;
    m.op = Op::backward_data;
    m.convolution_mode = !flip;
    bool data_ok = true;
    for (int i = 0; i < d && data_ok; ++i) {
      const int64_t K = ws[i + 1], kd = kernel_dilation[i];
      const int64_t pre = (K - 1) * kd - padding_lo[i];
      const int64_t post =
          fit_post(ys[i + 1], K, pre, xs[i + 1], input_dilation[i], kd,
                   (K - 1) * kd - padding_hi[i]);
      data_ok = set_axis(m, d, i, pre, post, input_dilation[i], kd);
    }
    if (data_ok) {
      m.y = tensor(xs, xst, 0, d + 1);  // DY: our input
      if (!packed(m.y)) {
        m.pack_input = true;
        m.y = tensor(xs, row_major(xs), 0, d + 1);
      }
      m.x = tensor(ys, yst, 0, d + 1);  // DX: our output
      // W: [C_in, K..., C_out/g] packed; from our weight [G, cout_g, K...,
      // cin_g] as W[g, ci, k..., co] = w[g, co, k..., ci].
      Shape wsh{groups, static_cast<int32_t>(cin_g)};
      Shape packed_w{static_cast<int32_t>(cin)};
      for (int i = 0; i < d; ++i) {
        wsh.push_back(ws[i + 1]);
        packed_w.push_back(ws[i + 1]);
      }
      wsh.push_back(static_cast<int32_t>(cout_g));
      packed_w.push_back(static_cast<int32_t>(cout_g));
      const Strides wrm = row_major(ws);
      m.pack_weight = !row_contiguous(ws, wst);
      m.weight_copy.shape = wsh;
      m.weight_copy.dst = row_major(wsh);
      m.weight_copy.src = {cout_g * wrm[0], 1};
      for (int i = 0; i < d; ++i) {
        m.weight_copy.src.push_back(wrm[i + 1]);
      }
      m.weight_copy.src.push_back(wrm[0]);
      m.w = tensor(packed_w, row_major(packed_w), 0, d + 1);
      int64_t elems = 1;
      for (auto v : packed_w) {
        elems *= v;
      }
      m.scratch_elems = elems;
      out.push_back(std::move(m));
    }
    if (dilated) {
      return out;  // nothing else takes input dilation
    }
  }

  // Forward, padding at the start not negative.
  Mapping f;
  f.op = Op::forward;
  f.convolution_mode = flip;
  bool forward_ok = true;
  for (int i = 0; i < d && forward_ok; ++i) {
    const int64_t K = ws[i + 1], kd = kernel_dilation[i];
    const int64_t post = fit_post(xs[i + 1], K, padding_lo[i], ys[i + 1],
                                  stride[i], kd, padding_hi[i]);
    forward_ok = set_axis(f, d, i, padding_lo[i], post, stride[i], kd);
  }
  if (forward_ok) {
    f.x = tensor(xs, xst, 0, d + 1);
    if (!packed(f.x)) {
      f.pack_input = true;
      f.x = tensor(xs, row_major(xs), 0, d + 1);
    }
    f.w = tensor(ws, wst, 0, d + 1);
    if (!packed(f.w)) {
      f.pack_weight = true;
      f.w = tensor(ws, row_major(ws), 0, d + 1);
    }
    f.y = tensor(ys, yst, 0, d + 1);
  }

  // Backward filter: our input [A, L..., B] and weight [Co, O..., B] as
  // cuDNN's X [N=B, C=A, L] and DY [N=B, K=Co, O] (packed channels-last as
  // they are: the weight gradient's transposed views), our output [A,
  // Kr..., Co] as DW [K=Co, C=A, Kr] (a packed scratch, then copied).
  // One group only: the grouped weight gradient is ConvolutionWeightGrad
  // (weight_grad_mappings).
  Mapping b;
  b.op = Op::backward_filter;
  bool filter_ok = !flip && groups == 1;
  for (int i = 0; i < d && filter_ok; ++i) {
    const int64_t Kr = ys[i + 1];
    const int64_t S = kernel_dilation[i], D = stride[i];
    const int64_t post =
        fit_post(xs[i + 1], Kr, padding_lo[i], ws[i + 1], S, D, -1);
    filter_ok = set_axis(b, d, i, padding_lo[i], post, S, D);
  }
  if (filter_ok) {
    b.x = tensor(xs, xst, d + 1, 0);
    filter_ok = packed(b.x);
  }
  if (filter_ok) {
    b.y = tensor(ws, wst, d + 1, 0);
    filter_ok = packed(b.y);
  }
  if (filter_ok) {
    // DW [Co, Kr..., A] packed.
    Shape dw{ws[0]};
    for (int i = 0; i < d; ++i) {
      dw.push_back(ys[i + 1]);
    }
    dw.push_back(xs[0]);
    b.w = tensor(dw, row_major(dw), 0, d + 1);
    b.result_copy.shape = dw;
    b.result_copy.src = row_major(dw);
    b.result_copy.dst = {yst.back()};
    for (int i = 0; i < d; ++i) {
      b.result_copy.dst.push_back(yst[i + 1]);
    }
    b.result_copy.dst.push_back(yst[0]);
    int64_t elems = 1;
    for (auto v : dw) {
      elems *= v;
    }
    b.scratch_elems = elems;
  }
  // A row-contiguous input is a forward convolution's; transposed views
  // (the rule's weight gradient) are backward filter's.
  const bool filter_first = !row_contiguous(xs, xst);
  if (filter_ok && filter_first) {
    out.push_back(b);
  }
  if (forward_ok) {
    out.push_back(std::move(f));
  }
  if (filter_ok && !filter_first) {
    out.push_back(std::move(b));
  }
  return out;
}

namespace {

// t described as it is when its strides are the packed channels-last ones,
// else as its row-contiguous copy; `pack` says which.
Tensor packed_or_copy(const Shape& shape, const Strides& strides,
                      bool& pack) {
  const int d = static_cast<int>(shape.size()) - 2;
  Tensor t = tensor(shape, strides, 0, d + 1);
  pack = !packed(t);
  if (pack) {
    t = tensor(shape, row_major(shape), 0, d + 1);
  }
  return t;
}

}  // namespace

std::vector<Mapping> weight_grad_mappings(
    const Shape& xs, const Strides& xst, const Shape& cts,
    const Strides& ctst, const Shape& ys, const std::vector<int>& stride,
    const std::vector<int>& padding_lo,
    const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation, int groups, bool flip) {
  std::vector<Mapping> out;
  const int d = static_cast<int>(xs.size()) - 2;
  if (d < 1 || d > 3) {
    return out;
  }
  const bool dilated = any_not_one(input_dilation),
             strided = any_not_one(stride);
  const Strides yst = row_major(ys);

  // The forward's input x [N, L..., C_in] as X, the cotangent ct [N, O...,
  // C_out] as DY and our output [C_out, K..., C_in/g] as DW (packed KRSC):
  // cuDNN's DW[k, c, r] sums X[n, g C/g + c, p S + r' D - P] DY[n, k, p]
  // over n and p, r' = r (R - 1 - r in CUDNN_CONVOLUTION mode), which is
  // the forward's sum with S its stride, D its kernel dilation, P its
  // padding at the start, and the mode its flip.
  if (!dilated) {
    Mapping m;
    m.op = Op::backward_filter;
    m.convolution_mode = flip;
    bool ok = true;
    for (int i = 0; i < d && ok; ++i) {
      const int64_t K = ys[i + 1], kd = kernel_dilation[i];
      const int64_t post = fit_post(xs[i + 1], K, padding_lo[i], cts[i + 1],
                                    stride[i], kd, -1);
      ok = set_axis(m, d, i, padding_lo[i], post, stride[i], kd);
    }
    if (ok) {
      m.x = packed_or_copy(xs, xst, m.pack_input);
      m.y = packed_or_copy(cts, ctst, m.pack_weight);
      m.w = tensor(ys, yst, 0, d + 1);
      out.push_back(std::move(m));
    }
  }

  // Without a stride the roles swap: the forward (stride 1) reads x's
  // element l at dilated position l id, so weight tap t sums x[l] ct[l id
  // + lo - t' kd] over l (t' = t, K - 1 - t flipped): cuDNN's backward
  // filter with X = ct, DY = x, stride id, dilation kd, P = (K - 1) kd -
  // lo, and the mode the opposite of the flip; DW [C_in, K..., C_out/g]
  // (groups again read off the channels) into a scratch, rearranged into
  // our output. The only operation for input dilation (conv_transpose's
  // weight gradient); otherwise the fallback.
  if (!strided) {
    Mapping m;
    m.op = Op::backward_filter;
    m.swap_operands = true;
    m.convolution_mode = !flip;
    bool ok = true;
    for (int i = 0; i < d && ok; ++i) {
      const int64_t K = ys[i + 1], kd = kernel_dilation[i];
      const int64_t pre = (K - 1) * kd - padding_lo[i];
      const int64_t post = fit_post(cts[i + 1], K, pre, xs[i + 1],
                                    input_dilation[i], kd, -1);
      ok = set_axis(m, d, i, pre, post, input_dilation[i], kd);
    }
    if (ok) {
      m.x = packed_or_copy(cts, ctst, m.pack_weight);
      m.y = packed_or_copy(xs, xst, m.pack_input);
      const int32_t cin = xs[d + 1], cout = cts[d + 1];
      const int32_t a = cin / groups, cog = cout / groups;
      Shape dw{cin};
      for (int i = 0; i < d; ++i) {
        dw.push_back(ys[i + 1]);
      }
      dw.push_back(cog);
      const Strides dwst = row_major(dw);
      m.w = tensor(dw, dwst, 0, d + 1);
      m.scratch_elems = shape_size(dw);
      // out(j cog + co, k..., a) = DW(j A + a, k..., co), over (j, a, k...,
      // co).
      Copy& c = m.result_copy;
      c.shape = {groups, a};
      c.src = {a * dwst[0], dwst[0]};
      c.dst = {cog * yst[0], yst[d + 1]};
      for (int i = 0; i < d; ++i) {
        c.shape.push_back(ys[i + 1]);
        c.src.push_back(dwst[i + 1]);
        c.dst.push_back(yst[i + 1]);
      }
      c.shape.push_back(cog);
      c.src.push_back(1);
      c.dst.push_back(yst[0]);
      out.push_back(std::move(m));
    }
  }
  return out;
}

WeightGradComposite weight_grad_composite(
    const Shape& xs, const Strides& xst, const Shape& cts,
    const Strides& ctst, const std::vector<int>& kernel,
    const std::vector<int>& stride, const std::vector<int>& padding_lo,
    const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation, int groups, bool flip) {
  WeightGradComposite w;
  const int d = static_cast<int>(xs.size()) - 2;
  const int32_t n = xs[0], cin = xs[d + 1], cout = cts[d + 1];
  const int32_t a = cin / groups;
  w.groups = groups;
  // x over (a, l..., j, n) into xin [A, L..., g, N].
  Copy& in = w.input;
  in.shape = {a};
  in.src = {xst[d + 1]};
  w.xin = {a};
  w.kern = {cout};
  w.r = {a};
  for (int i = 0; i < d; ++i) {
    in.shape.push_back(xs[i + 1]);
    in.src.push_back(xst[i + 1]);
    w.xin.push_back(xs[i + 1]);
    w.kern.push_back(cts[i + 1]);
    w.r.push_back(kernel[i]);
  }
  in.shape.insert(in.shape.end(), {groups, n});
  in.src.insert(in.src.end(), {a * xst[d + 1], xst[0]});
  in.dst = row_major(in.shape);
  w.xin.push_back(groups * n);
  w.kern.push_back(n);
  w.r.push_back(cout);
  // ct over (co, o..., n) into kern.
  Copy& k = w.cotangent;
  k.shape = w.kern;
  k.src = {ctst[d + 1]};
  for (int i = 0; i < d; ++i) {
    k.src.push_back(ctst[i + 1]);
  }
  k.src.push_back(ctst[0]);
  k.dst = row_major(w.kern);
  // The composite: the weight's tap t sums x at o s - lo + t kd over the
  // outputs o, a correlation of x with ct dilated by s, stepping kd.
  for (int i = 0; i < d; ++i) {
    const int L = xs[i + 1], K = kernel[i], O = cts[i + 1];
    w.stride.push_back(kernel_dilation[i]);
    w.padding_lo.push_back(padding_lo[i]);
    w.padding_hi.push_back((K - 1) * kernel_dilation[i] + (O - 1) * stride[i] -
                           (L - 1) * input_dilation[i] - padding_lo[i]);
    w.kernel_dilation.push_back(stride[i]);
    w.input_dilation.push_back(input_dilation[i]);
  }
  // r over (a, k..., co) into our output [C_out, K..., A], the taps
  // reversed where the forward flips.
  Shape ys{cout};
  ys.insert(ys.end(), kernel.begin(), kernel.end());
  ys.push_back(a);
  const Strides yst = row_major(ys), rst = row_major(w.r);
  Copy& r = w.result;
  r.shape = w.r;
  r.src = rst;
  r.dst = {yst[d + 1]};
  for (int i = 0; i < d; ++i) {
    r.dst.push_back(yst[i + 1]);
    if (flip) {
      r.src_offset += (kernel[i] - 1) * rst[i + 1];
      r.src[i + 1] = -rst[i + 1];
    }
  }
  r.dst.push_back(yst[0]);
  return w;
}

}  // namespace fluxion::conv_plan
