#include <cmath>
#include <limits>

#include "test_utils.h"

using namespace fluxion;
using namespace fluxion::test;

TEST(Dtype, SizesAndNames) {
  EXPECT_EQ(bool_.size, 1);
  EXPECT_EQ(int16.size, 2);
  EXPECT_EQ(uint64.size, 8);
  EXPECT_EQ(bfloat16.size, 2);
  EXPECT_EQ(complex64.size, 8);
  EXPECT_STREQ(dtype_name(bfloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(bool_), "bool");
  EXPECT_EQ(dtype_of<float16_t>, float16);
  EXPECT_EQ(dtype_of<long long>, int64);
}

TEST(Dtype, PromotionTable) {
  // Spot checks of MLX's table, including its choices that differ from
  // NumPy (uint64 with a signed int gives float32; f16 with bf16 gives f32).
  EXPECT_EQ(promote_types(bool_, int8), int8);
  EXPECT_EQ(promote_types(uint8, int8), int16);
  EXPECT_EQ(promote_types(uint16, int16), int32);
  EXPECT_EQ(promote_types(uint32, int32), int64);
  EXPECT_EQ(promote_types(uint64, int64), float32);
  EXPECT_EQ(promote_types(int64, float16), float16);
  EXPECT_EQ(promote_types(float16, bfloat16), float32);
  EXPECT_EQ(promote_types(bfloat16, int32), bfloat16);
  EXPECT_EQ(promote_types(float32, float64), float64);
  EXPECT_EQ(promote_types(float64, complex64), complex64);
  // The table is symmetric and idempotent.
  const Dtype all[] = {bool_,  uint8,   uint16,  uint32,  uint64,
                       int8,   int16,   int32,   int64,   float16,
                       float32, float64, bfloat16, complex64};
  for (auto a : all) {
    EXPECT_EQ(promote_types(a, a), a);
    for (auto b : all) {
      EXPECT_EQ(promote_types(a, b), promote_types(b, a)) << a << " " << b;
    }
  }
}

TEST(Dtype, WeakScalars) {
  EXPECT_EQ(promote_with_scalar(int8, int32), int8);
  EXPECT_EQ(promote_with_scalar(float16, float32), float16);
  EXPECT_EQ(promote_with_scalar(int32, float32), float32);
  EXPECT_EQ(promote_with_scalar(bool_, int32), int32);
  EXPECT_EQ(promote_with_scalar(uint8, bool_), uint8);
  EXPECT_EQ(promote_with_scalar(float32, complex64), complex64);
  array x({1, 2}, int8);
  EXPECT_EQ((x * 2).dtype(), int8);
  EXPECT_EQ((x * 2.5).dtype(), float32);
  array h({1.0f, 2.0f}, float16);
  EXPECT_EQ((h + 1.0).dtype(), float16);
  EXPECT_EQ((2 * h).dtype(), float16);
}

TEST(Dtype, Categories) {
  EXPECT_TRUE(issubdtype(float16, DtypeCategory::floating));
  EXPECT_TRUE(issubdtype(bfloat16, DtypeCategory::inexact));
  EXPECT_TRUE(issubdtype(complex64, DtypeCategory::complexfloating));
  EXPECT_TRUE(issubdtype(uint8, DtypeCategory::integer));
  EXPECT_FALSE(issubdtype(uint8, DtypeCategory::signedinteger));
  EXPECT_TRUE(issubdtype(int8, DtypeCategory::number));
  EXPECT_FALSE(issubdtype(bool_, DtypeCategory::number));
  EXPECT_TRUE(issubdtype(DtypeCategory::floating, DtypeCategory::inexact));
  EXPECT_FALSE(issubdtype(DtypeCategory::integer, DtypeCategory::floating));
}

TEST(Dtype, Float16RoundTripsEveryBitPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    auto h = float16_t::from_bits(static_cast<uint16_t>(b));
    float f = h;
    float16_t back(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(back)));
    } else {
      ASSERT_EQ(back.bits, h.bits) << "bits " << b;
    }
  }
}

TEST(Dtype, Float16Values) {
  EXPECT_EQ(static_cast<float>(float16_t(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(float16_t(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(float16_t(70000.0f))));
  // Smallest subnormal: 2^-24.
  EXPECT_EQ(static_cast<float>(float16_t(std::ldexp(1.0f, -24))),
            std::ldexp(1.0f, -24));
  // Round to nearest even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(static_cast<float>(float16_t(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(static_cast<float>(float16_t(1.0f + 3 * std::ldexp(1.0f, -11))),
            1.0f + std::ldexp(1.0f, -9));
  EXPECT_NEAR(static_cast<float>(float16_t(1.0f / 3.0f)), 1.0f / 3.0f, 1e-3);
  EXPECT_EQ(static_cast<float>(float16_t(-2.5f)), -2.5f);
}

TEST(Dtype, BFloat16Values) {
  EXPECT_EQ(static_cast<float>(bfloat16_t(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16_t(3.0e38f)),
            static_cast<float>(bfloat16_t::from_bits(0x7f62)));
  EXPECT_TRUE(std::isnan(static_cast<float>(
      bfloat16_t(std::numeric_limits<float>::quiet_NaN()))));
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(static_cast<float>(bfloat16_t(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_NEAR(static_cast<float>(bfloat16_t(3.14159f)), 3.14159f, 0.01f);
}
