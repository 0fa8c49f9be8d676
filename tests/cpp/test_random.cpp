#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

namespace {

using Key = std::pair<uint32_t, uint32_t>;

Key key_values(const array& k) {
  auto v = to_vector<uint32_t>(k);
  return {v[0], v[1]};
}

struct Stats {
  double mean, var, min, max;
};

Stats stats(const std::vector<double>& v) {
  double s = 0, mn = INFINITY, mx = -INFINITY;
  for (double x : v) {
    s += x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  double mean = s / v.size(), ss = 0;
  for (double x : v) {
    ss += (x - mean) * (x - mean);
  }
  return {mean, ss / v.size(), mn, mx};
}

}  // namespace

TEST(Random, ThreefryKnownAnswers) {
  // The Random123 known-answer vectors for threefry2x32 with 20 rounds.
  using random::threefry2x32;
  EXPECT_EQ(threefry2x32({0, 0}, {0, 0}), Key(0x6b200159u, 0x99ba4efeu));
  EXPECT_EQ(
      threefry2x32({0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
      Key(0x1cb996fcu, 0xbb002be7u));
  EXPECT_EQ(
      threefry2x32({0x13198a2eu, 0x03707344u}, {0x243f6a88u, 0x85a308d3u}),
      Key(0xc4923a9cu, 0x483df7a0u));
}

TEST(Random, Key) {
  auto k = random::key(0x123456789abcdef0ull);
  EXPECT_EQ(k.dtype(), uint32);
  EXPECT_EQ(k.shape(), Shape({2}));
  EXPECT_EQ(key_values(k), Key(0x12345678u, 0x9abcdef0u));
  EXPECT_EQ(key_values(random::key(7)), Key(0, 7));
}

// Word w of a key's n-word output in JAX's (MLX's) layout: pairs
// (i, h + o + i) of threefry counters, the middle word of an odd n from
// (h, 0).
uint32_t jax_word(Key k, uint32_t n, uint32_t w) {
  uint32_t h = n / 2, o = n % 2;
  if (o && w == h) {
    return random::threefry2x32(k, {h, 0}).first;
  }
  if (w < h) {
    return random::threefry2x32(k, {w, w + h + o}).first;
  }
  uint32_t i = w - h - o;
  return random::threefry2x32(k, {i, i + h + o}).second;
}

TEST(Random, BitsLayout) {
  Key k{0x01234567u, 0x89abcdefu};
  auto key = random::key(0x0123456789abcdefull);
  auto w = random::bits({2, 2}, 4, key);
  EXPECT_EQ(w.dtype(), uint32);
  EXPECT_EQ(to_vector<uint32_t>(w),
            std::vector<uint32_t>({jax_word(k, 4, 0), jax_word(k, 4, 1),
                                   jax_word(k, 4, 2), jax_word(k, 4, 3)}));
  // Narrow words cut the same stream of n = ceil(bytes / 4) words,
  // little-endian: 3 uint16 are 2 words.
  auto h = random::bits({3}, 2, key);
  EXPECT_EQ(h.dtype(), uint16);
  uint32_t h0 = jax_word(k, 2, 0), h1 = jax_word(k, 2, 1);
  EXPECT_EQ(to_vector<uint32_t>(h),
            std::vector<uint32_t>({h0 & 0xffff, h0 >> 16, h1 & 0xffff}));
  auto c = random::bits({5}, 1, key);
  EXPECT_EQ(c.dtype(), uint8);
  EXPECT_EQ(to_vector<uint32_t>(c),
            std::vector<uint32_t>({h0 & 0xff, (h0 >> 8) & 0xff,
                                   (h0 >> 16) & 0xff, h0 >> 24, h1 & 0xff}));
  // One word: the middle word of an odd count, counters (0, 0): for
  // key (0, 0), Random123's known answer 0x6b200159 (JAX's PRNGKey(0)).
  EXPECT_EQ(random::bits({}, 4, key).item<uint32_t>(), jax_word(k, 1, 0));
  EXPECT_EQ(random::bits({}, 4, random::key(0)).item<uint32_t>(),
            0x6b200159u);
  EXPECT_EQ(random::bits({0, 3}, 4, key).size(), 0u);
}

TEST(Random, BitsLargeDeterministic) {
  // Enough pairs to be split over threads: every word matches the
  // reference, whatever the split.
  auto key = random::key(99);
  Key k{0, 99};
  int n = (1 << 20) + 3;
  auto a = to_vector<uint32_t>(random::bits({n}, 4, key));
  auto b = to_vector<uint32_t>(random::bits({n}, 4, key));
  EXPECT_EQ(a, b);
  for (int i = 0; i < n; i += 997) {
    ASSERT_EQ(a[i], jax_word(k, n, i)) << i;
  }
  ASSERT_EQ(a[n / 2], jax_word(k, n, n / 2));
  ASSERT_EQ(a[n - 1], jax_word(k, n, n - 1));
  // Bytes: a stream of ceil(4001 / 4) = 1001 words cut into 1-byte words.
  auto c = to_vector<uint32_t>(random::bits({4 * 1000 + 1}, 1, key));
  for (int i = 0; i < 4001; ++i) {
    ASSERT_EQ(c[i], (jax_word(k, 1001, i / 4) >> (8 * (i % 4))) & 0xff) << i;
  }
}

TEST(Random, BitsBatchedKeys) {
  // The primitive takes a batch of keys (..., 2), here a transposed view:
  // each key's output equals bits() with that key alone.
  auto kv = to_vector<uint32_t>(random::split(random::key(5), 3));
  std::vector<uint32_t> kt(6);
  for (int i = 0; i < 3; ++i) {
    kt[i] = kv[2 * i];
    kt[3 + i] = kv[2 * i + 1];
  }
  auto keys = transpose(array(kt.begin(), {2, 3}));  // (3, 2), strides (1, 3)
  auto p = std::make_shared<random::RandomBits>(default_stream(Device::cpu),
                                                Shape{5}, 2);
  array out(Shape{3, 5}, uint16, p, {keys});
  EXPECT_EQ(p->output_shapes({keys}), std::vector<Shape>{Shape({3, 5})});
  auto got = to_vector<uint32_t>(out);
  for (int i = 0; i < 3; ++i) {
    auto single = to_vector<uint32_t>(
        random::bits({5}, 2, array({kv[2 * i], kv[2 * i + 1]})));
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(got[i * 5 + j], single[j]) << i << "," << j;
    }
  }
}

TEST(Random, Split) {
  auto key = random::key(42);
  Key k = key_values(key);
  auto keys = random::split(key, 4);
  EXPECT_EQ(keys.shape(), Shape({4, 2}));
  EXPECT_EQ(keys.dtype(), uint32);
  auto v = to_vector<uint32_t>(keys);
  std::set<Key> distinct;
  for (int i = 0; i < 4; ++i) {
    Key row{v[2 * i], v[2 * i + 1]};
    // bits({4, 2}): 8 words in JAX's layout.
    EXPECT_EQ(row, Key(jax_word(k, 8, 2 * i), jax_word(k, 8, 2 * i + 1)));
    distinct.insert(row);
  }
  distinct.insert(k);
  EXPECT_EQ(distinct.size(), 5u);
  // The pair is rows 0 and 1 of split(key, 2) (MLX).
  auto [k1, k2] = random::split(key);
  EXPECT_EQ(k1.shape(), Shape({2}));
  auto v2 = to_vector<uint32_t>(random::split(key, 2));
  EXPECT_EQ(key_values(k1), Key(v2[0], v2[1]));
  EXPECT_EQ(key_values(k2), Key(v2[2], v2[3]));
  EXPECT_EQ(random::split(key, 0).shape(), Shape({0, 2}));
  // Splitting is deterministic.
  EXPECT_EQ(to_vector<uint32_t>(random::split(key, 4)), v);

  expect_error<std::invalid_argument>(
      [&] { random::split(key, -1); },
      "[random.split] The number of keys must be non-negative; got -1.");
  expect_error<std::invalid_argument>(
      [] {
        random::split(array({1, 2}));
      },
      "[random.split] Expected a key of shape (2) and dtype uint32; got shape "
      "(2) and dtype int32.");
  expect_error<std::invalid_argument>(
      [] {
        random::split(array({1u, 2u, 3u}), 2);
      },
      "[random.split] Expected a key of shape (2) and dtype uint32; got shape "
      "(3) and dtype uint32.");
}

TEST(Random, BitsErrors) {
  expect_error<std::invalid_argument>(
      [] { random::bits({2}, 3, random::key(0)); },
      "[random.bits] The width must be 1, 2 or 4 bytes; got 3.");
  expect_error<std::invalid_argument>(
      [] {
        random::bits({2, -1}, 4, random::key(0));
      },
      "[random.bits] Negative dimensions are not allowed; got shape (2,-1).");
  expect_error<std::invalid_argument>(
      [] {
        random::bits({2}, 4, array({1.0f, 2.0f}));
      },
      "[random.bits] Expected a key of shape (2) and dtype uint32; got shape "
      "(2) and dtype float32.");
}

TEST(Random, DifferentKeysDiffer) {
  auto a = to_vector<uint32_t>(random::bits({64}, 4, random::key(1)));
  auto b = to_vector<uint32_t>(random::bits({64}, 4, random::key(2)));
  int same = 0;
  for (int i = 0; i < 64; ++i) {
    same += a[i] == b[i];
  }
  EXPECT_EQ(same, 0);
  auto u1 = to_vector<float>(random::uniform({16}, float32, random::key(1)));
  auto u1b = to_vector<float>(random::uniform({16}, float32, random::key(1)));
  auto u2 = to_vector<float>(random::uniform({16}, float32, random::key(2)));
  EXPECT_EQ(u1, u1b);
  EXPECT_NE(u1, u2);
}

TEST(Random, UniformUnitInterval) {
  int n = 1 << 20;
  auto u = random::uniform({n}, float32, random::key(3));
  EXPECT_EQ(u.dtype(), float32);
  EXPECT_EQ(u.shape(), Shape({n}));
  auto v = to_vector<double>(u);
  auto s = stats(v);
  EXPECT_GE(s.min, 0.0);
  EXPECT_LT(s.max, 1.0);
  // Mean 1/2 and variance 1/12, within ~5 standard errors.
  EXPECT_NEAR(s.mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(s.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
  // Uniform over the interval: each tenth holds about a tenth.
  std::vector<int> hist(10, 0);
  for (double x : v) {
    hist[static_cast<int>(x * 10)]++;
  }
  for (int h : hist) {
    EXPECT_NEAR(h, n / 10.0, 5 * std::sqrt(n * 0.1 * 0.9));
  }
  // Values are MLX's: a 32-bit word over 2^32 - 1, in float32.
  auto w = to_vector<uint32_t>(random::bits({n}, 4, random::key(3)));
  for (int i = 0; i < 1000; ++i) {
    float want = std::min(static_cast<float>(w[i]) / 4294967295.0f,
                          std::nextafter(1.0f, 0.0f));
    ASSERT_EQ(static_cast<float>(v[i]), want) << i;
  }
}

TEST(Random, UniformDtypes) {
  int n = 1 << 16;
  for (auto t : {float16, bfloat16, float64}) {
    auto u = random::uniform({n}, t, random::key(4));
    EXPECT_EQ(u.dtype(), t);
    auto s = stats(to_vector<double>(u));
    EXPECT_GE(s.min, 0.0) << dtype_name(t);
    EXPECT_LT(s.max, 1.0) << dtype_name(t);
    EXPECT_NEAR(s.mean, 0.5, 0.01) << dtype_name(t);
    EXPECT_NEAR(s.var, 1.0 / 12, 0.005) << dtype_name(t);
  }
  // float64 values use 53 random bits: on the 2^-53 grid, and finer than
  // 2^-32 for most of them.
  auto v = to_vector<double>(random::uniform({1000}, float64, random::key(8)));
  int fine = 0;
  for (double x : v) {
    ASSERT_EQ(std::ldexp(x, 53), std::floor(std::ldexp(x, 53)));
    fine += std::ldexp(x, 32) != std::floor(std::ldexp(x, 32));
  }
  EXPECT_GT(fine, 990);
}

TEST(Random, UniformBounds) {
  int n = 30000;
  array low({-2.0f, 0.0f, 10.0f});
  array high({-1.0f, 5.0f, 10.5f});
  auto u = random::uniform(low, high, {n, 3}, float32, random::key(5));
  EXPECT_EQ(u.shape(), Shape({n, 3}));
  auto v = to_vector<double>(u);
  double lo[3] = {-2, 0, 10}, hi[3] = {-1, 5, 10.5};
  for (int j = 0; j < 3; ++j) {
    std::vector<double> col;
    for (int i = 0; i < n; ++i) {
      col.push_back(v[i * 3 + j]);
    }
    auto s = stats(col);
    double w = hi[j] - lo[j];
    EXPECT_GE(s.min, lo[j]);
    EXPECT_LT(s.max, hi[j]);
    EXPECT_NEAR(s.mean, (lo[j] + hi[j]) / 2, 5 * w * std::sqrt(1.0 / 12 / n));
  }
  // Scalar bounds, other dtypes; the bounds are cast to the dtype.
  auto d = to_vector<double>(
      random::uniform(array(-3.0), array(3), {1000}, float64, random::key(6)));
  auto sd = stats(d);
  EXPECT_GE(sd.min, -3.0);
  EXPECT_LT(sd.max, 3.0);
  // lo == hi gives lo.
  expect_close(random::uniform(array(2.0f), array(2.0f), {4}), {2, 2, 2, 2});
}

TEST(Random, UniformNeverReturnsHigh) {
  // lo + (hi - lo) * u rounds up to hi for about half of these samples.
  int n = 1 << 16;
  auto a = to_vector<double>(random::uniform(
      array(16777215.0f), array(16777216.0f), {n}, float32, random::key(7)));
  for (double x : a) {
    ASSERT_EQ(x, 16777215.0);
  }
  auto b = to_vector<double>(random::uniform(
      array(-16777218.0f), array(-16777216.0f), {n}, float32, random::key(7)));
  for (double x : b) {
    ASSERT_EQ(x, -16777218.0);
  }
  // In float16, 1 + u rounds to 2 for the top values of u.
  auto c = to_vector<double>(
      random::uniform(array(1.0f), array(2.0f), {n}, float16, random::key(8)));
  for (double x : c) {
    ASSERT_GE(x, 1.0);
    ASSERT_LT(x, 2.0);
  }
  EXPECT_EQ(*std::max_element(c.begin(), c.end()), 2.0 - 1.0 / 1024);
  // A bound at zero, and a subnormal bound.
  auto d = to_vector<double>(random::uniform(array(-1e-45f), array(0.0f), {n},
                                             float32, random::key(9)));
  for (double x : d) {
    ASSERT_LT(x, 0.0);
  }
}

TEST(Random, UniformErrors) {
  expect_error<std::invalid_argument>(
      [] { random::uniform({2}, int32); },
      "[random.uniform] Only real floating point dtypes are supported; got "
      "int32.");
  expect_error<std::invalid_argument>(
      [] { random::uniform(array(0.0f), array(1.0f), {2}, complex64); },
      "[random.uniform] Only real floating point dtypes are supported; got "
      "complex64.");
  expect_error<std::invalid_argument>(
      [] {
        random::uniform(array({0.0f, 1.0f, 2.0f}), array(3.0f), {2});
      },
      "[random.uniform] Cannot generate values of shape (2) from low and high "
      "with shapes (3) and ().");
  expect_error<std::invalid_argument>(
      [] {
        random::uniform(array(0.0f), array({1.0f, 2.0f}, {2, 1}), {2});
      },
      "[random.uniform] Cannot generate values of shape (2) from low and high "
      "with shapes () and (2,1).");
  expect_error<std::invalid_argument>(
      [] { random::uniform({-2}); },
      "[random.uniform] Negative dimensions are not allowed; got shape (-2).");
  expect_error<std::invalid_argument>(
      [] {
        random::uniform({2}, float32, array({1u, 2u}, {1, 2}));
      },
      "[random.uniform] Expected a key of shape (2) and dtype uint32; got "
      "shape (1,2) and dtype uint32.");
}

TEST(Random, Normal) {
  int n = 1 << 20;
  auto z = random::normal({n}, float32, 0.0f, 1.0f, random::key(10));
  EXPECT_EQ(z.dtype(), float32);
  auto v = to_vector<double>(z);
  auto s = stats(v);
  EXPECT_TRUE(std::isfinite(s.min) && std::isfinite(s.max));
  EXPECT_NEAR(s.mean, 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(s.var), 1.0, 5 * std::sqrt(0.5 / n));
  // Shape of the distribution: P(|z| < 1) and the fourth moment.
  double inside = 0, m4 = 0;
  for (double x : v) {
    inside += std::abs(x) < 1;
    m4 += x * x * x * x;
  }
  EXPECT_NEAR(inside / n, 0.682689, 5 * std::sqrt(0.2166 / n));
  EXPECT_NEAR(m4 / n, 3.0, 5 * std::sqrt(96.0 / n));
  // The tails reach past 4 sigma but stay finite.
  EXPECT_GT(s.max, 4.0);
  EXPECT_LT(s.min, -4.0);

  // loc and scale.
  auto w = to_vector<double>(
      random::normal({n / 4}, float32, 3.0f, 0.5f, random::key(11)));
  auto sw = stats(w);
  EXPECT_NEAR(sw.mean, 3.0, 5 * 0.5 / std::sqrt(n / 4));
  EXPECT_NEAR(std::sqrt(sw.var), 0.5, 5 * 0.5 * std::sqrt(0.5 / (n / 4)));

  for (auto t : {float64, float16, bfloat16}) {
    auto x = random::normal({1 << 15}, t, 0.0f, 1.0f, random::key(12));
    EXPECT_EQ(x.dtype(), t);
    auto sx = stats(to_vector<double>(x));
    EXPECT_TRUE(std::isfinite(sx.min) && std::isfinite(sx.max));
    EXPECT_NEAR(sx.mean, 0.0, 0.03) << dtype_name(t);
    EXPECT_NEAR(std::sqrt(sx.var), 1.0, 0.03) << dtype_name(t);
  }

  expect_error<std::invalid_argument>(
      [] { random::normal({2}, int32); },
      "[random.normal] Only real floating point dtypes are supported; got "
      "int32.");
  expect_error<std::invalid_argument>(
      [] {
        random::normal({2}, float32, 0.0f, 1.0f, array({1, 2}));
      },
      "[random.normal] Expected a key of shape (2) and dtype uint32");
}

TEST(Random, Randint) {
  int n = 100000;
  auto r = random::randint(array(0), array(10), {n}, int32, random::key(13));
  EXPECT_EQ(r.dtype(), int32);
  EXPECT_EQ(r.shape(), Shape({n}));
  std::vector<int> count(10, 0);
  for (auto x : to_vector<int64_t>(r)) {
    ASSERT_GE(x, 0);
    ASSERT_LT(x, 10);
    count[x]++;
  }
  for (int c : count) {
    EXPECT_NEAR(c, n / 10.0, 5 * std::sqrt(n * 0.1 * 0.9));
  }
  // Negative bounds: every value, the lowest included, equally often.
  std::vector<int> neg(6, 0);
  for (auto x : to_vector<int64_t>(
           random::randint(array(-3), array(3), {n}, int64, random::key(14)))) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 3);
    neg[x + 3]++;
  }
  for (int c : neg) {
    EXPECT_NEAR(c, n / 6.0, 5 * std::sqrt(n / 6.0));
  }
  // Broadcast bounds and a narrow dtype.
  auto b = random::randint(array({0, 100}), array({2, 103}), {500, 2}, uint8,
                           random::key(15));
  EXPECT_EQ(b.dtype(), uint8);
  auto bv = to_vector<int>(b);
  std::set<int> seen0, seen1;
  for (int i = 0; i < 500; ++i) {
    seen0.insert(bv[2 * i]);
    seen1.insert(bv[2 * i + 1]);
  }
  EXPECT_EQ(seen0, std::set<int>({0, 1}));
  EXPECT_EQ(seen1, std::set<int>({100, 101, 102}));
  // A range wider than float32 can resolve.
  auto wide = to_vector<int64_t>(
      random::randint(array(int64_t{0}), array(int64_t{1} << 40), {1000}, int64,
                      random::key(16)));
  int odd = 0;
  for (auto x : wide) {
    ASSERT_GE(x, 0);
    ASSERT_LT(x, int64_t{1} << 40);
    odd += x & 1;
  }
  EXPECT_NEAR(odd, 500, 100);

  expect_error<std::invalid_argument>(
      [] { random::randint(array(0), array(5), {2}, float32); },
      "[random.randint] Only integer and bool dtypes are supported; got "
      "float32.");
  // bool draws from [low, high) and keeps nonzero (MLX).
  {
    auto b = random::randint(array(0), array(2), {2000}, bool_,
                             random::key(3));
    EXPECT_EQ(b.dtype(), bool_);
    EXPECT_TRUE(any(b).item<bool>());
    EXPECT_FALSE(all(b).item<bool>());
    EXPECT_FALSE(any(random::randint(array(0), array(1), {100}, bool_))
                     .item<bool>());
  }
  expect_error<std::invalid_argument>(
      [] {
        random::randint(array({0, 1}), array(5), {3});
      },
      "[random.randint] Cannot generate values of shape (3) from low and high "
      "with shapes (2) and ().");
}

TEST(Random, Bernoulli) {
  int n = 1 << 18;
  auto b = random::bernoulli(array(0.3f), {n}, random::key(17));
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_EQ(b.shape(), Shape({n}));
  double ones = 0;
  for (auto x : to_vector<int>(b)) {
    ones += x;
  }
  EXPECT_NEAR(ones / n, 0.3, 5 * std::sqrt(0.21 / n));

  // p broadcast over rows: 0 never, 1 always.
  auto c =
      random::bernoulli(array({0.0, 1.0, 0.5}), {1000, 3}, random::key(18));
  auto cv = to_vector<int>(c);
  double half = 0;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(cv[3 * i], 0);
    ASSERT_EQ(cv[3 * i + 1], 1);
    half += cv[3 * i + 2];
  }
  EXPECT_NEAR(half / 1000, 0.5, 5 * std::sqrt(0.25 / 1000));

  // The shape defaults to p's; with no p it is a fair coin.
  auto d = random::bernoulli(array({0.2f, 0.9f}, float16), random::key(19));
  EXPECT_EQ(d.shape(), Shape({2}));
  // (A bare array argument would be taken for p: pass the key as optional.)
  auto e = random::bernoulli(std::optional<array>(random::key(20)));
  EXPECT_EQ(e.shape(), Shape{});
  EXPECT_EQ(e.dtype(), bool_);
  double heads = 0;
  for (int i = 0; i < 400; ++i) {
    heads += random::bernoulli(std::optional<array>(random::key(100 + i)))
                 .item<bool>();
  }
  EXPECT_NEAR(heads / 400, 0.5, 5 * std::sqrt(0.25 / 400));

  expect_error<std::invalid_argument>(
      [] { random::bernoulli(array(1), Shape{2}); },
      "[random.bernoulli] p must have a real floating point dtype; got "
      "int32.");
  expect_error<std::invalid_argument>(
      [] {
        random::bernoulli(array({0.5f, 0.5f, 0.5f}), Shape{2});
      },
      "[random.bernoulli] p with shape (3) cannot be broadcast to shape (2).");
}

TEST(Random, GlobalSeed) {
  random::seed(42);
  auto a = to_vector<float>(random::uniform({100}));
  auto b = to_vector<float>(random::uniform({100}));
  random::seed(42);
  auto a2 = to_vector<float>(random::uniform({100}));
  auto b2 = to_vector<float>(random::uniform({100}));
  EXPECT_EQ(a, a2);
  EXPECT_EQ(b, b2);
  EXPECT_NE(a, b);

  // Without a key the global key is split: the second half is used, the
  // first becomes the new global key.
  random::seed(7);
  auto x = to_vector<float>(random::uniform({8}));
  auto y = to_vector<float>(random::normal({8}));
  auto [g1, used1] = random::split(random::key(7));
  auto used2 = random::split(g1).second;
  EXPECT_EQ(x, to_vector<float>(random::uniform({8}, float32, used1)));
  EXPECT_EQ(y, to_vector<float>(random::normal({8}, float32, 0, 1, used2)));

  // A call that fails validation leaves the global key alone.
  random::seed(3);
  EXPECT_THROW(random::uniform({2}, int32), std::invalid_argument);
  EXPECT_THROW(random::bernoulli(array(1), Shape{2}), std::invalid_argument);
  auto after = to_vector<float>(random::uniform({4}));
  random::seed(3);
  EXPECT_EQ(after, to_vector<float>(random::uniform({4})));
}

TEST(Random, GlobalKeyThreadSafe) {
  // Threads splitting the global key concurrently get exactly the keys a
  // single thread would, each once.
  constexpr int kThreads = 4, kCalls = 200;
  random::seed(5);
  std::vector<std::vector<array>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, t] {
      for (int i = 0; i < kCalls; ++i) {
        made[t].push_back(random::bits({2}));
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  std::multiset<Key> concurrent, sequential;
  for (auto& v : made) {
    for (auto& a : v) {
      concurrent.insert(key_values(a));
    }
  }
  random::seed(5);
  for (int i = 0; i < kThreads * kCalls; ++i) {
    sequential.insert(key_values(random::bits({2})));
  }
  EXPECT_EQ(concurrent, sequential);
  EXPECT_EQ(std::set<Key>(sequential.begin(), sequential.end()).size(),
            sequential.size());
}

TEST(Random, RandomBitsPrimitive) {
  auto a = random::bits({3}, 2, random::key(1));
  auto& p = static_cast<random::RandomBits&>(a.primitive());
  EXPECT_STREQ(p.name(), "RandomBits");
  EXPECT_EQ(p.shape(), Shape({3}));
  EXPECT_EQ(p.width(), 2);
  EXPECT_TRUE(
      p.is_equivalent(random::bits({3}, 2, random::key(2)).primitive()));
  EXPECT_FALSE(
      p.is_equivalent(random::bits({3}, 4, random::key(1)).primitive()));
  auto [k1, k2] = random::split(random::key(1));
  EXPECT_FALSE(array_equal(k1, k2).item<bool>());
}
