// The GPU convolution's plan (backend/common/conv_plan.h), checked without
// a GPU against the CPU kernel, on every Convolution and
// ConvolutionWeightGrad node of a set of convolutions and of their
// gradients (the rules' nodes, with the strides their operands really
// have: transposed views, negative padding, input dilation):
//  - the general path: the unfolded matrix of conv_plan::im2col_source
//    times the weight, and conv_plan::direct_tile where the GPU runs its
//    direct kernel (one input channel per group), the very index code the
//    kernels run;
//  - every cuDNN operation cudnn_mappings offers, emulated from cuDNN's
//    documented definitions over the descriptors it built (dims and
//    strides read from the operands' own buffers, or from row-contiguous
//    copies where it asks for packing, the weight's rearrangement and the
//    filter gradient's copy into the output done as cu::copy_region would),
//    after checking the size relation cuDNN enforces between its tensors;
//  - ConvolutionWeightGrad: every backward filter weight_grad_mappings
//    offers, emulated the same way, and its composite (the Convolution the
//    GPU runs where cuDNN does not take the node) through all of the above;
//  - that the benchmark's forms get the operation meant for them (forward,
//    backward data for the input gradient, backward filter for the weight
//    gradient) without copies, grouped and depthwise ones included.
// The emulation, for output p of a spatial axis, tap r, stride S, dilation
// D and pre-padding P: forward y[n, k, p] = sum x[n, g Cw + c, p S + r D -
// P] w[k, c, r'] over c < Cw = W's C and taps r (r' = R - 1 - r in
// CUDNN_CONVOLUTION mode, else r), g = k / (K / groups), groups = X's C /
// W's C; backward data dx[n, c, i] = sum over the k of c's group and the
// (p, r) with p S + r D - P = i of dy[n, k, p] w[k, c mod Cw, r'];
// backward filter dw[k, c, r] = sum over n, p of x[n, g Cw + c, p S + r' D
// - P] dy[n, k, p].
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include "fluxion/backend/common/conv_plan.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/conv.h"
#include "fluxion/ops/conv_impl.h"
#include "fluxion/transforms.h"
#include "device_scope.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;
namespace cp = fluxion::conv_plan;

namespace {


array rnd(const Shape& shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& e : v) {
    e = u(gen);
  }
  return array(v.begin(), shape, float64);
}

// Every Convolution (and ConvolutionWeightGrad) node reachable from `a`,
// in no particular order.
void collect(const array& a, std::vector<array>& out,
             std::set<uintptr_t>& seen) {
  if (!a.has_primitive() || !seen.insert(a.id()).second) {
    return;
  }
  const std::string name = a.primitive().name();
  if (name == "Convolution" || name == "ConvolutionWeightGrad") {
    out.push_back(a);
  }
  for (const auto& in : a.inputs()) {
    collect(in, out, seen);
  }
}

// A float64 buffer as the emulation reads it: the values and the number of
// elements that may be addressed from its first one.
struct Buf {
  const double* p = nullptr;
  int64_t n = 0;
  std::vector<double> own;
};
Buf as_is(const array& a) {
  Buf b;
  b.p = a.data<double>();
  b.n = static_cast<int64_t>(a.data_size());
  return b;
}
Buf row_major(const array& a) {
  Buf b;
  b.own = to_vector<double>(a);
  b.p = b.own.data();
  b.n = static_cast<int64_t>(b.own.size());
  return b;
}

std::string where(const cp::Mapping& m) { return " [" + m.str() + "]"; }

int64_t offset(const cp::Tensor& t, const int64_t* idx) {
  int64_t o = 0;
  for (int i = 0; i < t.nd; ++i) {
    o += idx[i] * t.stride[i];
  }
  return o;
}

double read(const Buf& b, const cp::Tensor& t, const int64_t* idx,
            const std::string& what) {
  const int64_t o = offset(t, idx);
  if (o < 0 || o >= b.n) {
    ADD_FAILURE() << "read outside " << what << ": offset " << o << " of "
                  << b.n;
    return kNaN;
  }
  return b.p[o];
}

// Calls f(idx) for every index of dims[0 .. nd).
void for_each(int nd, const int64_t* dims,
              const std::function<void(const int64_t*)>& f) {
  int64_t idx[5] = {0, 0, 0, 0, 0};
  int64_t total = 1;
  for (int i = 0; i < nd; ++i) {
    total *= dims[i];
  }
  for (int64_t e = 0; e < total; ++e) {
    f(idx);
    for (int i = nd - 1; i >= 0; --i) {
      if (++idx[i] < dims[i]) {
        break;
      }
      idx[i] = 0;
    }
  }
}

// The emulated operation: every element of its output tensor (the one our
// output or the scratch is), in the buffer `out` of `out_n` elements.
std::vector<double> emulate(const cp::Mapping& m, const Buf& xb,
                            const Buf& wb, const Buf& yb, int64_t out_n) {
  const int sp = m.x.nd - 2;
  const cp::Tensor &X = m.x, &W = m.w, &Y = m.y;
  std::vector<double> out(out_n, kNaN);
  const int64_t groups = X.dim[1] / W.dim[1];
  const int64_t Cw = W.dim[1], Kg = W.dim[0] / groups;
  // cuDNN's size relation between the tensors, and channel counts.
  EXPECT_EQ(X.dim[1] % W.dim[1], 0) << where(m);
  EXPECT_EQ(W.dim[0] % groups, 0) << where(m);
  EXPECT_EQ(Y.dim[0], X.dim[0]) << where(m);
  EXPECT_EQ(Y.dim[1], W.dim[0]) << where(m);
  for (int a = 0; a < sp; ++a) {
    EXPECT_GE(m.pre[a], 0) << where(m);
    EXPECT_GE(m.post[a], 0) << where(m);
    EXPECT_EQ(Y.dim[2 + a],
              cp::cudnn_out_size(X.dim[2 + a], W.dim[2 + a], m.pre[a],
                                 m.post[a], m.stride[a], m.dilation[a]))
        << "axis " << a << where(m);
  }
  if (::testing::Test::HasFailure()) {
    return out;
  }
  auto tap = [&](const int64_t* r, int a) {
    return m.convolution_mode ? W.dim[2 + a] - 1 - r[a] : r[a];
  };
  auto write = [&](const cp::Tensor& t, const int64_t* idx, double v) {
    const int64_t o = offset(t, idx);
    if (o < 0 || o >= out_n || !std::isnan(out[o])) {
      ADD_FAILURE() << "write outside or twice at " << o << where(m);
      return;
    }
    out[o] = v;
  };
  switch (m.op) {
    case cp::Op::forward:
      for_each(Y.nd, Y.dim, [&](const int64_t* yi) {
        const int64_t g = yi[1] / Kg;
        double s = 0;
        for_each(W.nd - 1, W.dim + 1, [&](const int64_t* ci) {
          int64_t xi[5] = {yi[0], g * Cw + ci[0]}, wi[5] = {yi[1], ci[0]};
          for (int a = 0; a < sp; ++a) {
            xi[2 + a] = yi[2 + a] * m.stride[a] + ci[1 + a] * m.dilation[a] -
                        m.pre[a];
            if (xi[2 + a] < 0 || xi[2 + a] >= X.dim[2 + a]) {
              return;
            }
            wi[2 + a] = tap(ci + 1, a);
          }
          s += read(xb, X, xi, "X") * read(wb, W, wi, "W");
        });
        write(Y, yi, s);
      });
      break;
    case cp::Op::backward_data:
      for_each(X.nd, X.dim, [&](const int64_t* xi) {
        const int64_t g = xi[1] / Cw;
        double s = 0;
        for (int64_t k = g * Kg; k < (g + 1) * Kg; ++k) {
          for_each(sp, W.dim + 2, [&](const int64_t* r) {
            int64_t yi[5] = {xi[0], k}, wi[5] = {k, xi[1] % Cw};
            for (int a = 0; a < sp; ++a) {
              const int64_t q = xi[2 + a] + m.pre[a] - r[a] * m.dilation[a];
              if (q < 0 || q % m.stride[a] != 0 ||
                  q / m.stride[a] >= Y.dim[2 + a]) {
                return;
              }
              yi[2 + a] = q / m.stride[a];
              wi[2 + a] = tap(r, a);
            }
            s += read(yb, Y, yi, "DY") * read(wb, W, wi, "W");
          });
        }
        write(X, xi, s);
      });
      break;
    case cp::Op::backward_filter:
      for_each(W.nd, W.dim, [&](const int64_t* wi) {
        const int64_t g = wi[0] / Kg;
        double s = 0;
        int64_t ndims[4] = {X.dim[0], Y.dim[2], Y.dim[3], sp == 3 ? Y.dim[4]
                                                                  : 1};
        for_each(sp + 1, ndims, [&](const int64_t* np) {
          int64_t xi[5] = {np[0], g * Cw + wi[1]}, yi[5] = {np[0], wi[0]};
          for (int a = 0; a < sp; ++a) {
            xi[2 + a] = np[1 + a] * m.stride[a] +
                        tap(wi + 2, a) * m.dilation[a] - m.pre[a];
            if (xi[2 + a] < 0 || xi[2 + a] >= X.dim[2 + a]) {
              return;
            }
            yi[2 + a] = np[1 + a];
          }
          s += read(xb, X, xi, "X") * read(yb, Y, yi, "DY");
        });
        write(W, wi, s);
      });
      break;
  }
  return out;
}

// dst[idx . c.dst] = src[c.src_offset + idx . c.src] over c.shape
// (cu::copy_region).
void copy_region(const cp::Copy& c, const Buf& src, std::vector<double>& dst,
                 const std::string& what) {
  ASSERT_EQ(c.src.size(), c.shape.size()) << what;
  ASSERT_EQ(c.dst.size(), c.shape.size()) << what;
  std::vector<int64_t> dims(c.shape.begin(), c.shape.end());
  std::vector<int64_t> idx(dims.size(), 0);
  const int64_t total = shape_size(c.shape);
  for (int64_t e = 0; e < total; ++e) {
    int64_t so = c.src_offset, d = 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      so += idx[i] * c.src[i];
      d += idx[i] * c.dst[i];
    }
    ASSERT_TRUE(so >= 0 && so < src.n) << what << ": source offset " << so;
    ASSERT_TRUE(d >= 0 && d < static_cast<int64_t>(dst.size()))
        << what << ": destination offset " << d;
    ASSERT_TRUE(std::isnan(dst[d])) << what << ": written twice at " << d;
    dst[d] = src.p[so];
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      if (++idx[i] < dims[i]) {
        break;
      }
      idx[i] = 0;
    }
  }
}

// What a mapping computes, as the executor (conv_cudnn.cpp) runs it: our
// output in row-major order.
std::vector<double> run_mapping(const cp::Mapping& m, const array& x,
                                const array& w, int64_t out_n) {
  const Buf xb = m.pack_input ? row_major(x) : as_is(x);
  const Buf wb = m.pack_weight ? row_major(w) : as_is(w);
  switch (m.op) {
    case cp::Op::forward:
      return emulate(m, xb, wb, Buf{}, out_n);
    case cp::Op::backward_data: {
      EXPECT_EQ(m.scratch_elems, w.size()) << where(m);
      std::vector<double> wr(m.scratch_elems, kNaN);
      copy_region(m.weight_copy, wb, wr, "weight rearrangement");
      Buf wrb;
      wrb.p = wr.data();
      wrb.n = static_cast<int64_t>(wr.size());
      return emulate(m, Buf{}, wrb, xb, out_n);
    }
    case cp::Op::backward_filter: {
      const Buf& X = m.swap_operands ? wb : xb;
      const Buf& DY = m.swap_operands ? xb : wb;
      if (m.scratch_elems == 0) {  // DW is our output
        return emulate(m, X, Buf{}, DY, out_n);
      }
      auto dw = emulate(m, X, Buf{}, DY, m.scratch_elems);
      Buf dwb;
      dwb.p = dw.data();
      dwb.n = static_cast<int64_t>(dw.size());
      std::vector<double> out(out_n, kNaN);
      copy_region(m.result_copy, dwb, out, "filter gradient's copy");
      return out;
    }
  }
  return {};
}

void expect_close(const std::vector<double>& got,
                  const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (double v : want) {
    scale = std::max(scale, std::abs(v));
  }
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    if (!(std::abs(got[i] - want[i]) <= 1e-10 * scale)) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs "
                    << want[i];
      ++bad;
    }
  }
}

// The general path on the host: im2col + product per group, and the direct
// sum where the GPU takes it.
std::vector<double> general(const cp::Geometry& g, const std::vector<double>& x,
                            const std::vector<double>& w) {
  std::vector<double> y(g.rows() * g.cout, 0.0);
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    for (int64_t r = 0; r < g.rows(); ++r) {
      for (int64_t co = 0; co < g.cout_g; ++co) {
        double s = 0;
        for (int64_t c = 0; c < g.cols(); ++c) {
          const int64_t src = cp::im2col_source(g, grp, r, c);
          if (src >= 0) {
            s += x[src] * w[(grp * g.cout_g + co) * g.cols() + c];
          }
        }
        y[r * g.cout + grp * g.cout_g + co] = s;
      }
    }
  }
  return y;
}

// A Convolution's parameters (the node's, or a composite's).
struct ConvArgs {
  std::vector<int> stride, lo, hi, kd, id;
  int groups = 1;
  bool flip = false;
  static ConvArgs of(const Convolution& c) {
    return {c.stride(),         c.padding_lo(), c.padding_hi(),
            c.kernel_dilation(), c.input_dilation(), c.groups(), c.flip()};
  }
};

// A Convolution of x and w (any strides) giving `want` [ys], on every
// path: the general path's im2col and direct kernel, every cuDNN mapping.
// Returns the mappings' operations.
std::vector<cp::Op> check_conv(const std::string& name, const ConvArgs& c,
                               const array& x, const array& w,
                               const Shape& ys,
                               const std::vector<double>& want) {
  std::ostringstream os;
  os << name << ": node x" << shape_str(x.shape()) << " w"
     << shape_str(w.shape()) << " y" << shape_str(ys) << " stride "
     << vec_str(c.stride) << " lo " << vec_str(c.lo) << " hi "
     << vec_str(c.hi) << " kd " << vec_str(c.kd) << " id " << vec_str(c.id)
     << " g " << c.groups << " flip " << c.flip;
  const std::string what = os.str();
  const auto g = cp::geometry(x.shape(), w.shape(), ys, c.stride, c.lo, c.kd,
                              c.id, c.groups, c.flip);
  auto xv = to_vector<double>(x);
  auto wv = to_vector<double>(w);
  expect_close(general(g, xv, wv), want, what + " (im2col)");
  if (g.cin_g == 1) {
    // The direct kernel's items, 4 outputs each (32-bit indices).
    std::vector<double> direct(want.size(), kNaN);
    const int64_t items = cp::direct_items<4, uint32_t>(g);
    for (int64_t i = 0; i < items; ++i) {
      cp::direct_tile<4, double, uint32_t>(
          g, static_cast<uint32_t>(i), [&](int64_t k) { return xv[k]; },
          [&](int64_t k) { return wv[k]; },
          [&](int64_t k, double v) {
            ASSERT_TRUE(k >= 0 && k < static_cast<int64_t>(direct.size()));
            ASSERT_TRUE(std::isnan(direct[k])) << "written twice: " << k;
            direct[k] = v;
          });
    }
    expect_close(direct, want, what + " (direct)");
  }
  auto maps = cp::cudnn_mappings(x.shape(), x.strides(), w.shape(),
                                 w.strides(), ys, c.stride, c.lo, c.hi, c.kd,
                                 c.id, c.groups, c.flip);
  std::vector<cp::Op> ops;
  for (const auto& m : maps) {
    ops.push_back(m.op);
    expect_close(run_mapping(m, x, w, static_cast<int64_t>(want.size())),
                 want, what + " (cuDNN " + m.str() + ")");
  }
  return ops;
}

// A float64 array holding `v` as `shape`.
array from(const std::vector<double>& v, const Shape& shape) {
  return array(v.begin(), shape, float64);
}

// ConvolutionWeightGrad of x and ct giving `want` [ys]: every cuDNN
// mapping, and its composite (the GPU's fallback) through check_conv.
std::vector<cp::Op> check_weight_grad(const std::string& name,
                                      const ConvolutionWeightGrad& c,
                                      const array& x, const array& ct,
                                      const Shape& ys,
                                      const std::vector<double>& want) {
  std::ostringstream os;
  os << name << ": weight grad x" << shape_str(x.shape()) << " ct"
     << shape_str(ct.shape()) << " y" << shape_str(ys) << " stride "
     << vec_str(c.stride()) << " lo " << vec_str(c.padding_lo()) << " kd "
     << vec_str(c.kernel_dilation()) << " id " << vec_str(c.input_dilation())
     << " g " << c.groups() << " flip " << c.flip();
  const std::string what = os.str();
  auto maps = cp::weight_grad_mappings(
      x.shape(), x.strides(), ct.shape(), ct.strides(), ys, c.stride(),
      c.padding_lo(), c.kernel_dilation(), c.input_dilation(), c.groups(),
      c.flip());
  std::vector<cp::Op> ops;
  for (const auto& m : maps) {
    ops.push_back(m.op);
    expect_close(run_mapping(m, x, ct, static_cast<int64_t>(want.size())),
                 want, what + " (cuDNN " + m.str() + ")");
  }
  // The composite: operands rearranged as cu::copy_region does, the
  // Convolution checked on every path against the CPU, its result
  // rearranged into the output.
  const auto k = cp::weight_grad_composite(
      x.shape(), x.strides(), ct.shape(), ct.strides(), c.kernel_size(),
      c.stride(), c.padding_lo(), c.kernel_dilation(), c.input_dilation(),
      c.groups(), c.flip());
  std::vector<double> xin(shape_size(k.xin), kNaN),
      kern(shape_size(k.kern), kNaN);
  copy_region(k.input, as_is(x), xin, what + " input rearrangement");
  copy_region(k.cotangent, as_is(ct), kern, what + " cotangent's copy");
  auto xa = from(xin, k.xin), ka = from(kern, k.kern);
  ConvArgs q{k.stride,         k.padding_lo, k.padding_hi, k.kernel_dilation,
             k.input_dilation, k.groups,     false};
  conv_detail::ConvParams p{k.stride,          k.padding_lo, k.padding_hi,
                            k.kernel_dilation, k.input_dilation, k.groups,
                            false};
  auto r = conv_detail::make_conv(xa, ka, p, default_stream(kCpu));
  EXPECT_EQ(r.shape(), k.r) << what;
  auto rv = to_vector<double>(r);
  check_conv(what + " composite", q, xa, ka, k.r, rv);
  std::vector<double> out(want.size(), kNaN);
  Buf rb;
  rb.p = rv.data();
  rb.n = static_cast<int64_t>(rv.size());
  copy_region(k.result, rb, out, what + " composite's result");
  expect_close(out, want, what + " (composite)");
  return ops;
}

struct Checked {
  int nodes = 0;
  std::vector<std::vector<cp::Op>> ops;  // the mappings of each node
};

// Every Convolution node of f(x, w) and of its gradients: each path against
// the CPU's result of that node.
Checked check_all(const std::string& name,
                  const std::function<array(const array&, const array&)>& f,
                  const Shape& xs, const Shape& ws, unsigned seed) {
  Checked result;
  auto x = rnd(xs, seed);
  auto w = rnd(ws, seed + 1);
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) {
        return std::vector<array>{f(in[0], in[1])};
      },
      {x, w}, {rnd(f(x, w).shape(), seed + 2)});
  std::vector<array> nodes;
  std::set<uintptr_t> seen;
  collect(outs[0], nodes, seen);
  for (const auto& gr : grads) {
    collect(gr, nodes, seen);
  }
  for (auto& node : nodes) {
    auto ins = node.inputs();
    // Held: evaluating the node detaches it from its primitive.
    auto prim = node.primitive_ptr();
    eval(ins);
    const Shape ys = node.shape();
    auto want = to_vector<double>(node);
    if (auto* wg = dynamic_cast<ConvolutionWeightGrad*>(prim.get())) {
      result.ops.push_back(check_weight_grad(name, *wg, ins[0], ins[1], ys,
                                             want));
    } else {
      auto& c = static_cast<Convolution&>(*prim);
      result.ops.push_back(check_conv(name, ConvArgs::of(c), ins[0], ins[1],
                                      ys, want));
    }
    ++result.nodes;
  }
  return result;
}

using F = std::function<array(const array&, const array&)>;

}  // namespace

TEST(ConvPlan, ChunkRowsBoundTheScratch) {
  auto g = cp::geometry({64, 56, 56, 64}, {64, 3, 3, 64}, {64, 56, 56, 64},
                        {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false);
  EXPECT_EQ(g.cols(), 576);
  EXPECT_EQ(g.rows(), 64 * 56 * 56);
  const int64_t r = cp::chunk_rows(g, 4, int64_t{1} << 26);
  EXPECT_LE(r * g.cols() * 4, int64_t{1} << 26);
  EXPECT_GT((r + 1) * g.cols() * 4, int64_t{1} << 26);
  // At least the rows that keep chunks 256-byte aligned (64 x 4 bytes
  // per row: one row already is).
  EXPECT_EQ(cp::chunk_rows(g, 4, 1), 1);
  auto odd = cp::geometry({64, 56, 56, 64}, {3, 3, 3, 64}, {64, 56, 56, 3},
                          {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false);
  EXPECT_EQ(cp::chunk_rows(odd, 2, 1), 128);  // 3 x 2 bytes a row
  const int64_t ro = cp::chunk_rows(odd, 2, int64_t{1} << 20);
  EXPECT_EQ(ro * 3 * 2 % 256, 0);
  EXPECT_LE(ro * odd.cols() * 2, int64_t{1} << 20);
  EXPECT_EQ(cp::chunk_rows(g, 4, int64_t{1} << 40), g.rows());
}

TEST(ConvPlan, EveryFormAndItsGradients) {
  struct Case {
    std::string name;
    F f;
    Shape xs, ws;
  };
  std::vector<Case> cases = {
      {"conv1d", [](auto& x, auto& w) { return conv1d(x, w, 1, 0, 1, 1, kCpu); },
       {2, 9, 3}, {4, 3, 3}},
      {"conv1d stride pad dilation",
       [](auto& x, auto& w) { return conv1d(x, w, 2, 2, 2, 1, kCpu); },
       {2, 11, 2}, {3, 3, 2}},
      {"conv1d groups",
       [](auto& x, auto& w) { return conv1d(x, w, 1, 1, 1, 2, kCpu); },
       {2, 7, 4}, {6, 2, 2}},
      {"conv2d 3x3 pad 1",
       [](auto& x, auto& w) { return conv2d(x, w, 1, 1, 1, 1, kCpu); },
       {2, 6, 5, 4}, {3, 3, 3, 4}},
      {"conv2d stride uneven",
       [](auto& x, auto& w) {
         return conv2d(x, w, {2, 3}, {1, 0}, {1, 1}, 1, kCpu);
       },
       {2, 8, 9, 2}, {3, 2, 3, 2}},
      {"conv2d stride 2 drops the last row",
       [](auto& x, auto& w) { return conv2d(x, w, 2, 0, 1, 1, kCpu); },
       {1, 6, 6, 2}, {2, 3, 3, 2}},
      {"conv2d dilation groups",
       [](auto& x, auto& w) {
         return conv2d(x, w, {1, 1}, {1, 2}, {2, 1}, 3, kCpu);
       },
       {1, 7, 6, 6}, {6, 2, 2, 2}},
      {"conv2d depthwise",
       [](auto& x, auto& w) { return conv2d(x, w, 1, 1, 1, 4, kCpu); },
       {2, 5, 6, 4}, {4, 3, 3, 1}},
      {"conv2d depthwise multiplier stride",
       [](auto& x, auto& w) { return conv2d(x, w, 2, 1, 1, 3, kCpu); },
       {1, 7, 6, 3}, {6, 3, 3, 1}},
      {"conv2d 1x1",
       [](auto& x, auto& w) { return conv2d(x, w, 1, 0, 1, 1, kCpu); },
       {2, 4, 5, 6}, {3, 1, 1, 6}},
      {"conv2d 1x1 groups",
       [](auto& x, auto& w) { return conv2d(x, w, 1, 0, 1, 2, kCpu); },
       {2, 4, 3, 6}, {4, 1, 1, 3}},
      {"conv3d",
       [](auto& x, auto& w) { return conv3d(x, w, 1, 1, 1, 1, kCpu); },
       {1, 4, 5, 4, 2}, {3, 2, 3, 2, 2}},
      {"conv3d stride",
       [](auto& x, auto& w) { return conv3d(x, w, 2, 0, 1, 1, kCpu); },
       {1, 5, 4, 5, 1}, {2, 2, 2, 3, 1}},
      {"conv_general asymmetric flip kernel and input dilation",
       [](auto& x, auto& w) {
         return conv_general(x, w, {1, 2}, {1, 2}, {2, 0}, {1, 2}, {2, 1}, 1,
                             true, kCpu);
       },
       {1, 4, 5, 2}, {2, 2, 2, 2}},
      {"conv_general 1d everything",
       [](auto& x, auto& w) {
         return conv_general(x, w, {3}, {2}, {1}, {2}, {3}, 2, true, kCpu);
       },
       {2, 4, 4}, {2, 2, 2}},
      {"conv_general input dilation stride 1",
       [](auto& x, auto& w) {
         return conv_general(x, w, {1, 1}, {2, 1}, {1, 3}, {1, 2}, {2, 3}, 1,
                             false, kCpu);
       },
       {2, 3, 4, 3}, {2, 3, 2, 3}},
      {"conv_transpose1d",
       [](auto& x, auto& w) {
         return conv_transpose1d(x, w, 2, 1, 1, 1, 1, kCpu);
       },
       {1, 4, 2}, {3, 3, 2}},
      {"conv_transpose2d groups",
       [](auto& x, auto& w) {
         return conv_transpose2d(x, w, {2, 1}, {0, 1}, {1, 2}, {1, 0}, 2,
                                 kCpu);
       },
       {1, 3, 4, 4}, {4, 2, 3, 2}},
      {"conv_transpose2d output padding > padding",
       [](auto& x, auto& w) {
         return conv_transpose2d(x, w, 3, 0, 1, 2, 1, kCpu);
       },
       {2, 3, 3, 2}, {3, 2, 2, 2}},
      {"conv_transpose3d",
       [](auto& x, auto& w) {
         return conv_transpose3d(x, w, 2, 1, 1, 0, 1, kCpu);
       },
       {1, 2, 3, 2, 1}, {2, 2, 2, 3, 1}},
      // Grouped forms: their weight gradients are ConvolutionWeightGrad.
      {"conv1d depthwise multiplier stride dilation",
       [](auto& x, auto& w) { return conv1d(x, w, 2, 2, 2, 4, kCpu); },
       {2, 11, 4}, {8, 3, 1}},
      {"conv3d groups",
       [](auto& x, auto& w) { return conv3d(x, w, 1, 1, 1, 2, kCpu); },
       {1, 4, 3, 4, 4}, {4, 2, 2, 2, 2}},
      {"conv3d depthwise stride",
       [](auto& x, auto& w) { return conv3d(x, w, 2, 1, 1, 3, kCpu); },
       {1, 5, 4, 5, 3}, {3, 2, 2, 3, 1}},
      {"conv_general groups asymmetric flip kernel dilation",
       [](auto& x, auto& w) {
         return conv_general(x, w, {1, 2}, {2, 0}, {0, 1}, {2, 1}, {1, 1}, 2,
                             true, kCpu);
       },
       {2, 6, 7, 4}, {4, 2, 3, 2}},
      {"conv_general groups input dilation stride 1",
       [](auto& x, auto& w) {
         return conv_general(x, w, {1, 1}, {2, 1}, {1, 3}, {1, 2}, {2, 3}, 2,
                             false, kCpu);
       },
       {2, 3, 4, 4}, {4, 3, 2, 2}},
      {"conv_transpose1d depthwise",
       [](auto& x, auto& w) {
         return conv_transpose1d(x, w, 2, 1, 1, 1, 3, kCpu);
       },
       {2, 4, 3}, {3, 3, 1}},
      {"conv_transpose3d groups",
       [](auto& x, auto& w) {
         return conv_transpose3d(x, w, 2, 1, 1, 1, 2, kCpu);
       },
       {1, 2, 3, 2, 4}, {4, 2, 2, 2, 2}},
  };
  unsigned seed = 1;
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = check_all(c.name, c.f, c.xs, c.ws, seed);
    seed += 3;
    EXPECT_GE(r.nodes, 3) << c.name;  // forward, two gradients
    std::string ops;
    for (const auto& node : r.ops) {
      ops += " [";
      for (auto op : node) {
        ops += std::string(" ") + cp::op_name(op);
      }
      ops += " ]";
    }
    std::printf("%-56s %d nodes:%s\n", c.name.c_str(), r.nodes, ops.c_str());
  }
}

// The benchmark's convolution (3x3, padding 1, groups 1) and its strided
// form: the forward is cuDNN's forward; the input gradient is backward
// data at both strides (at stride 1 the rule's node is flipped, without
// input dilation, and the forward convolution follows as the fallback;
// the rule's weight, a transposed view, is copied: a few thousand
// elements); the weight gradient is backward filter on the rule's
// transposed views. No activation-sized operand is copied.
TEST(ConvPlan, TrainingStepUsesTheNativeOperations) {
  for (int stride : {1, 2}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    F f = [stride](const array& x, const array& w) {
      return conv2d(x, w, stride, 1, 1, 1, kCpu);
    };
    auto x = rnd({2, 6, 6, 4}, 7);
    auto w = rnd({5, 3, 3, 4}, 8);
    auto y = f(x, w);
    auto [outs, grads] = vjp(
        [&](const std::vector<array>& in) {
          return std::vector<array>{f(in[0], in[1])};
        },
        {x, w}, {rnd(y.shape(), 9)});
    std::vector<cp::Mapping> first;
    for (const array* a : {&outs[0], &grads[0], &grads[1]}) {
      std::vector<array> nodes;
      std::set<uintptr_t> seen;
      collect(*a, nodes, seen);
      ASSERT_EQ(nodes.size(), 1u);
      array node = nodes[0];
      auto ins = node.inputs();
      eval(ins);
      auto prim = node.primitive_ptr();
      auto& c = static_cast<Convolution&>(*prim);
      auto maps = cp::cudnn_mappings(
          ins[0].shape(), ins[0].strides(), ins[1].shape(), ins[1].strides(),
          node.shape(), c.stride(), c.padding_lo(), c.padding_hi(),
          c.kernel_dilation(), c.input_dilation(), c.groups(), c.flip());
      ASSERT_FALSE(maps.empty());
      EXPECT_FALSE(maps[0].pack_input) << maps[0].str();
      if (a == &grads[0] && stride == 1) {
        // The forward convolution (CUDNN_CONVOLUTION mode) as the fallback.
        ASSERT_EQ(maps.size(), 2u);
        EXPECT_EQ(maps[1].op, cp::Op::forward);
        EXPECT_TRUE(maps[1].convolution_mode);
      }
      first.push_back(maps[0]);
    }
    EXPECT_EQ(first[0].op, cp::Op::forward);
    EXPECT_FALSE(first[0].pack_weight);
    EXPECT_EQ(first[1].op, cp::Op::backward_data);
    EXPECT_EQ(first[2].op, cp::Op::backward_filter);
  }
}

// The weight gradient of a grouped convolution (depthwise included, every
// form) is a ConvolutionWeightGrad node whose first mapping is cuDNN's
// backward filter reading the forward's input and the cotangent as they
// are, writing our output: no operand packed, no scratch. Input dilation
// (conv_transpose) swaps the operands' roles and rearranges the
// weight-sized result; a stride with input dilation has no mapping (the
// composite runs). Values are checked in EveryFormAndItsGradients.
TEST(ConvPlan, GroupedWeightGradientIsBackwardFilterWithoutCopies) {
  struct Case {
    std::string name;
    F f;
    Shape xs, ws;
    bool swapped = false, none = false;
  };
  std::vector<Case> cases = {
      {"depthwise 3x3",
       [](auto& x, auto& w) { return conv2d(x, w, 1, 1, 1, 8, kCpu); },
       {3, 6, 5, 8}, {8, 3, 3, 1}},
      {"groups 2",
       [](auto& x, auto& w) { return conv2d(x, w, 1, 1, 1, 2, kCpu); },
       {2, 5, 5, 6}, {4, 3, 3, 3}},
      {"depthwise multiplier strided dilated",
       [](auto& x, auto& w) {
         return conv2d(x, w, {2, 1}, {1, 2}, {1, 2}, 3, kCpu);
       },
       {2, 7, 6, 3}, {6, 3, 3, 1}},
      {"conv1d depthwise stride",
       [](auto& x, auto& w) { return conv1d(x, w, 2, 1, 1, 4, kCpu); },
       {2, 9, 4}, {4, 3, 1}},
      {"conv3d groups",
       [](auto& x, auto& w) { return conv3d(x, w, 1, 1, 1, 2, kCpu); },
       {1, 4, 3, 4, 4}, {4, 2, 2, 2, 2}},
      {"asymmetric padding, flip",
       [](auto& x, auto& w) {
         return conv_general(x, w, {1, 2}, {2, 0}, {0, 1}, {2, 1}, {1, 1}, 2,
                             true, kCpu);
       },
       {2, 6, 7, 4}, {4, 2, 3, 2}},
      {"conv_transpose2d groups",
       [](auto& x, auto& w) {
         return conv_transpose2d(x, w, {2, 2}, {1, 0}, {1, 1}, {0, 1}, 2,
                                 kCpu);
       },
       {2, 3, 4, 4}, {4, 3, 2, 2}, true},
      {"stride with input dilation",
       [](auto& x, auto& w) {
         return conv_general(x, w, {2}, {1}, {1}, {1}, {2}, 2, false, kCpu);
       },
       {2, 5, 4}, {2, 2, 2}, false, true},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    auto x = rnd(k.xs, 11);
    auto w = rnd(k.ws, 12);
    auto f = [&](const std::vector<array>& in) {
      return std::vector<array>{k.f(in[0], in[1])};
    };
    auto y = f({x, w})[0];
    auto [outs, grads] = vjp(f, {x, w}, {rnd(y.shape(), 13)});
    std::vector<array> nodes;
    std::set<uintptr_t> seen;
    collect(grads[1], nodes, seen);
    ASSERT_EQ(nodes.size(), 1u);
    ASSERT_EQ(std::string(nodes[0].primitive().name()),
              "ConvolutionWeightGrad");
    auto ins = nodes[0].inputs();
    eval(ins);
    auto& c = static_cast<ConvolutionWeightGrad&>(nodes[0].primitive());
    auto maps = cp::weight_grad_mappings(
        ins[0].shape(), ins[0].strides(), ins[1].shape(), ins[1].strides(),
        nodes[0].shape(), c.stride(), c.padding_lo(), c.kernel_dilation(),
        c.input_dilation(), c.groups(), c.flip());
    if (k.none) {
      EXPECT_TRUE(maps.empty());
      continue;
    }
    ASSERT_FALSE(maps.empty());
    const cp::Mapping& m = maps[0];
    EXPECT_EQ(m.op, cp::Op::backward_filter) << m.str();
    EXPECT_FALSE(m.pack_input) << m.str();
    EXPECT_FALSE(m.pack_weight) << m.str();
    EXPECT_EQ(m.swap_operands, k.swapped) << m.str();
    if (k.swapped) {
      // DW is [C_in, K..., C_out/g], rearranged: a weight-sized scratch.
      EXPECT_EQ(m.scratch_elems, w.size()) << m.str();
      EXPECT_EQ(m.y.dim[1], k.xs.back());
    } else {
      // X is the forward input, DY the cotangent, DW our output.
      EXPECT_EQ(m.scratch_elems, 0) << m.str();
      EXPECT_EQ(m.x.dim[0], k.xs[0]);
      EXPECT_EQ(m.x.dim[1], k.xs.back());
      EXPECT_EQ(m.w.dim[0], k.ws[0]);
      EXPECT_EQ(m.w.dim[1], k.ws.back());
    }
  }
}

// Forms no cuDNN operation takes go to the general path: a stride with
// input dilation, negative padding at the start.
TEST(ConvPlan, NoMappingWhereCudnnCannot) {
  auto none = [](const Shape& xs, const Shape& ws, const Shape& ys,
                 std::vector<int> s, std::vector<int> lo,
                 std::vector<int> hi, std::vector<int> id) {
    Strides xst(xs.size(), 1), wst(ws.size(), 1);
    for (int i = static_cast<int>(xs.size()) - 2; i >= 0; --i) {
      xst[i] = xst[i + 1] * xs[i + 1];
    }
    for (int i = static_cast<int>(ws.size()) - 2; i >= 0; --i) {
      wst[i] = wst[i + 1] * ws[i + 1];
    }
    return cp::cudnn_mappings(xs, xst, ws, wst, ys, s, lo, hi, {1}, id, 1,
                              false)
        .empty();
  };
  // Stride 2 and input dilation 2: L 4 -> dilated 7, K 2: 3 outputs.
  EXPECT_TRUE(none({1, 4, 1}, {1, 2, 1}, {1, 3, 1}, {2}, {0}, {0}, {2}));
  // Cropping at the start.
  EXPECT_TRUE(none({1, 6, 1}, {1, 2, 1}, {1, 4, 1}, {1}, {-1}, {0}, {1}));
  // The same without the crop maps to the forward.
  EXPECT_FALSE(none({1, 6, 1}, {1, 2, 1}, {1, 5, 1}, {1}, {0}, {0}, {1}));
}
