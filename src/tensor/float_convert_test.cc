// Exhaustive tests of the BF16/F16 conversions against a slow, obviously-correct reference: the
// nearest representable value found by search over all 65536 encodings, ties to the even encoding.
#include "tensor/float_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace spk {
namespace {

// Decodes F16 bits the long way: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for subnormals.
double ReferenceF16Value(uint16_t bits) {
  const int sign = (bits >> 15) ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  if (exponent == 0x1F) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// The finite non-negative encodings of a 16-bit format in increasing order of value.
std::vector<uint16_t> SortedNonNegative(uint16_t max_finite) {
  std::vector<uint16_t> out;
  for (uint32_t b = 0; b <= max_finite; ++b) out.push_back(static_cast<uint16_t>(b));
  return out;  // for both formats, non-negative encodings are ordered like their values
}

// Nearest-even rounding by search: the reference that FloatToF16/FloatToBF16 must match.
uint16_t ReferenceRound(double x, const std::vector<uint16_t>& sorted, double (*decode)(uint16_t),
                        double overflow_threshold, uint16_t inf_bits) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double ax = std::fabs(x);
  if (ax >= overflow_threshold) return sign | inf_bits;
  auto upper = std::lower_bound(sorted.begin(), sorted.end(), ax,
                                [&](uint16_t b, double v) { return decode(b) < v; });
  if (upper == sorted.end()) return sign | sorted.back();  // above the largest, below overflow
  if (decode(*upper) == ax || upper == sorted.begin()) return sign | *upper;
  const uint16_t hi = *upper;
  const uint16_t lo = *(upper - 1);
  const double dlo = ax - decode(lo);
  const double dhi = decode(hi) - ax;
  if (dlo < dhi) return sign | lo;
  if (dhi < dlo) return sign | hi;
  return sign | ((lo & 1) == 0 ? lo : hi);
}

double DecodeBF16(uint16_t b) { return BF16ToFloat(b); }
double DecodeF16(uint16_t b) { return ReferenceF16Value(b); }

float NextUp(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }
float NextDown(float x) { return std::nextafter(x, -std::numeric_limits<float>::infinity()); }

TEST(FloatConvertTest, F16ToFloatMatchesDefinitionForAllEncodings) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double want = ReferenceF16Value(static_cast<uint16_t>(b));
    const float got = F16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << b;
      EXPECT_EQ(std::signbit(got), (b & 0x8000) != 0) << b;
    }
  }
}

TEST(FloatConvertTest, BF16ToFloatIsTheHighHalf) {
  for (uint32_t b = 0; b < 65536; ++b) {
    EXPECT_EQ(std::bit_cast<uint32_t>(BF16ToFloat(static_cast<uint16_t>(b))), b << 16);
  }
}

TEST(FloatConvertTest, RoundTripOfAllEncodings) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f16 = F16ToFloat(bits);
    const float bf16 = BF16ToFloat(bits);
    if (std::isnan(f16)) {
      EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(f16)))) << b;
    } else {
      EXPECT_EQ(FloatToF16(f16), bits) << b;
    }
    if (std::isnan(bf16)) {
      EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(bf16)))) << b;
    } else {
      EXPECT_EQ(FloatToBF16(bf16), bits) << b;
    }
  }
}

// For every pair of adjacent encodings: the midpoint (a tie), the floats just around it, and the
// floats just around each encoding must round like the search reference.
void CheckAllNeighbourhoods(uint16_t max_finite, double (*decode)(uint16_t), double overflow,
                            uint16_t inf_bits, uint16_t (*convert)(float)) {
  const std::vector<uint16_t> sorted = SortedNonNegative(max_finite);
  int64_t checked = 0;
  for (size_t i = 0; i + 1 < sorted.size(); ++i) {
    const float lo = static_cast<float>(decode(sorted[i]));
    const float hi = static_cast<float>(decode(sorted[i + 1]));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);  // exact in float32
    for (float x : {lo, NextUp(lo), NextDown(mid), mid, NextUp(mid), NextDown(hi)}) {
      for (float s : {x, -x}) {
        ASSERT_EQ(convert(s), ReferenceRound(s, sorted, decode, overflow, inf_bits))
            << "x=" << s << " bits=" << std::bit_cast<uint32_t>(s);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300000);
}

TEST(FloatConvertTest, F16RoundsToNearestEvenEverywhere) {
  CheckAllNeighbourhoods(0x7BFF, DecodeF16, 65520.0, 0x7C00, FloatToF16);
}

TEST(FloatConvertTest, BF16RoundsToNearestEvenEverywhere) {
  // Overflow threshold: largest BF16 plus half an ulp (ties go to the even encoding, Inf).
  const double max_bf16 = BF16ToFloat(0x7F7F);
  const double overflow = max_bf16 + std::ldexp(1.0, 127 - 8);
  CheckAllNeighbourhoods(0x7F7F, DecodeBF16, overflow, 0x7F80, FloatToBF16);
}

TEST(FloatConvertTest, RandomFloatsMatchReference) {
  const std::vector<uint16_t> f16_sorted = SortedNonNegative(0x7BFF);
  const std::vector<uint16_t> bf16_sorted = SortedNonNegative(0x7F7F);
  const double bf16_overflow = static_cast<double>(BF16ToFloat(0x7F7F)) + std::ldexp(1.0, 119);
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    ASSERT_EQ(FloatToF16(x), ReferenceRound(x, f16_sorted, DecodeF16, 65520.0, 0x7C00)) << x;
    ASSERT_EQ(FloatToBF16(x), ReferenceRound(x, bf16_sorted, DecodeBF16, bf16_overflow, 0x7F80))
        << x;
  }
}

TEST(FloatConvertTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FloatToF16(inf), 0x7C00);
  EXPECT_EQ(FloatToF16(-inf), 0xFC00);
  EXPECT_EQ(FloatToBF16(inf), 0x7F80);
  EXPECT_EQ(FloatToBF16(-inf), 0xFF80);
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(nan))));
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(nan))));
  // A NaN whose payload lives only in the low bits must not truncate to Inf.
  const float low_payload_nan = std::bit_cast<float>(0x7F800001u);
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(low_payload_nan))));
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(low_payload_nan))));
  EXPECT_EQ(FloatToF16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBF16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToF16(65519.99f), 0x7BFF);
  EXPECT_EQ(FloatToF16(65520.0f), 0x7C00);
  EXPECT_EQ(FloatToF16(0x1p-24f), 0x0001);
  EXPECT_EQ(FloatToF16(0x1p-25f), 0x0000);    // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(FloatToF16(0x1.8p-24f), 0x0002);  // tie between 1 and 2 ulps: even is 2
  EXPECT_EQ(FloatToF16(std::bit_cast<float>(0x33000001u)), 0x0001);   // just above 2^-25
  EXPECT_EQ(FloatToBF16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(FloatToBF16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBF16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(FloatToBF16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBF16(0x1p-133f), 0x0001);  // smallest BF16 subnormal survives
}

TEST(FloatConvertTest, RoundToDType) {
  EXPECT_EQ(RoundToDType(1.0f / 7.5f, DType::kBF16), 0.1337890625f);
  EXPECT_EQ(RoundToDType(1.0f / 3.0f, DType::kF16), F16ToFloat(0x3555));
  EXPECT_EQ(RoundToDType(1.0f / 3.0f, DType::kF32), 1.0f / 3.0f);
}

TEST(FloatConvertTest, BufferConversionsAreLittleEndian) {
  const float values[3] = {1.0f, -2.5f, 0.1337890625f};
  uint8_t bytes[12];
  ConvertFromFloat(DType::kBF16, values, bytes, 3);
  EXPECT_EQ(bytes[0], 0x80);
  EXPECT_EQ(bytes[1], 0x3F);
  EXPECT_EQ(bytes[4], 0x09);
  EXPECT_EQ(bytes[5], 0x3E);
  float back[3];
  for (DType d : {DType::kBF16, DType::kF16, DType::kF32}) {
    ConvertFromFloat(d, values, bytes, 3);
    ConvertToFloat(d, bytes, back, 3);
    EXPECT_EQ(back[0], 1.0f);
    EXPECT_EQ(back[1], -2.5f);
    EXPECT_EQ(back[2], RoundToDType(0.1337890625f, d));
  }
  ConvertFromFloat(DType::kF16, values, bytes, 1);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[1], 0x3C);
}

}  // namespace
}  // namespace spk
