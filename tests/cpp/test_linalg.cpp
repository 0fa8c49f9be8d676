#include <cmath>
#include <complex>
#include <limits>

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

using cdouble = std::complex<double>;

// Deterministic values that are exact in every float dtype (multiples of
// 1/4 in [-1.25, 1.25]), so that references depend on no input rounding.
array make(const Shape& shape, Dtype t = float32, int seed = 0) {
  std::vector<double> v(shape_size(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<double>((static_cast<int>(i) * 7 + seed * 3) % 11 - 5) /
           4.0;
  }
  return astype(array(v.begin(), shape), t);
}

array make_complex(const Shape& shape, int seed = 0) {
  std::vector<complex64_t> v(shape_size(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    int j = static_cast<int>(i);
    v[i] = complex64_t(((j * 7 + seed) % 11 - 5) / 4.0f,
                       ((j * 5 + seed * 2) % 9 - 4) / 4.0f);
  }
  return array(v.begin(), shape);
}

// NumPy matmul in double (or complex double) over logical values: 1-D
// operands get a unit dim added and removed, batch dims broadcast.
template <typename T>
std::vector<T> ref_matmul(std::vector<T> a, Shape sa, std::vector<T> b,
                          Shape sb, Shape* out_shape = nullptr) {
  bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) {
    sa.insert(sa.begin(), 1);
  }
  if (b1) {
    sb.push_back(1);
  }
  int m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  size_t nb = std::max(sa.size(), sb.size()) - 2;
  Shape batch(nb);
  auto dim = [&](const Shape& s, size_t i) {
    // Batch dim i (aligned right) of s, 1 when missing.
    size_t own = s.size() - 2;
    return i + own >= nb ? s[i + own - nb] : 1;
  };
  for (size_t i = 0; i < nb; ++i) {
    batch[i] = std::max(dim(sa, i), dim(sb, i));
  }
  int64_t nbatch = shape_size(batch);
  std::vector<T> out(nbatch * m * n, T(0));
  for (int64_t bi = 0; bi < nbatch; ++bi) {
    int64_t oa = 0, ob = 0, r = bi, stride_a = 1, stride_b = 1;
    for (int d = static_cast<int>(nb) - 1; d >= 0; --d) {
      int64_t j = r % batch[d];
      r /= batch[d];
      oa += (dim(sa, d) == 1 ? 0 : j) * stride_a;
      ob += (dim(sb, d) == 1 ? 0 : j) * stride_b;
      stride_a *= dim(sa, d);
      stride_b *= dim(sb, d);
    }
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        T acc(0);
        for (int p = 0; p < k; ++p) {
          acc += a[(oa * m + i) * k + p] * b[(ob * k + p) * n + j];
        }
        out[(bi * m + i) * n + j] = acc;
      }
    }
  }
  if (out_shape) {
    *out_shape = batch;
    if (!a1) {
      out_shape->push_back(m);
    }
    if (!b1) {
      out_shape->push_back(n);
    }
  }
  return out;
}

double tol_for(Dtype t) {
  if (t == float16) {
    return 2e-3;
  }
  if (t == bfloat16) {
    return 1e-2;
  }
  return t == float64 ? 1e-12 : 1e-5;
}

// matmul(a, b) against the double loop, shape and values.
void check_matmul(const array& a, const array& b, const std::string& what) {
  Shape shape;
  auto expect = ref_matmul(to_vector<double>(a), a.shape(),
                           to_vector<double>(b), b.shape(), &shape);
  auto out = matmul(a, b);
  EXPECT_EQ(out.dtype(), promote_types(a.dtype(), b.dtype())) << what;
  EXPECT_EQ(out.shape(), shape) << what;
  double tol = tol_for(out.dtype());
  expect_close(out, expect, tol, tol, what);
}

}  // namespace

TEST(Linalg, MatmulFloatDtypes) {
  for (auto t : {float32, float64, float16, bfloat16}) {
    check_matmul(make({3, 4}, t), make({4, 5}, t, 1), dtype_name(t));
    check_matmul(make({7, 33}, t, 2), make({33, 9}, t, 3), dtype_name(t));
  }
}

TEST(Linalg, MatmulHalfRoundsOnce) {
  // float16 accumulates in float32: 2048 + 1 + 1 would be 2048 in float16
  // arithmetic (spacing 2 there) but the float32 sum 2050 is exact.
  array a({2048.0f, 1.0f, 1.0f}, {1, 3}, float16);
  array b({1.0f, 1.0f, 1.0f}, {3, 1}, float16);
  EXPECT_EQ(matmul(a, b).item<float>(), 2050.0f);
}

TEST(Linalg, MatmulComplex) {
  auto a = make_complex({2, 3, 4});
  auto b = make_complex({4, 5}, 1);
  auto to_c = [](const array& x) {
    std::vector<cdouble> v;
    for (auto z : to_vector<complex64_t>(x)) {
      v.emplace_back(z.real(), z.imag());
    }
    return v;
  };
  Shape shape;
  auto expect = ref_matmul(to_c(a), a.shape(), to_c(b), b.shape(), &shape);
  auto out = matmul(a, b);
  EXPECT_EQ(out.dtype(), complex64);
  EXPECT_EQ(out.shape(), shape);
  auto got = to_c(out);
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].real(), expect[i].real(), 1e-5) << i;
    EXPECT_NEAR(got[i].imag(), expect[i].imag(), 1e-5) << i;
  }
  // A real operand is promoted to complex.
  auto mixed = matmul(make({3, 4}), b);
  EXPECT_EQ(mixed.dtype(), complex64);
}

TEST(Linalg, MatmulTransposedOperands) {
  // Column-major views go to BLAS with the trans flags; check all four
  // combinations, for each BLAS type and for a half type.
  for (auto t : {float32, float64, float16}) {
    auto a = make({6, 5}, t);
    auto at = transpose(make({5, 6}, t, 1));
    auto b = make({5, 7}, t, 2);
    auto bt = transpose(make({7, 5}, t, 3));
    check_matmul(a, b, "NN");
    check_matmul(at, b, "TN");
    check_matmul(a, bt, "NT");
    check_matmul(at, bt, "TT");
  }
  auto ca = transpose(make_complex({5, 3}));
  auto cb = make_complex({5, 2}, 1);
  auto got = to_vector<complex64_t>(matmul(ca, cb));
  auto va = to_vector<complex64_t>(ca), vb = to_vector<complex64_t>(cb);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      std::complex<double> acc = 0;
      for (int p = 0; p < 5; ++p) {
        acc += std::complex<double>(va[i * 5 + p]) *
               std::complex<double>(vb[p * 2 + j]);
      }
      EXPECT_NEAR(got[i * 2 + j].real(), acc.real(), 1e-5);
      EXPECT_NEAR(got[i * 2 + j].imag(), acc.imag(), 1e-5);
    }
  }
}

TEST(Linalg, MatmulStridedLayouts) {
  auto x = make({3, 2, 4});
  // Row-major matrices with a leading dimension larger than the row.
  check_matmul(transpose(x, {1, 0, 2}), make({4, 3}, float32, 1), "ld > n");
  // Column-major matrices inside a batch.
  check_matmul(transpose(make({4, 2, 3}), {1, 2, 0}), make({4, 2}, float32, 2),
               "batched column-major");
  // Neither row- nor column-major: copied.
  check_matmul(transpose(make({3, 2, 4}), {2, 0, 1}), make({2, 5}), "copy");
  // A matrix broadcast within its own dims (stride 0): copied.
  check_matmul(broadcast_to(make({1, 4}), {3, 4}), make({4, 2}), "stride 0");
  check_matmul(make({2, 3}), broadcast_to(make({3, 1}, float32, 4), {3, 5}),
               "stride 0 columns");
}

TEST(Linalg, MatmulBroadcastBatch) {
  check_matmul(make({2, 1, 3, 4}), make({5, 4, 2}, float32, 1), "4-D x 3-D");
  check_matmul(make({3, 4}), make({6, 4, 5}, float32, 1), "2-D x 3-D");
  check_matmul(make({6, 3, 4}, float64), make({4, 5}, float64, 1), "3-D x 2-D");
  check_matmul(make({2, 1, 3, 4}, bfloat16), make({1, 3, 4, 2}, bfloat16, 1),
               "bfloat16 both broadcast");
  // An explicit broadcast of the batch is a stride-0 view, read in place.
  check_matmul(broadcast_to(make({3, 4}), {5, 3, 4}), make({5, 4, 2}),
               "broadcast view");
  // A transposed operand whose batch is broadcast.
  check_matmul(make({4, 2, 3}),
               broadcast_to(transpose(make({5, 3})), {4, 3, 5}),
               "broadcast transposed");
}

TEST(Linalg, MatmulOneDimensional) {
  auto v = make({4}, float32, 1);
  auto dot = matmul(make({4}), v);
  EXPECT_EQ(dot.shape(), Shape{});
  check_matmul(make({4}), v, "vector . vector");
  check_matmul(make({4}), make({4, 5}), "vector x matrix");
  check_matmul(make({3, 4}), v, "matrix x vector");
  check_matmul(make({2, 3, 4}), v, "batch x vector");
  check_matmul(make({4}), make({2, 4, 5}), "vector x batch");
  EXPECT_EQ(matmul(make({4}), make({2, 4, 5})).shape(), Shape({2, 5}));
  EXPECT_EQ(matmul(make({2, 3, 4}), v).shape(), Shape({2, 3}));
}

TEST(Linalg, MatmulEmpty) {
  // K == 0: an empty sum is zero.
  for (auto t : {float32, float16, complex64}) {
    auto z = matmul(zeros({3, 0}, t), zeros({0, 4}, t));
    EXPECT_EQ(z.shape(), Shape({3, 4}));
    expect_close(z, std::vector<double>(12, 0.0), 0, 0, dtype_name(t));
  }
  auto z1 = matmul(zeros({0}), zeros({0}));
  EXPECT_EQ(z1.shape(), Shape{});
  EXPECT_EQ(z1.item<float>(), 0.0f);
  // M, N or a batch dim 0: empty outputs.
  EXPECT_EQ(matmul(zeros({0, 4}), make({4, 5})).shape(), Shape({0, 5}));
  EXPECT_EQ(matmul(make({3, 4}), zeros({4, 0})).shape(), Shape({3, 0}));
  auto e = matmul(zeros({2, 0, 3, 4}), make({4, 5}));
  EXPECT_EQ(e.shape(), Shape({2, 0, 3, 5}));
  EXPECT_EQ(to_vector<float>(e).size(), 0u);
}

TEST(Linalg, MatmulLargeAndManySmall) {
  // Big enough for OpenBLAS threads.
  check_matmul(make({130, 257}), make({257, 96}, float32, 1), "large");
  // Many tiny matrices: the batch is split over the pool.
  check_matmul(make({70000, 2, 2}), make({2, 2}, float32, 1), "many small");
  check_matmul(make({3000, 3, 5}, float64), make({3000, 5, 4}, float64, 1),
               "many small f64");
}

TEST(Linalg, MatmulPromotion) {
  auto out = matmul(array({1, 2, 3, 4}, {2, 2}), make({2, 2}));
  EXPECT_EQ(out.dtype(), float32);
  expect_close(out,
               ref_matmul<double>({1, 2, 3, 4}, {2, 2},
                                  to_vector<double>(make({2, 2})), {2, 2}));
  EXPECT_EQ(matmul(make({2, 2}, float16), make({2, 2})).dtype(), float32);
  EXPECT_EQ(matmul(make({2, 2}, bfloat16), make({2, 2}, float16)).dtype(),
            float32);
  EXPECT_EQ(matmul(make({2, 2}, float64), make({2, 2})).dtype(), float64);
}

TEST(Linalg, MatmulErrors) {
  expect_error<std::invalid_argument>(
      [] { matmul(array(1.0f), make({2})); },
      "[matmul] Inputs must have at least one dimension; got shapes () and "
      "(2).");
  expect_error<std::invalid_argument>(
      [] {
        matmul(array({1, 2, 3, 4}, {2, 2}), array({1, 2, 3, 4}, {2, 2}));
      },
      "[matmul] Only inexact (floating point and complex) types are "
      "supported; got int32.");
  expect_error<std::invalid_argument>(
      [] {
        matmul(array({true, false}), array({true, false}));
      },
      "[matmul] Only inexact (floating point and complex) types are "
      "supported; got bool.");
  expect_error<std::invalid_argument>(
      [] {
        matmul(array({1, 2}, int8), array({1, 2}, int16));
      },
      "got int16.");
  expect_error<std::invalid_argument>(
      [] {
        matmul(make({2, 3}), make({4, 5}));
      },
      "[matmul] Last dimension of first input with shape (2,3) must match "
      "second to last dimension of second input with shape (4,5).");
  expect_error<std::invalid_argument>(
      [] { matmul(make({3}), make({4})); },
      "[matmul] Last dimension of first input with shape (3) must match "
      "second to last dimension of second input with shape (4).");
  expect_error<std::invalid_argument>(
      [] {
        matmul(make({2, 3, 4}), make({3, 4, 5}));
      },
      "[matmul] Batch dimensions of inputs with shapes (2,3,4) and (3,4,5) "
      "cannot be broadcast.");
}

TEST(Linalg, MatmulPrimitive) {
  auto out = matmul(make({2, 3}), make({3, 4}));
  EXPECT_STREQ(out.primitive().name(), "Matmul");
  EXPECT_EQ(out.primitive().output_shapes(out.inputs()),
            std::vector<Shape>{Shape({2, 4})});
}

namespace {

// alpha * a @ b + beta * c against loops; c broadcasts to the product.
void check_addmm(const array& c, const array& a, const array& b, float alpha,
                 float beta, const std::string& what) {
  Shape shape;
  auto ab = ref_matmul(to_vector<double>(a), a.shape(), to_vector<double>(b),
                       b.shape(), &shape);
  auto cb = to_vector<double>(broadcast_to(c, shape));
  std::vector<double> expect(ab.size());
  for (size_t i = 0; i < ab.size(); ++i) {
    expect[i] = alpha * ab[i] + beta * cb[i];
  }
  auto out = addmm(c, a, b, alpha, beta);
  EXPECT_EQ(out.shape(), shape) << what;
  double tol = tol_for(out.dtype());
  expect_close(out, expect, tol, tol, what);
}

}  // namespace

TEST(Linalg, AddMM) {
  for (auto t : {float32, float64, float16, bfloat16}) {
    std::string name = dtype_name(t);
    check_addmm(make({3, 5}, t, 2), make({3, 4}, t), make({4, 5}, t, 1), 2.0f,
                0.5f, name);
    check_addmm(make({5}, t, 2), make({3, 4}, t), make({4, 5}, t, 1), 1.0f,
                1.0f, name + " c row");
    check_addmm(array(1.5f, t), transpose(make({4, 3}, t)), make({4, 5}, t, 1),
                -1.0f, 2.0f, name + " c scalar");
    check_addmm(make({2, 3, 1}, t, 3), make({2, 3, 4}, t), make({4, 5}, t, 1),
                0.5f, -1.0f, name + " batched");
  }
  // 1-D operands: c broadcasts to the unsqueezed product.
  check_addmm(make({5}), make({4}), make({4, 5}, float32, 1), 1.0f, 1.0f,
              "vector a");
  check_addmm(make({3}), make({3, 4}), make({4}, float32, 1), 1.0f, 3.0f,
              "vector b");
  // Promotion includes c.
  auto out = addmm(make({2, 2}, float64), make({2, 2}), make({2, 2}));
  EXPECT_EQ(out.dtype(), float64);
  EXPECT_STREQ(
      addmm(make({2, 2}), make({2, 2}), make({2, 2})).primitive().name(),
      "AddMM");
}

TEST(Linalg, AddMMComplex) {
  auto a = make_complex({2, 3});
  auto b = make_complex({3, 2}, 1);
  auto c = make_complex({2, 2}, 2);
  auto out = to_vector<complex64_t>(addmm(c, a, b, 2.0f, -0.5f));
  auto va = to_vector<complex64_t>(a), vb = to_vector<complex64_t>(b),
       vc = to_vector<complex64_t>(c);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      std::complex<double> acc = 0;
      for (int p = 0; p < 3; ++p) {
        acc += std::complex<double>(va[i * 3 + p]) *
               std::complex<double>(vb[p * 2 + j]);
      }
      auto e = 2.0 * acc - 0.5 * std::complex<double>(vc[i * 2 + j]);
      EXPECT_NEAR(out[i * 2 + j].real(), e.real(), 1e-5);
      EXPECT_NEAR(out[i * 2 + j].imag(), e.imag(), 1e-5);
    }
  }
}

TEST(Linalg, AddMMBufferReuse) {
  auto a = make({3, 4});
  auto b = make({4, 5}, float32, 1);
  auto expect =
      ref_matmul(to_vector<double>(a), {3, 4}, to_vector<double>(b), {4, 5});
  // c kept by the caller: its buffer must not be overwritten.
  auto c = make({3, 5}, float32, 2);
  auto before = to_vector<double>(c);
  auto out = addmm(c, a, b, 1.0f, 1.0f);
  std::vector<double> e(15);
  for (int i = 0; i < 15; ++i) {
    e[i] = expect[i] + before[i];
  }
  expect_close(out, e);
  expect_close(c, before, 0, 0, "c unchanged");
  // c used by nobody else: its buffer may become the output.
  auto out2 = addmm(c * 2.0f, a, b, 1.0f, 1.0f);
  for (int i = 0; i < 15; ++i) {
    e[i] = expect[i] + 2 * before[i];
  }
  expect_close(out2, e);
}

TEST(Linalg, AddMMBetaZeroAndEmpty) {
  // beta == 0: c is not read, so its nans do not appear.
  auto c = full({2, 2}, NAN);
  auto a = make({2, 3});
  auto b = make({3, 2}, float32, 1);
  auto expect =
      ref_matmul(to_vector<double>(a), {2, 3}, to_vector<double>(b), {3, 2});
  expect_close(addmm(c, a, b, 1.0f, 0.0f), expect);
  expect_close(addmm(astype(c, float16), astype(a, float16), astype(b, float16),
                     1.0f, 0.0f),
               expect, 1e-3, 1e-3);
  // K == 0: beta * c.
  auto c2 = make({3, 4}, float32, 1);
  auto cv = to_vector<double>(c2);
  for (auto& x : cv) {
    x *= 3.0;
  }
  expect_close(addmm(c2, zeros({3, 0}), zeros({0, 4}), 2.0f, 3.0f), cv);
  expect_close(addmm(c2, zeros({3, 0}), zeros({0, 4}), 2.0f, 0.0f),
               std::vector<double>(12, 0.0));
}

TEST(Linalg, AddMMErrors) {
  expect_error<std::invalid_argument>(
      [] {
        addmm(array({1, 2}), array({1, 2, 3, 4}, {2, 2}),
              array({1, 2, 3, 4}, {2, 2}));
      },
      "[addmm] Only inexact (floating point and complex) types are "
      "supported; got int32.");
  expect_error<std::invalid_argument>(
      [] {
        addmm(make({2}), make({2, 3}), make({4, 2}));
      },
      "[addmm] Last dimension of first input with shape (2,3) must match "
      "second to last dimension of second input with shape (4,2).");
  expect_error<std::invalid_argument>(
      [] {
        addmm(make({4}), make({3, 2}), make({2, 5}));
      },
      "[addmm] Input c with shape (4) cannot be broadcast to the shape (3,5) "
      "of the product of inputs with shapes (3,2) and (2,5).");
  expect_error<std::invalid_argument>(
      [] { addmm(make({2}), array(1.0f), make({2})); },
      "[addmm] Inputs must have at least one dimension");
}

TEST(Linalg, Outer) {
  auto a = make({3});
  auto b = make({4}, float32, 1);
  auto va = to_vector<double>(a), vb = to_vector<double>(b);
  std::vector<double> e;
  for (double x : va) {
    for (double y : vb) {
      e.push_back(x * y);
    }
  }
  auto o = outer(a, b);
  EXPECT_EQ(o.shape(), Shape({3, 4}));
  expect_close(o, e);
  // Inputs of any shape are flattened.
  auto o2 = outer(reshape(a, {3, 1}), reshape(b, {2, 2}));
  EXPECT_EQ(o2.shape(), Shape({3, 4}));
  expect_close(o2, e);
  // Any dtype (it is elementwise).
  auto oi = outer(array({1, 2}), array({3, 4, 5}));
  EXPECT_EQ(oi.dtype(), int32);
  expect_close(oi, {3, 4, 5, 6, 8, 10});
  EXPECT_EQ(outer(array(2.0f), array(3.0f)).shape(), Shape({1, 1}));
  // Views are flattened in logical order.
  auto x = transpose(make({2, 3}));
  auto vx = to_vector<double>(x);
  std::vector<double> ex;
  for (double p : vx) {
    for (double q : vb) {
      ex.push_back(p * q);
    }
  }
  expect_close(outer(x, b), ex);
  expect_close(outer(b, x), [&] {
    std::vector<double> e2;
    for (double q : vb) {
      for (double p : vx) {
        e2.push_back(q * p);
      }
    }
    return e2;
  }());
}

TEST(Linalg, Inner) {
  // 1-D . 1-D is a scalar.
  auto a = make({5});
  auto b = make({5}, float32, 1);
  auto va = to_vector<double>(a), vb = to_vector<double>(b);
  double dot = 0;
  for (int i = 0; i < 5; ++i) {
    dot += va[i] * vb[i];
  }
  auto d = inner(a, b);
  EXPECT_EQ(d.shape(), Shape{});
  EXPECT_NEAR(d.item<double>(), dot, 1e-6);

  // (2,3,4) . (5,4) -> (2,3,5), summing over the last axes.
  auto x = make({2, 3, 4});
  auto y = make({5, 4}, float64, 2);
  auto vx = to_vector<double>(x), vy = to_vector<double>(y);
  std::vector<double> e;
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int p = 0; p < 4; ++p) {
        s += vx[i * 4 + p] * vy[j * 4 + p];
      }
      e.push_back(s);
    }
  }
  auto r = inner(x, y);
  EXPECT_EQ(r.shape(), Shape({2, 3, 5}));
  EXPECT_EQ(r.dtype(), float64);
  expect_close(r, e, 1e-12, 1e-12);

  // A scalar operand multiplies (any dtype).
  auto s = inner(array(3), array({1, 2}));
  EXPECT_EQ(s.dtype(), int32);
  expect_close(s, {3, 6});

  expect_error<std::invalid_argument>(
      [] {
        inner(make({2, 3}), make({4}));
      },
      "[inner] Last dimension of first input with shape (2,3) must match "
      "last dimension of second input with shape (4).");
  expect_error<std::invalid_argument>(
      [] {
        inner(array({1, 2}), array({3, 4}));
      },
      "[inner] Only inexact (floating point and complex) types are "
      "supported; got int32.");
}

namespace {

// NumPy tensordot by brute force: sum over the paired axes.
std::vector<double> ref_tensordot(const array& a, const array& b,
                                  const std::vector<int>& axes_a,
                                  const std::vector<int>& axes_b) {
  auto va = to_vector<double>(a), vb = to_vector<double>(b);
  auto norm = [](int ax, int nd) { return ax < 0 ? ax + nd : ax; };
  std::vector<int> ca, cb, fa, fb;
  for (size_t i = 0; i < axes_a.size(); ++i) {
    ca.push_back(norm(axes_a[i], a.ndim()));
    cb.push_back(norm(axes_b[i], b.ndim()));
  }
  for (int i = 0; i < a.ndim(); ++i) {
    if (std::find(ca.begin(), ca.end(), i) == ca.end()) {
      fa.push_back(i);
    }
  }
  for (int i = 0; i < b.ndim(); ++i) {
    if (std::find(cb.begin(), cb.end(), i) == cb.end()) {
      fb.push_back(i);
    }
  }
  // Walk the index spaces of (free_a, free_b) and of the contraction.
  auto sizes = [](const array& x, const std::vector<int>& axes) {
    std::vector<int> s;
    for (int ax : axes) {
      s.push_back(x.shape(ax));
    }
    return s;
  };
  auto sfa = sizes(a, fa), sfb = sizes(b, fb), sc = sizes(a, ca);
  auto count = [](const std::vector<int>& s) {
    int64_t n = 1;
    for (int d : s) {
      n *= d;
    }
    return n;
  };
  auto unravel = [](int64_t i, const std::vector<int>& s) {
    std::vector<int> idx(s.size());
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      idx[d] = static_cast<int>(i % s[d]);
      i /= s[d];
    }
    return idx;
  };
  auto flat = [](const array& x, const std::vector<int>& idx) {
    int64_t off = 0;
    for (int d = 0; d < x.ndim(); ++d) {
      off = off * x.shape(d) + idx[d];
    }
    return off;
  };
  std::vector<double> out;
  for (int64_t i = 0; i < count(sfa); ++i) {
    for (int64_t j = 0; j < count(sfb); ++j) {
      double s = 0;
      for (int64_t p = 0; p < count(sc); ++p) {
        std::vector<int> ia(a.ndim()), ib(b.ndim());
        auto ifa = unravel(i, sfa), ifb = unravel(j, sfb), ic = unravel(p, sc);
        for (size_t d = 0; d < fa.size(); ++d) {
          ia[fa[d]] = ifa[d];
        }
        for (size_t d = 0; d < fb.size(); ++d) {
          ib[fb[d]] = ifb[d];
        }
        for (size_t d = 0; d < ca.size(); ++d) {
          ia[ca[d]] = ic[d];
          ib[cb[d]] = ic[d];
        }
        s += va[flat(a, ia)] * vb[flat(b, ib)];
      }
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace

TEST(Linalg, TensordotAxesCount) {
  auto a = make({2, 3, 4});
  auto b = make({3, 4, 5}, float32, 1);
  auto t2 = tensordot(a, b, 2);
  EXPECT_EQ(t2.shape(), Shape({2, 5}));
  expect_close(t2, ref_tensordot(a, b, {1, 2}, {0, 1}));
  auto b1 = make({4, 6}, float32, 2);
  auto t1 = tensordot(a, b1, 1);
  EXPECT_EQ(t1.shape(), Shape({2, 3, 6}));
  expect_close(t1, ref_tensordot(a, b1, {2}, {0}));
  // Default axes = 2.
  expect_close(tensordot(a, b), ref_tensordot(a, b, {1, 2}, {0, 1}));
  // axes = 0 is the outer product.
  auto t0 = tensordot(make({2, 3}), make({4}, float32, 1), 0);
  EXPECT_EQ(t0.shape(), Shape({2, 3, 4}));
  expect_close(t0, ref_tensordot(make({2, 3}), make({4}, float32, 1), {}, {}));
  // Full contraction gives a scalar.
  auto full_c = tensordot(make({3, 4}), make({3, 4}, float32, 1), 2);
  EXPECT_EQ(full_c.shape(), Shape{});
  expect_close(full_c, ref_tensordot(make({3, 4}), make({3, 4}, float32, 1),
                                     {0, 1}, {0, 1}));
}

TEST(Linalg, TensordotExplicitAxes) {
  auto a = make({2, 3, 4});
  auto b = make({4, 5, 3}, float32, 1);
  // Axes paired out of order (a's contracted axes need a copy).
  auto t = tensordot(a, b, {2, 1}, {0, 2});
  EXPECT_EQ(t.shape(), Shape({2, 5}));
  expect_close(t, ref_tensordot(a, b, {2, 1}, {0, 2}));
  // The same with negative axes, and with the pairs swapped.
  expect_close(tensordot(a, b, {-1, -2}, {-3, -1}),
               ref_tensordot(a, b, {2, 1}, {0, 2}));
  expect_close(tensordot(a, b, {1, 2}, {2, 0}),
               ref_tensordot(a, b, {1, 2}, {2, 0}));
  // Contracting a's leading axis (a view transposed for matmul).
  auto c = make({3, 6}, float64, 2);
  auto t3 = tensordot(a, c, {1}, {0});
  EXPECT_EQ(t3.shape(), Shape({2, 4, 6}));
  EXPECT_EQ(t3.dtype(), float64);
  expect_close(t3, ref_tensordot(a, c, {1}, {0}), 1e-12, 1e-12);
  auto t4 = tensordot(make({5, 2}), make({3, 5}, float32, 1), {0}, {1});
  EXPECT_EQ(t4.shape(), Shape({2, 3}));
  expect_close(t4,
               ref_tensordot(make({5, 2}), make({3, 5}, float32, 1), {0}, {1}));
  // Transposed inputs.
  auto at = transpose(make({4, 3, 2}));
  auto bt = transpose(make({5, 4, 3}, float32, 1));
  expect_close(tensordot(at, bt, {2, 1}, {1, 0}),
               ref_tensordot(at, bt, {2, 1}, {1, 0}));
  auto bt2 = transpose(make({5, 3, 4}, float32, 2));
  expect_close(tensordot(at, bt2, 1), ref_tensordot(at, bt2, {2}, {0}));
  // Complex inputs.
  auto tc = tensordot(make_complex({2, 3}), make_complex({3, 2}, 1), 1);
  EXPECT_EQ(tc.dtype(), complex64);
}

TEST(Linalg, TensordotErrors) {
  auto a = make({2, 3, 4});
  auto b = make({3, 4, 5});
  expect_error<std::invalid_argument>(
      [&] { tensordot(a, b, -1); },
      "[tensordot] The number of axes must be in [0, min(a.ndim, b.ndim)]; "
      "got -1 for inputs with shapes (2,3,4) and (3,4,5).");
  expect_error<std::invalid_argument>(
      [&] { tensordot(a, make({4}), 2); },
      "[tensordot] The number of axes must be in [0, min(a.ndim, b.ndim)]; "
      "got 2");
  expect_error<std::invalid_argument>(
      [&] { tensordot(a, b, 1); },
      "[tensordot] Contracted axes must have equal sizes; axis 2 of a with "
      "shape (2,3,4) has size 4 but axis 0 of b with shape (3,4,5) has size "
      "3.");
  expect_error<std::invalid_argument>(
      [&] {
        tensordot(a, b, {1, 2}, {0});
      },
      "[tensordot] The axes of a (1,2) and the axes of b (0) must have the "
      "same length.");
  expect_error<std::invalid_argument>(
      [&] {
        tensordot(a, b, {1, 1}, {0, 1});
      },
      "[tensordot] Repeated axis 1 in axes_a (1,1).");
  expect_error<std::invalid_argument>(
      [&] {
        tensordot(a, b, {1, 2}, {0, -3});
      },
      "[tensordot] Repeated axis -3 in axes_b (0,-3).");
  expect_error<std::invalid_argument>(
      [&] { tensordot(a, b, {3}, {0}); },
      "[tensordot] Invalid axis 3 for array with 3 dimensions.");
  expect_error<std::invalid_argument>(
      [] {
        tensordot(array({1, 2}), array({1, 2}), 1);
      },
      "[tensordot] Only inexact (floating point and complex) types are "
      "supported; got int32.");
}
