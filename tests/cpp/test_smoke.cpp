#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

TEST(Smoke, AddAndSum) {
  array a({1.0f, 2.0f, 3.0f});
  array b({10.0f, 20.0f, 30.0f});
  auto c = a + b;
  EXPECT_EQ(c.dtype(), float32);
  expect_close(c, {11, 22, 33});
  EXPECT_FLOAT_EQ(sum(c).item<float>(), 66.0f);
}

TEST(Smoke, BroadcastAndTranspose) {
  array a({1, 2, 3, 4, 5, 6}, {2, 3});
  auto t = transpose(a);
  expect_close(t, {1, 4, 2, 5, 3, 6});
  auto b = a + array({10, 20, 30});
  expect_close(b, {11, 22, 33, 14, 25, 36});
  expect_close(sum(a, 0), {5, 7, 9});
  expect_close(sum(a, 1), {6, 15});
  expect_close(sum(t, 1), {5, 7, 9});
}
