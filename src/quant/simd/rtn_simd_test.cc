// The SIMD kernels against the scalar reference (quant/rtn.h, tensor/float_convert.h), on every
// Highway target compiled into this binary that the CPU supports: each test runs once per target
// (hwy::TestWithParamTarget sets the target mask, so HWY_DYNAMIC_DISPATCH picks that target).
// Equality is bit for bit: packed words, scale bytes, zero points, error Status.
#include "quant/simd/rtn_simd.h"
#include "quant/simd/test_util.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/test_util.h"
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "quant/rtn.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

using test_util::Encode;
using test_util::kIntBits;
using test_util::RunQuantizer;
using Output = test_util::QuantizerOutput;

constexpr DType kFloatTypes[] = {DType::kBF16, DType::kF16, DType::kF32};

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }

// Weights that exercise the awkward cases: typical scales, outlier columns, subnormals, all-zero
// and signed-zero groups, and groups whose quotients land exactly on .5 (ties).
std::vector<float> MakeWeights(DType dtype, int64_t rows, int64_t cols, int64_t width,
                               uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < cols / width; ++g) {
      float* group = w.data() + r * cols + g * width;
      const int kind = static_cast<int>((r * 7 + g) % 8);
      for (int64_t i = 0; i < width; ++i) {
        float v = test_util::AwkwardWeight(kind, i, dtype, normal(rng));  // kinds 1-4
        switch (kind) {
          case 5: {  // ties: absmax 7.5 or 127.5 times a power of two, values (k + 0.5) * 2^-6
            const float unit = 0x1p-6f;
            v = (static_cast<float>(static_cast<int>(rng() % 15)) - 7.0f + 0.5f) * unit;
            if (i == 0) v = 7.5f * unit;
            break;
          }
          case 6:  // one sign only
            v = std::fabs(v);
            break;
          default:
            break;
        }
        group[i] = RoundToDType(v, dtype);
      }
    }
  }
  return w;
}

class RtnSimdTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(RtnSimdTest);

TEST_P(RtnSimdTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(simd::ActiveTargetName(), hwy::TargetName(GetParam()));
}

TEST_P(RtnSimdTest, ConvertsEvery16BitPatternExactly) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    std::vector<uint8_t> bytes(2 * 65536 + 6);  // + 3 values so that a tail is left over
    for (uint32_t i = 0; i < 65539; ++i) {
      const uint16_t v = static_cast<uint16_t>(i * 40503u);
      bytes[2 * i] = static_cast<uint8_t>(v);
      bytes[2 * i + 1] = static_cast<uint8_t>(v >> 8);
    }
    const size_t n = bytes.size() / 2;
    std::vector<float> want(n), got(n);
    ConvertToFloat(dtype, bytes.data(), want.data(), n);
    simd::ConvertToFloat(dtype, bytes.data(), got.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(Bits(got[i]), Bits(want[i])) << DTypeName(dtype) << " element " << i;
    }
  }
  std::vector<float> f32 = {1.5f, -0.0f, std::numeric_limits<float>::denorm_min(), 3e38f, -7.0f};
  std::vector<uint8_t> raw = Encode(DType::kF32, f32);
  std::vector<float> got(f32.size());
  simd::ConvertToFloat(DType::kF32, raw.data(), got.data(), got.size());
  for (size_t i = 0; i < f32.size(); ++i) EXPECT_EQ(Bits(got[i]), Bits(f32[i]));
}

TEST_P(RtnSimdTest, GroupMinMaxMatchesReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t n : {1, 3, 8, 16, 17, 32, 33, 64, 128, 200, 4096}) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng) * 1e-3f;
    v[rng() % n] = -1e30f;
    const GroupRange want = GroupMinMax(v);
    const GroupRange got = simd::GroupMinMax(v);
    EXPECT_EQ(got.min, want.min) << n;
    EXPECT_EQ(got.max, want.max) << n;
  }
}

TEST_P(RtnSimdTest, GroupScalesMatchReferenceBitForBit) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mag(-30.0f, 8.0f);
  std::vector<float> mins, maxs;
  auto add = [&](float lo, float hi) {
    mins.push_back(lo);
    maxs.push_back(hi);
  };
  add(0.0f, 0.0f);
  add(-0.0f, -0.0f);
  add(-0.0f, 0.0f);
  add(0x1p-24f, 0x1p-24f);
  add(-0x1p-24f, 0.0f);  // F16: the scale underflows to 0 and the zero point sees -Inf
  add(-0x1p-140f, 0x1p-149f);
  add(-65504.0f, 65504.0f);  // F16: the range overflows
  add(-3e38f, 3e38f);        // F32: the range overflows
  add(1.0f, 2.0f);
  add(-2.0f, -1.0f);
  add(-7.5f, 7.0f);
  for (int i = 0; i < 3000; ++i) {
    const float a = std::ldexp(1.0f, static_cast<int>(mag(rng))) * (rng() % 1000) / 997.0f;
    const float b = std::ldexp(1.0f, static_cast<int>(mag(rng))) * (rng() % 1000) / 991.0f;
    add(-a, (i % 5 == 0) ? -b / 2 : b);
  }
  for (DType dtype : kFloatTypes) {
    std::vector<float> lo(mins.size()), hi(maxs.size());
    for (size_t i = 0; i < mins.size(); ++i) {
      lo[i] = RoundToDType(mins[i], dtype);
      hi[i] = std::max(RoundToDType(maxs[i], dtype), lo[i]);
    }
    for (int bits : kIntBits) {
      for (bool symmetric : {true, false}) {
        const QuantParams p{bits, symmetric, 128};
        std::vector<float> scales(lo.size());
        std::vector<int32_t> zps(lo.size());
        simd::ComputeGroupScales(p, dtype, lo.data(), hi.data(), lo.size(), scales.data(),
                                 zps.data());
        for (size_t i = 0; i < lo.size(); ++i) {
          const GroupQuantParams want = ComputeGroupScale(p, dtype, {lo[i], hi[i]});
          ASSERT_EQ(Bits(scales[i]), Bits(want.scale))
              << DTypeName(dtype) << " bits " << bits << " sym " << symmetric << " range [" << lo[i]
              << ", " << hi[i] << "]";
          ASSERT_EQ(zps[i], want.zero_point) << DTypeName(dtype) << " range " << i;
        }
      }
    }
  }
}

TEST_P(RtnSimdTest, QuantizeGroupMatchesReferenceIncludingTies) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> k(-300, 300);
  for (DType dtype : kFloatTypes) {
    for (int bits : kIntBits) {
      for (bool symmetric : {true, false}) {
        const QuantParams p{bits, symmetric, 128};
        for (float scale : {0x1p-7f, 0.0123f, 3.0f, 0x1p-20f}) {
          const GroupQuantParams gq{RoundToDType(scale, dtype), symmetric ? 0 : -3};
          std::vector<float> w(131);  // a tail after the vectors
          for (size_t i = 0; i < w.size(); ++i) {
            // Half-integer multiples of the scale: the quotient is a tie before and after the
            // dtype rounding; every third value is perturbed off the tie.
            float v = (static_cast<float>(k(rng)) / 2.0f) * gq.scale;
            if (i % 3 == 0) v *= 1.0001f;
            w[i] = RoundToDType(v, dtype);
          }
          std::vector<int8_t> want(w.size()), got(w.size());
          QuantizeGroupWithScale(p, dtype, w, gq, want);
          simd::QuantizeGroupWithScale(p, dtype, w, gq, got);
          ASSERT_EQ(got, want) << DTypeName(dtype) << " bits " << bits << " scale " << scale;
        }
      }
    }
  }
}

TEST_P(RtnSimdTest, PackRowMatchesReference) {
  std::mt19937 rng(3);
  for (int bits : kIntBits) {
    for (size_t n : {8, 16, 24, 64, 128, 136, 4096, 12, 7, 203}) {
      std::vector<int8_t> q(n);
      for (int8_t& x : q) x = static_cast<int8_t>(QMin(bits) + rng() % (1u << bits));
      std::vector<int32_t> want(PackedWords(n, bits)), got(want.size(), -1);
      PackRow(bits, q, want);
      simd::PackRow(bits, q, got);
      ASSERT_EQ(got, want) << "bits " << bits << " n " << n;
    }
  }
}

TEST_P(RtnSimdTest, QuantizeRowsMatchesReferenceForEveryScheme) {
  struct Shape {
    int64_t rows, cols, group;
  };
  const Shape shapes[] = {
      {16, 256, 32},          {16, 256, 64},          {12, 512, 128},
      {9, 384, kChannelWise}, {5, 200, kChannelWise},  // words straddle: the reference packer
      {3, 4096, 128}};
  uint32_t seed = 1;
  for (DType dtype : kFloatTypes) {
    for (const Shape& s : shapes) {
      const int64_t width = GroupWidth(s.cols, s.group);
      const std::vector<uint8_t> bytes =
          Encode(dtype, MakeWeights(dtype, s.rows, s.cols, width, seed++));
      for (int bits : kIntBits) {
        for (bool symmetric : {true, false}) {
          const QuantParams p{bits, symmetric, s.group};
          const Output want = RunQuantizer(QuantizeRowsRtn, p, dtype, bytes, s.rows, s.cols);
          const Output got = RunQuantizer(QuantizeRowsRtnFast, p, dtype, bytes, s.rows, s.cols);
          const std::string what = std::string(DTypeName(dtype)) + " " + std::to_string(s.rows) +
                                   "x" + std::to_string(s.cols) + " group " +
                                   std::to_string(s.group) + " bits " + std::to_string(bits) +
                                   (symmetric ? " sym" : " asym");
          ASSERT_TRUE(want.status.ok()) << what << ": " << want.status.message();
          ASSERT_TRUE(got.status.ok()) << what << ": " << got.status.message();
          EXPECT_EQ(got.packed, want.packed) << what;
          EXPECT_EQ(got.scales, want.scales) << what;
          EXPECT_EQ(got.zero_points, want.zero_points) << what;
        }
      }
    }
  }
}

// The quotient the row kernels divide by: the corrected reciprocal equals IEEE division bit for
// bit for every finite BF16/F16 weight and every scale of the dtype where it is claimed exact,
// over the quotients a quantizer forms (|w / s| <= 512), signed zeros included; below 2^-60
// (subnormal weights) both stay far from any code. Every 127th scale here (test_util::SweepStride;
// SPK_EXHAUSTIVE=1 takes every one).
TEST_P(RtnSimdTest, QuotientsAreTheDivisionsBitForBit) {
  const uint32_t stride = test_util::SweepStride(127);
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<float> weights;
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const uint16_t stored = static_cast<uint16_t>(h);
      float w;
      ConvertToFloat(dtype, reinterpret_cast<const uint8_t*>(&stored), &w, 1);
      if (std::isfinite(w)) weights.push_back(w);
    }
    std::vector<float> got(weights.size());
    for (uint32_t s_bits = 1; s_bits < 0x8000; s_bits += stride) {
      const uint16_t stored = static_cast<uint16_t>(s_bits);
      float scale;
      ConvertToFloat(dtype, reinterpret_cast<const uint8_t*>(&stored), &scale, 1);
      if (!std::isfinite(scale)) continue;
      simd::QuotientOfWeights(dtype, scale, weights, got);
      for (size_t i = 0; i < weights.size(); ++i) {
        const float want = weights[i] / scale;
        if (!(std::fabs(want) <= 512.0f)) continue;
        if (want != 0.0f && std::fabs(want) < 0x1p-60f) {
          ASSERT_LT(std::fabs(got[i]), 0x1p-50f) << weights[i] << " / " << scale;
        } else {
          ASSERT_EQ(Bits(got[i]), Bits(want)) << std::hexfloat << weights[i] << " / " << scale;
        }
      }
    }
  }
}

// Every finite weight under group maxima spread over the whole range of the dtype: the row
// kernel's symmetric codes (the quotient by a corrected reciprocal where it is claimed exact, by
// division elsewhere) against the reference's division. Each group holds its maximum first and
// then weights no larger in magnitude, so that the maximum fixes the scale. Every 997th maximum
// here (test_util::SweepStride; SPK_EXHAUSTIVE=1 takes every one, minutes).
TEST_P(RtnSimdTest, SymmetricCodesMatchForEveryWeightUnderGroupMaxima) {
  const uint32_t stride = test_util::SweepStride(997);
  constexpr int64_t kWidth = 128;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const uint16_t inf = dtype == DType::kBF16 ? 0x7F80 : 0x7C00;
    for (int bits : {4, 8}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " bits " + std::to_string(bits));
      const QuantParams p{bits, true, kWidth};
      for (uint32_t max_bits = 1; max_bits < inf; max_bits += stride) {
        std::vector<uint16_t> row;  // stored patterns, a group at a time
        for (uint32_t w = 0; w < 0x10000; ++w) {
          if ((w & 0x7FFF) > max_bits) continue;
          if (row.size() % kWidth == 0) row.push_back(static_cast<uint16_t>(max_bits));
          row.push_back(static_cast<uint16_t>(w));
        }
        while (row.size() % kWidth != 0) row.push_back(0);
        std::vector<uint8_t> bytes(row.size() * 2);
        std::memcpy(bytes.data(), row.data(), bytes.size());
        const int64_t rows = static_cast<int64_t>(row.size()) / kWidth;
        const Output want = RunQuantizer(QuantizeRowsRtn, p, dtype, bytes, rows, kWidth);
        const Output got = RunQuantizer(QuantizeRowsRtnFast, p, dtype, bytes, rows, kWidth);
        ASSERT_TRUE(want.status.ok()) << want.status.message();
        ASSERT_EQ(got.packed, want.packed) << "group maximum bits 0x" << std::hex << max_bits;
        ASSERT_EQ(got.scales, want.scales) << "group maximum bits 0x" << std::hex << max_bits;
      }
    }
  }
}

TEST_P(RtnSimdTest, BadDataGivesTheReferenceError) {
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  for (DType dtype : kFloatTypes) {
    for (float bad : kBad) {
      std::vector<float> w = MakeWeights(dtype, 4, 256, 128, 9);
      w[2 * 256 + 77] = bad;
      const std::vector<uint8_t> bytes = Encode(dtype, w);
      const QuantParams p{4, false, 128};
      const Output want = RunQuantizer(QuantizeRowsRtn, p, dtype, bytes, 4, 256);
      const Output got = RunQuantizer(QuantizeRowsRtnFast, p, dtype, bytes, 4, 256);
      test_util::ExpectError(want.status, StatusCode::kInvalidInput, "weight row 2 column 77 is");
      EXPECT_EQ(got.status.code(), want.status.code());
      EXPECT_EQ(got.status.message(), want.status.message());
      EXPECT_NE(got.status.message().find("row 2 column 77"), std::string::npos)
          << got.status.message();
    }
  }
  // An F16 range that overflows: the scale is Inf.
  std::vector<float> w(2 * 128, 1.0f);
  w[128 + 5] = -65504.0f;
  w[128 + 6] = 65504.0f;
  const std::vector<uint8_t> bytes = Encode(DType::kF16, w);
  const QuantParams p{4, false, 128};
  const Output want = RunQuantizer(QuantizeRowsRtn, p, DType::kF16, bytes, 2, 128);
  const Output got = RunQuantizer(QuantizeRowsRtnFast, p, DType::kF16, bytes, 2, 128);
  test_util::ExpectError(want.status, StatusCode::kInvalidInput,
                         "weight row 1 columns 0..127: the value range overflows F16");
  EXPECT_EQ(got.status.code(), want.status.code());
  EXPECT_EQ(got.status.message(), want.status.message());
  // Bad shape and dtype are rejected like the reference does.
  const Output shape_want =
      RunQuantizer(QuantizeRowsRtn, {4, true, 128}, DType::kF16, bytes, 1, 256);
  const Output shape_got =
      RunQuantizer(QuantizeRowsRtnFast, {4, true, 128}, DType::kF16, bytes, 1, 256);
  EXPECT_TRUE(shape_got.status.ok() && shape_want.status.ok());
  std::vector<int32_t> packed(100);
  std::vector<uint8_t> scales(100);
  const Status ragged = QuantizeRowsRtnFast({4, true, 128}, DType::kF16, bytes.data(), 1, 200,
                                            {packed.data(), scales.data(), nullptr});
  EXPECT_EQ(ragged.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(ragged.message(), QuantizeRowsRtn({4, true, 128}, DType::kF16, bytes.data(), 1, 200,
                                              {packed.data(), scales.data(), nullptr})
                                  .message());
}

}  // namespace
}  // namespace spk
