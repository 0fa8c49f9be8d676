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
  bool dilated = false, strided = false;
  for (int i = 0; i < d; ++i) {
    dilated = dilated || input_dilation[i] != 1;
    strided = strided || stride[i] != 1;
  }
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
      data_ok = pre >= 0 && post >= 0;
      const int j = slot(d, i);
      m.pre[j] = pre;
      m.post[j] = post;
      m.stride[j] = input_dilation[i];
      m.dilation[j] = kd;
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
    forward_ok = padding_lo[i] >= 0 && post >= 0;
    const int j = slot(d, i);
    f.pre[j] = padding_lo[i];
    f.post[j] = post;
    f.stride[j] = stride[i];
    f.dilation[j] = kd;
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
  // With g groups the rule's input is [A, L..., g N] (A = C_in/g; element
  // (a, l, j N + n) is the forward input's (n, l, j A + a)): X [N, C=g A,
  // L] is that rearranged into a packed scratch, and DW [Co, A, Kr] holds
  // each output channel's group's A channels.
  Mapping b;
  b.op = Op::backward_filter;
  bool filter_ok = !flip && xs[d + 1] % groups == 0;
  for (int i = 0; i < d && filter_ok; ++i) {
    const int64_t Kr = ys[i + 1];
    const int64_t S = kernel_dilation[i], D = stride[i];
    const int64_t post =
        fit_post(xs[i + 1], Kr, padding_lo[i], ws[i + 1], S, D, -1);
    filter_ok = padding_lo[i] >= 0 && post >= 0;
    const int j = slot(d, i);
    b.pre[j] = padding_lo[i];
    b.post[j] = post;
    b.stride[j] = S;
    b.dilation[j] = D;
  }
  if (filter_ok && groups == 1) {
    b.x = tensor(xs, xst, d + 1, 0);
    filter_ok = packed(b.x);
  } else if (filter_ok) {
    const int32_t a = xs[0], n = xs[d + 1] / groups;
    Shape xp{n};  // the forward input [N, L..., g A]
    for (int i = 0; i < d; ++i) {
      xp.push_back(xs[i + 1]);
    }
    xp.push_back(groups * a);
    const Strides xpst = row_major(xp);
    Copy& c = b.input_copy;
    c.shape = {a};  // over (a, l..., j, n)
    c.src = {xst[0]};
    c.dst = {1};
    for (int i = 0; i < d; ++i) {
      c.shape.push_back(xs[i + 1]);
      c.src.push_back(xst[i + 1]);
      c.dst.push_back(xpst[i + 1]);
    }
    c.shape.insert(c.shape.end(), {groups, n});
    c.src.insert(c.src.end(), {n * xst[d + 1], xst[d + 1]});
    c.dst.insert(c.dst.end(), {a, xpst[0]});
    b.input_elems = shape_size(xp);
    b.x = tensor(xp, xpst, 0, d + 1);
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
  // (the rule's weight gradient) are backward filter's. With groups the
  // rule's input is a copy, but its weight (the cotangent) still a view.
  const bool filter_first =
      !row_contiguous(xs, xst) || (groups > 1 && !row_contiguous(ws, wst));
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

}  // namespace fluxion::conv_plan
