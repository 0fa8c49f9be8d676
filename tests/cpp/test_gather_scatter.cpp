// gather and the scatter family against naive loops over index rows, on
// strided and broadcast operands, for each dtype, with duplicates, negative
// indices, the parallel paths, and every error path.
#include <functional>
#include <random>

#include "fluxion/ops/common.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/transforms.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

std::vector<int> random_ints(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(n);
  for (auto& x : v) {
    x = d(gen);
  }
  return v;
}

array int_array(const std::vector<int>& v, const Shape& s, Dtype t = int32) {
  return array(v.begin(), s, t);
}

// Index row `row` of B for an index array of shape `s` broadcast to B.
int bcast_at(const std::vector<int>& v, const Shape& s, const Shape& B,
             int64_t row) {
  Index pos(B.size());
  for (int d = static_cast<int>(B.size()) - 1; d >= 0; --d) {
    pos[d] = static_cast<int>(row % B[d]);
    row /= B[d];
  }
  int64_t off = 0;
  size_t lead = B.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) {
    off = off * s[d] + (s[d] == 1 ? 0 : pos[lead + d]);
  }
  return v[off];
}

struct Idx {
  std::vector<int> v;
  Shape s;
};

Shape bshape(const std::vector<Idx>& idx) {
  Shape B;
  for (auto& i : idx) {
    B = broadcast_shapes(B, i.s, "test");
  }
  return B;
}

// The element offsets of `a` (row-major, shape `as`) covered by row `row`'s
// window of shape `win`, in row-major window order.
std::vector<int64_t> window(const Shape& as, const std::vector<Idx>& idx,
                            const std::vector<int>& axes, const Shape& win,
                            const Shape& B, int64_t row) {
  Index start(as.size(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    int ax = axes[k] < 0 ? axes[k] + static_cast<int>(as.size()) : axes[k];
    int i = bcast_at(idx[k].v, idx[k].s, B, row);
    start[ax] = i < 0 ? i + as[ax] : i;
  }
  std::vector<int64_t> out;
  expected_by(win, [&](const Index& w) {
    Index p(as.size());
    for (size_t d = 0; d < as.size(); ++d) {
      p[d] = start[d] + w[d];
    }
    out.push_back(flat(as, p));
    return 0.0;
  });
  return out;
}

std::vector<double> naive_gather(const std::vector<double>& a, const Shape& as,
                                 const std::vector<Idx>& idx,
                                 const std::vector<int>& axes,
                                 const Shape& sizes) {
  Shape B = bshape(idx);
  std::vector<double> out;
  for (int64_t r = 0; r < shape_size(B); ++r) {
    for (int64_t o : window(as, idx, axes, sizes, B, r)) {
      out.push_back(a[o]);
    }
  }
  return out;
}

using Combiner = std::function<double(double, double)>;

std::vector<double> naive_scatter(std::vector<double> a, const Shape& as,
                                  const std::vector<Idx>& idx,
                                  const std::vector<double>& upd,
                                  const std::vector<int>& axes, const Shape& U,
                                  const Combiner& f) {
  Shape B = bshape(idx);
  int64_t S = shape_size(U);
  for (int64_t r = 0; r < shape_size(B); ++r) {
    auto w = window(as, idx, axes, U, B, r);
    for (int64_t j = 0; j < S; ++j) {
      a[w[j]] = f(a[w[j]], upd[r * S + j]);
    }
  }
  return a;
}

std::vector<array> arrays(const std::vector<Idx>& idx, Dtype t = int32) {
  std::vector<array> out;
  for (auto& i : idx) {
    out.push_back(int_array(i.v, i.s, t));
  }
  return out;
}

const Combiner kSet = [](double, double v) { return v; };
const Combiner kAdd = [](double d, double v) { return d + v; };
const Combiner kMul = [](double d, double v) { return d * v; };
const Combiner kMax = [](double d, double v) { return std::max(d, v); };
const Combiner kMin = [](double d, double v) { return std::min(d, v); };

using ScatterFn = array (*)(const array&, const std::vector<array>&,
                            const array&, const std::vector<int>&,
                            StreamOrDevice);

struct Kind {
  const char* name;
  ScatterFn f;
  Combiner r;
};

const std::vector<Kind> kKinds = {{"scatter", &scatter, kSet},
                                  {"scatter_add", &scatter_add, kAdd},
                                  {"scatter_prod", &scatter_prod, kMul},
                                  {"scatter_max", &scatter_max, kMax},
                                  {"scatter_min", &scatter_min, kMin}};

}  // namespace

TEST(Gather, MultiAxisBroadcastIndices) {
  Shape as{4, 5, 6};
  auto av = iota_vec(120);
  std::vector<Idx> idx = {{{0, -1, 2}, {3, 1}}, {{4, -3}, {1, 2}}};
  std::vector<int> axes{0, 2};
  Shape sizes{1, 3, 2};
  auto g = gather(iota(as), arrays(idx), axes, sizes);
  EXPECT_EQ(g.shape(), Shape({3, 2, 1, 3, 2}));
  expect_close(g, naive_gather(av, as, idx, axes, sizes));
  // Negative axes and mixed index dtypes.
  auto h = gather(iota(as),
                  {int_array(idx[0].v, idx[0].s, int8),
                   int_array(idx[1].v, idx[1].s, int64)},
                  {-3, -1}, sizes);
  expect_close(h, naive_gather(av, as, idx, axes, sizes));
}

TEST(Gather, EveryDtypeAndIndexDtype) {
  Shape as{3, 4};
  std::vector<Idx> idx = {{{2, 0, -1, 1, 1}, {5}}};
  for (Dtype t : {bool_, uint8, int16, int32, int64, uint64, float16, bfloat16,
                  float32, float64, complex64}) {
    auto a = astype(iota(as, float32), t);
    std::vector<double> av;
    for (double v : iota_vec(12)) {
      av.push_back(test::as(t, v));
    }
    for (Dtype it :
         {int8, uint8, int16, uint16, int32, uint32, int64, uint64}) {
      std::vector<Idx> use = idx;
      if (is_unsigned(it)) {
        use[0].v = {2, 0, 2, 1, 1};
      }
      auto g = gather(a, arrays(use, it), {0}, {1, 4});
      EXPECT_EQ(g.dtype(), t);
      expect_close(g, naive_gather(av, as, use, {0}, {1, 4}), 1e-5, 1e-6,
                   dtype_name(t));
    }
  }
}

TEST(Gather, StridedOperandsAndWindows) {
  // A transposed operand, a strided index, windows of 2 and 3.
  auto base = iota({6, 7});
  auto a = transpose(base);  // (7, 6)
  Shape as{7, 6};
  auto av = to_vector<double>(a);
  std::vector<int> iv = random_ints(8, -5, 4, 3);
  auto idx_full = int_array(iv, {4, 2});
  auto idx = slice(idx_full, {0, 0}, {4, 2}, {1, 2});  // (4, 1), strided
  std::vector<Idx> ref = {{{iv[0], iv[2], iv[4], iv[6]}, {4, 1}}};
  auto g = gather(a, std::vector<array>{idx}, std::vector<int>{0}, {3, 2});
  EXPECT_EQ(g.shape(), Shape({4, 1, 3, 2}));
  expect_close(g, naive_gather(av, as, ref, {0}, {3, 2}));
  // No index arrays: a single slice at the origin.
  auto s = gather(a, std::vector<array>{}, {}, {2, 3});
  EXPECT_EQ(s.shape(), Shape({2, 3}));
  expect_close(s, {0, 7, 14, 1, 8, 15});
  // A broadcast (stride-0) operand.
  auto bc = broadcast_to(array({1.0f, 2.0f, 3.0f}), {4, 3});
  expect_close(gather(bc, array({3, 0}), 0, {1, 2}), {1, 2, 1, 2});
  // Empty index arrays.
  std::vector<int> none;
  auto e = gather(a, int_array(none, {0}), 0, {1, 6});
  EXPECT_EQ(e.shape(), Shape({0, 1, 6}));
}

TEST(Gather, LargeParallel) {
  Shape as{3000, 64};
  auto a = iota(as);
  auto iv = random_ints(20000, -3000, 2999, 7);
  auto g = gather(a, int_array(iv, {20000}), 0, {1, 64});
  auto got = to_vector<double>(g);
  ASSERT_EQ(got.size(), 20000u * 64);
  for (size_t r = 0; r < iv.size(); r += 97) {
    int i = iv[r] < 0 ? iv[r] + 3000 : iv[r];
    for (int j = 0; j < 64; ++j) {
      ASSERT_EQ(got[r * 64 + j], i * 64.0 + j);
    }
  }
  // Elementwise (slice of 1 everywhere) over two axes.
  auto jv = random_ints(20000, 0, 63, 8);
  auto e = gather(a, {int_array(iv, {20000}), int_array(jv, {20000})}, {0, 1},
                  {1, 1});
  auto ev = to_vector<double>(e);
  for (size_t r = 0; r < iv.size(); ++r) {
    int i = iv[r] < 0 ? iv[r] + 3000 : iv[r];
    ASSERT_EQ(ev[r], i * 64.0 + jv[r]);
  }
}

TEST(Scatter, EveryKindWithDuplicates) {
  Shape as{5, 4, 3};
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> dist(-2, 2);
  std::vector<double> av(60);
  for (auto& x : av) {
    x = dist(gen);
  }
  // Duplicate (row, col) pairs, negative indices, broadcast index arrays.
  std::vector<Idx> idx = {{{0, -5, 3, 3}, {4, 1}}, {{1, -3, 1}, {1, 3}}};
  Shape U{1, 1, 2};
  std::vector<double> uv(4 * 3 * 2);
  for (auto& x : uv) {
    x = dist(gen);
  }
  for (auto& k : kKinds) {
    auto a = array(av.begin(), as, float64);
    auto u = array(uv.begin(), {4, 3, 1, 1, 2}, float64);
    auto out = k.f(a, arrays(idx), u, {0, 1}, {});
    EXPECT_EQ(out.shape(), as);
    expect_close(out, naive_scatter(av, as, idx, uv, {0, 1}, U, k.r), 1e-12,
                 1e-12, k.name);
  }
}

TEST(Scatter, OverlappingWindowsInIndexOrder) {
  // Windows of 3 along axis 0 starting at 0, 1, 2 overlap: the last write in
  // index order wins, and sums accumulate.
  Shape as{6, 2};
  auto av = iota_vec(12);
  std::vector<Idx> idx = {{{2, 0, 1}, {3}}};
  std::vector<double> uv = iota_vec(18, 100);
  for (auto& k : kKinds) {
    auto out = k.f(iota(as, float64), arrays(idx),
                   array(uv.begin(), {3, 3, 2}, float64), {0}, {});
    expect_close(out, naive_scatter(av, as, idx, uv, {0}, {3, 2}, k.r), 1e-12,
                 0, k.name);
  }
}

TEST(Scatter, Dtypes) {
  Shape as{4, 3};
  std::vector<Idx> idx = {{{1, 3, 1, -3}, {4}}};
  std::vector<double> uv = {1, 0, 2, 1, 1, 0, 2, 1, 1, 0, 1, 1};
  for (Dtype t : {bool_, uint8, int16, int32, int64, uint64, float16, bfloat16,
                  float32, complex64}) {
    for (auto& k : kKinds) {
      std::string kn = k.name;
      if (t == complex64 && (kn == "scatter_max" || kn == "scatter_min")) {
        continue;
      }
      auto a = astype(iota(as, float32), t);
      std::vector<double> av;
      for (double v : iota_vec(12)) {
        av.push_back(test::as(t, v));
      }
      std::vector<double> u2;
      for (double v : uv) {
        u2.push_back(test::as(t, v));
      }
      Combiner r = k.r;
      if (t == bool_) {  // NumPy's bool arithmetic: or / and
        std::string n = k.name;
        if (n == "scatter_add") {
          r = [](double d, double v) { return double(d || v); };
        } else if (n == "scatter_prod") {
          r = [](double d, double v) { return double(d && v); };
        }
      }
      auto out =
          k.f(a, arrays(idx), astype(array(uv.begin(), {4, 1, 3}), t), {0}, {});
      EXPECT_EQ(out.dtype(), t);
      expect_close(out, naive_scatter(av, as, idx, u2, {0}, {1, 3}, r), 1e-2,
                   1e-6, std::string(k.name) + " " + dtype_name(t));
    }
  }
}

TEST(Scatter, StridedAndBroadcastInputs) {
  auto a = transpose(iota({3, 4}, float64));  // (4, 3), strided
  auto av = to_vector<double>(a);
  // Updates broadcast along the index dimension.
  auto u = broadcast_to(array({1.0, 2.0, 3.0}, {1, 1, 3}), {2, 1, 3});
  std::vector<Idx> idx = {{{3, -4}, {2}}};
  auto out = scatter_add(a, arrays(idx), u, {0}, {});
  expect_close(out, naive_scatter(av, {4, 3}, idx, {1, 2, 3, 1, 2, 3}, {0},
                                  {1, 3}, kAdd));
  // A 0-d update broadcast to the slices (B = (), U = (1, 3) needs 2 dims).
  auto w = scatter(a, array(2), array({9.0, 8.0, 7.0}, {1, 3}), 0);
  expect_close(
      w, naive_scatter(av, {4, 3}, {{{2}, {}}}, {9, 8, 7}, {0}, {1, 3}, kSet));
}

TEST(Scatter, LargeParallelPaths) {
  // Unit windows along the indexed axis, long slices: the chunked path.
  Shape as{50, 5000};
  auto iv = random_ints(40, -50, 49, 5);
  std::vector<Idx> idx = {{iv, {40}}};
  std::vector<double> uv(40 * 5000);
  for (size_t i = 0; i < uv.size(); ++i) {
    uv[i] = static_cast<double>((i * 7919) % 13) - 6;
  }
  auto av = iota_vec(250000);
  for (auto& k : kKinds) {
    if (std::string(k.name) == "scatter_prod") {
      continue;
    }
    auto out = k.f(iota(as, float64), arrays(idx),
                   array(uv.begin(), {40, 1, 5000}, float64), {0}, {});
    expect_close(out, naive_scatter(av, as, idx, uv, {0}, {1, 5000}, k.r), 0, 0,
                 k.name);
  }
  // A middle indexed axis: the window (30, 1, 100) has two dimensions that
  // do not merge, so the chunked path walks slice rows.
  {
    Shape bs{30, 5, 100};
    auto kv = random_ints(9, -5, 4, 9);
    std::vector<Idx> kidx = {{kv, {9}}};
    std::vector<double> wv(9 * 3000);
    for (size_t i = 0; i < wv.size(); ++i) {
      wv[i] = static_cast<double>((i * 31) % 17) - 8;
    }
    auto bv = iota_vec(15000);
    for (auto& k : kKinds) {
      auto out = k.f(iota(bs, float64), arrays(kidx),
                     array(wv.begin(), {9, 30, 1, 100}, float64), {1}, {});
      expect_close(out, naive_scatter(bv, bs, kidx, wv, {1}, {30, 1, 100}, k.r),
                   1e-12, 0, k.name);
    }
  }
  // Many scalar updates with heavy duplication (the S == 1 path).
  auto jv = random_ints(100000, 0, 99, 6);
  std::vector<double> ones(100000, 1.0);
  auto h = scatter_add(zeros({100}, float64), int_array(jv, {100000}),
                       array(ones.begin(), {100000, 1}, float64), 0);
  std::vector<double> hist(100, 0);
  for (int j : jv) {
    hist[j] += 1;
  }
  expect_close(h, hist, 0, 0);
}

TEST(Scatter, NanPropagatesThroughMaxMin) {
  auto a = array({1.0, 2.0, 3.0});
  auto u = array({kNaN, 5.0}, {2, 1});
  auto mx = scatter_max(a, array({0, 0}), u, 0);
  auto mn = scatter_min(a, array({1, 1}), u, 0);
  auto mv = to_vector<double>(mx);
  EXPECT_TRUE(std::isnan(mv[0]));
  auto nv = to_vector<double>(mn);
  EXPECT_TRUE(std::isnan(nv[1]));
  EXPECT_EQ(nv[0], 1.0);
}

TEST(Scatter, Gradients) {
  // Plain scatter: only the last writer of a duplicated position gets the
  // cotangent, a gets it where nothing was written.
  auto a = array({1.0, 2.0, 3.0, 4.0});
  auto u = array({10.0, 20.0, 30.0}, {3, 1});
  auto idx = array({1, 3, 1});
  auto f = [&](const std::vector<array>& x) {
    return sum(
        multiply(scatter(x[0], idx, x[1], 0), array({1.0, 2.0, 3.0, 4.0})));
  };
  auto g = grad(f, {0, 1})({a, u});
  expect_close(g[0], {1, 0, 3, 0});
  expect_close(g[1], {0, 4, 2});
  // scatter_max ties: a[0] = 5 and both updates equal 5 share the cotangent.
  auto h = grad(
      [&](const std::vector<array>& x) {
        return sum(scatter_max(x[0], array({0, 0}), x[1], 0));
      },
      {0, 1})({array({5.0, 1.0}), array({5.0, 5.0}, {2, 1})});
  expect_close(h[0], {1.0 / 3, 1});
  expect_close(h[1], {1.0 / 3, 1.0 / 3});
  // scatter_prod with a zero update: d/du of the others' product.
  auto p = grad(
      [&](const std::vector<array>& x) {
        return sum(scatter_prod(x[0], array({0, 0, 1}), x[1], 0));
      },
      {0, 1})({array({2.0, 3.0}), array({0.0, 4.0, 5.0}, {3, 1})});
  expect_close(p[0], {0, 5});
  expect_close(p[1], {8, 0, 3});
}

TEST(GatherScatter, Errors) {
  auto a = iota({5, 4});
  expect_error<std::out_of_range>(
      [&] {
        gather(a, array({7}), 0, {1, 4}).eval();
      },
      "[gather] Index 7 is out of bounds for axis 0 with size 5.");
  expect_error<std::out_of_range>(
      [&] {
        gather(a, array({-6}), 0, {1, 4}).eval();
      },
      "[gather] Index -6 is out of bounds for axis 0 with size 5.");
  expect_error<std::out_of_range>(
      [&] {
        gather(a, array({3}), 0, {3, 4}).eval();
      },
      "[gather] Index 3 is out of bounds for axis 0 with size 5 (for a slice "
      "of size 3).");
  expect_error<std::invalid_argument>(
      [&] {
        gather(a, array({1}), 2, {1, 4});
      },
      "[gather] Invalid axis 2 for array with 2 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        gather(a, array({1.0f}), 0, {1, 4});
      },
      "[gather] Indices must be of an integer type; got float32.");
  expect_error<std::invalid_argument>(
      [&] {
        gather(a, std::vector<array>{array({1}), array({1})},
               std::vector<int>{0}, {1, 1});
      },
      "[gather] Got 2 index arrays for 1 axes");
  expect_error<std::invalid_argument>(
      [&] {
        gather(a, {array({1}), array({1})}, {0, -2}, {1, 1});
      },
      "[gather] Axis -2 is repeated");
  expect_error<std::invalid_argument>([&] { gather(a, array({1}), 0, {1}); },
                                      "[gather] Got slice sizes (1)");
  expect_error<std::invalid_argument>(
      [&] {
        gather(a, array({1}), 0, {1, 5});
      },
      "[gather] Slice sizes (1,5) do not fit");
  expect_error<std::invalid_argument>(
      [&] {
        gather(a, {array({1, 2}), array({1, 2, 3})}, {0, 1}, {1, 1});
      },
      "[gather] Shapes (2) and (3) cannot be broadcast.");
  for (auto& k : kKinds) {
    std::string n = k.name;
    expect_error<std::out_of_range>(
        [&] {
          k.f(a, {array({0, 5})}, zeros({2, 1, 4}), {0}, {}).eval();
        },
        "[" + n + "] Index 5 is out of bounds for axis 0 with size 5.");
    expect_error<std::invalid_argument>(
        [&] {
          k.f(a, {array({0, 1})}, zeros({2, 4}), {0}, {});
        },
        "[" + n + "] Updates of shape (2,4) must have 3 dimensions");
    expect_error<std::invalid_argument>(
        [&] {
          k.f(a, {array({0, 1})}, zeros({3, 1, 4}), {0}, {});
        },
        "[" + n + "] Updates of shape (3,1,4) cannot be broadcast");
    expect_error<std::invalid_argument>(
        [&] {
          k.f(a, {array({0, 1})}, zeros({2, 6, 4}), {0}, {});
        },
        "[" + n + "] Update slices of shape (6,4) do not fit");
    expect_error<std::invalid_argument>(
        [&] {
          k.f(a, {array({0.5f})}, zeros({1, 1, 4}), {0}, {});
        },
        "[" + n + "] Indices must be of an integer type");
  }
  expect_error<std::invalid_argument>(
      [&] {
        scatter_max(astype(a, complex64), array({0}), zeros({1, 1, 4}), 0);
      },
      "[scatter_max] complex64 arrays have no order.");
  // An invalid row aborts the whole scatter: nothing is written.
  expect_error<std::out_of_range>(
      [&] {
        scatter(a, array({0, -9}), ones({2, 1, 4}), 0).eval();
      },
      "[scatter] Index -9 is out of bounds for axis 0 with size 5.");
}

TEST(GatherScatter, Vmap) {
  // Mapped operand, mapped indices, both; compared with a loop.
  auto a = iota({3, 5, 4}, float64);
  auto idx = int_array({0, 4, -1, 2, 2, 1}, {3, 2});
  auto fn = [](const std::vector<array>& x) {
    return std::vector<array>{gather(x[0], x[1], 0, {1, 2})};
  };
  auto v = vmap(fn, {0, 0})({a, idx})[0];
  EXPECT_EQ(v.shape(), Shape({3, 2, 1, 2}));
  for (int b = 0; b < 3; ++b) {
    auto want = gather(take(a, b, 0), take(idx, b, 0), 0, {1, 2});
    expect_close(take(v, b, 0), to_vector<double>(want));
  }
  auto sfn = [](const std::vector<array>& x) {
    return std::vector<array>{scatter_add(x[0], x[1], x[2], 0)};
  };
  auto u = iota({3, 2, 1, 4}, float64);
  auto w = vmap(sfn, {0, -1, 0})({a, array({1, 1}), u})[0];
  for (int b = 0; b < 3; ++b) {
    auto want = scatter_add(take(a, b, 0), array({1, 1}), take(u, b, 0), 0);
    expect_close(take(w, b, 0), to_vector<double>(want));
  }
}

TEST(TakeMode, WrapClipRaise) {
  auto a = iota({4, 3});
  // wrap: any integer, Python's modulo.
  auto w = take(a, array({5, -1, -9, 12}), 0, "wrap");
  EXPECT_EQ(w.shape(), Shape({4, 3}));
  expect_close(w, {3, 4, 5, 9, 10, 11, 9, 10, 11, 0, 1, 2});
  // clip: negative indices go to 0 (NumPy), large ones to n - 1.
  auto c = take(a, array({-1, 7, 1}, int8), 1, "clip");
  expect_close(c, {0, 2, 1, 3, 5, 4, 6, 8, 7, 9, 11, 10});
  auto u = take(a, array({200, 1}, uint8), "clip");
  expect_close(u, {11, 1});
  auto f = take(a, array({13, -13}), "wrap");  // flattened, size 12
  expect_close(f, {1, 11});
  expect_close(take(a, array({-1}), 0, "raise"), {9, 10, 11});
  expect_error<std::invalid_argument>(
      [&] { take(a, array({0}), 0, "nearest"); },
      "[take] Unknown mode 'nearest'; expected 'raise', 'wrap' or 'clip'.");
  expect_error<std::invalid_argument>(
      [&] {
        take(zeros({0, 2}), array({0}), 0, "clip");
      },
      "[take] Cannot take from the empty axis 0 with mode 'clip'.");
  expect_error<std::invalid_argument>(
      [&] { take(a, array({0.5f}), 0, "wrap"); },
      "[take] Indices must be of an integer type; got float32.");
  expect_error<std::invalid_argument>(
      [&] { take(a, array({0}), 3, "wrap"); },
      "[take] Invalid axis 3 for array with 2 dimensions.");
  expect_error<std::out_of_range>(
      [&] { take(a, array({4}), 0, "raise").eval(); },
      "[take] Index 4 is out of bounds for axis 0 with size 4.");
}
