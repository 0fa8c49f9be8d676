// Convolutions against a naive nested-loop reference written here from the
// definition (gradients and vmap are checked by the op-spec table in
// op_cases_conv.cpp).
#include <random>
#include <sstream>

#include "test_utils.h"
#include "fluxion/eager.h"
#include "fluxion/ops/conv_impl.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

struct Params {
  std::vector<int> stride, lo, hi, kdil, idil;
  int groups = 1;
  bool flip = false;
};

array rand_array(const Shape& shape, unsigned seed, Dtype t = float64) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& e : v) {
    e = u(gen);
  }
  return array(v.begin(), shape, t);
}

// The definition: out[n, o..., co] = sum over taps k and group channels c
// of x_dilated_padded[n, o * stride + k' * kdil, g * cin_g + c] *
// w[co, k..., c], k' = K - 1 - k when flipped.
std::vector<double> naive_conv(const array& x, const array& w, const Params& p,
                               Shape& out_shape) {
  int d = x.ndim() - 2;
  auto xv = to_vector<double>(x);
  auto wv = to_vector<double>(w);
  int cin = x.shape(-1), cout = w.shape(0);
  int cin_g = cin / p.groups, cout_g = cout / p.groups;
  out_shape = {x.shape(0)};
  for (int i = 0; i < d; ++i) {
    int span = (x.shape(i + 1) - 1) * p.idil[i] + 1 + p.lo[i] + p.hi[i];
    int k = (w.shape(i + 1) - 1) * p.kdil[i] + 1;
    out_shape.push_back((span - k) / p.stride[i] + 1);
  }
  out_shape.push_back(cout);
  Shape kshape(w.shape().begin() + 1, w.shape().end() - 1);
  return expected_by(out_shape, [&](const Index& o) {
    int n = o[0], co = o[d + 1], grp = co / cout_g;
    double acc = 0;
    for (int64_t t = 0; t < shape_size(kshape); ++t) {
      Index k(d);
      int64_t r = t;
      for (int i = d - 1; i >= 0; --i) {
        k[i] = r % kshape[i];
        r /= kshape[i];
      }
      Index xi{n};
      bool ok = true;
      for (int i = 0; i < d && ok; ++i) {
        int kk = p.flip ? kshape[i] - 1 - k[i] : k[i];
        int j = o[i + 1] * p.stride[i] - p.lo[i] + kk * p.kdil[i];
        ok = j >= 0 && j % p.idil[i] == 0 && j / p.idil[i] < x.shape(i + 1);
        xi.push_back(ok ? j / p.idil[i] : 0);
      }
      if (!ok) {
        continue;
      }
      for (int c = 0; c < cin_g; ++c) {
        Index xc = xi;
        xc.push_back(grp * cin_g + c);
        Index wc{co};
        wc.insert(wc.end(), k.begin(), k.end());
        wc.push_back(c);
        acc += xv[flat(x.shape(), xc)] * wv[flat(w.shape(), wc)];
      }
    }
    return acc;
  });
}

void expect_conv(const array& got, const array& x, const array& w,
                 const Params& p, double tol = 1e-10,
                 const std::string& what = "") {
  Shape shape;
  auto want = naive_conv(x, w, p, shape);
  ASSERT_EQ(got.shape(), shape) << what;
  expect_close(got, want, tol, tol, what);
}

Params uniform(int d, int s, int lo, int hi, int kd, int id, int groups,
               bool flip) {
  return {std::vector<int>(d, s),
          std::vector<int>(d, lo),
          std::vector<int>(d, hi),
          std::vector<int>(d, kd),
          std::vector<int>(d, id),
          groups,
          flip};
}

}  // namespace

TEST(Conv, GeneralAllOptionCombinations) {
  unsigned seed = 1;
  for (int d = 1; d <= 3; ++d) {
    int len = d == 3 ? 4 : 6;
    for (int s : {1, 2})
      for (int pad : {0, 2})
        for (int kd : {1, 2})
          for (int id : {1, 2})
            for (int groups : {1, 2})
              for (bool flip : {false, true}) {
                Shape xs{2}, ws{4};
                for (int i = 0; i < d; ++i) {
                  xs.push_back(len + i);
                  ws.push_back(2 + (i % 2));
                }
                xs.push_back(4);
                ws.push_back(4 / groups);
                auto x = rand_array(xs, seed++);
                auto w = rand_array(ws, seed++);
                Params p = uniform(d, s, pad, pad / 2, kd, id, groups, flip);
                auto y = conv_general(x, w, p.stride, p.lo, p.hi, p.kdil,
                                      p.idil, groups, flip);
                expect_conv(
                    y, x, w, p, 1e-10,
                    "d=" + std::to_string(d) + " s=" + std::to_string(s) +
                        " pad=" + std::to_string(pad) + " kd=" +
                        std::to_string(kd) + " id=" + std::to_string(id) +
                        " g=" + std::to_string(groups) +
                        " flip=" + std::to_string(flip));
              }
  }
}

// One channel per group in and out (single-channel signals and depthwise
// convolutions) takes a direct kernel: the same sweep over its options.
TEST(Conv, DepthwiseAllOptionCombinations) {
  unsigned seed = 500;
  for (int d = 1; d <= 3; ++d)
    for (int c : {1, 3})
      for (int s : {1, 2})
        for (int pad : {0, 2})
          for (int kd : {1, 2})
            for (int id : {1, 2})
              for (bool flip : {false, true}) {
                Shape xs{2}, ws{c};
                for (int i = 0; i < d; ++i) {
                  xs.push_back(6 - i);
                  ws.push_back(3 - (i % 2));
                }
                xs.push_back(c);
                ws.push_back(1);
                auto x = rand_array(xs, seed++);
                auto w = rand_array(ws, seed++);
                Params p = uniform(d, s, pad, 1, kd, id, c, flip);
                auto y = conv_general(x, w, p.stride, p.lo, p.hi, p.kdil,
                                      p.idil, c, flip);
                expect_conv(y, x, w, p, 1e-10,
                            "d=" + std::to_string(d) + " c=" +
                                std::to_string(c) + " s=" + std::to_string(s) +
                                " pad=" + std::to_string(pad) +
                                " kd=" + std::to_string(kd) +
                                " id=" + std::to_string(id) +
                                " flip=" + std::to_string(flip));
                auto yf =
                    conv_general(astype(x, float32), astype(w, float32),
                                 p.stride, p.lo, p.hi, p.kdil, p.idil, c, flip);
                expect_conv(yf, x, w, p, 1e-5, "float32");
              }
}

TEST(Conv, PerAxisParameters) {
  auto x = rand_array({1, 7, 9, 3}, 11);
  auto w = rand_array({2, 3, 2, 3}, 12);
  Params p{{2, 1}, {1, 0}, {0, 2}, {1, 3}, {2, 1}, 1, false};
  expect_conv(conv_general(x, w, p.stride, p.lo, p.hi, p.kdil, p.idil), x, w,
              p);
  // One value applies to every axis; empty vectors are the defaults.
  Params q = uniform(2, 1, 1, 1, 1, 1, 1, false);
  expect_conv(conv_general(x, w, {}, {1}), x, w, q);
}

TEST(Conv, Wrappers) {
  auto x1 = rand_array({2, 9, 4}, 21);
  auto w1 = rand_array({6, 3, 2}, 22);
  expect_conv(conv1d(x1, w1, 2, 1, 2, 2), x1, w1,
              uniform(1, 2, 1, 1, 2, 1, 2, false));
  auto x2 = rand_array({2, 7, 6, 3}, 23);
  auto w2 = rand_array({4, 3, 2, 3}, 24);
  expect_conv(conv2d(x2, w2), x2, w2, uniform(2, 1, 0, 0, 1, 1, 1, false));
  expect_conv(conv2d(x2, w2, {2, 1}, {1, 0}, {1, 2}), x2, w2,
              Params{{2, 1}, {1, 0}, {1, 0}, {1, 2}, {1, 1}, 1, false});
  expect_conv(conv2d(x2, w2, 2, 1, 2), x2, w2,
              uniform(2, 2, 1, 1, 2, 1, 1, false));
  auto x3 = rand_array({1, 4, 5, 6, 2}, 25);
  auto w3 = rand_array({3, 2, 2, 3, 2}, 26);
  expect_conv(conv3d(x3, w3), x3, w3, uniform(3, 1, 0, 0, 1, 1, 1, false));
  expect_conv(
      conv3d(x3, w3, {1, 2, 1}, {0, 1, 1}, {2, 1, 1}), x3, w3,
      Params{{1, 2, 1}, {0, 1, 1}, {0, 1, 1}, {2, 1, 1}, {1, 1, 1}, 1, false});
  expect_conv(conv3d(x3, w3, 2, 1), x3, w3,
              uniform(3, 2, 1, 1, 1, 1, 1, false));
}

// The scatter form of a transposed convolution: input i feeds output
// i * stride - padding + k * dilation through tap k.
std::vector<double> naive_transpose(const array& x, const array& w,
                                    const std::vector<int>& s,
                                    const std::vector<int>& pad,
                                    const std::vector<int>& dil,
                                    const std::vector<int>& opad, int groups,
                                    Shape& out_shape) {
  int d = x.ndim() - 2;
  auto xv = to_vector<double>(x);
  auto wv = to_vector<double>(w);
  int cin = x.shape(-1), cout = w.shape(0);
  int cin_g = cin / groups, cout_g = cout / groups;
  out_shape = {x.shape(0)};
  for (int i = 0; i < d; ++i) {
    out_shape.push_back((x.shape(i + 1) - 1) * s[i] - 2 * pad[i] +
                        dil[i] * (w.shape(i + 1) - 1) + 1 + opad[i]);
  }
  out_shape.push_back(cout);
  std::vector<double> out(shape_size(out_shape), 0.0);
  Shape xsp(x.shape().begin() + 1, x.shape().end() - 1);
  Shape ksp(w.shape().begin() + 1, w.shape().end() - 1);
  for (int n = 0; n < x.shape(0); ++n)
    for (int64_t a = 0; a < shape_size(xsp); ++a)
      for (int64_t b = 0; b < shape_size(ksp); ++b) {
        Index i(d), k(d), o{n};
        int64_t ra = a, rb = b;
        for (int j = d - 1; j >= 0; --j) {
          i[j] = ra % xsp[j];
          ra /= xsp[j];
          k[j] = rb % ksp[j];
          rb /= ksp[j];
        }
        bool ok = true;
        for (int j = 0; j < d; ++j) {
          int pos = i[j] * s[j] - pad[j] + k[j] * dil[j];
          ok = ok && pos >= 0 && pos < out_shape[j + 1];
          o.push_back(pos);
        }
        if (!ok) {
          continue;
        }
        for (int co = 0; co < cout; ++co) {
          int grp = co / cout_g;
          Index oc = o;
          oc.push_back(co);
          for (int c = 0; c < cin_g; ++c) {
            Index xc{n};
            xc.insert(xc.end(), i.begin(), i.end());
            xc.push_back(grp * cin_g + c);
            Index wc{co};
            wc.insert(wc.end(), k.begin(), k.end());
            wc.push_back(c);
            out[flat(out_shape, oc)] +=
                xv[flat(x.shape(), xc)] * wv[flat(w.shape(), wc)];
          }
        }
      }
  return out;
}

TEST(Conv, Transpose) {
  unsigned seed = 100;
  for (int d = 1; d <= 3; ++d)
    for (int s : {1, 2, 3})
      for (int pad : {0, 1})
        for (int dil : {1, 2})
          for (int groups : {1, 2}) {
            int opad = s > 1 ? 1 : (dil > 1 ? 1 : 0);
            Shape xs{2}, ws{4};
            for (int i = 0; i < d; ++i) {
              xs.push_back(3 + i);
              ws.push_back(2 + (i % 2));
            }
            xs.push_back(2);
            ws.push_back(2 / groups);
            auto x = rand_array(xs, seed++);
            auto w = rand_array(ws, seed++);
            std::vector<int> sv(d, s), pv(d, pad), dv(d, dil), ov(d, opad);
            array y = array(0.0);
            if (d == 1) {
              y = conv_transpose1d(x, w, s, pad, dil, opad, groups);
            } else if (d == 2) {
              y = conv_transpose2d(x, w, {s, s}, {pad, pad}, {dil, dil},
                                   {opad, opad}, groups);
            } else {
              y = conv_transpose3d(x, w, s, pad, dil, opad, groups);
            }
            Shape shape;
            auto want = naive_transpose(x, w, sv, pv, dv, ov, groups, shape);
            std::string what =
                "d=" + std::to_string(d) + " s=" + std::to_string(s) +
                " pad=" + std::to_string(pad) + " dil=" + std::to_string(dil) +
                " g=" + std::to_string(groups);
            ASSERT_EQ(y.shape(), shape) << what;
            expect_close(y, want, 1e-10, 1e-10, what);
          }
}

TEST(Conv, Convolve) {
  auto a = array({1.0, 2.0, 3.0, 4.0, 5.0});
  auto v = array({1.0, -1.0, 0.5});
  // NumPy: np.convolve([1,2,3,4,5], [1,-1,0.5], mode)
  expect_close(convolve(a, v), {1, 1, 1.5, 2, 2.5, -3, 2.5});
  expect_close(convolve(a, v, "same"), {1, 1.5, 2, 2.5, -3});
  expect_close(convolve(a, v, "valid"), {1.5, 2, 2.5});
  // The shorter argument may come first (NumPy swaps them).
  expect_close(convolve(v, a, "same"), {1, 1.5, 2, 2.5, -3});
  // Even kernel length: "same" centres like NumPy.
  auto e = array({1.0, 2.0});
  expect_close(convolve(a, e, "same"), {1, 4, 7, 10, 13});
  expect_close(convolve(a, e, "valid"), {4, 7, 10, 13});
  EXPECT_EQ(convolve(astype(a, float32), astype(v, float32)).dtype(), float32);
}

TEST(Conv, Dtypes) {
  auto x = rand_array({2, 6, 5, 4}, 31);
  auto w = rand_array({6, 3, 3, 2}, 32);
  Params p = uniform(2, 2, 1, 1, 1, 1, 2, false);
  for (auto t : {float32, float16, bfloat16}) {
    auto xt = astype(x, t), wt = astype(w, t);
    auto y = conv2d(xt, wt, 2, 1, 1, 2);
    EXPECT_EQ(y.dtype(), t);
    // Reference on the rounded inputs; the output rounds once.
    double tol = t == float32 ? 1e-5 : (t == float16 ? 4e-3 : 3e-2);
    expect_conv(y, astype(xt, float64), astype(wt, float64), p, tol,
                dtype_name(t));
  }
  // Mixed dtypes promote.
  EXPECT_EQ(conv2d(astype(x, float32), w, 2, 1, 1, 2).dtype(), float64);
  EXPECT_EQ(conv2d(astype(x, float16), astype(w, float32), 2, 1, 1, 2).dtype(),
            float32);
}

TEST(Conv, StridedBroadcastAndTransposedInputs) {
  // A transposed input, a sliced (gapped) weight, a broadcast input.
  auto base = rand_array({3, 2, 8, 7}, 41);  // [C, N, H, W]
  auto x = transpose(base, {1, 2, 3, 0});    // [N, H, W, C]
  auto wbig = rand_array({4, 5, 3, 6}, 42);
  auto w = slice(wbig, {0, 0, 0, 0}, {4, 5, 3, 6}, {1, 2, 1, 2});  // [4,3,3,3]
  Params p = uniform(2, 1, 1, 1, 1, 1, 1, false);
  expect_conv(conv2d(x, w, 1, 1), x, w, p);
  auto row = rand_array({1, 1, 7, 3}, 43);
  auto xb = broadcast_to(row, {2, 8, 7, 3});
  expect_conv(conv2d(xb, w, 1, 1), xb, w, p);
  // A reversed view.
  auto xr = slice(x, {0, 7, 0, 0}, {2, -9, 7, 3}, {1, -1, 1, 1});
  expect_conv(conv2d(xr, w, 1, 1), xr, w, p);
}

TEST(Conv, LargeBlockedAndDepthwise) {
  // Several im2col blocks (the large path), float32.
  auto x = rand_array({3, 24, 24, 32}, 51, float32);
  auto w = rand_array({40, 3, 3, 32}, 52, float32);
  expect_conv(conv2d(x, w, 1, 1), x, w, uniform(2, 1, 1, 1, 1, 1, 1, false),
              1e-4);
  // Depthwise (one channel per group): thin products over the pool.
  auto wd = rand_array({64, 3, 3, 1}, 53, float32);
  auto xd = rand_array({2, 20, 20, 64}, 54, float32);
  expect_conv(conv2d(xd, wd, 2, 1, 1, 64), xd, wd,
              uniform(2, 2, 1, 1, 1, 1, 64, false), 1e-4);
  // Grouped, large enough for the sequential blocked path.
  auto wg = rand_array({64, 3, 3, 16}, 56, float32);
  expect_conv(conv2d(x, wg, 1, 1, 1, 2), x, wg,
              uniform(2, 1, 1, 1, 1, 1, 2, false), 1e-4);
  // A strided 1x1 convolution goes through im2col.
  auto w1s = rand_array({5, 1, 1, 32}, 57, float32);
  expect_conv(conv2d(x, w1s, 2), x, w1s, uniform(2, 2, 0, 0, 1, 1, 1, false),
              1e-4);
  // Pointwise (1x1) reads the input in place.
  auto w1 = rand_array({5, 1, 1, 32}, 55, float32);
  expect_conv(conv2d(x, w1), x, w1, uniform(2, 1, 0, 0, 1, 1, 1, false), 1e-4);
}

TEST(Conv, EmptyAndEdgeShapes) {
  // No batch; an output of one position; a kernel as large as the input.
  auto x = rand_array({0, 5, 3}, 61);
  auto w = rand_array({2, 3, 3}, 62);
  EXPECT_EQ(conv1d(x, w).shape(), (Shape{0, 3, 2}));
  auto x1 = rand_array({2, 3, 3}, 63);
  expect_conv(conv1d(x1, w), x1, w, uniform(1, 1, 0, 0, 1, 1, 1, false));
  expect_conv(conv1d(x1, w, 5), x1, w, uniform(1, 5, 0, 0, 1, 1, 1, false));
}

TEST(Conv, Errors) {
  auto x = rand_array({2, 6, 6, 4}, 71);
  auto w = rand_array({4, 3, 3, 4}, 72);
  expect_error<std::invalid_argument>([&] { conv2d(x, w, 0); }, "[conv2d]");
  expect_error<std::invalid_argument>([&] { conv2d(x, w, 1, -1); },
                                      "non-negative");
  expect_error<std::invalid_argument>([&] { conv2d(x, w, 1, 0, 0); },
                                      "[conv2d] Received dilation");
  expect_error<std::invalid_argument>([&] { conv2d(x, w, 1, 0, 1, 3); },
                                      "groups = 3");
  expect_error<std::invalid_argument>([&] { conv2d(x, w, 1, 0, 1, 0); },
                                      "[conv2d] Received groups = 0");
  expect_error<std::invalid_argument>([&] { conv2d(x, w, 1, 0, 1, 2); },
                                      "C_in / groups = 2");
  expect_error<std::invalid_argument>(
      [&] {
        conv2d(x, rand_array({4, 3, 3, 3}, 73));
      },
      "(4 channels)");
  expect_error<std::invalid_argument>(
      [&] {
        conv2d(x, rand_array({4, 7, 3, 4}, 74));
      },
      "[conv2d] Received an input of shape (2,6,6,4) and a weight");
  expect_error<std::invalid_argument>(
      [&] {
        conv2d(rand_array({6, 6, 4}, 75), w);
      },
      "needs 4 dimensions");
  expect_error<std::invalid_argument>(
      [&] {
        conv2d(x, rand_array({4, 3, 4}, 76));
      },
      "[conv2d] Received a weight");
  expect_error<std::invalid_argument>(
      [&] { conv2d(astype(x, int32), astype(w, int32)); }, "floating-point");
  expect_error<std::invalid_argument>(
      [&] {
        conv1d(rand_array({1, 4, 1}, 1), rand_array({1, 0, 1}, 2));
      },
      "empty spatial");
  expect_error<std::invalid_argument>([&] { conv3d(x, w); }, "[conv3d]");
  expect_error<std::invalid_argument>(
      [&] {
        conv_general(x, w, {1, 1, 1});
      },
      "[conv_general] Received stride");
  expect_error<std::invalid_argument>(
      [&] { conv_general(x, w, {1}, {0}, {-1}, {}, {}, 1, false, {}); },
      "[conv_general]");
  expect_error<std::invalid_argument>(
      [&] { conv_general(x, w, {}, {}, {}, {}, {0}, 1, false, {}); },
      "input dilation");
  expect_error<std::invalid_argument>(
      [&] {
        conv_general(rand_array({2, 2}, 3), rand_array({2, 2}, 4));
      },
      "1 to 3 spatial");
  expect_error<std::invalid_argument>(
      [&] { conv_transpose2d(x, w, 2, 0, 1, 2); }, "[conv_transpose2d]");
  expect_error<std::invalid_argument>(
      [&] {
        conv_transpose1d(rand_array({1, 4, 1}, 5), rand_array({1, 2, 1}, 6), 1,
                         -1);
      },
      "[conv_transpose1d] Received padding");
  expect_error<std::invalid_argument>([&] { conv_transpose3d(x, w); },
                                      "[conv_transpose3d]");
  auto a = array({1.0, 2.0});
  expect_error<std::invalid_argument>(
      [&] {
        convolve(reshape(a, {1, 2}), a);
      },
      "[convolve]");
  expect_error<std::invalid_argument>([&] { convolve(a, zeros({0}, float64)); },
                                      "cannot be empty");
  expect_error<std::invalid_argument>([&] { convolve(a, a, "wide"); },
                                      "[convolve] Received mode 'wide'");
  expect_error<std::invalid_argument>(
      [&] { convolve(astype(a, int32), astype(a, int32)); }, "[convolve]");
}

TEST(Conv, GradientOfInputIsTransposedConv) {
  // vjp of conv1d with respect to its input, against the scatter form.
  auto x = rand_array({1, 9, 2}, 81);
  auto w = rand_array({3, 3, 2}, 82);
  auto ct = rand_array({1, 5, 3}, 83);
  auto f = [&](const std::vector<array>& in) {
    return std::vector<array>{conv1d(in[0], in[1], 2, 1)};
  };
  auto [out, grads] = vjp(f, {x, w}, {ct});
  // d x[i, c] = sum_{o, k: i = 2 o - 1 + k} ct[o, co] w[co, k, c]
  auto ctv = to_vector<double>(ct);
  auto wv = to_vector<double>(w);
  auto want = expected_by({1, 9, 2}, [&](const Index& ix) {
    double acc = 0;
    for (int o = 0; o < 5; ++o)
      for (int k = 0; k < 3; ++k)
        if (2 * o - 1 + k == ix[1])
          for (int co = 0; co < 3; ++co)
            acc += ctv[o * 3 + co] * wv[(co * 3 + k) * 2 + ix[2]];
    return acc;
  });
  expect_close(grads[0], want, 1e-10, 1e-10);
}

TEST(Conv, PrimitiveEquivalenceAndShapes) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  auto x = rand_array({1, 6, 5, 2}, 91);
  auto w = rand_array({2, 3, 2, 2}, 92);
  auto a = conv2d(x, w, 2, 1);
  auto b = conv2d(x, w, 2, 1);
  auto c = conv2d(x, w, 1, 1);
  auto f = conv_general(x, w, {2}, {1}, {1}, {1}, {1}, 1, true, {});
  EXPECT_TRUE(a.primitive().is_equivalent(b.primitive()));
  EXPECT_FALSE(a.primitive().is_equivalent(c.primitive()));
  EXPECT_FALSE(a.primitive().is_equivalent(f.primitive()));
  EXPECT_FALSE(a.primitive().is_equivalent(exp(x).primitive()));
  EXPECT_EQ(a.primitive().output_shapes({x, w}), std::vector<Shape>{a.shape()});
  EXPECT_EQ(a.shape(), (Shape{1, 3, 3, 2}));
  std::ostringstream os;
  a.primitive().print(os);
  EXPECT_NE(os.str().find("stride=(2,2)"), std::string::npos) << os.str();
}

// The grouped weight gradient is one ConvolutionWeightGrad node of the
// input and the cotangent; on the CPU it computes exactly what the
// composite the rule wrote before (conv_detail::weight_grad_composite)
// computes: the same copies, the same kernel, the same bits. Every option,
// 1-D to 3-D, depthwise with and without a channel multiplier, float64
// and float32, and an input read through a transposed view.
TEST(Conv, GroupedWeightGradMatchesTheComposite) {
  unsigned seed = 900;
  int cases = 0;
  for (int d = 1; d <= 3; ++d) {
    int len = d == 3 ? 4 : 6;
    for (int s : {1, 2})
      for (int pad : {0, 2})
        for (int kd : {1, 2})
          for (int id : {1, 2})
            for (int form : {0, 1, 2})  // groups 2; depthwise; multiplier 2
              for (bool flip : {false, true}) {
                const int cin = 4, groups = form == 0 ? 2 : 4;
                const int cout = form == 2 ? 8 : 4;
                Shape xs{2}, ws{cout};
                std::vector<int> kernel;
                for (int i = 0; i < d; ++i) {
                  xs.push_back(len + i);
                  ws.push_back(2 + (i % 2));
                  kernel.push_back(2 + (i % 2));
                }
                xs.push_back(cin);
                ws.push_back(cin / groups);
                Params p = uniform(d, s, pad, pad / 2, kd, id, groups, flip);
                const Dtype t = (seed % 2) ? float32 : float64;
                auto x = rand_array(xs, seed++, t);
                auto w = rand_array(ws, seed++, t);
                auto f = [&](const std::vector<array>& in) {
                  return std::vector<array>{conv_general(
                      in[0], in[1], p.stride, p.lo, p.hi, p.kdil, p.idil,
                      groups, flip)};
                };
                auto y = f({x, w})[0];
                auto ct = rand_array(y.shape(), seed++, t);
                auto [out, grads] = vjp(f, {x, w}, {ct});
                const std::string what =
                    "d=" + std::to_string(d) + " s=" + std::to_string(s) +
                    " pad=" + std::to_string(pad) + " kd=" +
                    std::to_string(kd) + " id=" + std::to_string(id) +
                    " form=" + std::to_string(form) +
                    " flip=" + std::to_string(flip);
                ASSERT_TRUE(grads[1].has_primitive()) << what;
                EXPECT_STREQ(grads[1].primitive().name(),
                             "ConvolutionWeightGrad")
                    << what;
                conv_detail::ConvParams q{p.stride, p.lo,   p.hi, p.kdil,
                                          p.idil,   groups, flip};
                auto old = conv_detail::weight_grad_composite(
                    x, ct, kernel, q, default_stream(default_device()));
                ASSERT_EQ(grads[1].shape(), w.shape()) << what;
                EXPECT_EQ(grads[1].dtype(), t) << what;
                EXPECT_EQ(to_vector<double>(grads[1]), to_vector<double>(old))
                    << what;
                ++cases;
              }
  }
  EXPECT_EQ(cases, 3 * 2 * 2 * 2 * 2 * 3 * 2);
  // Operands read through views: a transposed input, a broadcast
  // cotangent.
  auto xt = transpose(rand_array({2, 4, 6, 5}, 1), {0, 2, 3, 1});  // [2,6,5,4]
  auto w = rand_array({8, 3, 3, 1}, 2);
  auto ct = broadcast_to(rand_array({1, 3, 3, 8}, 3), {2, 3, 3, 8});
  auto [o, g] = vjp(
      [&](const std::vector<array>& in) {
        return std::vector<array>{conv2d(in[0], in[1], 2, 1, 1, 4)};
      },
      {xt, w}, {ct});
  conv_detail::ConvParams q{{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 4, false};
  auto old = conv_detail::weight_grad_composite(
      xt, ct, {3, 3}, q, default_stream(default_device()));
  EXPECT_EQ(to_vector<double>(g[1]), to_vector<double>(old));
}

TEST(Conv, WeightGradPrimitive) {
  fluxion::detail::EagerOff lazy_graphs;
  auto x = rand_array({2, 6, 5, 4}, 95);
  auto ct = rand_array({2, 3, 3, 8}, 96);
  auto s = default_stream(default_device());
  conv_detail::ConvParams p{{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 4, false};
  auto a = conv_detail::weight_grad(x, ct, {3, 2}, p, s);
  auto b = conv_detail::weight_grad(x, ct, {3, 2}, p, s);
  auto c = conv_detail::weight_grad(x, ct, {3, 3}, p, s);
  EXPECT_EQ(a.shape(), (Shape{8, 3, 2, 1}));
  EXPECT_TRUE(a.primitive().is_equivalent(b.primitive()));
  EXPECT_FALSE(a.primitive().is_equivalent(c.primitive()));
  EXPECT_EQ(a.primitive().output_shapes({x, ct}),
            std::vector<Shape>{a.shape()});
  std::ostringstream os;
  a.primitive().print(os);
  EXPECT_EQ(os.str(),
            "ConvolutionWeightGrad(kernel=(3,2), stride=(2,2), "
            "padding=(1,1), kernel_dilation=(1,1), input_dilation=(1,1), "
            "groups=4)");
  // One group: the composite of transposed views (no copy to avoid).
  p.groups = 1;
  auto one = conv_detail::weight_grad(x, rand_array({2, 3, 3, 2}, 97),
                                      {3, 2}, p, s);
  EXPECT_STREQ(one.primitive().name(), "Transpose");
  // Shapes that do not fit the parameters (an imported node) raise.
  p.groups = 3;
  EXPECT_THROW(a.primitive().output_shapes({x, rand_array({2, 3, 8}, 98)}),
               std::invalid_argument);
  // Empty operands give zeros.
  p.groups = 4;
  auto e = conv_detail::weight_grad(zeros({0, 6, 5, 4}, float64),
                                    zeros({0, 3, 3, 8}, float64), {3, 2}, p, s);
  EXPECT_EQ(to_vector<double>(e), std::vector<double>(8 * 3 * 2, 0.0));
}
