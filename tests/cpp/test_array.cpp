#include <atomic>

#include "test_utils.h"
#include "fluxion/eager.h"

using namespace fluxion;
using namespace fluxion::test;

TEST(Array, Scalars) {
  array a(3.5f);
  EXPECT_EQ(a.ndim(), 0);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.item<float>(), 3.5f);
  EXPECT_EQ(a.item<int>(), 3);
  array b(true);
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_TRUE(b.item<bool>());
  array c(7, int64);
  EXPECT_EQ(c.dtype(), int64);
  EXPECT_EQ(c.item<int64_t>(), 7);
  array z(complex64_t(1.0f, -2.0f));
  EXPECT_EQ(z.dtype(), complex64);
  EXPECT_EQ(z.item<complex64_t>(), complex64_t(1.0f, -2.0f));
  array h(1.5f, float16);
  EXPECT_EQ(h.nbytes(), 2u);
  EXPECT_EQ(h.item<float>(), 1.5f);
}

TEST(Array, FromListsAndShapes) {
  array a({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.shape(), Shape({2, 3}));
  EXPECT_EQ(a.shape(-1), 3);
  EXPECT_EQ(a.strides(), Strides({3, 1}));
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_TRUE(a.flags().row_contiguous);
  EXPECT_EQ(a.data<int>()[4], 5);
  array b({1.0, 2.0}, float32);  // converted on construction
  EXPECT_EQ(b.dtype(), float32);
  EXPECT_EQ(b.data<float>()[1], 2.0f);
  std::vector<int16_t> v = {4, 5, 6};
  array c(v.begin(), {3});
  EXPECT_EQ(c.dtype(), int16);
  EXPECT_EQ(to_vector<int>(c), std::vector<int>({4, 5, 6}));
  array e(std::initializer_list<float>{}, {0, 3});
  EXPECT_EQ(e.size(), 0u);
}

TEST(Array, Errors) {
  expect_error<std::invalid_argument>(
      [] { array({1, 2, 3}, {2, 2}); }, "[array] Data size (3)");
  expect_error<std::invalid_argument>(
      [] { array(std::initializer_list<int>{}, {-1}); },
      "[array] Negative dimension -1");
  array a({1, 2, 3});
  expect_error<std::out_of_range>([&] { a.shape(3); },
                                  "[array::shape] Axis 3 is out of bounds");
  expect_error<std::invalid_argument>([&] { a.item<int>(); },
                                      "[item] Only one-element arrays");
}

TEST(Array, ExternalBufferDeleter) {
  static std::atomic<int> freed{0};
  freed = 0;
  {
    float* p = new float[4]{1, 2, 3, 4};
    array a(p, {2, 2}, float32, [](void* q) {
      delete[] static_cast<float*>(q);
      freed++;
    });
    auto b = a * 2.0f;
    expect_close(b, {2, 4, 6, 8});
    EXPECT_EQ(freed.load(), 0);
  }
  EXPECT_EQ(freed.load(), 1);
}

TEST(Array, LazinessAndDetach) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  array a({1.0f, 2.0f});
  auto b = exp(a);
  auto c = b + a;
  EXPECT_EQ(c.status(), array::Status::unscheduled);
  EXPECT_TRUE(c.has_primitive());
  EXPECT_EQ(c.inputs().size(), 2u);
  c.eval();
  EXPECT_NE(c.status(), array::Status::unscheduled);
  // Detached after eval: the graph behind c can be freed.
  EXPECT_FALSE(c.has_primitive());
  EXPECT_TRUE(c.inputs().empty());
  expect_close(c, {1 + std::exp(1.0), 2 + std::exp(2.0)});
  // b was never evaluated on its own but is still usable.
  expect_close(b, {std::exp(1.0), std::exp(2.0)});
}

// One output of a group whose other outputs have no handle outside the
// group (as after a GPU eval, which keeps no copies of the outputs):
// detaching it must not free a sibling while its list is being cleared.
TEST(Array, DetachWhenOnlyOneOutputOfAGroupIsHeld) {
  fluxion::detail::EagerOff lazy_graphs;
  array x({5.0f});
  for (int n : {2, 3}) {
    std::vector<array> outs{x + 1.0f, x * 2.0f, x - 1.0f};
    outs.erase(outs.begin() + n, outs.end());
    array first = depends(outs, {x})[0];
    first.detach();
    EXPECT_FALSE(first.has_primitive());
    EXPECT_TRUE(first.siblings().empty());
    EXPECT_TRUE(first.inputs().empty());
  }
  // Evaluated, the held output is still right.
  array y = depends({x + 1.0f, x * 2.0f}, {x})[1];
  EXPECT_EQ(y.item<float>(), 10.0f);
}

TEST(Array, DeepGraphsDoNotOverflowTheStack) {
  // Graphs of computed arrays, kept lazy (fluxion/eager.h).
  fluxion::detail::EagerOff lazy_graphs;
  array a({1.0f});
  {
    array x = a;
    for (int i = 0; i < 200000; ++i) {
      x = x + 1.0f;
    }
    // Destroyed without evaluation: must not recurse 200k deep.
  }
  array x = a;
  for (int i = 0; i < 200000; ++i) {
    x = x + 1.0f;
  }
  EXPECT_EQ(x.item<float>(), 200001.0f);
}
