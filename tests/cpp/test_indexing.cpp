// take, take_along_axis and put_along_axis against loops over indices, on
// strided inputs and indices, for every index dtype, with the kernel's
// out-of-range errors surfacing from eval.
#include <climits>
#include <functional>
#include <numeric>
#include <random>

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {


int wrap(int i, int n) { return i < 0 ? i + n : i; }

std::vector<int> random_ints(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(n);
  for (auto& x : v) {
    x = d(gen);
  }
  return v;
}

const std::vector<Dtype> kDtypes = {bool_,   uint8,   int16,    int32,
                                    int64,   uint64,  float16,  bfloat16,
                                    float32, float64, complex64};
const std::vector<Dtype> kIndexDtypes = {int8,  uint8,  int16, uint16,
                                         int32, uint32, int64, uint64};

}  // namespace

// --- take ---

TEST(IndexingTake, Rows) {
  auto a = iota({5, 3});
  auto idx = array({4, 0, -1, 2});
  auto t = take(a, idx, 0);
  EXPECT_EQ(t.shape(), Shape({4, 3}));
  EXPECT_EQ(t.dtype(), float32);
  expect_close(t, {12, 13, 14, 0, 1, 2, 12, 13, 14, 6, 7, 8});
  auto c = take(a, array({2, 0}), 1);
  EXPECT_EQ(c.shape(), Shape({5, 2}));
  expect_close(c, expected_by({5, 2}, [](const Index& i) {
                 return i[0] * 3.0 + (i[1] == 0 ? 2 : 0);
               }));
  auto neg = take(a, array({-3}), -1);
  expect_close(neg, {0, 3, 6, 9, 12});
}

TEST(IndexingTake, NdIndices) {
  auto a = iota({2, 5, 3});
  Shape ishape = {2, 3};
  std::vector<int> iv = {0, 4, -2, 1, 1, 3};
  auto idx = array(iv.begin(), ishape, int32);
  auto t = take(a, idx, 1);
  EXPECT_EQ(t.shape(), Shape({2, 2, 3, 3}));
  expect_close(t, expected_by({2, 2, 3, 3}, [&](const Index& i) {
                 int k = wrap(iv[i[1] * 3 + i[2]], 5);
                 return i[0] * 15.0 + k * 3 + i[3];
               }));
  // Along the last axis.
  auto u = take(a, idx, 2);
  EXPECT_EQ(u.shape(), Shape({2, 5, 2, 3}));
  // Indices 4 and -2 are out of range for size 3 only in the first case;
  // use in-range ones here.
  std::vector<int> jv = {0, 2, -1, 1, 1, -3};
  auto jdx = array(jv.begin(), ishape, int64);
  auto w = take(a, jdx, 2);
  expect_close(w, expected_by({2, 5, 2, 3}, [&](const Index& i) {
                 int k = wrap(jv[i[2] * 3 + i[3]], 3);
                 return i[0] * 15.0 + i[1] * 3 + k;
               }));
  // A 0-d index array removes the axis.
  auto s = take(a, array(3), 1);
  EXPECT_EQ(s.shape(), Shape({2, 3}));
  expect_close(s, {9, 10, 11, 24, 25, 26});
  // Empty indices.
  std::vector<int> none;
  auto e = take(a, array(none.begin(), {0}, int32), 1);
  EXPECT_EQ(e.shape(), Shape({2, 0, 3}));
  EXPECT_TRUE(to_vector<float>(e).empty());
}

TEST(IndexingTake, Flattened) {
  auto a = iota({3, 5});
  auto t = take(a, array({0, 14, -1, 7}));
  EXPECT_EQ(t.shape(), Shape({4}));
  expect_close(t, {0, 14, 14, 7});
  auto tt = take(transpose(a), array({1, 2}, {1, 2}));
  EXPECT_EQ(tt.shape(), Shape({1, 2}));
  expect_close(tt, {5, 10});
  expect_close(take(array(4.0f), array({0, -1})), {4, 4});
}

TEST(IndexingTake, IntIndex) {
  auto a = iota({4, 3});
  auto r = take(a, 2, 0);
  EXPECT_EQ(r.shape(), Shape({3}));
  expect_close(r, {6, 7, 8});
  auto c = take(a, -1, 1);
  EXPECT_EQ(c.shape(), Shape({4}));
  expect_close(c, {2, 5, 8, 11});
  c.eval();
  EXPECT_EQ(c.data_shared_ptr(), a.data_shared_ptr());
  expect_error<std::out_of_range>(
      [&] { take(a, 3, 1); },
      "[take] Index 3 is out of bounds for axis 1 with size 3.");
  expect_error<std::out_of_range>(
      [&] { take(a, -5, 0); },
      "[take] Index -5 is out of bounds for axis 0 with size 4.");
  expect_error<std::invalid_argument>(
      [&] { take(a, 0, 2); },
      "[take] Invalid axis 2 for array with 2 dimensions.");
}

TEST(IndexingTake, IndexDtypes) {
  auto a = iota({6, 2});
  for (Dtype t : kIndexDtypes) {
    auto idx = array({5, 0, 3}, t);
    auto r = take(a, idx, 0);
    expect_close(r, {10, 11, 0, 1, 6, 7}, 1e-5, 1e-6, dtype_name(t));
    if (!is_unsigned(t)) {
      expect_close(take(a, array({-1, -6}, t), 0), {10, 11, 0, 1}, 1e-5, 1e-6,
                   dtype_name(t));
    }
  }
}

TEST(IndexingTake, ValueDtypes) {
  for (Dtype t : kDtypes) {
    auto a = iota({4, 3}, t);
    auto r = take(a, array({3, 0}), 0);
    EXPECT_EQ(r.dtype(), t);
    expect_close(r, {as(t, 9), as(t, 10), as(t, 11), 0, as(t, 1), as(t, 2)},
                 1e-5, 1e-6, dtype_name(t));
    auto c = take(a, array({2, -3}), 1);
    expect_close(c,
                 {as(t, 2), 0, as(t, 5), as(t, 3), as(t, 8), as(t, 6),
                  as(t, 11), as(t, 9)},
                 1e-5, 1e-6, dtype_name(t));
  }
  std::vector<complex64_t> cv = {{1, -1}, {2, -2}, {3, -3}};
  auto got =
      to_vector<complex64_t>(take(array(cv.begin(), {3}), array({2, 0})));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], complex64_t(3, -3));
  EXPECT_EQ(got[1], complex64_t(1, -1));
}

TEST(IndexingTake, StridedInputs) {
  // Transposed source: rows of t are columns of a.
  auto a = iota({3, 4});
  auto t = transpose(a);  // (4, 3), t[i, j] = 4j + i
  expect_close(take(t, array({3, 1}), 0), {3, 7, 11, 1, 5, 9});
  expect_close(take(t, array({2, 0}), 1), {8, 0, 9, 1, 10, 2, 11, 3});
  // Reversed rows, every other column.
  auto r = slice(a, {-1, 0}, {INT_MIN, 4}, {-1, 2});  // (3, 2)
  expect_close(take(r, array({0, 2}), 0), {8, 10, 0, 2});
  expect_close(take(r, array({1}), 1), {10, 6, 2});
  // Broadcast source.
  auto b = broadcast_to(iota({3}), {4, 3});
  expect_close(take(b, array({1, 3}), 0), {0, 1, 2, 0, 1, 2});
  expect_close(take(b, array({2, 2, 0}), 1),
               {2, 2, 0, 2, 2, 0, 2, 2, 0, 2, 2, 0});
  // Strided index arrays: transposed and reversed.
  auto it = transpose(array({0, 1, 2, 2, 0, 1}, {2, 3}));  // (3, 2)
  auto ti = take(a, it, 0);
  EXPECT_EQ(ti.shape(), Shape({3, 2, 4}));
  std::vector<int> itv = {0, 2, 1, 0, 2, 1};
  expect_close(ti, expected_by({3, 2, 4}, [&](const Index& i) {
                 return itv[i[0] * 2 + i[1]] * 4.0 + i[2];
               }));
  auto ir = slice(array({0, 1, 2}), {-1}, {INT_MIN}, {-1});
  expect_close(take(a, ir, 0), {8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3});
  // Broadcast index array.
  auto ib = broadcast_to(array(1), {2, 2});
  auto tb = take(iota({3}), ib, 0);
  EXPECT_EQ(tb.shape(), Shape({2, 2}));
  expect_close(tb, {1, 1, 1, 1});
}

TEST(IndexingTake, LargeGatherMatchesLoop) {
  // Enough rows to be split over threads; rows copied whole.
  const int n = 1000, d = 64, m = 5000;
  auto a = iota({n, d});
  auto iv = random_ints(m, -n, n - 1, 1);
  std::vector<int64_t> iv64(iv.begin(), iv.end());
  auto idx = array(iv64.begin(), {m});
  auto t = take(a, idx, 0);
  expect_close(t, expected_by({m, d}, [&](const Index& i) {
                 return wrap(iv[i[0]], n) * static_cast<double>(d) + i[1];
               }));
  // Columns: one element per index.
  auto jv = random_ints(m, -d, d - 1, 2);
  auto c = take(a, array(jv.begin(), {m}, int16), 1);
  EXPECT_EQ(c.shape(), Shape({n, m}));
  auto g = to_vector<double>(c);
  for (int r : {0, 17, 999}) {
    for (int j : {0, 1, 2500, 4999}) {
      EXPECT_EQ(g[static_cast<size_t>(r) * m + j], r * d + wrap(jv[j], d));
    }
  }
}

TEST(IndexingTake, OutOfRangeFromEval) {
  auto a = iota({5});
  auto t = take(a, array({1, 7}), 0);
  expect_error<std::out_of_range>(
      [&] { t.eval(); },
      "[take] Index 7 is out of bounds for axis 0 with size 5.");
  auto n = take(a, array({-6}), 0);
  expect_error<std::out_of_range>(
      [&] { n.eval(); },
      "[take] Index -6 is out of bounds for axis 0 with size 5.");
  auto u = take(a, array({uint8_t(200)}), 0);
  expect_error<std::out_of_range>(
      [&] { u.eval(); },
      "[take] Index 200 is out of bounds for axis 0 with size 5.");
  auto big = take(a, array({uint64_t(1) << 63}), 0);
  expect_error<std::out_of_range>(
      [&] { big.eval(); },
      "[take] Index 9223372036854775808 is out of bounds for axis 0");
  auto col = take(iota({2, 3}), array({0, 3}), 1);
  expect_error<std::out_of_range>(
      [&] { col.eval(); },
      "[take] Index 3 is out of bounds for axis 1 with size 3.");
  // Taking from an empty axis is an error when the op is built (MLX).
  expect_error<std::invalid_argument>(
      [&] { take(iota({0, 2}), array({0}), 0); },
      "[take] Cannot take from the empty axis 0 of an array of shape (0,2).");
  EXPECT_EQ(take(iota({0, 2}), zeros({0}, int32), 0).shape(), Shape({0, 2}));
  // The error is reported once: later evaluations work.
  expect_close(take(a, array({4}), 0), {4});
  // A bad index deep in a parallel gather: the first one is reported.
  std::vector<int> iv(20000, 1);
  iv[15000] = 9;
  iv[19000] = -8;
  auto par = take(iota({5, 16}), array(iv.begin(), {20000}), 0);
  expect_error<std::out_of_range>(
      [&] { par.eval(); },
      "[take] Index 9 is out of bounds for axis 0 with size 5.");
  expect_close(take(a, array({-1}), 0), {4});
}

TEST(IndexingTake, Errors) {
  auto a = iota({5, 2});
  expect_error<std::invalid_argument>(
      [&] { take(a, array({1.0f}), 0); },
      "[take] Indices must be of an integer type; got float32.");
  expect_error<std::invalid_argument>(
      [&] { take(a, array({true}), 0); },
      "[take] Indices must be of an integer type; got bool.");
  expect_error<std::invalid_argument>([&] { take(a, array({1.0})); },
                                      "[take] Indices must be of an integer "
                                      "type; got float64.");
  expect_error<std::invalid_argument>(
      [&] { take(a, array({1}), 2); },
      "[take] Invalid axis 2 for array with 2 dimensions.");
  expect_error<std::invalid_argument>(
      [&] { take(array(1.0f), array({0}), 0); },
      "[take] Invalid axis 0 for array with 0 dimensions.");
}

// --- take_along_axis ---

TEST(IndexingTakeAlongAxis, Values) {
  auto a = array({10, 30, 20, 60, 40, 50}, {2, 3});
  auto i1 = array({0, 2, 1, 1, 0, 2}, {2, 3});
  auto t1 = take_along_axis(a, i1, 1);
  EXPECT_EQ(t1.shape(), Shape({2, 3}));
  expect_close(t1, {10, 20, 30, 40, 60, 50});
  auto t0 = take_along_axis(a, array({1, 0, -1}, {1, 3}), 0);
  EXPECT_EQ(t0.shape(), Shape({1, 3}));
  expect_close(t0, {60, 30, 50});
  // Index broadcast along the other axis.
  auto tb = take_along_axis(a, array({2, 0}, {2, 1}), -1);
  EXPECT_EQ(tb.shape(), Shape({2, 1}));
  expect_close(tb, {20, 60});
  auto one = take_along_axis(a, array({1}, {1, 1}), 1);
  EXPECT_EQ(one.shape(), Shape({2, 1}));
  expect_close(one, {30, 40});
  // The array broadcasts against the indices too.
  auto row = array({5, 6, 7}, {1, 3});
  auto ta = take_along_axis(row, array({2, 0, 1, 1}, {2, 2}), 1);
  EXPECT_EQ(ta.shape(), Shape({2, 2}));
  expect_close(ta, {7, 5, 6, 6});
  // Empty indices along the axis.
  std::vector<int> none;
  auto e = take_along_axis(a, array(none.begin(), {2, 0}, int32), 1);
  EXPECT_EQ(e.shape(), Shape({2, 0}));
}

TEST(IndexingTakeAlongAxis, ThreeDAgainstLoop) {
  Shape as = {3, 4, 5};
  auto a = iota(as);
  for (int axis = 0; axis < 3; ++axis) {
    Shape is = as;
    is[axis] = 6;
    auto iv = random_ints(shape_size(is), -as[axis], as[axis] - 1, axis + 3);
    auto idx = array(iv.begin(), is, int16);
    auto t = take_along_axis(a, idx, axis);
    EXPECT_EQ(t.shape(), is);
    expect_close(t,
                 expected_by(is,
                             [&](const Index& i) {
                               Index src = i;
                               src[axis] = wrap(iv[flat(is, i)], as[axis]);
                               return static_cast<double>(flat(as, src));
                             }),
                 1e-5, 1e-6, "axis " + std::to_string(axis));
    // The same on a transposed copy of the layout and transposed indices.
    auto tt = take_along_axis(transpose(transpose(a, {2, 1, 0}), {2, 1, 0}),
                              transpose(transpose(idx)), axis);
    expect_close(tt, to_vector<double>(t), 1e-5, 1e-6,
                 "strided axis " + std::to_string(axis));
  }
}

TEST(IndexingTakeAlongAxis, StridedAndDtypes) {
  auto a = transpose(iota({3, 2}));  // (2, 3): a[i, j] = 2j + i
  auto idx = array({2, 2, 0, 1, 0, 1}, {2, 3});
  expect_close(take_along_axis(a, idx, 1), {4, 4, 0, 3, 1, 3});
  auto r = slice(iota({4}), {-1}, {INT_MIN}, {-1});  // 3 2 1 0
  expect_close(take_along_axis(r, array({0, 3, 3}), 0), {3, 0, 0});
  for (Dtype t : kDtypes) {
    auto x = iota({2, 3}, t);
    auto g = take_along_axis(x, array({2, 1}, {2, 1}), 1);
    EXPECT_EQ(g.dtype(), t);
    expect_close(g, {as(t, 2), as(t, 4)}, 1e-5, 1e-6, dtype_name(t));
  }
  for (Dtype t : kIndexDtypes) {
    auto g = take_along_axis(iota({2, 3}), array({0, 2}, {2, 1}, t), 1);
    expect_close(g, {0, 5}, 1e-5, 1e-6, dtype_name(t));
  }
}

TEST(IndexingTakeAlongAxis, LargeAgainstLoop) {
  // Per-element indices (not constant over the inner block), parallel.
  Shape as = {40, 3000};
  auto a = iota(as);
  Shape is = {25, 3000};
  auto iv = random_ints(shape_size(is), -40, 39, 11);
  auto t = take_along_axis(a, array(iv.begin(), is, int32), 0);
  expect_close(t, expected_by(is, [&](const Index& i) {
                 return wrap(iv[flat(is, i)], 40) * 3000.0 + i[1];
               }));
}

TEST(IndexingTakeAlongAxis, Errors) {
  auto a = iota({2, 3});
  expect_error<std::invalid_argument>(
      [&] {
        take_along_axis(a, array({0, 1, 2}), 1);
      },
      "[take_along_axis] Indices of shape (3) must have as many dimensions "
      "as the array of shape (2,3).");
  expect_error<std::invalid_argument>(
      [&] {
        take_along_axis(a, array({0.0f}, {1, 1}), 1);
      },
      "[take_along_axis] Indices must be of an integer type; got float32.");
  expect_error<std::invalid_argument>(
      [&] {
        take_along_axis(a, array({0}, {1, 1}), 2);
      },
      "[take_along_axis] Invalid axis 2 for array with 2 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        take_along_axis(a, array({0, 1, 2}, {3, 1}), 1);
      },
      "[take_along_axis] Shapes (2,1) and (3,1) cannot be broadcast.");
  auto bad = take_along_axis(a, array({0, 3}, {2, 1}), 1);
  expect_error<std::out_of_range>(
      [&] { bad.eval(); },
      "[take_along_axis] Index 3 is out of bounds for axis 1 with size 3.");
  auto bad0 = take_along_axis(a, array({0, -3, 1}, {1, 3}), 0);
  expect_error<std::out_of_range>(
      [&] { bad0.eval(); },
      "[take_along_axis] Index -3 is out of bounds for axis 0 with size 2.");
}

// --- put_along_axis ---

TEST(IndexingPutAlongAxis, Values) {
  auto a = iota({2, 3});
  auto p = put_along_axis(a, array({2, 0}, {2, 1}),
                          array({-1.0f, -2.0f}, {2, 1}), 1);
  EXPECT_EQ(p.shape(), Shape({2, 3}));
  expect_close(p, {0, 1, -1, -2, 4, 5});
  expect_close(a, iota_vec(6));  // untouched
  // Scalar values; indices broadcast over the other axis.
  auto q = put_along_axis(a, array({0}, {1, 1}), array(9.0f), 1);
  expect_close(q, {9, 1, 2, 9, 4, 5});
  // Axis 0 with negative indices.
  auto r = put_along_axis(a, array({-1, 0, 1}, {1, 3}),
                          array({7.0f, 8.0f, 9.0f}, {1, 3}), 0);
  expect_close(r, {0, 8, 2, 7, 4, 9});
  // Values cast to the array's type.
  auto ia = iota({3}, int32);
  auto ic = put_along_axis(ia, array({1}), array(2.7f), 0);
  EXPECT_EQ(ic.dtype(), int32);
  expect_close(ic, {0, 2, 2});
}

TEST(IndexingPutAlongAxis, DuplicatesLastWins) {
  auto a = iota({1, 3});
  auto p = put_along_axis(a, array({1, 1, 1}, {1, 3}),
                          array({7.0f, 8.0f, 9.0f}, {1, 3}), 1);
  expect_close(p, {0, 9, 2});
  auto b = iota({4, 2});
  auto q = put_along_axis(b, array({3, 0, 3, 3}, {4, 1}),
                          array({1.0f, 2.0f, 3.0f, 4.0f}, {4, 1}), 0);
  expect_close(q, {2, 2, 2, 3, 4, 5, 4, 4});
}

TEST(IndexingPutAlongAxis, AgainstLoop) {
  Shape as = {3, 4, 5};
  for (int axis = 0; axis < 3; ++axis) {
    Shape is = as;
    is[axis] = 7;  // more indices than positions: duplicates
    auto iv = random_ints(shape_size(is), -as[axis], as[axis] - 1, axis + 21);
    auto vv = iota_vec(shape_size(is), 100);
    auto a = iota(as);
    auto p = put_along_axis(a, array(iv.begin(), is, int64),
                            array(vv.begin(), is), axis);
    auto want = iota_vec(shape_size(as));
    int64_t k = 0;
    for (auto& i : [&] {
           std::vector<Index> all;
           expected_by(is, [&](const Index& x) {
             all.push_back(x);
             return 0.0;
           });
           return all;
         }()) {
      Index dst = i;
      dst[axis] = wrap(iv[k], as[axis]);
      want[flat(as, dst)] = vv[k];
      ++k;
    }
    expect_close(p, want, 1e-5, 1e-6, "axis " + std::to_string(axis));
    // Strided array, indices and values give the same result.
    auto ps = put_along_axis(transpose(transpose(a)),
                             transpose(transpose(array(iv.begin(), is, int64))),
                             transpose(transpose(array(vv.begin(), is))), axis);
    expect_close(ps, want, 1e-5, 1e-6, "strided axis " + std::to_string(axis));
  }
}

TEST(IndexingPutAlongAxis, LargeAgainstLoop) {
  // One outer row split into inner chunks over threads.
  const int n = 50, w = 10000, m = 80;
  auto iv = random_ints(static_cast<size_t>(m) * w, 0, n - 1, 5);
  auto vv = iota_vec(static_cast<int64_t>(m) * w, 1);
  auto a = iota({n, w});
  auto p = put_along_axis(a, array(iv.begin(), {m, w}, int32),
                          array(vv.begin(), {m, w}), 0);
  auto want = iota_vec(static_cast<int64_t>(n) * w);
  for (int j = 0; j < m; ++j) {
    for (int c = 0; c < w; ++c) {
      want[static_cast<int64_t>(iv[j * w + c]) * w + c] = vv[j * w + c];
    }
  }
  expect_close(p, want);
}

TEST(IndexingPutAlongAxis, ChainsAndDtypes) {
  // Intermediates without other users may be donated; same values.
  auto x = iota({2, 3});
  auto y = copy(x);
  for (int j = 0; j < 3; ++j) {
    y = put_along_axis(y, array({j}, {1, 1}), array(static_cast<float>(-j)), 1);
  }
  expect_close(y, {0, -1, -2, 0, -1, -2});
  expect_close(x, iota_vec(6));
  for (Dtype t : kDtypes) {
    auto a = iota({3}, t, 1);
    auto p = put_along_axis(a, array({2, 0}), array({0.0f, 5.0f}), 0);
    EXPECT_EQ(p.dtype(), t);
    expect_close(p, {as(t, 5), as(t, 2), 0}, 1e-5, 1e-6, dtype_name(t));
  }
  std::vector<complex64_t> cv = {{1, 1}, {2, 2}};
  std::vector<complex64_t> nv = {{0, -5}};
  auto c = put_along_axis(array(cv.begin(), {2}), array({1}),
                          array(nv.begin(), {1}), 0);
  auto got = to_vector<complex64_t>(c);
  EXPECT_EQ(got[0], complex64_t(1, 1));
  EXPECT_EQ(got[1], complex64_t(0, -5));
  for (Dtype t : kIndexDtypes) {
    auto p = put_along_axis(iota({3}), array({2}, t), array(-1.0f), 0);
    expect_close(p, {0, 1, -1}, 1e-5, 1e-6, dtype_name(t));
  }
}

TEST(IndexingPutAlongAxis, Errors) {
  auto a = iota({2, 3});
  expect_error<std::invalid_argument>(
      [&] {
        put_along_axis(a, array({0.5f}, {1, 1}), array(1.0f), 1);
      },
      "[put_along_axis] Indices must be of an integer type; got float32.");
  expect_error<std::invalid_argument>(
      [&] { put_along_axis(a, array({0}), array(1.0f), 1); },
      "[put_along_axis] Indices of shape (1) must have as many dimensions as "
      "the array of shape (2,3).");
  expect_error<std::invalid_argument>(
      [&] {
        put_along_axis(a, array({0}, {1, 1}), array(1.0f), -3);
      },
      "[put_along_axis] Invalid axis -3 for array with 2 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        put_along_axis(a, array({0, 1, 0}, {3, 1}), array(1.0f), 1);
      },
      "[put_along_axis] Indices of shape (3,1) cannot be broadcast to the "
      "array's shape (2,3) except along axis 1.");
  expect_error<std::invalid_argument>(
      [&] {
        put_along_axis(a, array({0, 1}, {2, 1}), array({1.0f, 2.0f, 3.0f}), 1);
      },
      "[put_along_axis] Values of shape (3) cannot be broadcast to the "
      "indices' shape (2,1).");
  auto bad = put_along_axis(a, array({0, -4}, {2, 1}), array(1.0f), 1);
  expect_error<std::out_of_range>(
      [&] { bad.eval(); },
      "[put_along_axis] Index -4 is out of bounds for axis 1 with size 3.");
  expect_close(put_along_axis(a, array({1}, {1, 1}), array(0.0f), 0),
               {0, 1, 2, 0, 0, 0});
}

// --- scatter_add_axis ---

TEST(IndexingScatterAddAxis, DuplicatesAccumulate) {
  auto a = iota({2, 3});
  auto p =
      scatter_add_axis(a, array({2, 2, 0, 1, 1, 1}, {2, 3}),
                       array({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3}), 1);
  expect_close(p, {3, 1, 2 + 3, 3, 4 + 15, 5});
  expect_close(a, iota_vec(6));  // untouched
  // Scalar values and indices broadcast over the columns; negative indices
  // along axis 0.
  auto q = scatter_add_axis(a, array({-1, -1}, {2, 1}), array(10.0f), 0);
  expect_close(q, {0, 1, 2, 23, 24, 25});
}

TEST(IndexingScatterAddAxis, AgainstLoop) {
  Shape as = {3, 4, 5};
  for (int axis = 0; axis < 3; ++axis) {
    Shape is = as;
    is[axis] = 7;
    auto iv = random_ints(shape_size(is), -as[axis], as[axis] - 1, axis + 41);
    auto vv = iota_vec(shape_size(is), 100);
    auto want = iota_vec(shape_size(as));
    int64_t k = 0;
    expected_by(is, [&](const Index& i) {
      Index dst = i;
      dst[axis] = wrap(iv[k], as[axis]);
      want[flat(as, dst)] += vv[k];
      ++k;
      return 0.0;
    });
    auto a = iota(as, float64);
    auto idx = array(iv.begin(), is, int64);
    auto vals = array(vv.begin(), is, float64);
    auto p = scatter_add_axis(a, idx, vals, axis);
    expect_close(p, want, 1e-12, 1e-12, "axis " + std::to_string(axis));
    auto ps =
        scatter_add_axis(transpose(transpose(a)), transpose(transpose(idx)),
                         transpose(transpose(vals)), axis);
    expect_close(ps, want, 1e-12, 1e-12,
                 "strided axis " + std::to_string(axis));
  }
}

TEST(IndexingScatterAddAxis, LargeAgainstLoop) {
  // Many duplicates per column, split over threads by chunks of columns.
  const int n = 20, w = 10000, m = 60;
  auto iv = random_ints(static_cast<size_t>(m) * w, 0, n - 1, 7);
  auto vv = random_ints(static_cast<size_t>(m) * w, -50, 50, 8);
  auto p = scatter_add_axis(zeros({n, w}, int32), array(iv.begin(), {m, w}),
                            array(vv.begin(), {m, w}), 0);
  std::vector<double> want(static_cast<size_t>(n) * w, 0);
  for (int j = 0; j < m; ++j) {
    for (int c = 0; c < w; ++c) {
      want[static_cast<size_t>(iv[j * w + c]) * w + c] += vv[j * w + c];
    }
  }
  EXPECT_EQ(p.dtype(), int32);
  expect_close(p, want, 0, 0);
}

TEST(IndexingScatterAddAxis, Dtypes) {
  for (Dtype t : kDtypes) {
    auto a = iota({3}, t, 1);
    auto p =
        scatter_add_axis(a, array({2, 0, 2}), array({1.0f, 5.0f, 0.0f}), 0);
    EXPECT_EQ(p.dtype(), t);
    // bool adds as logical or.
    std::vector<double> want = t == bool_ ? std::vector<double>{1, 1, 1}
                                          : std::vector<double>{6, 2, 4};
    expect_close(p, want, 1e-5, 1e-6, dtype_name(t));
  }
  // Half types accumulate in float, rounding after each addition.
  auto h = scatter_add_axis(zeros({1}, float16), array({0, 0, 0}),
                            array({2048.0f, 1.0f, 1.0f}), 0);
  expect_close(h, {2048});  // 2049 is not a float16
  std::vector<complex64_t> cv = {{1, 1}, {2, 2}};
  std::vector<complex64_t> nv = {{0, -5}, {3, 1}};
  auto c = scatter_add_axis(array(cv.begin(), {2}), array({1, 1}),
                            array(nv.begin(), {2}), 0);
  auto got = to_vector<complex64_t>(c);
  EXPECT_EQ(got[0], complex64_t(1, 1));
  EXPECT_EQ(got[1], complex64_t(5, -2));
  for (Dtype t : kIndexDtypes) {
    auto p = scatter_add_axis(iota({3}), array({2, 2}, t), array(-1.0f), 0);
    expect_close(p, {0, 1, 0}, 1e-5, 1e-6, dtype_name(t));
  }
}

TEST(IndexingScatterAddAxis, Errors) {
  auto a = iota({2, 3});
  expect_error<std::invalid_argument>(
      [&] {
        scatter_add_axis(a, array({0.5f}, {1, 1}), array(1.0f), 1);
      },
      "[scatter_add_axis] Indices must be of an integer type; got float32.");
  expect_error<std::invalid_argument>(
      [&] { scatter_add_axis(a, array({0}), array(1.0f), 1); },
      "[scatter_add_axis] Indices of shape (1) must have as many dimensions "
      "as the array of shape (2,3).");
  expect_error<std::invalid_argument>(
      [&] {
        scatter_add_axis(a, array({0}, {1, 1}), array(1.0f), 2);
      },
      "[scatter_add_axis] Invalid axis 2 for array with 2 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        scatter_add_axis(a, array({0, 1, 0}, {3, 1}), array(1.0f), 1);
      },
      "[scatter_add_axis] Indices of shape (3,1) cannot be broadcast to the "
      "array's shape (2,3) except along axis 1.");
  expect_error<std::invalid_argument>(
      [&] {
        scatter_add_axis(a, array({0, 1}, {2, 1}), array({1.0f, 2.0f, 3.0f}),
                         1);
      },
      "[scatter_add_axis] Values of shape (3) cannot be broadcast to the "
      "indices' shape (2,1).");
  auto bad = scatter_add_axis(a, array({0, 3}, {2, 1}), array(1.0f), 1);
  expect_error<std::out_of_range>(
      [&] { bad.eval(); },
      "[scatter_add_axis] Index 3 is out of bounds for axis 1 with size 3.");
}

// --- primitives ---

TEST(IndexingPrimitives, OutputShapesAndEquivalence) {
  auto a = iota({2, 5});
  auto g = take_along_axis(a, array({0, 1}, {2, 1}), 1);
  EXPECT_EQ(g.primitive().output_shapes(g.inputs())[0], g.shape());
  auto g2 = take_along_axis(a, array({3, 1}, {2, 1}), 1);
  EXPECT_TRUE(g.primitive().is_equivalent(g2.primitive()));
  auto g0 = take_along_axis(a, array({0}, {1, 1}), 0);
  EXPECT_FALSE(g.primitive().is_equivalent(g0.primitive()));
  auto p = put_along_axis(a, array({0}, {1, 1}), array(1.0f), 1);
  EXPECT_EQ(p.primitive().output_shapes(p.inputs())[0], p.shape());
  EXPECT_STREQ(g.primitive().name(), "GatherAxis");
  EXPECT_STREQ(p.primitive().name(), "ScatterAxis");
}
