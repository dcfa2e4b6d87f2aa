// Unit tests of the scalar RTN reference: docs/formats.md's worked vectors, hand-derived edge cases
// and properties. Bit-exactness against compressed-tensors itself is
// tests/python/test_quant_interop.py.
#include "quant/rtn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/float_convert.h"

namespace spk {
namespace {

// A weight matrix in some dtype plus the buffers QuantizeRowsRtn fills.
struct Quantized {
  std::vector<int32_t> packed;
  std::vector<uint8_t> scales;
  std::vector<int32_t> zero_points;
  Status status;
};

std::vector<uint8_t> Encode(DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * DTypeBits(dtype) / 8);
  ConvertFromFloat(dtype, values.data(), bytes.data(), values.size());
  return bytes;
}

std::vector<float> Decode(DType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() * 8 / DTypeBits(dtype));
  ConvertToFloat(dtype, bytes.data(), values.data(), values.size());
  return values;
}

Quantized Quantize(const QuantParams& p, DType dtype, const std::vector<float>& w, int64_t rows,
                   int64_t cols) {
  Quantized out;
  const int64_t groups = GroupFits(cols, p.group_size) ? GroupsPerRow(cols, p.group_size) : 1;
  out.packed.assign(rows * PackedWords(cols, p.bits), 0);
  out.scales.assign(rows * groups * DTypeBits(dtype) / 8, 0);
  out.zero_points.assign(rows * groups, 0);
  const std::vector<uint8_t> bytes = Encode(dtype, w);
  out.status = QuantizeRowsRtn(
      p, dtype, bytes.data(), rows, cols,
      {out.packed.data(), out.scales.data(), p.symmetric ? nullptr : out.zero_points.data()});
  return out;
}

std::vector<int8_t> UnpackAll(int bits, const std::vector<int32_t>& packed, int64_t cols) {
  std::vector<int8_t> q(cols);
  UnpackRow(bits, packed, q);
  return q;
}

TEST(PackTest, FormatWorkedVector) {
  const std::vector<int8_t> q = {-8, -1, 0, 1, 7, 3, -3, 2};
  int32_t word = 0;
  PackRow(4, q, std::span(&word, 1));
  EXPECT_EQ(static_cast<uint32_t>(word), 0xA5BF9870u);
  EXPECT_EQ(word, -1514170256);
  std::vector<int8_t> back(8);
  UnpackRow(4, std::span<const int32_t>(&word, 1), back);
  EXPECT_EQ(back, q);
}

TEST(PackTest, EightBitWord) {
  const std::vector<int8_t> q = {-128, 0, 127, 1};  // u = 0, 128, 255, 129
  int32_t word = 0;
  PackRow(8, q, std::span(&word, 1));
  EXPECT_EQ(static_cast<uint32_t>(word), 0x81FF8000u);
}

TEST(PackTest, RoundTripAllWidthsAndRaggedLengths) {
  std::mt19937 rng(7);
  for (int bits = 1; bits <= 8; ++bits) {
    for (int64_t n : {1, 5, 8, 31, 32, 33, 100}) {
      std::uniform_int_distribution<int> dist(QMin(bits), QMax(bits));
      std::vector<int8_t> q(n);
      for (auto& v : q) v = static_cast<int8_t>(dist(rng));
      std::vector<int32_t> words(PackedWords(n, bits), 0x5A5A5A5A);  // garbage must be overwritten
      PackRow(bits, q, words);
      std::vector<int8_t> back(n);
      UnpackRow(bits, words, back);
      EXPECT_EQ(back, q) << "bits=" << bits << " n=" << n;
      // Bits past the last value are zero, as pack_to_int32's zero padding leaves them.
      const int64_t used = n * bits - (PackedWords(n, bits) - 1) * 32;
      if (used < 32) {
        EXPECT_EQ(static_cast<uint32_t>(words.back()) >> used, 0u);
      }
    }
  }
}

TEST(PackTest, ThreeBitValuesStraddleWords) {
  // Value 10 of a 3-bit stream sits at bits 30..32: two low bits in word 0, one high bit in word 1.
  std::vector<int8_t> q(11, -4);  // u = 0
  q[10] = 3;                      // u = 7
  std::vector<int32_t> words(2);
  PackRow(3, q, words);
  EXPECT_EQ(static_cast<uint32_t>(words[0]), 0xC0000000u);
  EXPECT_EQ(words[1], 1);
}

// Widths that do not divide 32 leave a partial last word whose unused high bits are 0, as
// pack_to_int32 pads with zeros: 7 values x 5 bits = 35 bits, 5 x 6 = 30 bits.
TEST(PackTest, PartialLastWordsOfOddWidths) {
  std::vector<int32_t> words(2, -1);
  PackRow(5, std::vector<int8_t>(7, 15), words);  // u = 31 everywhere
  EXPECT_EQ(static_cast<uint32_t>(words[0]), 0xFFFFFFFFu);
  EXPECT_EQ(words[1], 0x7);
  std::vector<int32_t> one(1, -1);
  PackRow(6, std::vector<int8_t>(5, 31), one);  // u = 63
  EXPECT_EQ(static_cast<uint32_t>(one[0]), 0x3FFFFFFFu);
  std::vector<int8_t> back(5);
  UnpackRow(6, one, back);
  EXPECT_EQ(back, std::vector<int8_t>(5, 31));
}

// 3-bit zero points of 11 rows: 33 bits down each column, so two words per column; row 10 sits at
// bits 30..32 and straddles them (pack_to_int32(zp, 3, packed_dim=0)).
TEST(PackTest, ThreeBitZeroPointsStraddleWordsDownTheRows) {
  const int64_t rows = 11, groups = 2;
  std::vector<int32_t> zp(rows * groups, -4);  // u = 0
  zp[10 * groups + 0] = 3;                     // u = 7 at bits 30..32 of column 0
  zp[0 * groups + 1] = 1;                      // u = 5 at bits 0..2 of column 1
  std::vector<int32_t> packed(PackedWords(rows, 3) * groups, -1);
  ASSERT_EQ(packed.size(), 4u);
  PackZeroPoints(3, zp.data(), rows, groups, packed.data());
  EXPECT_EQ(static_cast<uint32_t>(packed[0]), 0xC0000000u);  // word 0, column 0
  EXPECT_EQ(packed[1], 5);                                   // word 0, column 1
  EXPECT_EQ(packed[2], 1);                                   // word 1, column 0: the high bit
  EXPECT_EQ(packed[3], 0);
  std::vector<int32_t> back(rows * groups);
  UnpackZeroPoints(3, packed.data(), rows, groups, back.data());
  EXPECT_EQ(back, zp);
}

TEST(PackTest, ZeroPointsPackDownTheRows) {
  const int64_t rows = 9, groups = 2;
  std::vector<int32_t> zp(rows * groups);
  for (int64_t n = 0; n < rows; ++n) {
    zp[n * groups + 0] = static_cast<int32_t>(n) - 8;  // u = n
    zp[n * groups + 1] = 7 - static_cast<int32_t>(n);  // u = 15 - n
  }
  std::vector<int32_t> packed(PackedWords(rows, 4) * groups, -1);
  PackZeroPoints(4, zp.data(), rows, groups, packed.data());
  EXPECT_EQ(static_cast<uint32_t>(packed[0]), 0x76543210u);  // word 0, column 0
  EXPECT_EQ(static_cast<uint32_t>(packed[1]), 0x89ABCDEFu);  // word 0, column 1
  EXPECT_EQ(packed[2], 8);                                   // word 1, column 0: row 8
  EXPECT_EQ(packed[3], 7);
  std::vector<int32_t> back(rows * groups);
  UnpackZeroPoints(4, packed.data(), rows, groups, back.data());
  EXPECT_EQ(back, zp);
}

TEST(RtnTest, FormatWorkedBF16Group) {
  // One symmetric int4 BF16 group with absmax 1.0 (docs/formats.md 2.1).
  const std::vector<float> w = {0.2001953125f, 0.87109375f, 1.0f, -1.0f, 0, 0, 0, 0};
  const QuantParams p{.bits = 4, .symmetric = true, .group_size = 8};
  Quantized out = Quantize(p, DType::kBF16, w, 1, 8);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.scales[0], 0x09);  // 0x3E09 = 0.1337890625
  EXPECT_EQ(out.scales[1], 0x3E);
  EXPECT_EQ(UnpackAll(4, out.packed, 8), (std::vector<int8_t>{2, 6, 7, -7, 0, 0, 0, 0}));
  // The same through the per-group API.
  const GroupQuantParams gq = ComputeGroupScale(p, DType::kBF16, GroupMinMax(w));
  EXPECT_EQ(gq.scale, 0.1337890625f);
  EXPECT_EQ(gq.zero_point, 0);
  std::vector<int8_t> q(8);
  QuantizeGroupWithScale(p, DType::kBF16, w, gq, q);
  EXPECT_EQ(q[0], 2);  // plain float rounding of 1.49635 would give 1
  EXPECT_EQ(q[1], 6);  // 6.51095 rounds to BF16 6.5 first, then to even 6
}

TEST(RtnTest, AllZeroGroupsUseTheDTypeEps) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (bool symmetric : {true, false}) {
      const QuantParams p{.bits = 4, .symmetric = symmetric, .group_size = 8};
      Quantized out = Quantize(p, dtype, std::vector<float>(16, 0.0f), 1, 16);
      ASSERT_TRUE(out.status.ok());
      const std::vector<float> scales = Decode(dtype, out.scales);
      const float eps = dtype == DType::kBF16  ? 0x1p-7f
                        : dtype == DType::kF16 ? 0x1p-10f
                                               : 0x1p-23f;
      EXPECT_EQ(scales, (std::vector<float>{eps, eps}));
      // q = 0 is stored as u = 8 in every nibble; the asymmetric zero point (0/0 = NaN) is 0.
      EXPECT_EQ(static_cast<uint32_t>(out.packed[0]), 0x88888888u);
      EXPECT_EQ(out.zero_points, (std::vector<int32_t>{0, 0}));
    }
  }
}

TEST(RtnTest, TiesRoundToEvenAndAbsmaxClamps) {
  // absmax 7.5 gives scale exactly 1, so w/s is w itself.
  const std::vector<float> w = {7.5f, -7.5f, 2.5f, 3.5f, -2.5f, 0.5f, 1.5f, -0.5f};
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    Quantized out = Quantize({.bits = 4, .symmetric = true, .group_size = 8}, dtype, w, 1, 8);
    ASSERT_TRUE(out.status.ok());
    EXPECT_EQ(Decode(dtype, out.scales), std::vector<float>{1.0f});
    EXPECT_EQ(UnpackAll(4, out.packed, 8), (std::vector<int8_t>{7, -8, 2, 4, -2, 0, 2, 0}));
  }
  // 8-bit: absmax 127.5 gives scale 1.
  const std::vector<float> w8 = {127.5f, -127.5f, 3.5f, -4.5f};
  Quantized out8 =
      Quantize({.bits = 8, .symmetric = true, .group_size = -1}, DType::kF32, w8, 1, 4);
  ASSERT_TRUE(out8.status.ok());
  EXPECT_EQ(UnpackAll(8, out8.packed, 4), (std::vector<int8_t>{127, -128, 4, -4}));
}

TEST(RtnTest, F16SubnormalScale) {
  // absmax 2^-14: scale = F16(2^-14 / 7.5) = 137 * 2^-24, an F16 subnormal (bits 0x0089).
  const std::vector<float> w = {0x1p-14f, -0x1p-15f, 0, 0};
  Quantized out = Quantize({.bits = 4, .symmetric = true, .group_size = 4}, DType::kF16, w, 1, 4);
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(out.scales[0], 0x89);
  EXPECT_EQ(out.scales[1], 0x00);
  // 1024/137 = 7.4745 -> F16 7.47265625 -> 7;  -512/137 = -3.737 -> F16 -3.7363 -> -4.
  EXPECT_EQ(UnpackAll(4, out.packed, 4), (std::vector<int8_t>{7, -4, 0, 0}));
  // A scale that underflows to 0 is replaced by eps and everything quantizes to 0.
  const std::vector<float> tiny = {0x3p-24f, -0x1p-24f, 0, 0};
  out = Quantize({.bits = 4, .symmetric = true, .group_size = 4}, DType::kF16, tiny, 1, 4);
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(Decode(DType::kF16, out.scales), std::vector<float>{0x1p-10f});
  EXPECT_EQ(UnpackAll(4, out.packed, 4), (std::vector<int8_t>{0, 0, 0, 0}));
}

TEST(RtnTest, F32UsesPlainFloatArithmetic) {
  const std::vector<float> w = {0.3f, -1.7f, 0.05f, 1.2f};
  Quantized out = Quantize({.bits = 4, .symmetric = true, .group_size = 4}, DType::kF32, w, 1, 4);
  ASSERT_TRUE(out.status.ok());
  const float s = 1.7f / 7.5f;
  EXPECT_EQ(Decode(DType::kF32, out.scales), std::vector<float>{s});
  std::vector<int8_t> want;
  for (float v : w)
    want.push_back(static_cast<int8_t>(std::nearbyint(std::clamp(v / s, -8.f, 7.f))));
  EXPECT_EQ(UnpackAll(4, out.packed, 4), want);
}

TEST(RtnTest, AsymmetricScaleAndZeroPoint) {
  // min -1, max 2: s = BF16(3/15) = 0.2001953125, zp = RNE(-8 - BF16(-1/s)) = -8 + 5 = -3.
  const std::vector<float> w = {-1.0f, 2.0f, 0.0f, 0.5f};
  const QuantParams p{.bits = 4, .symmetric = false, .group_size = 4};
  Quantized out = Quantize(p, DType::kBF16, w, 1, 4);
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(Decode(DType::kBF16, out.scales), std::vector<float>{0.2001953125f});
  EXPECT_EQ(out.zero_points, std::vector<int32_t>{-3});
  // 0.5/s = 2.4976 -> BF16 2.5 -> -0.5 -> RNE -0 = 0.
  EXPECT_EQ(UnpackAll(4, out.packed, 4), (std::vector<int8_t>{-8, 7, -3, 0}));
  // Positive-only group: min clamps to 0, so zp = qmin.
  out = Quantize(p, DType::kBF16, {1.0f, 2.0f, 3.0f, 0.5f}, 1, 4);
  EXPECT_EQ(out.zero_points, std::vector<int32_t>{-8});
  // Negative-only group: max clamps to 0; zp = -8 - BF16(-3/s = -14.985 -> -15) = 7 = qmax.
  out = Quantize(p, DType::kBF16, {-1.0f, -2.0f, -3.0f, -0.5f}, 1, 4);
  EXPECT_EQ(out.zero_points, std::vector<int32_t>{7});
  EXPECT_EQ(UnpackAll(4, out.packed, 4)[2], -8);
}

TEST(RtnTest, ChannelWiseHasOneScalePerRow) {
  const std::vector<float> w = {1, 2, 3, 7.5f, -15, 0, 0, 1};
  Quantized out = Quantize({.bits = 4, .symmetric = true, .group_size = -1}, DType::kF32, w, 2, 4);
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(Decode(DType::kF32, out.scales), (std::vector<float>{1.0f, 2.0f}));
  std::vector<int8_t> row1(4);
  UnpackRow(4, std::span(out.packed).subspan(1, 1), row1);
  EXPECT_EQ(row1, (std::vector<int8_t>{-8, 0, 0, 0}));  // -7.5 -> -8, 0.5 -> 0
}

TEST(RtnTest, RejectsNaNAndInfNamingThePosition) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> w(16, 0.5f);
    w[1 * 8 + 3] = bad;
    Quantized out =
        Quantize({.bits = 4, .symmetric = true, .group_size = 8}, DType::kBF16, w, 2, 8);
    EXPECT_EQ(out.status.code(), StatusCode::kInvalidInput);
    EXPECT_NE(out.status.message().find("row 1 column 3"), std::string::npos)
        << out.status.message();
  }
}

TEST(RtnTest, RejectsScaleThatOverflowsF16) {
  // max - min = 120000 overflows F16, so the asymmetric scale would be Inf.
  Quantized out = Quantize({.bits = 4, .symmetric = false, .group_size = 4}, DType::kF16,
                           {60000.f, -60000.f, 0, 0}, 1, 4);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidInput);
  EXPECT_NE(out.status.message().find("Inf"), std::string::npos);
}

TEST(RtnTest, RejectsBadShapesAndDTypes) {
  Quantized out = Quantize({.bits = 4, .symmetric = true, .group_size = 8}, DType::kF32,
                           std::vector<float>(12, 1.0f), 1, 12);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidInput);
  std::vector<uint8_t> w(16);
  std::vector<int32_t> packed(2);
  std::vector<uint8_t> scales(4);
  EXPECT_EQ(QuantizeRowsRtn({}, DType::kI32, w.data(), 1, 4, {packed.data(), scales.data()}).code(),
            StatusCode::kInvalidInput);
  EXPECT_EQ(
      QuantizeRowsRtn({.bits = 9}, DType::kF32, w.data(), 1, 4, {packed.data(), scales.data()})
          .code(),
      StatusCode::kUsage);
}

// Quantize then dequantize random weights: the error stays within the rounding bound, and the
// dequantizer agrees with DequantizeGroup.
TEST(RtnTest, RoundTripErrorIsBounded) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const int64_t rows = 8, cols = 256;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int bits : {4, 8}) {
      for (bool symmetric : {true, false}) {
        for (int64_t group : {int64_t{32}, int64_t{128}, kChannelWise}) {
          const QuantParams p{.bits = bits, .symmetric = symmetric, .group_size = group};
          std::vector<float> w(rows * cols);
          for (auto& v : w) v = RoundToDType(normal(rng), dtype);
          w[5] = 0.5f;  // an outlier
          Quantized out = Quantize(p, dtype, w, rows, cols);
          ASSERT_TRUE(out.status.ok());
          std::vector<uint8_t> deq_bytes(w.size() * DTypeBits(dtype) / 8);
          ASSERT_TRUE(DequantizeRows(p, dtype, out.packed.data(), out.scales.data(),
                                     symmetric ? nullptr : out.zero_points.data(), rows, cols,
                                     deq_bytes.data())
                          .ok());
          const std::vector<float> deq = Decode(dtype, deq_bytes);
          const std::vector<float> scales = Decode(dtype, out.scales);
          const int64_t width = GroupWidth(cols, group);
          for (int64_t i = 0; i < rows * cols; ++i) {
            const float s = scales[(i / cols) * GroupsPerRow(cols, group) + (i % cols) / width];
            const float bound = (symmetric ? 0.51f : 1.01f) * s + std::fabs(w[i]) * 0x1p-7f;
            ASSERT_LE(std::fabs(w[i] - deq[i]), bound)
                << DTypeName(dtype) << " bits=" << bits << " sym=" << symmetric << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(RtnTest, RowBlocksAreIndependent) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 6, cols = 64;
  std::vector<float> w(rows * cols);
  for (auto& v : w) v = normal(rng);
  const QuantParams p{.bits = 4, .symmetric = false, .group_size = 32};
  Quantized whole = Quantize(p, DType::kBF16, w, rows, cols);
  Quantized top =
      Quantize(p, DType::kBF16, std::vector<float>(w.begin(), w.begin() + 2 * cols), 2, cols);
  Quantized bottom =
      Quantize(p, DType::kBF16, std::vector<float>(w.begin() + 2 * cols, w.end()), 4, cols);
  top.packed.insert(top.packed.end(), bottom.packed.begin(), bottom.packed.end());
  top.scales.insert(top.scales.end(), bottom.scales.begin(), bottom.scales.end());
  top.zero_points.insert(top.zero_points.end(), bottom.zero_points.begin(),
                         bottom.zero_points.end());
  EXPECT_EQ(top.packed, whole.packed);
  EXPECT_EQ(top.scales, whole.scales);
  EXPECT_EQ(top.zero_points, whole.zero_points);
}

TEST(RtnTest, DequantizeRejectsOutOfRangeZeroPoint) {
  std::vector<int32_t> packed(1, 0);
  std::vector<uint8_t> scales = Encode(DType::kBF16, {1.0f});
  std::vector<int32_t> zp = {9};
  std::vector<uint8_t> out(16);
  EXPECT_EQ(DequantizeRows({.bits = 4, .symmetric = false, .group_size = 8}, DType::kBF16,
                           packed.data(), scales.data(), zp.data(), 1, 8, out.data())
                .code(),
            StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace spk
