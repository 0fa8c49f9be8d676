// Shape ops: values against loops over indices, on strided inputs
// (transposed, reversed, broadcast), views that must share memory, and every
// error path.
#include <climits>
#include <complex>
#include <functional>
#include <numeric>
#include <random>

#include "fluxion/ops/common.h"
#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {


bool shares(const array& a, const array& b) {
  return a.data_shared_ptr() != nullptr &&
         a.data_shared_ptr() == b.data_shared_ptr();
}

const std::vector<Dtype> kDtypes = {bool_,   uint8,   int16,    int32,
                                    int64,   uint64,  float16,  bfloat16,
                                    float32, float64, complex64};

// Python's slice semantics, by filtering positions rather than by formula:
// the first position is the clamped start, then every |step|-th position
// that lies strictly before the stop.
std::vector<int> slice_positions(int n, int start, int stop, int step) {
  auto norm = [n](int64_t x) { return x < 0 ? x + n : x; };
  int64_t b = norm(start), e = norm(stop);
  std::vector<int> out;
  if (step > 0) {
    b = std::max<int64_t>(b, 0);
    for (int64_t i = 0; i < n; ++i) {
      if (i >= b && i < e && (i - b) % step == 0) {
        out.push_back(static_cast<int>(i));
      }
    }
  } else {
    b = std::min<int64_t>(b, n - 1);
    for (int64_t i = n - 1; i >= 0; --i) {
      if (i <= b && i > e && (b - i) % (-step) == 0) {
        out.push_back(static_cast<int>(i));
      }
    }
  }
  return out;
}

}  // namespace

// --- reshape, flatten, unflatten ---

TEST(ShapeReshape, ValuesAndInference) {
  auto a = iota({2, 3, 4});
  auto r = reshape(a, {4, -1});
  EXPECT_EQ(r.shape(), Shape({4, 6}));
  expect_close(r, iota_vec(24));
  EXPECT_EQ(reshape(a, {-1}).shape(), Shape({24}));
  EXPECT_EQ(reshape(a, {2, -1, 3}).shape(), Shape({2, 4, 3}));
  EXPECT_TRUE(reshape(a, {2, 3, 4}).is_same(a));
  auto s = reshape(array(5.0f), {1, 1});
  EXPECT_EQ(s.shape(), Shape({1, 1}));
  expect_close(s, {5});
  expect_close(reshape(iota({1, 1}), {}), {0});
  // Zero-size arrays.
  auto z = iota({0, 3});
  EXPECT_EQ(reshape(z, {3, 0, 2}).shape(), Shape({3, 0, 2}));
  EXPECT_EQ(reshape(z, {0, 1, 3}).size(), 0u);
  auto zr = reshape(transpose(z), {0});
  EXPECT_EQ(zr.shape(), Shape({0}));
  EXPECT_TRUE(to_vector<float>(zr).empty());
}

TEST(ShapeReshape, RowContiguousIsView) {
  auto a = iota({3, 4});
  auto r = reshape(a, {2, 6});
  r.eval();
  EXPECT_TRUE(shares(r, a));
  EXPECT_TRUE(r.flags().row_contiguous);
  EXPECT_EQ(r.data_size(), 12u);
}

TEST(ShapeReshape, TransposedSplitIsView) {
  // t[i, j] = a[j, i] with strides (1, 4): splitting the first axis works
  // without a copy.
  auto a = iota({3, 4});
  auto t = transpose(a);
  auto r = reshape(t, {2, 2, 3});
  r.eval();
  EXPECT_TRUE(shares(r, a));
  EXPECT_EQ(r.strides(), Strides({2, 1, 4}));
  expect_close(r, expected_by({2, 2, 3}, [](const Index& i) {
                 return (i[0] * 2 + i[1]) + 4.0 * i[2];
               }));
  // Adding unit axes anywhere is a view too.
  auto u = reshape(t, {1, 4, 1, 3, 1});
  u.eval();
  EXPECT_TRUE(shares(u, a));
  expect_close(u, to_vector<double>(t));
}

TEST(ShapeReshape, TransposedMergeCopies) {
  auto a = iota({3, 4});
  auto t = transpose(a);
  auto r = reshape(t, {12});
  r.eval();
  EXPECT_FALSE(shares(r, a));
  EXPECT_TRUE(r.flags().row_contiguous);
  expect_close(r, expected_by({12}, [](const Index& i) {
                 return (i[0] % 3) * 4.0 + i[0] / 3;
               }));
}

TEST(ShapeReshape, ReversedAndSlicedInputs) {
  // A reversed vector viewed as a matrix keeps negative strides.
  auto v = iota({6});
  auto rev = slice(v, {-1}, {INT_MIN}, {-1});
  auto m = reshape(rev, {2, 3});
  m.eval();
  EXPECT_TRUE(shares(m, v));
  EXPECT_EQ(m.strides(), Strides({-3, -1}));
  EXPECT_FALSE(m.flags().contiguous);
  expect_close(m, {5, 4, 3, 2, 1, 0});
  // Elementwise kernels must not take the flat path on it.
  expect_close(m + array(1.0f), {6, 5, 4, 3, 2, 1});
  expect_close(abs(m), {5, 4, 3, 2, 1, 0});
  expect_close(astype(m, int32), {5, 4, 3, 2, 1, 0});

  // Columns 1:3 of a 4x4 matrix: splitting rows is a view, merging copies.
  auto a = iota({4, 4});
  auto c = slice(a, {0, 1}, {4, 3});
  auto split_rows = reshape(c, {2, 2, 2});
  split_rows.eval();
  EXPECT_TRUE(shares(split_rows, a));
  auto merged = reshape(c, {8});
  merged.eval();
  EXPECT_FALSE(shares(merged, a));
  std::vector<double> want = {1, 2, 5, 6, 9, 10, 13, 14};
  expect_close(split_rows, want);
  expect_close(merged, want);
}

TEST(ShapeReshape, BroadcastInputs) {
  // (3,) broadcast to (4, 3): strides (0, 1).
  auto row = iota({3});
  auto b = broadcast_to(row, {4, 3});
  auto r = reshape(b, {2, 2, 3});
  r.eval();
  EXPECT_TRUE(shares(r, row));
  EXPECT_EQ(r.strides(), Strides({0, 0, 1}));
  expect_close(r, expected_by({2, 2, 3}, [](const Index& i) { return i[2]; }));
  // Merging the broadcast axis with a real one needs a copy.
  auto f = reshape(b, {12});
  f.eval();
  EXPECT_FALSE(shares(f, row));
  expect_close(f, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
  // (4, 1) broadcast to (4, 3): strides (1, 0); split the first axis.
  auto col = iota({4, 1});
  auto bc = broadcast_to(col, {4, 3});
  auto rc = reshape(bc, {2, 2, 3});
  rc.eval();
  EXPECT_TRUE(shares(rc, col));
  expect_close(rc, expected_by({2, 2, 3},
                               [](const Index& i) { return i[0] * 2 + i[1]; }));
  // Two broadcast axes merge freely.
  auto s = broadcast_to(array(7.0f), {3, 4});
  auto sf = reshape(s, {12});
  sf.eval();
  EXPECT_TRUE(shares(sf, s));
  EXPECT_EQ(sf.strides(), Strides({0}));
  EXPECT_EQ(sf.data_size(), 1u);
  expect_close(sf, std::vector<double>(12, 7));
  expect_close(sf * array(2.0f), std::vector<double>(12, 14));
}

TEST(ShapeReshape, Errors) {
  auto a = iota({2, 3});
  expect_error<std::invalid_argument>(
      [&] {
        reshape(a, {-1, -1});
      },
      "[reshape] Can only infer one dimension");
  expect_error<std::invalid_argument>(
      [&] {
        reshape(a, {-2, 3});
      },
      "[reshape] Invalid shape (-2,3)");
  expect_error<std::invalid_argument>(
      [&] {
        reshape(a, {4, -1});
      },
      "[reshape] Cannot infer the shape (4,-1)");
  expect_error<std::invalid_argument>(
      [&] {
        reshape(a, {0, -1});
      },
      "[reshape] Cannot infer the shape");
  expect_error<std::invalid_argument>(
      [&] {
        reshape(a, {4, 2});
      },
      "[reshape] Cannot reshape array of shape (2,3) (size 6) into shape "
      "(4,2).");
}

TEST(ShapeFlatten, Values) {
  auto a = iota({2, 3, 4});
  EXPECT_EQ(flatten(a).shape(), Shape({24}));
  EXPECT_EQ(flatten(a, 1, 2).shape(), Shape({2, 12}));
  EXPECT_EQ(flatten(a, 0, 1).shape(), Shape({6, 4}));
  EXPECT_EQ(flatten(a, -2, -1).shape(), Shape({2, 12}));
  EXPECT_EQ(flatten(a, 1, 1).shape(), Shape({2, 3, 4}));
  EXPECT_EQ(flatten(array(3)).shape(), Shape({1}));
  auto t = transpose(a, {2, 0, 1});  // (4, 2, 3)
  expect_close(flatten(t), expected_by({24}, [](const Index& i) {
                 int k = i[0] / 6, p = (i[0] / 3) % 2, q = i[0] % 3;
                 return p * 12.0 + q * 4 + k;
               }));
  expect_error<std::invalid_argument>(
      [&] { flatten(a, 2, 1); },
      "[flatten] start_axis 2 must not come after end_axis 1.");
  expect_error<std::invalid_argument>(
      [&] { flatten(a, 0, 3); },
      "[flatten] Invalid axis 3 for array with 3 dimensions.");
}

TEST(ShapeUnflatten, Values) {
  auto a = iota({2, 12});
  EXPECT_EQ(unflatten(a, 1, {3, 4}).shape(), Shape({2, 3, 4}));
  EXPECT_EQ(unflatten(a, -1, {-1, 2}).shape(), Shape({2, 6, 2}));
  EXPECT_EQ(unflatten(a, 0, {1, 2, 1}).shape(), Shape({1, 2, 1, 12}));
  expect_close(unflatten(a, 1, {3, 4}), iota_vec(24));
  expect_error<std::invalid_argument>([&] { unflatten(a, 1, {}); },
                                      "[unflatten] The shape must not be "
                                      "empty.");
  expect_error<std::invalid_argument>(
      [&] {
        unflatten(a, 1, {-1, -1});
      },
      "[unflatten] Can only infer one dimension");
  expect_error<std::invalid_argument>(
      [&] {
        unflatten(a, 1, {5, -1});
      },
      "[unflatten] Cannot unflatten axis 1 of size 12 into shape");
  expect_error<std::invalid_argument>(
      [&] {
        unflatten(a, 1, {3, 3});
      },
      "[unflatten] Cannot unflatten axis 1 of size 12 into shape (3,3).");
  expect_error<std::invalid_argument>([&] { unflatten(a, 2, {1}); },
                                  "[unflatten] Invalid axis 2");
}

// --- squeeze, expand_dims ---

TEST(ShapeSqueeze, ValuesViewsErrors) {
  auto a = iota({1, 3, 1, 2});
  auto s = squeeze(a);
  EXPECT_EQ(s.shape(), Shape({3, 2}));
  EXPECT_EQ(squeeze(a, 0).shape(), Shape({3, 1, 2}));
  EXPECT_EQ(squeeze(a, {-2, 0}).shape(), Shape({3, 2}));
  auto b = iota({2, 3});
  EXPECT_TRUE(squeeze(b).is_same(b));
  s.eval();
  EXPECT_TRUE(shares(s, a));
  expect_close(s, iota_vec(6));
  // On a transposed input.
  auto t = transpose(iota({2, 1, 3}), {2, 1, 0});  // (3, 1, 2)
  expect_close(squeeze(t, 1), expected_by({3, 2}, [](const Index& i) {
                 return i[1] * 3.0 + i[0];
               }));
  expect_error<std::invalid_argument>(
      [&] { squeeze(a, 1); },
      "[squeeze] Cannot squeeze axis 1 of size 3 in array of shape "
      "(1,3,1,2).");
  expect_error<std::invalid_argument>(
      [&] { squeeze(a, 4); },
      "[squeeze] Invalid axis 4 for array with 4 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        squeeze(a, {0, -4});
      },
      "[squeeze] Received duplicate axes");
}

TEST(ShapeExpandDims, ValuesViewsErrors) {
  auto a = iota({2, 3});
  EXPECT_EQ(expand_dims(a, 0).shape(), Shape({1, 2, 3}));
  EXPECT_EQ(expand_dims(a, -1).shape(), Shape({2, 3, 1}));
  EXPECT_EQ(expand_dims(a, {0, 2, 4}).shape(), Shape({1, 2, 1, 3, 1}));
  EXPECT_EQ(expand_dims(array(1), 0).shape(), Shape({1}));
  auto e = expand_dims(a, 1);
  e.eval();
  EXPECT_TRUE(shares(e, a));
  EXPECT_TRUE(e.flags().row_contiguous);
  expect_close(e, iota_vec(6));
  auto t = expand_dims(transpose(a), {0, 2});  // (1, 3, 1, 2)
  expect_close(t, {0, 3, 1, 4, 2, 5});
  expect_error<std::invalid_argument>(
      [&] { expand_dims(a, 3); },
      "[expand_dims] Invalid axis 3 for array with 3 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        expand_dims(a, {1, 1});
      },
      "[expand_dims] Received duplicate axes");
}

// --- transposes ---

TEST(ShapeTranspose, ValuesViewsErrors) {
  auto a = iota({2, 3, 4});
  auto t = transpose(a, {2, 0, 1});
  EXPECT_EQ(t.shape(), Shape({4, 2, 3}));
  expect_close(t, expected_by({4, 2, 3}, [](const Index& i) {
                 return i[1] * 12.0 + i[2] * 4 + i[0];
               }));
  t.eval();
  EXPECT_TRUE(shares(t, a));
  EXPECT_FALSE(t.flags().row_contiguous);
  EXPECT_TRUE(t.flags().contiguous);  // dense, in another order
  auto r = transpose(a);
  EXPECT_EQ(r.shape(), Shape({4, 3, 2}));
  r.eval();
  EXPECT_TRUE(r.flags().col_contiguous);
  expect_close(r, expected_by({4, 3, 2}, [](const Index& i) {
                 return i[2] * 12.0 + i[1] * 4 + i[0];
               }));
  EXPECT_TRUE(transpose(a, {0, 1, 2}).is_same(a));
  EXPECT_TRUE(transpose(a, {-3, -2, -1}).is_same(a));
  // Transposing a transpose.
  expect_close(transpose(t, {1, 2, 0}), iota_vec(24));
  expect_error<std::invalid_argument>(
      [&] {
        transpose(a, {0, 1});
      },
      "[transpose] Received 2 axes for array with 3 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        transpose(a, {0, 1, 1});
      },
      "[transpose] Repeated axes in (0,1,1).");
  expect_error<std::invalid_argument>(
      [&] {
        transpose(a, {0, 1, 3});
      },
      "[transpose] Invalid axis 3 for array with 3 dimensions.");
}

TEST(ShapeSwapaxesMoveaxis, Values) {
  auto a = iota({2, 3, 4});
  auto s = swapaxes(a, 0, -1);
  EXPECT_EQ(s.shape(), Shape({4, 3, 2}));
  expect_close(s, to_vector<double>(transpose(a)));
  EXPECT_TRUE(swapaxes(a, 1, 1).is_same(a));
  auto m = moveaxis(a, 0, 2);
  EXPECT_EQ(m.shape(), Shape({3, 4, 2}));
  expect_close(m, expected_by({3, 4, 2}, [](const Index& i) {
                 return i[2] * 12.0 + i[0] * 4 + i[1];
               }));
  auto m2 = moveaxis(a, -1, 0);
  EXPECT_EQ(m2.shape(), Shape({4, 2, 3}));
  expect_close(m2, to_vector<double>(transpose(a, {2, 0, 1})));
  m.eval();
  EXPECT_TRUE(shares(m, a));
  expect_error<std::invalid_argument>(
      [&] { swapaxes(a, 0, 3); },
      "[swapaxes] Invalid axis 3 for array with 3 dimensions.");
  expect_error<std::invalid_argument>(
      [&] { moveaxis(a, -4, 0); },
      "[moveaxis] Invalid axis -4 for array with 3 dimensions.");
  expect_error<std::invalid_argument>([&] { moveaxis(a, 0, 5); },
                                  "[moveaxis] Invalid axis 5");
}

// --- broadcasting ---

TEST(ShapeBroadcast, BroadcastTo) {
  auto a = iota({3, 1});
  auto b = broadcast_to(a, {2, 3, 4});
  EXPECT_EQ(b.shape(), Shape({2, 3, 4}));
  expect_close(b, expected_by({2, 3, 4}, [](const Index& i) { return i[1]; }));
  b.eval();
  EXPECT_TRUE(shares(b, a));
  EXPECT_FALSE(b.flags().contiguous);
  EXPECT_TRUE(broadcast_to(a, {3, 1}).is_same(a));
  // A zero-size broadcast.
  EXPECT_EQ(broadcast_to(a, {3, 0}).size(), 0u);
  // A broadcast of a transposed array.
  auto t = transpose(iota({2, 3}));  // (3, 2)
  expect_close(
      broadcast_to(t, {2, 3, 2}),
      expected_by({2, 3, 2}, [](const Index& i) { return i[2] * 3.0 + i[1]; }));
  expect_error<std::invalid_argument>(
      [&] {
        broadcast_to(a, {3, 2, 2});
      },
      "[broadcast_to] Cannot broadcast array of shape (3,1) to shape "
      "(3,2,2).");
  expect_error<std::invalid_argument>([&] { broadcast_to(a, {1}); },
                                      "[broadcast_to] Cannot broadcast");
}

TEST(ShapeBroadcast, BroadcastArrays) {
  auto a = iota({3, 1});
  auto b = iota({4}, float32, 10);
  auto c = array(5.0f);
  auto out = broadcast_arrays({a, b, c});
  ASSERT_EQ(out.size(), 3u);
  for (auto& o : out) {
    EXPECT_EQ(o.shape(), Shape({3, 4}));
  }
  expect_close(out[0],
               expected_by({3, 4}, [](const Index& i) { return i[0]; }));
  expect_close(out[1],
               expected_by({3, 4}, [](const Index& i) { return 10 + i[1]; }));
  expect_close(out[2], std::vector<double>(12, 5));
  out[2].eval();
  EXPECT_EQ(out[2].data_size(), 1u);
  expect_error<std::invalid_argument>(
      [&] {
        broadcast_arrays({iota({2, 3}), iota({4})});
      },
      "[broadcast_arrays] Shapes (2,3) and (4) cannot be broadcast.");
}

TEST(ShapeBroadcast, OverlappingViewIsNotContiguous) {
  // (2, 1) column of a (2, 3) matrix broadcast to (2, 2): strides (3, 0)
  // span 4 slots, as many as it has elements, without filling them.
  auto x = iota({2, 3});
  auto col = slice(x, {0, 0}, {2, 1});
  auto b = broadcast_to(col, {2, 2});
  b.eval();
  EXPECT_EQ(b.strides(), Strides({3, 0}));
  EXPECT_FALSE(b.flags().contiguous);
  EXPECT_NE(b.data_size(), b.size());
  expect_close(b, {0, 0, 3, 3});
  expect_close(negative(b), {0, 0, -3, -3});
  expect_close(astype(b, int32), {0, 0, 3, 3});
  expect_close(b + b, {0, 0, 6, 6});
}

// --- slice ---

TEST(ShapeSlice, Basic) {
  auto a = iota({4, 5});
  auto s = slice(a, {1, 0}, {3, 5});
  EXPECT_EQ(s.shape(), Shape({2, 5}));
  expect_close(s, iota_vec(10, 5));
  s.eval();
  EXPECT_TRUE(shares(s, a));
  EXPECT_TRUE(s.flags().row_contiguous);
  EXPECT_EQ(s.data_size(), 10u);

  auto c = slice(a, {0, 1}, {4, 4}, {2, 2});
  EXPECT_EQ(c.shape(), Shape({2, 2}));
  expect_close(c, {1, 3, 11, 13});
  c.eval();
  EXPECT_TRUE(shares(c, a));
  EXPECT_FALSE(c.flags().contiguous);
  EXPECT_FALSE(c.flags().row_contiguous);
  EXPECT_NE(c.data_size(), c.size());
  // Elementwise ops on the strided view.
  expect_close(c * array(2.0f), {2, 6, 22, 26});
  expect_close(c + slice(a, {0, 0}, {2, 2}), {1, 4, 16, 19});

  // Whole-array slices are the array itself.
  EXPECT_TRUE(slice(a, {0, 0}, {4, 5}).is_same(a));
  EXPECT_TRUE(slice(a, {0, -100}, {100, 5}).is_same(a));
  auto scalar = array(3.0f);
  EXPECT_TRUE(slice(scalar, {}, {}).is_same(scalar));
}

TEST(ShapeSlice, NegativeBoundsAndClamping) {
  auto a = iota({10});
  expect_close(slice(a, {-3}, {10}), {7, 8, 9});
  expect_close(slice(a, {2}, {-5}), {2, 3, 4});
  expect_close(slice(a, {-100}, {3}), {0, 1, 2});
  expect_close(slice(a, {8}, {100}), {8, 9});
  EXPECT_EQ(slice(a, {5}, {2}).size(), 0u);
  EXPECT_EQ(slice(a, {20}, {30}).size(), 0u);
  EXPECT_EQ(slice(a, {-20}, {-15}).size(), 0u);
  expect_close(slice(a, {1}, {10}, {3}), {1, 4, 7});
  expect_close(slice(a, {1}, {8}, {3}), {1, 4, 7});
  expect_close(slice(a, {1}, {7}, {3}), {1, 4});
}

TEST(ShapeSlice, NegativeStrides) {
  auto a = iota({10});
  auto r = slice(a, {-1}, {INT_MIN}, {-1});
  expect_close(r, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  r.eval();
  EXPECT_TRUE(shares(r, a));
  EXPECT_FALSE(r.flags().contiguous);
  EXPECT_EQ(r.strides(), Strides({-1}));
  expect_close(slice(a, {8}, {2}, {-2}), {8, 6, 4});
  expect_close(slice(a, {100}, {-100}, {-3}), {9, 6, 3, 0});
  expect_close(slice(a, {-2}, {-6}, {-1}), {8, 7, 6, 5});
  EXPECT_EQ(slice(a, {2}, {5}, {-1}).size(), 0u);
  expect_close(slice(a, {0}, {-11}, {-1}), {0});
  // Ops on reversed views must not take the flat path.
  expect_close(r + array(1.0f), {10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  expect_close(sqrt(square(r)), {9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  expect_close(r + a, std::vector<double>(10, 9));
  expect_close(sum(r), {45});
  // Reversing twice gives back a forward view.
  auto rr = slice(r, {-1}, {INT_MIN}, {-1});
  expect_close(rr, iota_vec(10));
  rr.eval();
  EXPECT_TRUE(shares(rr, a));
  EXPECT_TRUE(rr.flags().row_contiguous);
  // 2-D: rows reversed, every other column.
  auto m = iota({3, 4});
  auto s = slice(m, {2, 3}, {INT_MIN, INT_MIN}, {-1, -2});
  expect_close(s, {11, 9, 7, 5, 3, 1});
}

TEST(ShapeSlice, RandomAgainstReference) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> bound(-9, 9), step(-3, 3), dim(0, 5);
  for (int trial = 0; trial < 300; ++trial) {
    Shape shape = {dim(gen), dim(gen)};
    auto a = iota(shape);
    Shape start, stop, strides;
    for (int d = 0; d < 2; ++d) {
      int st = 0;
      while (st == 0) {
        st = step(gen);
      }
      start.push_back(bound(gen));
      stop.push_back(bound(gen));
      strides.push_back(st);
    }
    auto p0 = slice_positions(shape[0], start[0], stop[0], strides[0]);
    auto p1 = slice_positions(shape[1], start[1], stop[1], strides[1]);
    Shape want_shape = {static_cast<int>(p0.size()),
                        static_cast<int>(p1.size())};
    // Also slice a transposed copy of the layout, to vary the strides.
    auto t = transpose(transpose(a));
    for (auto& in : {a, t}) {
      auto s = slice(in, start, stop, strides);
      ASSERT_EQ(s.shape(), want_shape)
          << "shape " << shape_str(shape) << " start " << shape_str(start)
          << " stop " << shape_str(stop) << " strides " << shape_str(strides);
      expect_close(s, expected_by(want_shape, [&](const Index& i) {
                     return p0[i[0]] * shape[1] + p1[i[1]];
                   }));
    }
  }
}

TEST(ShapeSlice, StridedInputs) {
  // Slice of a transposed array.
  auto a = iota({3, 4});
  auto t = transpose(a);  // (4, 3)
  auto s = slice(t, {1, 0}, {4, 3}, {2, 1});
  expect_close(s, {1, 5, 9, 3, 7, 11});
  // A dense slice of a transposed array is contiguous (another order).
  auto d = slice(t, {0, 1}, {4, 3});  // columns 1..2 of t: rows 1..2 of a
  d.eval();
  EXPECT_TRUE(shares(d, a));
  EXPECT_TRUE(d.flags().contiguous);
  EXPECT_EQ(d.data_size(), 8u);
  expect_close(d, {4, 8, 5, 9, 6, 10, 7, 11});
  expect_close(d * array(1.0f), {4, 8, 5, 9, 6, 10, 7, 11});
  // Slice of a broadcast array.
  auto b = broadcast_to(iota({3}), {4, 3});
  auto sb = slice(b, {1, 2}, {3, -4}, {1, -1});
  expect_close(sb, {2, 1, 0, 2, 1, 0});
  auto one = slice(b, {0, 1}, {4, 2});  // one element repeated
  one.eval();
  EXPECT_EQ(one.data_size(), 1u);
  expect_close(one + iota({4, 1}), {1, 2, 3, 4});
  // Slice of a slice.
  auto ss = slice(slice(iota({20}), {2}, {18}, {2}), {-1}, {0}, {-3});
  expect_close(ss, {16, 10, 4});
}

TEST(ShapeSlice, EmptyAndZeroSize) {
  auto a = iota({3, 4});
  auto e = slice(a, {1, 5}, {3, 9});
  EXPECT_EQ(e.shape(), Shape({2, 0}));
  EXPECT_TRUE(to_vector<float>(e).empty());
  auto z = iota({0, 4});
  EXPECT_EQ(slice(z, {0, 1}, {0, 3}).shape(), Shape({0, 2}));
  // Elementwise ops on empty views of every kind work.
  EXPECT_EQ((e + array(1.0f)).size(), 0u);
  EXPECT_TRUE(to_vector<float>(e + array(1.0f)).empty());
  EXPECT_TRUE(to_vector<float>(abs(e)).empty());
  auto zt = transpose(z);
  EXPECT_TRUE(to_vector<float>(zt + array(1.0f)).empty());
  EXPECT_TRUE(to_vector<float>(negative(zt)).empty());
  auto zb = broadcast_to(iota({1, 0}), {3, 0});
  EXPECT_TRUE(to_vector<float>(zb + slice(a, {0, 0}, {3, 0})).empty());
  EXPECT_TRUE(to_vector<float>(zb * zb).empty());
}

TEST(ShapeSlice, Dtypes) {
  for (Dtype t : kDtypes) {
    auto a = iota({3, 4}, t);
    auto s = slice(a, {2, 3}, {INT_MIN, 0}, {-2, -2});
    expect_close(s, {as(t, 11), as(t, 9), as(t, 3), as(t, 1)}, 1e-5, 1e-6,
                 dtype_name(t));
    EXPECT_EQ(s.dtype(), t);
  }
  std::vector<complex64_t> cv = {{1, -1}, {2, -2}, {3, -3}, {4, -4}};
  array c(cv.begin(), {4});
  auto got = to_vector<complex64_t>(slice(c, {3}, {INT_MIN}, {-2}));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], complex64_t(4, -4));
  EXPECT_EQ(got[1], complex64_t(2, -2));
}

TEST(ShapeSlice, Errors) {
  auto a = iota({3, 4});
  expect_error<std::invalid_argument>(
      [&] { slice(a, {0}, {3}); },
      "[slice] Invalid number of start (1), stop (1) or stride (2) values "
      "for array of shape (3,4).");
  expect_error<std::invalid_argument>(
      [&] {
        slice(a, {0, 0}, {3, 4}, {1});
      },
      "[slice] Invalid number of start (2), stop (2) or stride (1)");
  expect_error<std::invalid_argument>(
      [&] {
        slice(a, {0, 0}, {3, 4}, {1, 0});
      },
      "[slice] Slice stride cannot be zero (axis 1).");
}

// --- slice_update ---

TEST(ShapeSliceUpdate, Basic) {
  auto src = iota({3, 4});
  auto upd = array({-1.0f, -2.0f, -3.0f, -4.0f}, {2, 2});
  auto out = slice_update(src, upd, {1, 1}, {3, 3});
  EXPECT_EQ(out.shape(), Shape({3, 4}));
  expect_close(out, {0, 1, 2, 3, 4, -1, -2, 7, 8, -3, -4, 11});
  // The source is untouched.
  expect_close(src, iota_vec(12));
  out.eval();
  EXPECT_FALSE(shares(out, src));
}

TEST(ShapeSliceUpdate, BroadcastCastAndStrides) {
  auto src = iota({3, 4}, int32);
  // A scalar float update, cast to int32, on every other column reversed.
  auto out = slice_update(src, array(9.7f), {0, -1}, {3, INT_MIN}, {1, -2});
  EXPECT_EQ(out.dtype(), int32);
  expect_close(out, {0, 9, 2, 9, 4, 9, 6, 9, 8, 9, 10, 9});
  // A row broadcast over the region, with negative row stride.
  auto row = array({100, 200});
  auto out2 = slice_update(src, row, {2, 0}, {INT_MIN, 4}, {-2, 2});
  expect_close(out2, {100, 1, 200, 3, 4, 5, 6, 7, 100, 9, 200, 11});
  // Update from a transposed array.
  auto u = transpose(array({1, 2, 3, 4, 5, 6}, {2, 3}));  // (3, 2)
  auto out3 = slice_update(src, u, {0, 2}, {3, 4});
  expect_close(out3, {0, 1, 1, 4, 4, 5, 2, 5, 8, 9, 3, 6});
  // Source given as a strided view: the output is a fresh dense array.
  auto t = transpose(iota({4, 3}, int32));  // (3, 4): t[i, j] = 3j + i
  auto out4 = slice_update(t, array(-1), {1, 1}, {2, 3});
  expect_close(out4, {0, 3, 6, 9, 1, -1, -1, 10, 2, 5, 8, 11});
  // Empty region: a copy of the source.
  expect_close(slice_update(src, array(5), {1, 1}, {1, 3}), iota_vec(12));
}

TEST(ShapeSliceUpdate, ChainedOnTemporaries) {
  // Each intermediate has no other user, so its buffer may be donated to
  // the next update; the values must come out the same either way.
  auto x = iota({8});
  auto y = copy(x);
  for (int i = 0; i < 8; i += 2) {
    y = slice_update(y, array(static_cast<float>(-i)), {i}, {i + 1});
  }
  expect_close(y, {0, 1, -2, 3, -4, 5, -6, 7});
  expect_close(x, iota_vec(8));
  // An update that reads the source itself.
  auto z = iota({6});
  auto w = slice_update(z, slice(z, {5}, {INT_MIN}, {-1}), {0}, {6});
  expect_close(w, {5, 4, 3, 2, 1, 0});
  expect_close(z, iota_vec(6));
}

TEST(ShapeSliceUpdate, Dtypes) {
  for (Dtype t : kDtypes) {
    auto src = iota({2, 3}, t, 2);
    auto out = slice_update(src, array(0.0f), {0, 1}, {2, 2});
    EXPECT_EQ(out.dtype(), t);
    expect_close(out, {as(t, 2), 0, as(t, 4), as(t, 5), 0, as(t, 7)}, 1e-5,
                 1e-6, dtype_name(t));
  }
}

TEST(ShapeSliceUpdate, Errors) {
  auto src = iota({3, 4});
  expect_error<std::invalid_argument>(
      [&] {
        slice_update(src, iota({3}), {0, 0}, {2, 2});
      },
      "[slice_update] Update of shape (3) cannot be broadcast to the slice's "
      "shape (2,2).");
  expect_error<std::invalid_argument>(
      [&] {
        slice_update(src, iota({1, 2, 2}), {0, 0}, {2, 2});
      },
      "[slice_update] Update of shape (1,2,2) cannot be broadcast");
  expect_error<std::invalid_argument>(
      [&] { slice_update(src, array(1.0f), {0}, {2}); },
      "[slice_update] Invalid number of start (1)");
  expect_error<std::invalid_argument>(
      [&] {
        slice_update(src, array(1.0f), {0, 0}, {2, 2}, {0, 1});
      },
      "[slice_update] Slice stride cannot be zero (axis 0).");
}

// --- concatenate, stack ---

TEST(ShapeConcatenate, Axes) {
  auto a = iota({2, 3});
  auto b = iota({1, 3}, float32, 10);
  auto c = concatenate({a, b}, 0);
  EXPECT_EQ(c.shape(), Shape({3, 3}));
  expect_close(c, {0, 1, 2, 3, 4, 5, 10, 11, 12});
  auto d = iota({2, 2}, float32, 20);
  auto e = concatenate({a, d, a}, -1);
  EXPECT_EQ(e.shape(), Shape({2, 8}));
  expect_close(e, {0, 1, 2, 20, 21, 0, 1, 2, 3, 4, 5, 22, 23, 3, 4, 5});
  // 3-D, middle axis, against a loop.
  auto x = iota({2, 2, 3});
  auto y = iota({2, 1, 3}, float32, 100);
  auto z = concatenate({x, y}, 1);
  EXPECT_EQ(z.shape(), Shape({2, 3, 3}));
  expect_close(z, expected_by({2, 3, 3}, [](const Index& i) {
                 return i[1] < 2 ? i[0] * 6.0 + i[1] * 3 + i[2]
                                 : 100.0 + i[0] * 3 + i[2];
               }));
  // A single array is returned as is.
  EXPECT_TRUE(concatenate({a}, 1).is_same(a));
  // Without an axis: flattened.
  auto f = concatenate({a, iota({2}, float32, 7)});
  expect_close(f, {0, 1, 2, 3, 4, 5, 7, 8});
}

TEST(ShapeConcatenate, StridedInputsAndEmpty) {
  auto a = iota({3, 2});
  auto t = transpose(iota({2, 3}, float32, 10));  // (3, 2)
  auto r = slice(iota({3, 2}, float32, 20), {2, 0}, {INT_MIN, 2}, {-1, 1});
  auto b = broadcast_to(array({-1.0f, -2.0f}), {3, 2});
  auto empty = iota({3, 0});
  auto c = concatenate({a, t, empty, r, b}, 1);
  EXPECT_EQ(c.shape(), Shape({3, 8}));
  expect_close(c, {0, 1, 10, 13, 24, 25, -1, -2,  //
                   2, 3, 11, 14, 22, 23, -1, -2,  //
                   4, 5, 12, 15, 20, 21, -1, -2});
  auto rows = concatenate({t, r}, 0);
  expect_close(rows, {10, 13, 11, 14, 12, 15, 24, 25, 22, 23, 20, 21});
  auto none = concatenate({iota({0, 2}), iota({0, 2})}, 0);
  EXPECT_EQ(none.shape(), Shape({0, 2}));
  EXPECT_TRUE(to_vector<float>(none).empty());
}

TEST(ShapeConcatenate, Promotion) {
  auto i = array({1, 2}, int32);
  auto f = array({0.5f});
  auto c = concatenate({i, f}, 0);
  EXPECT_EQ(c.dtype(), float32);
  expect_close(c, {1, 2, 0.5});
  auto b = array({true, false});
  auto l = array({int64_t(5)});
  auto bl = concatenate({b, l}, 0);
  EXPECT_EQ(bl.dtype(), int64);
  expect_close(bl, {1, 0, 5});
  auto h = iota({2}, float16);
  auto hc = concatenate({h, array({1.5f})}, 0);
  EXPECT_EQ(hc.dtype(), float32);
  auto u8 = array({uint8_t(200)});
  auto i8 = array({int8_t(-3)});
  auto ui = concatenate({u8, i8}, 0);
  EXPECT_EQ(ui.dtype(), int16);
  expect_close(ui, {200, -3});
  std::vector<complex64_t> cv = {{1, 2}};
  auto cc = concatenate({array(cv.begin(), {1}), array({3.0f})}, 0);
  EXPECT_EQ(cc.dtype(), complex64);
  auto got = to_vector<complex64_t>(cc);
  EXPECT_EQ(got[0], complex64_t(1, 2));
  EXPECT_EQ(got[1], complex64_t(3, 0));
}

TEST(ShapeConcatenate, Dtypes) {
  for (Dtype t : kDtypes) {
    auto a = iota({2, 2}, t);
    auto b = transpose(iota({2, 2}, t, 4));
    auto c = concatenate({a, b}, 1);
    EXPECT_EQ(c.dtype(), t);
    expect_close(c,
                 {as(t, 0), as(t, 1), as(t, 4), as(t, 6), as(t, 2), as(t, 3),
                  as(t, 5), as(t, 7)},
                 1e-5, 1e-6, dtype_name(t));
  }
}

TEST(ShapeConcatenate, Errors) {
  expect_error<std::invalid_argument>(
      [] { concatenate({}, 0); },
      "[concatenate] No arrays provided for concatenation.");
  expect_error<std::invalid_argument>(
      [] {
        concatenate({array(1.0f), array(2.0f)}, 0);
      },
      "[concatenate] Zero-dimensional arrays cannot be concatenated.");
  expect_error<std::invalid_argument>(
      [] {
        concatenate({iota({2, 3}), iota({2, 4})}, 0);
      },
      "[concatenate] All the input array dimensions must match exactly "
      "except for the concatenation axis 0; array 0 has shape (2,3) and "
      "array 1 has shape (2,4).");
  expect_error<std::invalid_argument>(
      [] {
        concatenate({iota({2, 3}), iota({6})}, 0);
      },
      "array 1 has shape (6).");
  expect_error<std::invalid_argument>(
      [] {
        concatenate({iota({2, 3}), iota({2, 3})}, 2);
      },
      "[concatenate] Invalid axis 2 for array with 2 dimensions.");
}

TEST(ShapeStack, Values) {
  auto a = iota({2, 3});
  auto b = iota({2, 3}, float32, 10);
  auto s0 = stack({a, b});
  EXPECT_EQ(s0.shape(), Shape({2, 2, 3}));
  expect_close(s0, {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  auto s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), Shape({2, 2, 3}));
  expect_close(s1, {0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15});
  auto s2 = stack({a, transpose(transpose(b)), a}, -1);
  EXPECT_EQ(s2.shape(), Shape({2, 3, 3}));
  expect_close(s2, expected_by({2, 3, 3}, [](const Index& i) {
                 double v = i[0] * 3 + i[1];
                 return i[2] == 1 ? v + 10 : v;
               }));
  auto sc = stack({array(1), array(2.5f)});
  EXPECT_EQ(sc.shape(), Shape({2}));
  EXPECT_EQ(sc.dtype(), float32);
  expect_close(sc, {1, 2.5});
  expect_error<std::invalid_argument>([] { stack({}); },
                                      "[stack] No arrays provided for "
                                      "stacking.");
  expect_error<std::invalid_argument>(
      [&] {
        stack({a, iota({3, 2})});
      },
      "[stack] All arrays must have the same shape; array 0 has shape (2,3) "
      "and array 1 has shape (3,2).");
  expect_error<std::invalid_argument>(
      [&] {
        stack({a, b}, 3);
      },
      "[stack] Invalid axis 3 for array with 3 dimensions.");
}

// --- split ---

TEST(ShapeSplit, EqualParts) {
  auto a = iota({6, 2});
  auto parts = split(a, 3);
  ASSERT_EQ(parts.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(parts[k].shape(), Shape({2, 2}));
    expect_close(parts[k], iota_vec(4, 4 * k));
    parts[k].eval();
    EXPECT_TRUE(shares(parts[k], a));
  }
  auto cols = split(a, 2, -1);
  ASSERT_EQ(cols.size(), 2u);
  expect_close(cols[0], {0, 2, 4, 6, 8, 10});
  expect_close(cols[1], {1, 3, 5, 7, 9, 11});
  EXPECT_EQ(split(a, 1, 1).size(), 1u);
  expect_error<std::invalid_argument>(
      [&] { split(a, 4); },
      "[split] Cannot split axis 0 of size 6 into 4 equal parts.");
  expect_error<std::invalid_argument>(
      [&] { split(a, 0, 1); },
      "[split] Cannot split axis 1 of size 2 into 0 equal parts.");
  expect_error<std::invalid_argument>(
      [&] { split(a, 2, 2); },
      "[split] Invalid axis 2 for array with 2 dimensions.");
}

TEST(ShapeSplit, AtIndices) {
  auto a = iota({10});
  auto p = split(a, Shape{2, 5, -2});
  ASSERT_EQ(p.size(), 4u);
  expect_close(p[0], {0, 1});
  expect_close(p[1], {2, 3, 4});
  expect_close(p[2], {5, 6, 7});
  expect_close(p[3], {8, 9});
  // Unsorted and out-of-range indices give empty parts, as in NumPy.
  auto q = split(a, Shape{6, 3, 20});
  ASSERT_EQ(q.size(), 4u);
  expect_close(q[0], iota_vec(6));
  EXPECT_EQ(q[1].size(), 0u);
  expect_close(q[2], {3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(q[3].size(), 0u);
  // Along an axis of a transposed array.
  auto t = transpose(iota({2, 4}));  // (4, 2)
  auto r = split(t, Shape{1}, 1);
  ASSERT_EQ(r.size(), 2u);
  expect_close(r[0], {0, 1, 2, 3});
  expect_close(r[1], {4, 5, 6, 7});
  auto none = split(a, Shape{});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0].is_same(a));
}

// --- pad ---

TEST(ShapePad, Constant) {
  auto a = array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  auto p = pad(a, 1);
  EXPECT_EQ(p.shape(), Shape({4, 4}));
  expect_close(p, {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0});
  auto q = pad(a, {{1, 0}, {0, 2}}, array(-1.0f));
  EXPECT_EQ(q.shape(), Shape({3, 4}));
  expect_close(q, {-1, -1, -1, -1, 1, 2, -1, -1, 3, 4, -1, -1});
  auto r = pad(a, std::make_pair(0, 1), array(7));
  expect_close(r, {1, 2, 7, 3, 4, 7, 7, 7, 7});
  // Selected axes, given in any order, with negative axes.
  auto x = iota({2, 3, 2});
  auto y = pad(x, {-1, 0}, {1, 0}, {0, 2}, array(9.0f));
  EXPECT_EQ(y.shape(), Shape({4, 3, 3}));
  expect_close(y, expected_by({4, 3, 3}, [](const Index& i) {
                 if (i[0] >= 2 || i[2] == 0) {
                   return 9.0;
                 }
                 return i[0] * 6.0 + i[1] * 2 + (i[2] - 1);
               }));
  // No padding at all: the array itself.
  EXPECT_TRUE(pad(a, 0).is_same(a));
  // The pad value is cast to the array's type.
  auto ia = array({1, 2}, int32);
  auto ip = pad(ia, 1, array(2.9f));
  EXPECT_EQ(ip.dtype(), int32);
  expect_close(ip, {2, 1, 2, 2});
}

TEST(ShapePad, StridedAndEmptyInputs) {
  auto t = transpose(iota({2, 3}));  // (3, 2)
  auto p = pad(t, {{0, 1}, {1, 0}}, array(-1.0f));
  expect_close(p, {-1, 0, 3, -1, 1, 4, -1, 2, 5, -1, -1, -1});
  auto r = slice(iota({5}), {-1}, {INT_MIN}, {-2});  // 4, 2, 0
  expect_close(pad(r, 2), {0, 0, 4, 2, 0, 0, 0});
  auto b = broadcast_to(array(3.0f), {2, 2});
  expect_close(pad(b, {{1, 0}, {0, 0}}), {0, 0, 3, 3, 3, 3});
  auto e = iota({0, 2});
  auto pe = pad(e, {{1, 1}, {0, 1}}, array(5.0f));
  EXPECT_EQ(pe.shape(), Shape({2, 3}));
  expect_close(pe, std::vector<double>(6, 5));
}

TEST(ShapePad, Dtypes) {
  for (Dtype t : kDtypes) {
    auto a = iota({2}, t, 1);
    auto p = pad(a, {{1, 2}}, array(3));
    EXPECT_EQ(p.dtype(), t);
    expect_close(p, {as(t, 3), 1, as(t, 2), as(t, 3), as(t, 3)}, 1e-5, 1e-6,
                 dtype_name(t));
  }
  std::vector<complex64_t> cv = {{1, 1}};
  auto c = pad(array(cv.begin(), {1}), 1, array(complex64_t(0, 2)));
  auto got = to_vector<complex64_t>(c);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], complex64_t(0, 2));
  EXPECT_EQ(got[1], complex64_t(1, 1));
  EXPECT_EQ(got[2], complex64_t(0, 2));
}

TEST(ShapePad, Edge) {
  auto a = array({1, 2, 3, 4}, {2, 2});
  auto p = pad(a, {{1, 2}, {0, 1}}, array(0), "edge");
  EXPECT_EQ(p.shape(), Shape({5, 3}));
  expect_close(p, {1, 2, 2, 1, 2, 2, 3, 4, 4, 3, 4, 4, 3, 4, 4});
  auto r = slice(iota({4}), {-1}, {INT_MIN}, {-1});
  expect_close(pad(r, 2, array(0), "edge"), {3, 3, 3, 2, 1, 0, 0, 0});
  EXPECT_TRUE(pad(a, 0, array(0), "edge").is_same(a));
}

TEST(ShapePad, Errors) {
  auto a = iota({2, 2});
  expect_error<std::invalid_argument>(
      [&] { pad(a, 1, array(0), "wrap"); },
      "[pad] Invalid padding mode (wrap) passed to pad");
  expect_error<std::invalid_argument>(
      [&] { pad(a, -1); },
      "[pad] Padding widths must be non-negative; got (-1, -1) for axis 0.");
  expect_error<std::invalid_argument>(
      [&] {
        pad(a, {{0, 0}, {1, -2}});
      },
      "[pad] Padding widths must be non-negative; got (1, -2) for axis 1.");
  expect_error<std::invalid_argument>(
      [&] {
        pad(a, 1, array({1.0f, 2.0f}));
      },
      "[pad] The padding value must be a scalar; got an array of shape (2).");
  expect_error<std::invalid_argument>(
      [&] {
        pad(a, {{1, 1}});
      },
      "[pad] Expected one (low, high) pair per dimension (2); got 1.");
  expect_error<std::invalid_argument>(
      [&] {
        pad(a, std::vector<int>{0, 1}, Shape{1}, Shape{1, 1});
      },
      "[pad] Invalid number of padding sizes: 1 low and 2 high for 2 axes.");
  expect_error<std::invalid_argument>(
      [&] {
        pad(a, std::vector<int>{0, -2}, Shape{1, 1}, Shape{1, 1});
      },
      "[pad] Received duplicate axes");
  expect_error<std::invalid_argument>(
      [&] { pad(a, std::vector<int>{2}, Shape{1}, Shape{1}); },
      "[pad] Invalid axis 2 for array with 2 dimensions.");
  expect_error<std::invalid_argument>(
      [&] {
        pad(iota({0, 2}), 1, array(0), "edge");
      },
      "[pad] Cannot pad the empty axis 0 in 'edge' mode.");
}

// --- repeat, tile, atleast_nd ---

TEST(ShapeRepeat, Values) {
  auto a = array({1, 2, 3, 4}, {2, 2});
  auto r0 = repeat(a, 2, 0);
  EXPECT_EQ(r0.shape(), Shape({4, 2}));
  expect_close(r0, {1, 2, 1, 2, 3, 4, 3, 4});
  auto r1 = repeat(a, 3, -1);
  EXPECT_EQ(r1.shape(), Shape({2, 6}));
  expect_close(r1, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
  auto rf = repeat(a, 2);
  EXPECT_EQ(rf.shape(), Shape({8}));
  expect_close(rf, {1, 1, 2, 2, 3, 3, 4, 4});
  EXPECT_EQ(repeat(a, 0, 1).shape(), Shape({2, 0}));
  EXPECT_TRUE(repeat(a, 1, 0).is_same(a));
  auto t = repeat(transpose(a), 2, 1);
  expect_close(t, {1, 1, 3, 3, 2, 2, 4, 4});
  auto s = repeat(array(5.0f), 3);
  EXPECT_EQ(s.shape(), Shape({3}));
  expect_close(s, {5, 5, 5});
  auto b = repeat(array({true, false}), 2);
  EXPECT_EQ(b.dtype(), bool_);
  expect_close(b, {1, 1, 0, 0});
  expect_error<std::invalid_argument>(
      [&] { repeat(a, -1, 0); },
      "[repeat] The number of repeats cannot be negative; got -1.");
  expect_error<std::invalid_argument>(
      [&] { repeat(a, 2, 2); },
      "[repeat] Invalid axis 2 for array with 2 dimensions.");
}

TEST(ShapeTile, Values) {
  auto v = array({1, 2});
  auto t1 = tile(v, {2});
  expect_close(t1, {1, 2, 1, 2});
  auto t2 = tile(v, {2, 2});
  EXPECT_EQ(t2.shape(), Shape({2, 4}));
  expect_close(t2, {1, 2, 1, 2, 1, 2, 1, 2});
  auto m = array({1, 2, 3, 4}, {2, 2});
  auto t3 = tile(m, {2});
  EXPECT_EQ(t3.shape(), Shape({2, 4}));
  expect_close(t3, {1, 2, 1, 2, 3, 4, 3, 4});
  auto t4 = tile(m, {2, 1});
  expect_close(t4, {1, 2, 3, 4, 1, 2, 3, 4});
  auto t5 = tile(m, {1, 1, 1});
  EXPECT_EQ(t5.shape(), Shape({1, 2, 2}));
  expect_close(t5, {1, 2, 3, 4});
  EXPECT_EQ(tile(m, {0, 2}).shape(), Shape({0, 4}));
  EXPECT_EQ(tile(m, {}).shape(), Shape({2, 2}));
  auto x = iota({2, 3});
  auto tx = tile(transpose(x), {2, 3});  // (6, 6)
  expect_close(tx, expected_by({6, 6}, [](const Index& i) {
                 int r = i[0] % 3, c = i[1] % 2;
                 return c * 3.0 + r;
               }));
  auto s = tile(array(7.0f), {3});
  EXPECT_EQ(s.shape(), Shape({3}));
  expect_error<std::invalid_argument>(
      [&] {
        tile(m, {2, -1});
      },
      "[tile] Repetitions must be non-negative; got (2,-1).");
}

TEST(ShapeAtleast, Shapes) {
  auto s = array(1.0f);
  auto v = iota({3});
  auto m = iota({2, 3});
  auto c = iota({2, 3, 4});
  EXPECT_EQ(atleast_1d(s).shape(), Shape({1}));
  EXPECT_TRUE(atleast_1d(v).is_same(v));
  EXPECT_EQ(atleast_2d(s).shape(), Shape({1, 1}));
  EXPECT_EQ(atleast_2d(v).shape(), Shape({1, 3}));
  EXPECT_TRUE(atleast_2d(m).is_same(m));
  EXPECT_EQ(atleast_3d(s).shape(), Shape({1, 1, 1}));
  EXPECT_EQ(atleast_3d(v).shape(), Shape({1, 3, 1}));
  EXPECT_EQ(atleast_3d(m).shape(), Shape({2, 3, 1}));
  EXPECT_TRUE(atleast_3d(c).is_same(c));
  expect_close(atleast_3d(v), {0, 1, 2});
  auto a3 = atleast_3d(m);
  a3.eval();
  EXPECT_TRUE(shares(a3, m));
}

// --- output_shapes and is_equivalent agree with the ops ---

TEST(ShapePrimitives, OutputShapesAndEquivalence) {
  auto a = iota({5, 6});
  auto s1 = slice(a, {-1, 100}, {INT_MIN, -100}, {-2, -3});
  auto s2 = slice(a, {4, 5}, {-6, -7}, {-2, -3});
  EXPECT_EQ(s1.primitive().output_shapes(s1.inputs())[0], s1.shape());
  EXPECT_TRUE(s1.primitive().is_equivalent(s2.primitive()));
  auto s3 = slice(a, {0, 0}, {5, 6}, {2, 1});
  EXPECT_FALSE(s1.primitive().is_equivalent(s3.primitive()));
  auto c = concatenate({a, a, a}, 1);
  EXPECT_EQ(c.primitive().output_shapes(c.inputs())[0], c.shape());
  auto p = pad(a, {{1, 2}, {3, 4}});
  EXPECT_EQ(p.primitive().output_shapes(p.inputs())[0], p.shape());
  EXPECT_FALSE(
      p.primitive().is_equivalent(pad(a, {{1, 2}, {3, 5}}).primitive()));
  auto u = slice_update(a, array(1.0f), {0, 0}, {2, 2});
  EXPECT_EQ(u.primitive().output_shapes(u.inputs())[0], u.shape());
}
