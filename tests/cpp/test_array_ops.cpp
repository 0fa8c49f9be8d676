// diag, diagonal, trace, roll, meshgrid and kron against double loops, over
// layouts and dtypes, with their gradients and vmaps (they are composites,
// so these check that the building blocks' rules compose).
#include <map>

#include "test_inputs.h"
#include "transform_checks.h"

using namespace fluxion;
using namespace fluxion::test;
using namespace fluxion::test::inputs;

namespace {

std::vector<double> iota_vals(int n, double scale = 1.0) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) {
    v[i] = ((i * 7) % 11) * scale;  // non-negative: unsigned dtypes too
  }
  return v;
}

int64_t flat_index(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    f = f * shape[d] + idx[d];
  }
  return f;
}

// The diagonal of axes (ax1, ax2) of a row-major array, batch axes first.
std::pair<Shape, std::vector<double>> ref_diagonal(const std::vector<double>& v,
                                                   const Shape& shape, int k,
                                                   int ax1, int ax2) {
  int nd = shape.size();
  Shape batch;
  for (int d = 0; d < nd; ++d) {
    if (d != ax1 && d != ax2) {
      batch.push_back(shape[d]);
    }
  }
  int n = shape[ax1], m = shape[ax2];
  int len = std::max(0, k >= 0 ? std::min(n, m - k) : std::min(n + k, m));
  Shape out_shape = batch;
  out_shape.push_back(len);
  std::vector<double> out;
  for (int64_t b = 0; b < shape_size(batch); ++b) {
    auto bi = unravel(b, batch);
    for (int i = 0; i < len; ++i) {
      std::vector<int64_t> idx(nd);
      int j = 0;
      for (int d = 0; d < nd; ++d) {
        if (d != ax1 && d != ax2) {
          idx[d] = bi[j++];
        }
      }
      idx[ax1] = k >= 0 ? i : i - k;
      idx[ax2] = k >= 0 ? i + k : i;
      out.push_back(v[flat_index(idx, shape)]);
    }
  }
  return {out_shape, out};
}

const std::vector<Dtype> kDtypes = {
    int32, uint8, int64, float16, bfloat16, float32, float64, complex64, bool_};

}  // namespace

TEST(ArrayOpsDiagonal, LayoutsDtypesOffsetsAxes) {
  const Shape shape = {3, 4, 5};
  auto v = iota_vals(60);
  for (Dtype dt : kDtypes) {
    auto vals = dt == bool_ ? iota_vals(60, 0) : v;
    if (dt == bool_) {
      for (int i = 0; i < 60; ++i) {
        vals[i] = (i % 3) == 0;
      }
    }
    for (Layout l : all_layouts()) {
      auto a = make_array(vals, shape, dt, l);
      for (auto [ax1, ax2] : std::vector<std::pair<int, int>>{
               {0, 1}, {1, 2}, {2, 0}, {-1, -3}, {1, 0}}) {
        for (int k : {-4, -2, -1, 0, 1, 3, 5, 7}) {
          int n1 = ax1 < 0 ? ax1 + 3 : ax1, n2 = ax2 < 0 ? ax2 + 3 : ax2;
          auto [es, ev] = ref_diagonal(vals, shape, k, n1, n2);
          auto out = diagonal(a, k, ax1, ax2);
          std::string what = std::string(dtype_name(dt)) + " " +
                             layout_name(l) + " k=" + std::to_string(k) +
                             " axes " + std::to_string(ax1) + "," +
                             std::to_string(ax2);
          ASSERT_EQ(out.shape(), es) << what;
          ASSERT_EQ(out.dtype(), dt) << what;
          expect_close(out, ev, 0, 0, what);
        }
      }
    }
  }
}

TEST(ArrayOpsDiag, VectorToMatrixAndBack) {
  for (Layout l : all_layouts()) {
    auto a = make_array(std::vector<double>{1, -2, 3}, {3}, float32, l);
    for (int k : {-2, 0, 1, 3}) {
      int n = 3 + std::abs(k);
      std::vector<double> expected(n * n, 0);
      for (int i = 0; i < 3; ++i) {
        int r = k >= 0 ? i : i - k, c = k >= 0 ? i + k : i;
        expected[r * n + c] = (i == 1 ? -2 : i + 1);
      }
      auto m = diag(a, k);
      ASSERT_EQ(m.shape(), (Shape{n, n}));
      expect_close(m, expected, 0, 0, layout_name(l));
      expect_close(diag(m, k), {1, -2, 3});
    }
  }
  auto m = diag(array({5}, int64));
  EXPECT_EQ(m.dtype(), int64);
  expect_close(m, {5});
  auto empty = diag(zeros({0}), 2);
  EXPECT_EQ(empty.shape(), (Shape{2, 2}));
  expect_close(empty, {0, 0, 0, 0});
  // A 2-D input gives its diagonal, rectangular too.
  auto r = reshape(arange(0.0, 6.0), {2, 3});
  expect_close(diag(r), {0, 4});
  expect_close(diag(r, 1), {1, 5});
  expect_close(diag(r, -1), {3});
  EXPECT_EQ(diag(r, 3).shape(), (Shape{0}));
}

TEST(ArrayOpsTrace, SumsAndDtype) {
  const Shape shape = {4, 3, 2};
  auto v = iota_vals(24);
  for (Layout l : all_layouts()) {
    auto a = make_array(v, shape, float64, l);
    for (int k : {-1, 0, 1}) {
      auto [es, ev] = ref_diagonal(v, shape, k, 0, 1);
      std::vector<double> expected(2, 0);
      for (size_t i = 0; i < ev.size(); ++i) {
        expected[i / es.back()] += ev[i];
      }
      expect_close(trace(a, k), expected, 1e-12, 1e-12, layout_name(l));
    }
  }
  auto m = reshape(arange(0, 9), {3, 3});
  auto t = trace(m);
  EXPECT_EQ(t.shape(), Shape{});
  expect_close(t, {12});
  auto tf = trace(m, 0, 0, 1, float16);
  EXPECT_EQ(tf.dtype(), float16);
  expect_close(tf, {12});
  auto t8 = trace(astype(full({200, 200}, 2), int8), 0, 0, 1, int32);
  EXPECT_EQ(t8.dtype(), int32);
  expect_close(t8, {400});
  expect_close(trace(m, 1, 1, 0), {3 + 7});
}

TEST(ArrayOpsDiagonal, Errors) {
  expect_error<std::invalid_argument>([] { diagonal(zeros({3})); },
                                      "[diagonal] Array must have at least "
                                      "two dimensions; got shape (3)");
  expect_error<std::invalid_argument>(
      [] {
        diagonal(zeros({3, 3}), 0, 1, -1);
      },
      "[diagonal] axis1 and axis2 must differ; got 1 and -1");
  expect_error<std::invalid_argument>(
      [] {
        diagonal(zeros({3, 3}), 0, 0, 2);
      },
      "[diagonal]");
  expect_error<std::invalid_argument>(
      [] {
        diag(zeros({2, 2, 2}));
      },
      "[diag] Input must be 1-D or 2-D; got shape (2,2,2)");
  expect_error<std::invalid_argument>([] { trace(zeros({4})); }, "[diagonal]");
}

TEST(ArrayOpsRoll, AxesAndFlattened) {
  const Shape shape = {3, 4};
  auto v = iota_vals(12);
  for (Dtype dt : {int32, float32, float64, uint16, complex64}) {
    for (Layout l : all_layouts()) {
      auto a = make_array(v, shape, dt, l);
      for (int sh : {-13, -1, 0, 2, 5, 12}) {
        std::vector<double> flat(12), ax1(12), ax0(12);
        for (int i = 0; i < 12; ++i) {
          flat[((i + sh) % 12 + 12) % 12] = v[i];
          int r = i / 4, c = i % 4;
          ax1[r * 4 + ((c + sh) % 4 + 4) % 4] = v[i];
          ax0[(((r + sh) % 3 + 3) % 3) * 4 + c] = v[i];
        }
        std::string what = std::string(dtype_name(dt)) + " " + layout_name(l) +
                           " shift " + std::to_string(sh);
        auto o = roll(a, sh);
        ASSERT_EQ(o.shape(), shape);
        expect_close(o, flat, 0, 0, what);
        expect_close(roll(a, sh, 1), ax1, 0, 0, what);
        expect_close(roll(a, sh, -2), ax0, 0, 0, what);
        // Two axes at once, one shift for both, and a pair of shifts.
        std::vector<double> both(12), pair(12);
        for (int i = 0; i < 12; ++i) {
          int r = i / 4, c = i % 4;
          both[(((r + sh) % 3 + 3) % 3) * 4 + ((c + sh) % 4 + 4) % 4] = v[i];
          pair[(((r + 1) % 3 + 3) % 3) * 4 + ((c + sh) % 4 + 4) % 4] = v[i];
        }
        expect_close(roll(a, Shape{sh}, {0, 1}), both, 0, 0, what);
        expect_close(roll(a, Shape{1, sh}, {0, 1}), pair, 0, 0, what);
      }
    }
  }
  expect_close(roll(array(3.0f), 4), {3});
  EXPECT_EQ(roll(zeros({0, 3}), 2, 0).shape(), (Shape{0, 3}));
  expect_error<std::invalid_argument>(
      [] {
        roll(zeros({2, 2}), Shape{1, 2}, {0, 1, 1});
      },
      "[roll] shift and axis must have the same length (or one of them a "
      "single value); got shift (1,2) and axis (0,1,1)");
  expect_error<std::invalid_argument>(
      [] {
        roll(zeros({2, 2}), Shape{}, {});
      },
      "[roll] At least one shift and one axis are needed.");
  expect_error<std::invalid_argument>([] { roll(zeros({2, 2}), 1, 2); },
                                      "[roll]");
}

TEST(ArrayOpsMeshgrid, IndexingAndSparse) {
  auto x = array({1.0f, 2.0f, 3.0f});
  auto y = array({10.0f, 20.0f});
  auto z = array({100, 200, 300, 400});
  for (std::string ix : {"xy", "ij"}) {
    for (bool sparse : {false, true}) {
      auto g = meshgrid({x, y, z}, sparse, ix);
      ASSERT_EQ(g.size(), 3u);
      Shape full_shape = ix == "xy" ? Shape{2, 3, 4} : Shape{3, 2, 4};
      std::vector<double> xs = {1, 2, 3}, ys = {10, 20},
                          zs = {100, 200, 300, 400};
      for (int which = 0; which < 3; ++which) {
        auto gi = broadcast_to(g[which], full_shape);
        std::vector<double> expected;
        for (int64_t f = 0; f < shape_size(full_shape); ++f) {
          auto idx = unravel(f, full_shape);
          int64_t xi = ix == "xy" ? idx[1] : idx[0];
          int64_t yi = ix == "xy" ? idx[0] : idx[1];
          expected.push_back(which == 0   ? xs[xi]
                             : which == 1 ? ys[yi]
                                          : zs[idx[2]]);
        }
        if (!sparse) {
          EXPECT_EQ(g[which].shape(), full_shape);
        } else {
          EXPECT_EQ(g[which].size(), std::vector<size_t>({3, 2, 4})[which]);
        }
        expect_close(gi, expected, 0, 0, ix + (sparse ? " sparse" : ""));
      }
    }
  }
  EXPECT_EQ(meshgrid({z}).at(0).shape(), (Shape{4}));
  EXPECT_EQ(meshgrid({z}).at(0).dtype(), int32);
  expect_error<std::invalid_argument>(
      [&] {
        meshgrid({x, y}, false, "ji");
      },
      "[meshgrid] indexing must be 'xy' or 'ij'; got 'ji'.");
}

TEST(ArrayOpsKron, AgainstLoops) {
  struct Case {
    Shape sa, sb;
  };
  for (auto c : std::vector<Case>{
           {{2, 3}, {3, 2}}, {{4}, {2, 2}}, {{2, 1, 3}, {3}}, {{3}, {4}}}) {
    auto va = iota_vals(shape_size(c.sa)), vb = iota_vals(shape_size(c.sb), 2);
    int nd = std::max(c.sa.size(), c.sb.size());
    Shape pa(nd - c.sa.size(), 1), pb(nd - c.sb.size(), 1), po;
    pa.insert(pa.end(), c.sa.begin(), c.sa.end());
    pb.insert(pb.end(), c.sb.begin(), c.sb.end());
    for (int d = 0; d < nd; ++d) {
      po.push_back(pa[d] * pb[d]);
    }
    std::vector<double> expected(shape_size(po));
    for (int64_t f = 0; f < shape_size(po); ++f) {
      auto idx = unravel(f, po);
      std::vector<int64_t> ia(nd), ib(nd);
      for (int d = 0; d < nd; ++d) {
        ia[d] = idx[d] / pb[d];
        ib[d] = idx[d] % pb[d];
      }
      expected[f] = va[flat_index(ia, pa)] * vb[flat_index(ib, pb)];
    }
    for (Layout l : all_layouts()) {
      for (Dtype dt : {int32, float32, float64}) {
        auto out = kron(make_array(va, c.sa, dt, l),
                        make_array(vb, c.sb, dt, Layout::Transposed));
        ASSERT_EQ(out.shape(), po);
        EXPECT_EQ(out.dtype(), dt);
        expect_close(out, expected, 0, 0, layout_name(l));
      }
    }
  }
  expect_close(kron(array(2.0f), array({1.0f, 3.0f})), {2, 6});
  auto mixed = kron(array({1, 2}, int8), array({0.5f}));
  EXPECT_EQ(mixed.dtype(), float32);
  expect_close(mixed, {0.5, 1});
}

namespace {

array rnd(const Shape& shape, unsigned seed) {
  std::mt19937 gen(seed);
  return random_like(zeros(shape, float64), gen);
}

}  // namespace

TEST(ArrayOpsGrad, CompositesCompose) {
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{diagonal(x[0], 1, 2, 0)};
      },
      {rnd({3, 2, 4}, 1)});
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{diag(x[0], -1)};
      },
      {rnd({3}, 2)});
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{trace(x[0], 0, 1, 2)};
      },
      {rnd({2, 3, 3}, 3)});
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{roll(x[0], Shape{1, -2}, {0, 1})};
      },
      {rnd({3, 4}, 4)});
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{kron(x[0], x[1])};
      },
      {rnd({2, 3}, 5), rnd({3, 2}, 6)});
  // The gradient of trace is the identity.
  auto g = grad([](const array& x) { return trace(x); })(rnd({3, 3}, 7));
  expect_close(g, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  check_vmap(
      [](const std::vector<array>& x) {
        return std::vector<array>{trace(x[0], 1)};
      },
      {rnd({3, 4, 5}, 8)}, {2});
  check_vmap(
      [](const std::vector<array>& x) {
        return std::vector<array>{kron(x[0], x[1])};
      },
      {rnd({3, 2, 2}, 9), rnd({2, 3}, 10)}, {0, -1});
  check_vmap(
      [](const std::vector<array>& x) {
        return std::vector<array>{roll(x[0], 2, 0)};
      },
      {rnd({4, 3}, 11)}, {1});
}

namespace {

// Brute-force einsum in double: loop over every assignment of the letters.
std::vector<double> ref_einsum(const std::vector<std::string>& ins,
                               const std::string& out,
                               const std::vector<std::vector<double>>& vals,
                               const std::vector<Shape>& shapes,
                               Shape& out_shape) {
  std::map<char, int> size;
  for (size_t i = 0; i < ins.size(); ++i) {
    for (size_t d = 0; d < ins[i].size(); ++d) {
      size[ins[i][d]] = shapes[i][d];
    }
  }
  std::string letters;
  Shape all;
  for (auto [c, n] : size) {
    letters += c;
    all.push_back(n);
  }
  out_shape.clear();
  for (char c : out) {
    out_shape.push_back(size[c]);
  }
  std::vector<double> res(shape_size(out_shape), 0);
  for (int64_t f = 0; f < shape_size(all); ++f) {
    auto idx = unravel(f, all);
    auto at = [&](char c) { return idx[letters.find(c)]; };
    double p = 1;
    for (size_t i = 0; i < ins.size(); ++i) {
      std::vector<int64_t> ii;
      for (char c : ins[i]) {
        ii.push_back(at(c));
      }
      p *= vals[i][flat_index(ii, shapes[i])];
    }
    std::vector<int64_t> oi;
    for (char c : out) {
      oi.push_back(at(c));
    }
    res[flat_index(oi, out_shape)] += p;
  }
  return res;
}

}  // namespace

TEST(ArrayOpsEinsum, AgainstLoops) {
  struct Case {
    std::string expr;
    std::vector<std::string> ins;
    std::string out;
    std::vector<Shape> shapes;
  };
  std::vector<Case> cases = {
      {"ij,jk->ik", {"ij", "jk"}, "ik", {{2, 3}, {3, 4}}},
      {"ij,jk", {"ij", "jk"}, "ik", {{2, 3}, {3, 4}}},
      {"ii", {"ii"}, "", {{3, 3}}},
      {"ii->i", {"ii"}, "i", {{3, 3}}},
      {"ij->ji", {"ij"}, "ji", {{2, 3}}},
      {"ij->", {"ij"}, "", {{2, 3}}},
      {"bij,bjk->bik", {"bij", "bjk"}, "bik", {{2, 2, 3}, {2, 3, 2}}},
      {"i,j->ij", {"i", "j"}, "ij", {{3}, {2}}},
      {"i,i", {"i", "i"}, "", {{4}, {4}}},
      {"iij,jk->ki", {"iij", "jk"}, "ki", {{3, 3, 2}, {2, 4}}},
      {"ab,bc,cd->ad", {"ab", "bc", "cd"}, "ad", {{2, 3}, {3, 4}, {4, 2}}},
      {"abc,cd,ab->d", {"abc", "cd", "ab"}, "d", {{2, 3, 2}, {2, 3}, {2, 3}}},
      {"ij,kl->", {"ij", "kl"}, "", {{2, 2}, {3, 1}}},
      {"Ba,aB", {"Ba", "aB"}, "", {{2, 3}, {3, 2}}},
      {"ba,a", {"ba", "a"}, "b", {{2, 3}, {3}}},
  };
  for (const auto& c : cases) {
    std::vector<std::vector<double>> vals;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      vals.push_back(iota_vals(shape_size(c.shapes[i]), 0.5 + i));
    }
    Shape es;
    auto ev = ref_einsum(c.ins, c.out, vals, c.shapes, es);
    for (Dtype dt : {float32, float64, int32}) {
      for (Layout l : {Layout::RowMajor, Layout::Transposed, Layout::Strided}) {
        std::vector<array> ops;
        for (size_t i = 0; i < c.shapes.size(); ++i) {
          auto v = vals[i];
          if (dt == int32) {
            for (auto& x : v) {
              x = std::round(x);
            }
          }
          ops.push_back(make_array(v, c.shapes[i], dt, l));
        }
        std::vector<std::vector<double>> used;
        for (auto& o : ops) {
          used.push_back(to_vector<double>(o));
        }
        Shape es2;
        auto ev2 = ref_einsum(c.ins, c.out, used, c.shapes, es2);
        auto out = einsum(c.expr, ops);
        std::string what = c.expr + " " + dtype_name(dt) + " " + layout_name(l);
        ASSERT_EQ(out.shape(), es) << what;
        EXPECT_EQ(out.dtype(), dt) << what;
        expect_close(out, ev2, 1e-5, 1e-4, what);
      }
    }
  }
}

TEST(ArrayOpsEinsum, GreedyPathAndErrors) {
  // a (2x100), b (100x100), c (100x2): a with b gives 2x100 and b with c
  // 100x2 (200 elements each), a with c an outer product of 40000; greedy
  // takes the first smallest pair.
  auto a = zeros({2, 100}), b = zeros({100, 100}), c = zeros({100, 2});
  auto [path, text] = einsum_path("ij,jk,kl->il", {a, b, c});
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(path[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(path[1], (std::vector<int>{0, 1}));
  EXPECT_NE(text.find("(0, 1): ij,jk->ik (200 elements)"), std::string::npos)
      << text;
  // A small vector contracted with a big matrix first.
  auto [p2, t2] = einsum_path("ij,jk,k->i",
                              {zeros({50, 60}), zeros({60, 70}), zeros({70})});
  EXPECT_EQ(p2[0], (std::vector<int>{1, 2})) << t2;
  expect_error<std::invalid_argument>(
      [] {
        einsum("ij,jk->ik", {zeros({2, 3})});
      },
      "[einsum] 'ij,jk->ik' names 2 operands but 1 were given.");
  expect_error<std::invalid_argument>(
      [] {
        einsum("ijk", {zeros({2, 3})});
      },
      "[einsum] Operand 0 has shape (2,3) but its subscripts 'ijk' name 3 "
      "axes.");
  expect_error<std::invalid_argument>(
      [] {
        einsum("ij,jk", {zeros({2, 3}), zeros({4, 2})});
      },
      "[einsum] Index 'j' has size 3 and size 4 (operand 1, shape (4,2)).");
  expect_error<std::invalid_argument>(
      [] {
        einsum("ij->ik", {zeros({2, 3})});
      },
      "[einsum] Output index 'k' appears in no operand of 'ij->ik'.");
  expect_error<std::invalid_argument>(
      [] {
        einsum("ij->ii", {zeros({2, 2})});
      },
      "[einsum] Output index 'i' repeats in 'ij->ii'.");
  expect_error<std::invalid_argument>(
      [] {
        einsum("i1", {zeros({2, 2})});
      },
      "[einsum] Subscripts may only hold letters, ',' and '->'; got '1'");
  expect_error<std::invalid_argument>([] { einsum("", {}); },
                                      "[einsum] At least one operand");
  expect_error<std::invalid_argument>(
      [] { einsum("i->i.", {zeros({2})}); },
      "[einsum] Output subscripts may only hold letters; got 'i.'.");
}

TEST(ArrayOpsEinsum, GradAndVmap) {
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{einsum("ij,jk,k->i", x)};
      },
      {rnd({2, 3}, 20), rnd({3, 4}, 21), rnd({4}, 22)});
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{einsum("iij->ji", x)};
      },
      {rnd({3, 3, 2}, 23)});
  check_vmap(
      [](const std::vector<array>& x) {
        return std::vector<array>{einsum("ij,j->i", x)};
      },
      {rnd({4, 2, 3}, 24), rnd({3}, 25)}, {0, -1});
}

TEST(ArrayOpsEinsum, Ellipsis) {
  // "...ij,jk->...ik" with the ellipsis axes (2,1) and (3): broadcast to
  // (2,3), then checked as "abij,jk->abik" on the broadcast operand.
  auto va = iota_vals(2 * 1 * 2 * 3), vb = iota_vals(3 * 3 * 2, 1.5);
  auto a = array(va.begin(), {2, 1, 2, 3}, float64);
  auto b = array(vb.begin(), {3, 3, 2}, float64);
  auto out = einsum("...ij,...jk->...ik", {a, b});
  auto ab = broadcast_to(a, {2, 3, 2, 3}), bb = broadcast_to(b, {2, 3, 3, 2});
  Shape es;
  auto ev = ref_einsum({"abij", "abjk"}, "abik",
                       {to_vector<double>(ab), to_vector<double>(bb)},
                       {{2, 3, 2, 3}, {2, 3, 3, 2}}, es);
  ASSERT_EQ(out.shape(), es);
  expect_close(out, ev, 1e-12, 1e-12);
  // Implicit output: the ellipsis axes first.
  auto t = einsum("i...i", {reshape(arange(0.0, 12.0), {2, 3, 2})});
  expect_close(t, {0 + 7, 2 + 9, 4 + 11});
  check_grads(
      [](const std::vector<array>& x) {
        return std::vector<array>{einsum("...j,j->...", x)};
      },
      {rnd({2, 3, 4}, 30), rnd({4}, 31)});
  expect_error<std::invalid_argument>(
      [] { einsum("ij...", {zeros({2})}); },
      "[einsum] Operand 0 has shape (2) but its subscripts 'ij...' name 2 "
      "axes.");
  expect_error<std::invalid_argument>(
      [] {
        einsum("...i->i", {zeros({2, 3})});
      },
      "[einsum] The output of '...i->i' has no '...' for the 1 axes under "
      "'...' (2).");
}
