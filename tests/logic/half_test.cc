// float16 / bfloat16 <-> float32 conversions (common/half.h): exact round
// trips of every 16-bit pattern, and round-to-nearest-even on the way down.
#include "tfmpi/common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tfmpi {
namespace {

bool IsHalfNaN(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool IsBFloat16NaN(std::uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

float FromBits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(Float16, EveryBitPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = Float16ToFloat(bits);
    if (IsHalfNaN(bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(IsHalfNaN(FloatToFloat16(f))) << std::hex << h;
      EXPECT_EQ(FloatToFloat16(f) & 0x8000u, bits & 0x8000u) << "sign kept " << std::hex << h;
    } else {
      EXPECT_FALSE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(FloatToFloat16(f), bits) << std::hex << h << " -> " << f;
    }
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(Float16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(Float16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(Float16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(Float16ToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(Float16ToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(Float16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(Float16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Float16ToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(Float16ToFloat(0x8000)));
  EXPECT_EQ(FloatToFloat16(0.1f), 0x2e66);
  EXPECT_EQ(FloatToFloat16(-0.0f), 0x8000);
}

TEST(Float16, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10);  // spacing of halves in [1, 2)
  EXPECT_EQ(FloatToFloat16(1 + ulp / 2), 0x3c00) << "tie goes down to the even 1.0";
  EXPECT_EQ(FloatToFloat16(1 + 3 * ulp / 2), 0x3c02) << "tie goes up to the even 1+2ulp";
  EXPECT_EQ(FloatToFloat16(1 + ulp / 2 + ulp / 64), 0x3c01) << "past the tie rounds up";
  EXPECT_EQ(FloatToFloat16(1 + ulp / 2 - ulp / 64), 0x3c00);
  EXPECT_EQ(FloatToFloat16(-(1 + 3 * ulp / 2)), 0xbc02);
  EXPECT_EQ(FloatToFloat16(2049.0f), 0x6800) << "2049 ties to 2048";
  EXPECT_EQ(FloatToFloat16(2051.0f), 0x6802) << "2051 ties to 2052";
}

TEST(Float16, OverflowAndUnderflow) {
  EXPECT_EQ(FloatToFloat16(65519.0f), 0x7bff) << "below the tie stays finite";
  EXPECT_EQ(FloatToFloat16(65520.0f), 0x7c00) << "the tie rounds to even: infinity";
  EXPECT_EQ(FloatToFloat16(1e6f), 0x7c00);
  EXPECT_EQ(FloatToFloat16(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToFloat16(std::numeric_limits<float>::infinity()), 0x7c00);
  const float sub = std::ldexp(1.0f, -24);  // one subnormal step
  EXPECT_EQ(FloatToFloat16(sub / 2), 0x0000) << "tie between 0 and 1 step goes to 0";
  EXPECT_EQ(FloatToFloat16(sub * 0.75f), 0x0001);
  EXPECT_EQ(FloatToFloat16(sub * 1.5f), 0x0002) << "tie between 1 and 2 steps goes to 2";
  EXPECT_EQ(FloatToFloat16(sub * 2.5f), 0x0002) << "tie between 2 and 3 steps goes to 2";
  EXPECT_EQ(FloatToFloat16(std::ldexp(1023.5f, -24)), 0x0400) << "rounds up into the normals";
  EXPECT_EQ(FloatToFloat16(1e-10f), 0x0000);
  EXPECT_EQ(FloatToFloat16(-1e-10f), 0x8000);
}

// Sweep floats across the whole half range: the result is a nearest half,
// and on a tie the even one.
TEST(Float16, SampledFloatsRoundToANearestHalf) {
  for (std::uint32_t bits = 0; bits < 0x47800000u; bits += 4093) {  // [0, 65536)
    const float f = FromBits(bits);
    const std::uint16_t h = FloatToFloat16(f);
    const double err = std::fabs(double(Float16ToFloat(h)) - f);
    if (h == 0x7c00) {
      EXPECT_GE(f, 65520.0f);
      continue;
    }
    for (int step : {-1, 1}) {
      if (h == 0 && step < 0) continue;
      const auto n = static_cast<std::uint16_t>(h + step);
      const double other = n == 0x7c00 ? 65536.0 : double(Float16ToFloat(n));
      const double nerr = std::fabs(other - f);
      ASSERT_LE(err, nerr) << "f=" << f << " h=" << std::hex << h;
      if (err == nerr) {
        ASSERT_EQ(h & 1u, 0u) << "tie must pick even, f=" << f;
      }
    }
  }
}

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = BFloat16ToFloat(bits);
    if (IsBFloat16NaN(bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(IsBFloat16NaN(FloatToBFloat16(f))) << std::hex << h;
    } else {
      ASSERT_EQ(FloatToBFloat16(f), bits) << std::hex << h << " -> " << f;
    }
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -7);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBFloat16(1 + ulp / 2), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1 + 3 * ulp / 2), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(1 + ulp / 2 + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(-(1 + 3 * ulp / 2)), 0xbf82);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80) << "rounds to inf";
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(FloatToBFloat16(257.0f), 0x4380) << "257 ties to 256";
}

TEST(BFloat16, NaNWithLowPayloadStaysNaN) {
  // A float NaN whose payload lives only in the low 16 bits would truncate to
  // infinity; the conversion must keep it a NaN.
  const float nan_low = FromBits(0x7f800001u);
  ASSERT_TRUE(std::isnan(nan_low));
  EXPECT_TRUE(IsBFloat16NaN(FloatToBFloat16(nan_low)));
  EXPECT_TRUE(IsBFloat16NaN(FloatToBFloat16(FromBits(0xffffffffu))));
  EXPECT_TRUE(IsHalfNaN(FloatToFloat16(nan_low)));
}

}  // namespace
}  // namespace tfmpi
