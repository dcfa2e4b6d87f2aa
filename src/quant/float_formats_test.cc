// The small float formats against hand-checked values: FP8 E4M3 round-to-nearest-even, subnormals,
// saturation and signed zero; the E2M1 ties and the sign of values that round to zero; E8M0
// exponents with the mantissa rounding of round_to_power_2 and the clamps; NVFP4's global scale
// with torch's reciprocal-then-product rounding. The same values are cross-checked against torch
// by tests/python/test_formats_interop.py through whole checkpoints.
#include "quant/float_formats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace spk {
namespace {

TEST(Fp8E4M3Test, RoundsToNearestEvenWithSubnormalsAndSaturates) {
  EXPECT_EQ(FloatToE4M3(1.0f), 0x38);     // exponent 7, mantissa 0
  EXPECT_EQ(FloatToE4M3(1.0625f), 0x38);  // halfway 1 .. 1.125: to even (1.0)
  EXPECT_EQ(FloatToE4M3(1.1875f), 0x3A);  // halfway 1.125 .. 1.25: to even (1.25)
  EXPECT_EQ(FloatToE4M3(1.07f), 0x39);    // past halfway: up
  EXPECT_EQ(FloatToE4M3(448.0f), 0x7E);   // the largest finite value
  EXPECT_EQ(FloatToE4M3(1e6f), 0x7E);     // saturates (the reference clamps first)
  EXPECT_EQ(FloatToE4M3(-1e6f), 0xFE);
  EXPECT_EQ(FloatToE4M3(240.0f), 0x77);
  EXPECT_EQ(FloatToE4M3(232.0f), 0x76);  // halfway 224 .. 240: to even (224)
  // Subnormals are multiples of 2^-9; ties go to the even multiple.
  EXPECT_EQ(FloatToE4M3(0x1p-9f), 0x01);
  EXPECT_EQ(FloatToE4M3(0x1p-10f), 0x00);         // half of 2^-9: to 0
  EXPECT_EQ(FloatToE4M3(3 * 0x1p-10f), 0x02);     // 1.5 x 2^-9: to 2
  EXPECT_EQ(FloatToE4M3(1.5f * 0x1p-10f), 0x01);  // 0.75 x 2^-9: up
  EXPECT_EQ(FloatToE4M3(7.5f * 0x1p-9f), 0x08);   // rounds up into the smallest normal, 2^-6
  EXPECT_EQ(FloatToE4M3(0.0f), 0x00);
  EXPECT_EQ(FloatToE4M3(-0.0f), 0x80);  // the sign of zero is kept
  EXPECT_EQ(FloatToE4M3(-(0x1p-11f)), 0x80);
  EXPECT_EQ(FloatToE4M3(std::nanf("")), 0x7F);
}

TEST(Fp8E4M3Test, DecodesEveryCodeAndRoundTrips) {
  EXPECT_EQ(E4M3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(E4M3ToFloat(0x01), 0x1p-9f);
  EXPECT_EQ(E4M3ToFloat(0x08), 0x1p-6f);
  EXPECT_TRUE(std::signbit(E4M3ToFloat(0x80)));
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0xFF)));
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    EXPECT_EQ(FloatToE4M3(E4M3ToFloat(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(Fp4E2M1Test, TiesGoToTheEvenMantissaAndNegativesKeepTheirSign) {
  // The 8 magnitudes map to indices 0..7; the thresholds are the midpoints, ties to even.
  EXPECT_EQ(FloatToE2M1(0.25f), 0x0);
  EXPECT_EQ(FloatToE2M1(0.26f), 0x1);
  EXPECT_EQ(FloatToE2M1(0.75f), 0x2);
  EXPECT_EQ(FloatToE2M1(1.25f), 0x2);
  EXPECT_EQ(FloatToE2M1(1.75f), 0x4);
  EXPECT_EQ(FloatToE2M1(2.5f), 0x4);
  EXPECT_EQ(FloatToE2M1(3.5f), 0x6);
  EXPECT_EQ(FloatToE2M1(5.0f), 0x6);
  EXPECT_EQ(FloatToE2M1(5.01f), 0x7);
  EXPECT_EQ(FloatToE2M1(100.0f), 0x7);
  EXPECT_EQ(FloatToE2M1(-6.0f), 0xF);
  EXPECT_EQ(FloatToE2M1(-0.1f), 0x8);  // torch.sign(x) * 0 = -0: the sign bit is stored
  EXPECT_EQ(FloatToE2M1(-0.0f), 0x0);  // torch.sign(-0.0) = 0: +0
  for (uint8_t n = 0; n < 16; ++n) {
    if (n == 0x8) continue;  // -0 decodes to -0.0, which encodes as +0
    EXPECT_EQ(FloatToE2M1(E2M1ToFloat(n)), n) << int{n};
  }
}

TEST(MxScaleTest, ExponentsRoundTheMantissaUpFromThreeQuartersAndClamp) {
  // 6.0 = 1.5 x 2^2 rounds down to 4 = 2^2; minus floor(log2(6)) = 2: scale 2^0, code 127.
  EXPECT_EQ(MxScaleExponent(6.0f, DType::kBF16, 4), 127);
  // 7.0 = 1.75 x 2^2 rounds up to 8: code 128.
  EXPECT_EQ(MxScaleExponent(7.0f, DType::kBF16, 4), 128);
  EXPECT_EQ(MxScaleExponent(384.0f, DType::kBF16, 8), 127);   // MXFP8, offset 8: 1.5 x 2^8
  EXPECT_EQ(MxScaleExponent(448.0f, DType::kBF16, 8), 128);   // 1.75 x 2^8 rounds up to 2^9
  EXPECT_EQ(MxScaleExponent(0.0f, DType::kBF16, 4), 0);       // log2(0) = -inf, clamped
  EXPECT_EQ(MxScaleExponent(0x1p-130f, DType::kBF16, 4), 0);  // 127 - 130 - 2 < 0, clamped
  EXPECT_EQ(MxScaleExponent(2e38f, DType::kF32, 4), 252);     // 1.18 x 2^127: 127 + 127 - 2
  EXPECT_EQ(MxScaleExponent(3e38f, DType::kF32, 4), 255);     // rounds up to 2^128 = Inf
  EXPECT_EQ(MxScaleExponent(65504.0f, DType::kF16, 4), 255);  // rounds to Inf in F16
  EXPECT_EQ(MxScaleValue(127, DType::kBF16), 1.0f);
  EXPECT_EQ(MxScaleValue(100, DType::kF16), 1.0f);  // 2^-27 underflows F16: the eps, 1
  EXPECT_EQ(MxScaleValue(100, DType::kBF16), 0x1p-27f);
  EXPECT_EQ(MxStoredExponent(1.0f), 127);
  EXPECT_EQ(MxStoredExponent(0x1p-27f), 100);
  EXPECT_EQ(MxDecompressedScale(0), 0x1p-127f);  // a BF16 subnormal
}

TEST(NvFp4GlobalScaleTest, ReciprocalThenProductLikeTorch) {
  // 2688 / 0.09326171875 = 28822.1, which rounds to 28800 in BF16; torch computes
  // R(R(1 / x) * 2688) = R(10.75 * 2688) = 28928 (model_free_ptq's value for this weight).
  EXPECT_EQ(NvFp4GlobalScale(0.09326171875f, DType::kBF16), 28928.0f);
  EXPECT_EQ(NvFp4GlobalScale(0.091796875f, DType::kBF16), 29184.0f);
  EXPECT_EQ(NvFp4GlobalScale(0.0f, DType::kBF16), 1.0f);  // 2688 / tiny overflows: 1
  EXPECT_EQ(NvFp4GlobalScale(0.0f, DType::kF16), 1.0f);
  EXPECT_EQ(NvFp4GlobalScale(1.0f, DType::kF32), 2688.0f);
}

}  // namespace
}  // namespace spk
