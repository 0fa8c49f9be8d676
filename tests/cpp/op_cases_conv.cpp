// Op-table cases of the convolutions: every option (stride, padding,
// dilations, groups, flip), 1-D to 3-D, and the transposed forms. Small
// float64 shapes keep the finite-difference checks fast. References: a
// direct loop over output positions and taps (conv_ref), the transposed
// forms by scattering each input element through the kernel.
#include "fluxion/ops/conv_impl.h"
#include "op_cases.h"

namespace fluxion::test {

namespace {

// Aggregate order: stride, padding lo, hi, kernel dilation, input
// dilation (empty: the defaults), groups, flip.
struct ConvParams {
  std::vector<int> stride, lo, hi, kdil, idil;
  int groups = 1;
  bool flip = false;
};

// Channels-last input [N, S..., C_in], weight [C_out, K..., C_in / g].
array conv_ref(const array& x, const array& w, ConvParams p) {
  int nd = x.ndim() - 2;
  auto fill = [nd](std::vector<int>& v, int d) {
    if (v.empty()) v.assign(nd, d);
  };
  fill(p.stride, 1), fill(p.lo, 0), fill(p.hi, 0), fill(p.kdil, 1),
      fill(p.idil, 1);
  Host hx(x), hw(w);
  int n = x.shape(0), cin = x.shape(-1), cout = w.shape(0);
  int cg = cin / p.groups, og = cout / p.groups;
  Shape out{n};
  std::vector<int> in_sp, k_sp;
  for (int d = 0; d < nd; ++d) {
    in_sp.push_back(x.shape(1 + d));
    k_sp.push_back(w.shape(1 + d));
    int dilated = (in_sp[d] - 1) * p.idil[d] + 1 + p.lo[d] + p.hi[d];
    int kext = (k_sp[d] - 1) * p.kdil[d] + 1;
    out.push_back((dilated - kext) / p.stride[d] + 1);
  }
  out.push_back(cout);
  auto xat = [&](int b, const std::vector<int>& pos, int c) {
    int64_t off = b;
    for (int d = 0; d < nd; ++d) off = off * in_sp[d] + pos[d];
    return hx.v[off * cin + c];
  };
  auto wat = [&](int co, const std::vector<int>& k, int c) {
    int64_t off = co;
    for (int d = 0; d < nd; ++d) off = off * k_sp[d] + k[d];
    return hw.v[off * cg + c];
  };
  int64_t taps = 1;
  for (int k : k_sp) taps *= k;
  return [&] {
    std::vector<double> v(shape_size(out));
    std::vector<int> idx(out.size(), 0);
    for (size_t e = 0; e < v.size(); ++e) {
      int b = idx[0], co = idx.back(), g = co / og;
      double s = 0;
      for (int64_t t = 0; t < taps; ++t) {
        std::vector<int> k(nd), pos(nd);
        bool inside = true;
        int64_t r = t;
        for (int d = nd - 1; d >= 0; --d) {
          k[d] = static_cast<int>(r % k_sp[d]);
          r /= k_sp[d];
          int q = idx[1 + d] * p.stride[d] + k[d] * p.kdil[d] - p.lo[d];
          inside = inside && q >= 0 && q % p.idil[d] == 0 &&
                   q / p.idil[d] < in_sp[d];
          pos[d] = inside ? q / p.idil[d] : 0;
        }
        if (!inside) continue;
        std::vector<int> kk = k;
        if (p.flip) {
          for (int d = 0; d < nd; ++d) kk[d] = k_sp[d] - 1 - k[d];
        }
        for (int c = 0; c < cg; ++c) {
          s += xat(b, pos, g * cg + c) * wat(co, kk, c);
        }
      }
      v[e] = s;
      for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
    return host_array(v, out);
  }();
}

// The weight gradient of conv_ref's convolution with cotangent ct [N, O...,
// C_out] and kernel spatial size `ks` by its definition: each output
// element's cotangent times the input each tap reads, added into the tap.
array conv_weight_grad_ref(const array& x, const array& ct,
                           std::vector<int> ks, ConvParams p) {
  int nd = x.ndim() - 2;
  Host hx(x), hc(ct);
  int n = x.shape(0), cin = x.shape(-1), cout = ct.shape(-1);
  int cg = cin / p.groups, og = cout / p.groups;
  std::vector<int> in_sp, o_sp;
  Shape ws{cout};
  for (int d = 0; d < nd; ++d) {
    in_sp.push_back(x.shape(1 + d));
    o_sp.push_back(ct.shape(1 + d));
    ws.push_back(ks[d]);
  }
  ws.push_back(cg);
  int64_t taps = 1, positions = 1;
  for (int k : ks) taps *= k;
  for (int o : o_sp) positions *= o;
  std::vector<double> v(shape_size(ws), 0.0);
  for (int b = 0; b < n; ++b) {
    for (int64_t q = 0; q < positions; ++q) {
      std::vector<int> o(nd);
      int64_t r = q;
      for (int d = nd - 1; d >= 0; --d) {
        o[d] = static_cast<int>(r % o_sp[d]);
        r /= o_sp[d];
      }
      for (int64_t t = 0; t < taps; ++t) {
        std::vector<int> k(nd);
        int64_t xoff = b, rt = t;
        bool inside = true;
        for (int d = nd - 1; d >= 0; --d) {
          k[d] = static_cast<int>(rt % ks[d]);
          rt /= ks[d];
        }
        for (int d = 0; d < nd; ++d) {
          int kk = p.flip ? ks[d] - 1 - k[d] : k[d];
          int pos = o[d] * p.stride[d] + kk * p.kdil[d] - p.lo[d];
          inside = inside && pos >= 0 && pos % p.idil[d] == 0 &&
                   pos / p.idil[d] < in_sp[d];
          xoff = xoff * in_sp[d] + (inside ? pos / p.idil[d] : 0);
        }
        if (!inside) continue;
        for (int co = 0; co < cout; ++co) {
          int g = co / og;
          double c = hc.v[(b * positions + q) * cout + co];
          for (int ci = 0; ci < cg; ++ci) {
            v[(co * taps + t) * cg + ci] +=
                c * hx.v[xoff * cin + g * cg + ci];
          }
        }
      }
    }
  }
  return host_array(v, ws);
}

// The transposed convolution by its definition: each input element at i
// adds x[i] w[k] at output position i * stride + k * dilation - padding.
array conv_transpose_ref(const array& x, const array& w,
                         std::vector<int> stride, std::vector<int> pad,
                         std::vector<int> dil, std::vector<int> out_pad,
                         int groups) {
  int nd = x.ndim() - 2;
  Host hx(x), hw(w);
  int n = x.shape(0), cin = x.shape(-1), cout = w.shape(0);
  int cg = cin / groups, og = cout / groups;
  std::vector<int> in_sp, k_sp;
  Shape out{n};
  for (int d = 0; d < nd; ++d) {
    in_sp.push_back(x.shape(1 + d));
    k_sp.push_back(w.shape(1 + d));
    out.push_back((in_sp[d] - 1) * stride[d] - 2 * pad[d] +
                  dil[d] * (k_sp[d] - 1) + out_pad[d] + 1);
  }
  out.push_back(cout);
  std::vector<double> v(shape_size(out), 0.0);
  int64_t in_n = 1, taps = 1;
  for (int s : in_sp) in_n *= s;
  for (int k : k_sp) taps *= k;
  for (int b = 0; b < n; ++b) {
    for (int64_t i = 0; i < in_n; ++i) {
      for (int64_t t = 0; t < taps; ++t) {
        int64_t ri = i, rt = t, off = b;
        std::vector<int> ii(nd), kk(nd);
        for (int d = nd - 1; d >= 0; --d) {
          ii[d] = static_cast<int>(ri % in_sp[d]), ri /= in_sp[d];
          kk[d] = static_cast<int>(rt % k_sp[d]), rt /= k_sp[d];
        }
        bool inside = true;
        for (int d = 0; d < nd; ++d) {
          int o = ii[d] * stride[d] + kk[d] * dil[d] - pad[d];
          inside = inside && o >= 0 && o < out[1 + d];
          off = off * out[1 + d] + o;
        }
        if (!inside) continue;
        for (int co = 0; co < cout; ++co) {
          int g = co / og;
          for (int c = 0; c < cg; ++c) {
            int64_t woff = co;
            for (int d = 0; d < nd; ++d) woff = woff * k_sp[d] + kk[d];
            int64_t xoff = b;
            for (int d = 0; d < nd; ++d) xoff = xoff * in_sp[d] + ii[d];
            v[off * cout + co] +=
                hx.v[xoff * cin + g * cg + c] * hw.v[woff * cg + c];
          }
        }
      }
    }
  }
  return host_array(v, out);
}

// np.convolve(a, v, mode).
array convolve_ref(const array& a, const array& v, const std::string& mode) {
  auto x = values(a), y = values(v);
  int n = static_cast<int>(x.size()), m = static_cast<int>(y.size());
  std::vector<double> full(n + m - 1, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) full[i + j] += x[i] * y[j];
  if (mode == "full") return host_array(full, {n + m - 1});
  int len = std::max(n, m), start = (std::min(n, m) - 1) / 2;
  std::vector<double> same(full.begin() + start, full.begin() + start + len);
  return host_array(same, {len});
}

}  // namespace

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> c;
  auto add = [&](const std::string& name,
                 std::function<array(const array&, const array&)> g,
                 const Shape& xs, const Shape& ws,
                 std::function<array(const array&, const array&)> ref,
                 bool second = false) {
    OpCase k{name,
             binary(g),
             {normal(xs), normal(ws)},
             second ? Deriv::second : Deriv::first};
    k.dtypes = {float64, float32};
    k.ref = [ref](const Arrays& x) { return Arrays{ref(x[0], x[1])}; };
    k.fwd_tol = 1e-10;
    // float32 sums of up to 24 products, in another order on the GPU
    // (cuDNN, cuBLASLt) than on the CPU.
    k.fwd_ulps = 64;
    c.push_back(std::move(k));
  };
  using P = ConvParams;
  auto general = [](P p) {
    return [p](const array& x, const array& w) { return conv_ref(x, w, p); };
  };
  add("conv1d", [](auto& x, auto& w) { return conv1d(x, w); }, {2, 6, 3},
      {2, 3, 3}, general({{}, {}, {}, {}, {}, 1, false}), true);
  add("conv1d_stride_pad_dilation",
      [](auto& x, auto& w) { return conv1d(x, w, 2, 2, 2); }, {1, 7, 2},
      {3, 2, 2}, general({{2}, {2}, {2}, {2}, {}, 1, false}));
  add("conv1d_groups",
      [](auto& x, auto& w) { return conv1d(x, w, 1, 1, 1, 2); }, {2, 5, 4},
      {4, 2, 2}, general({{}, {1}, {1}, {}, {}, 2, false}));
  add("conv2d", [](auto& x, auto& w) { return conv2d(x, w, 1, 1); },
      {1, 4, 5, 2}, {3, 3, 2, 2}, general({{}, {1, 1}, {1, 1}, {}, {}, 1, false}),
      true);
  add("conv2d_stride_uneven",
      [](auto& x, auto& w) { return conv2d(x, w, {2, 3}, {1, 0}); },
      {2, 6, 7, 2}, {2, 2, 3, 2},
      general({{2, 3}, {1, 0}, {1, 0}, {}, {}, 1, false}));
  add("conv2d_dilation_groups",
      [](auto& x, auto& w) {
        return conv2d(x, w, {1, 1}, {1, 2}, {2, 1}, 3);
      },
      {1, 6, 5, 3}, {3, 2, 2, 1},
      general({{}, {1, 2}, {1, 2}, {2, 1}, {}, 3, false}));
  add("conv3d", [](auto& x, auto& w) { return conv3d(x, w, 1, 1); },
      {1, 3, 4, 3, 2}, {2, 2, 3, 2, 2},
      general({{}, {1, 1, 1}, {1, 1, 1}, {}, {}, 1, false}));
  add("conv3d_stride", [](auto& x, auto& w) { return conv3d(x, w, 2); },
      {1, 5, 4, 5, 1}, {2, 2, 2, 3, 1}, general({{2, 2, 2}, {}, {}, {}, {}, 1, false}));
  add("conv_general_flip_input_dilation",
      [](auto& x, auto& w) {
        return conv_general(x, w, {1, 2}, {1, 2}, {2, 0}, {1, 2}, {2, 1}, 1,
                            true);
      },
      {1, 4, 5, 2}, {2, 2, 2, 2},
      general({{1, 2}, {1, 2}, {2, 0}, {1, 2}, {2, 1}, 1, true}), true);
  add("conv_general_1d_everything",
      [](auto& x, auto& w) {
        return conv_general(x, w, {3}, {2}, {1}, {2}, {3}, 2, true);
      },
      {2, 4, 2}, {2, 2, 1},
      general({{3}, {2}, {1}, {2}, {3}, 2, true}));
  add("conv_transpose1d",
      [](auto& x, auto& w) { return conv_transpose1d(x, w, 2, 1, 1, 1); },
      {1, 4, 2}, {3, 3, 2},
      [](const array& x, const array& w) {
        return conv_transpose_ref(x, w, {2}, {1}, {1}, {1}, 1);
      },
      true);
  add("conv_transpose2d_groups",
      [](auto& x, auto& w) {
        return conv_transpose2d(x, w, {2, 1}, {0, 1}, {1, 2}, {1, 0}, 2);
      },
      {1, 3, 4, 2}, {4, 2, 3, 1},
      [](const array& x, const array& w) {
        return conv_transpose_ref(x, w, {2, 1}, {0, 1}, {1, 2}, {1, 0}, 2);
      });
  add("conv_transpose3d",
      [](auto& x, auto& w) { return conv_transpose3d(x, w, 2, 1); },
      {1, 2, 3, 2, 1}, {2, 2, 2, 3, 1},
      [](const array& x, const array& w) {
        return conv_transpose_ref(x, w, {2, 2, 2}, {1, 1, 1}, {1, 1, 1},
                                  {0, 0, 0}, 1);
      });
  add("convolve_same", [](auto& a, auto& v) { return convolve(a, v, "same"); },
      {7}, {4}, [](const array& a, const array& v) {
        return convolve_ref(a, v, "same");
      });
  add("convolve_full", [](auto& a, auto& v) { return convolve(a, v); }, {3},
      {5}, [](const array& a, const array& v) {
        return convolve_ref(a, v, "full");
      });
  add("conv2d_depthwise",
      [](auto& x, auto& w) { return conv2d(x, w, 2, 1, 1, 3); }, {1, 5, 4, 3},
      {3, 3, 2, 1},
      general({{2, 2}, {1, 1}, {1, 1}, {}, {}, 3, false}),
      true);
  // The grouped weight gradient's own node (ConvolutionWeightGrad), as the
  // vjp builds it: of the input and the cotangent.
  auto wgrad = [](std::vector<int> ks, P p) {
    return [ks, p](const array& x, const array& ct) {
      conv_detail::ConvParams q{p.stride, p.lo, p.hi, p.kdil,
                                p.idil,   p.groups, p.flip};
      return conv_detail::weight_grad(x, ct, ks, q, to_stream({}));
    };
  };
  auto wgrad_ref = [](std::vector<int> ks, P p) {
    return [ks, p](const array& x, const array& ct) {
      return conv_weight_grad_ref(x, ct, ks, p);
    };
  };
  // 2-D depthwise with a channel multiplier, strided, padded: x [1, 5, 4,
  // 2], weight [4, 3, 2, 1], cotangent [1, 3, 3, 4].
  P dw{{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, false};
  add("conv_weight_grad_depthwise", wgrad({3, 2}, dw), {1, 5, 4, 2},
      {1, 3, 3, 4}, wgrad_ref({3, 2}, dw), true);
  // 1-D, groups 2, flipped, kernel and input dilation, asymmetric
  // padding: L 4 -> dilated 7, padded 2 + 1, kernel 2 dilated 2: 8
  // outputs.
  P fl{{1}, {2}, {1}, {2}, {2}, 2, true};
  add("conv_weight_grad_flip_input_dilation", wgrad({2}, fl), {2, 4, 4},
      {2, 8, 2}, wgrad_ref({2}, fl));
  return c;
}

FLUXION_REGISTER_OP_CASES(conv_cases);

}  // namespace fluxion::test
