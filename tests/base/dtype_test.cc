// Tests for dtype names and float16/bfloat16 conversions.
#include "core/base/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace quant {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (DType d :
       {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64,
        DType::kI32, DType::kI16, DType::kI8, DType::kU8, DType::kBool}) {
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok()) << DTypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
}

TEST(DTypeTest, UnknownNameIsNamedInError) {
  auto parsed = ParseDType("F8_E4M3X");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("F8_E4M3X"), std::string::npos);
}

TEST(DTypeTest, EveryHalfRoundTripsExactly) {
  // All 65536 bit patterns: float16 -> float32 -> float16 is the identity
  // (NaNs stay NaN).
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "bits " << bits;
  }
}

TEST(DTypeTest, EveryBFloat16RoundTripsExactly) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const float f = BFloat16ToFloat(b);
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBFloat16(f), b) << "bits " << bits;
  }
}

TEST(DTypeTest, HalfKnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);               // Rounds to infinity.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);  // Rounds to zero.
  // 1 + 2^-11 is halfway between 1 and the next half: ties to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3*2^-11 is halfway between two odd/even neighbours: rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_FLOAT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

TEST(DTypeTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway: ties to even keeps 0x3F80.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(
      FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DTypeTest, ConvertToFloatHandlesIntegersAndUnalignedInput) {
  alignas(8) unsigned char buffer[1 + 3 * sizeof(int32_t)];
  const int32_t values[3] = {-7, 0, 123456};
  std::memcpy(buffer + 1, values, sizeof(values));
  float out[3];
  ConvertToFloat(DType::kI32, buffer + 1, 3, out);
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 123456.0f);
}

TEST(DTypeTest, ConvertFromFloatRejectsIntegerTargets) {
  float in[1] = {1.0f};
  int32_t out[1];
  EXPECT_EQ(ConvertFromFloat(in, 1, DType::kI32, out).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quant
