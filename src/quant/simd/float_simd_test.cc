// The byte-format SIMD kernels against the scalar reference (quant/float_rows.h,
// quant/float_formats.h), on every Highway target compiled into this binary that the CPU supports
// (hwy::TestWithParamTarget sets the target mask, so HWY_DYNAMIC_DISPATCH picks that target).
// Equality is bit for bit: value bytes, scale bytes, divisors, error Status.
#include "quant/simd/float_simd.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "quant/float_formats.h"
#include "quant/float_rows.h"
#include "quant/simd/test_util.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

using test_util::Encode;

constexpr DType kFloatTypes[] = {DType::kBF16, DType::kF16, DType::kF32};
constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }

// Floats that cover the kernels' branches: 2^20 spread bit patterns (every exponent, both signs,
// subnormals, Inf, NaN) plus every E4M3 value, the midpoints between neighbours and their float
// neighbours (ties and near-ties), the E2M1 thresholds and theirs.
std::vector<float> InterestingFloats() {
  std::vector<float> v;
  for (uint32_t i = 0; i < (1u << 20); ++i) v.push_back(std::bit_cast<float>(i * 4099u + i / 7));
  auto with_neighbours = [&](float x) {
    for (float s : {1.0f, -1.0f}) {
      v.push_back(s * x);
      v.push_back(s * std::nextafter(x, 0.0f));
      v.push_back(s * std::nextafter(x, kInf));
    }
  };
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = E4M3ToFloat(static_cast<uint8_t>(c)),
                hi = E4M3ToFloat(static_cast<uint8_t>(c + 1));
    with_neighbours(lo);
    with_neighbours((lo + hi) / 2);
  }
  for (float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 448.0f, 464.0f, 0x1p-6f}) {
    with_neighbours(t);
  }
  for (float x : {0.0f, kInf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min()}) {
    with_neighbours(x);
  }
  return v;
}

// Every non-negative finite value of a 16-bit dtype, then (F32) a spread of non-negative floats:
// candidate group maxima.
std::vector<float> NonNegativeValues(DType dtype) {
  std::vector<float> v;
  if (dtype == DType::kF32) {
    for (uint32_t i = 0; i < (1u << 18); ++i) {
      const float x = std::bit_cast<float>((i * 32771u) & 0x7FFFFFFFu);
      if (std::isfinite(x)) v.push_back(x);
    }
    return v;
  }
  for (uint32_t h = 0; h < 0x8000; ++h) {
    const float x = dtype == DType::kBF16 ? BF16ToFloat(static_cast<uint16_t>(h))
                                          : F16ToFloat(static_cast<uint16_t>(h));
    if (std::isfinite(x)) v.push_back(x);
  }
  return v;
}

class FloatSimdTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(FloatSimdTest);

TEST_P(FloatSimdTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(simd::FloatActiveTargetName(), hwy::TargetName(GetParam()));
}

TEST_P(FloatSimdTest, E4M3AndE2M1CodesMatchReference) {
  const std::vector<float> x = InterestingFloats();
  std::vector<uint8_t> e4m3(x.size()), e2m1(x.size());
  simd::FloatsToE4M3(x.data(), x.size(), e4m3.data());
  simd::FloatsToE2M1(x.data(), x.size(), e2m1.data());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(e4m3[i], FloatToE4M3(x[i])) << "E4M3 of bits 0x" << std::hex << Bits(x[i]);
    ASSERT_EQ(e2m1[i], FloatToE2M1(x[i])) << "E2M1 of bits 0x" << std::hex << Bits(x[i]);
  }
}

TEST_P(FloatSimdTest, MxScalesMatchReferenceForEveryGroupMaximum) {
  for (DType dtype : kFloatTypes) {
    for (int element_bits : {4, 8}) {
      std::vector<float> absmax;
      for (float a : NonNegativeValues(dtype)) {
        if (std::isfinite(MxScaleValue(MxScaleExponent(a, dtype, element_bits), dtype))) {
          absmax.push_back(a);
        }
      }
      std::vector<float> scales(absmax.size());
      std::vector<uint8_t> stored(absmax.size());
      ASSERT_TRUE(simd::MxScales(dtype, element_bits, absmax.data(), absmax.size(), scales.data(),
                                 stored.data()));
      for (size_t i = 0; i < absmax.size(); ++i) {
        const float want = MxScaleValue(MxScaleExponent(absmax[i], dtype, element_bits), dtype);
        ASSERT_EQ(Bits(scales[i]), Bits(want)) << DTypeName(dtype) << " absmax " << absmax[i];
        ASSERT_EQ(stored[i], MxStoredExponent(want)) << DTypeName(dtype) << " absmax " << absmax[i];
      }
    }
  }
  // A maximum whose scale overflows (F16: from 57344 up; F32: near FLT_MAX) is refused, in a full
  // vector and in the tail.
  for (auto [dtype, big] : {std::pair{DType::kF16, 60000.0f}, std::pair{DType::kF32, 3e38f}}) {
    for (size_t at : {0, 5, 40}) {
      std::vector<float> absmax(41, 1.0f), scales(41);
      std::vector<uint8_t> stored(41);
      absmax[at] = big;
      EXPECT_FALSE(
          simd::MxScales(dtype, 4, absmax.data(), absmax.size(), scales.data(), stored.data()))
          << DTypeName(dtype) << " at " << at;
    }
  }
}

TEST_P(FloatSimdTest, NvGroupDivisorsMatchReference) {
  for (DType dtype : kFloatTypes) {
    const std::vector<float> absmax = NonNegativeValues(dtype);
    for (float gs : {1.0f, 2688.0f, 28928.0f, NvFp4GlobalScale(0.01f, dtype),
                     NvFp4GlobalScale(3e-5f, dtype), 3e38f, 1e-30f}) {
      std::vector<float> divisors(absmax.size());
      std::vector<uint8_t> stored(absmax.size());
      simd::NvGroupDivisors(dtype, gs, absmax.data(), absmax.size(), divisors.data(),
                            stored.data());
      for (size_t i = 0; i < absmax.size(); ++i) {
        uint8_t want_stored = 0;
        const float want = NvGroupDivisor(absmax[i], dtype, gs, &want_stored);
        ASSERT_EQ(Bits(divisors[i]), Bits(want))
            << DTypeName(dtype) << " gs " << gs << " absmax " << absmax[i];
        ASSERT_EQ(stored[i], want_stored) << DTypeName(dtype) << " gs " << gs;
      }
    }
  }
}

TEST_P(FloatSimdTest, AbsMaxSkipsNaNAndKeepsInfLikeReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (DType dtype : kFloatTypes) {
    for (size_t n : {1, 7, 64, 1000, 4099}) {
      for (int variant = 0; variant < 5; ++variant) {
        std::vector<float> v(n);
        for (float& x : v) x = normal(rng) * (variant == 1 ? 1e-6f : 1.0f);
        if (variant == 2) v[n / 2] = std::numeric_limits<float>::quiet_NaN();
        if (variant == 3) v[n - 1] = -kInf;
        if (variant == 4) std::fill(v.begin(), v.end(), -0.0f);
        const std::vector<uint8_t> bytes = Encode(dtype, v);
        EXPECT_EQ(Bits(simd::AbsMaxOf(dtype, bytes.data(), n)),
                  Bits(AbsMaxOf(dtype, bytes.data(), n)))
            << DTypeName(dtype) << " n " << n << " variant " << variant;
      }
    }
    // Every 16-bit pattern, NaNs included.
    if (dtype != DType::kF32) {
      std::vector<uint8_t> all(2 * 65536);
      for (uint32_t h = 0; h < 65536; ++h) {
        all[2 * h] = static_cast<uint8_t>(h);
        all[2 * h + 1] = static_cast<uint8_t>(h >> 8);
      }
      for (size_t begin : {0, 1000, 0x7F00, 0xFC00}) {
        const size_t n = 65536 - begin;
        EXPECT_EQ(Bits(simd::AbsMaxOf(dtype, all.data() + 2 * begin, n)),
                  Bits(AbsMaxOf(dtype, all.data() + 2 * begin, n)))
            << DTypeName(dtype) << " from " << begin;
      }
    }
  }
}

// ---- Whole row blocks.

struct Case {
  ByteRowsLayout layout;
  QuantParams p;
  int64_t rows;
  int64_t cols;
};

// Weights whose groups (of the format's width) exercise the awkward cases: outliers, all zero,
// signed zeros, subnormals, one sign, and quotients that land exactly on E4M3 midpoints (FP8 ties)
// and on the E2M1 thresholds (MX ties, and NVFP4 ties under a global scale of 1).
std::vector<float> MakeWeights(DType dtype, int64_t rows, int64_t cols, int64_t width,
                               uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  static constexpr float kThresholds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  std::vector<float> midpoints;
  for (int c = 0; c < 0x7E; ++c) {
    midpoints.push_back(
        (E4M3ToFloat(static_cast<uint8_t>(c)) + E4M3ToFloat(static_cast<uint8_t>(c + 1))) / 2);
  }
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t g = c / width, i = c % width;
      const int kind = static_cast<int>((r * 7 + g) % 10);
      const float sign = (rng() % 2) ? -1.0f : 1.0f;
      float v = test_util::AwkwardWeight(kind, i, dtype, normal(rng));  // kinds 1-4
      switch (kind) {
        case 5:  // FP8 ties: scale exactly 2^-8, quotients on E4M3 midpoints
          v = i == 0 ? 448.0f * 0x1p-8f : sign * midpoints[(i * 13) % midpoints.size()] * 0x1p-8f;
          break;
        case 6:  // MX ties: absmax 4 x 2^-6 gives the scale 2^-6
          v = i == 0 ? 4.0f * 0x1p-6f : sign * kThresholds[i % 7] * 0x1p-6f;
          break;
        case 7:  // NVFP4 ties under global scale 1: absmax 6 x 2^-4 gives the scale 2^-4
          v = i == 0 ? 6.0f * 0x1p-4f : sign * kThresholds[i % 7] * 0x1p-4f;
          break;
        case 8:  // one sign only
          v = std::fabs(v);
          break;
        default:
          break;
      }
      w[static_cast<size_t>(r * cols + c)] = RoundToDType(v, dtype);
    }
  }
  return w;
}

struct Output {
  std::vector<uint8_t> values, scales;
  Status status;
};

using RowsFn = Status (*)(const ByteRowsLayout&, const QuantParams&, DType, const uint8_t*, int64_t,
                          int64_t, float, const ByteRowsOutput&);

// Runs `fn` into buffers filled with a recognizable pattern, so that a kernel that skips a write
// differs from the reference.
Output Run(RowsFn fn, const Case& c, DType dtype, const std::vector<uint8_t>& bytes, float gs) {
  Output out;
  const int64_t bands = (c.rows + c.layout.block_rows - 1) / c.layout.block_rows;
  const bool dtype_scale =
      c.layout.format == ByteFormat::kFp8 || c.layout.format == ByteFormat::kInt;
  out.values.assign(static_cast<size_t>(c.rows * c.cols), 0x5A);
  out.scales.assign(static_cast<size_t>(bands * ByteGroups(c.p, c.cols)) *
                        (dtype_scale ? DTypeBits(dtype) / 8 : 1),
                    0xA5);
  out.status = fn(c.layout, c.p, dtype, bytes.data(), c.rows, c.cols, gs,
                  {out.values.data(), out.scales.data()});
  return out;
}

std::string Describe(const Case& c, DType dtype, float gs) {
  return std::string(DTypeName(dtype)) + " format " +
         std::to_string(static_cast<int>(c.layout.format)) + " block_rows " +
         std::to_string(c.layout.block_rows) + " bits " + std::to_string(c.p.bits) + " group " +
         std::to_string(c.p.group_size) + " " + std::to_string(c.rows) + "x" +
         std::to_string(c.cols) + " gs " + std::to_string(gs);
}

void ExpectSameAsReference(const Case& c, DType dtype, const std::vector<float>& w, float gs) {
  const std::vector<uint8_t> bytes = Encode(dtype, w);
  const Output want = Run(&QuantizeByteRows, c, dtype, bytes, gs);
  const Output got = Run(&QuantizeByteRowsFast, c, dtype, bytes, gs);
  const std::string what = Describe(c, dtype, gs);
  EXPECT_EQ(got.status.code(), want.status.code()) << what;
  EXPECT_EQ(got.status.message(), want.status.message()) << what;
  if (!want.status.ok()) return;  // outputs are partly written on error
  for (size_t i = 0; i < want.values.size(); ++i) {
    ASSERT_EQ(got.values[i], want.values[i]) << what << " value byte " << i;
  }
  for (size_t i = 0; i < want.scales.size(); ++i) {
    ASSERT_EQ(got.scales[i], want.scales[i]) << what << " scale byte " << i;
  }
}

std::vector<Case> Cases() {
  using F = ByteFormat;
  return {
      {{F::kFp8, 1}, {8, true, kChannelWise}, 20, 16},
      {{F::kFp8, 1}, {8, true, kChannelWise}, 20, 37},
      {{F::kFp8, 1}, {8, true, kChannelWise}, 20, 300},
      {{F::kFp8, 128}, {8, true, 128}, 1, 128},
      {{F::kFp8, 128}, {8, true, 128}, 130, 200},
      {{F::kFp8, 128}, {8, true, 128}, 257, 300},
      {{F::kInt, 1}, {8, true, kChannelWise}, 20, 37},
      {{F::kInt, 1}, {8, true, kChannelWise}, 20, 256},
      {{F::kInt, 1}, {4, true, 128}, 20, 384},
      {{F::kMxfp8, 1}, {8, true, 32}, 20, 32},
      {{F::kMxfp8, 1}, {8, true, 32}, 20, 544},
      {{F::kNvfp4, 1}, {4, true, 16}, 20, 16},
      {{F::kNvfp4, 1}, {4, true, 16}, 20, 48},
      {{F::kNvfp4, 1}, {4, true, 16}, 20, 528},
      {{F::kMxfp4, 1}, {4, true, 32}, 20, 32},
      {{F::kMxfp4, 1}, {4, true, 32}, 20, 544},
  };
}

TEST_P(FloatSimdTest, RowBlocksMatchReferenceBitForBit) {
  uint32_t seed = 1;
  for (const Case& c : Cases()) {
    const int64_t width = c.layout.format == ByteFormat::kFp8 && c.layout.block_rows > 1
                              ? c.cols  // kinds per row: ties survive the block's max
                              : ByteGroupWidth(c.p, c.cols);
    for (DType dtype : kFloatTypes) {
      const std::vector<float> w = MakeWeights(dtype, c.rows, c.cols, width, seed++);
      float absmax = 0.0f;
      for (float x : w) absmax = std::max(absmax, std::fabs(x));
      for (float gs : {1.0f, NvFp4GlobalScale(absmax, dtype)}) {
        ExpectSameAsReference(c, dtype, w, gs);
        if (c.layout.format != ByteFormat::kNvfp4) break;
      }
    }
  }
}

TEST_P(FloatSimdTest, BadDataGivesTheReferenceStatus) {
  for (const Case& c : Cases()) {
    for (DType dtype : kFloatTypes) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf}) {
        for (int64_t at : {int64_t{0}, c.rows * c.cols / 2 + 1, c.rows * c.cols - 1}) {
          std::vector<float> w = MakeWeights(dtype, c.rows, c.cols, ByteGroupWidth(c.p, c.cols), 9);
          w[static_cast<size_t>(at)] = bad;
          ExpectSameAsReference(c, dtype, w, 1.0f);
        }
      }
    }
  }
  // An F16 group maximum whose MX scale overflows F16: the reference's error, for both MX formats.
  for (const Case& c : Cases()) {
    if (c.layout.format != ByteFormat::kMxfp4 && c.layout.format != ByteFormat::kMxfp8) continue;
    std::vector<float> w(static_cast<size_t>(c.rows * c.cols), 0.5f);
    w[w.size() / 2] = 60000.0f;
    ExpectSameAsReference(c, DType::kF16, w, 1.0f);
  }
}

}  // namespace
}  // namespace spk
