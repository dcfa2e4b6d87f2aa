// The SIMD search against the scalar reference (quant/search.h) on every Highway target compiled
// into this binary that the CPU supports (hwy::TestWithParamTarget sets the target mask, so
// HWY_DYNAMIC_DISPATCH picks that target). Equality is bit for bit: each kernel's floats and codes,
// and the whole row quantizer's packed words, scale bytes, zero points and error Status.
#include "quant/simd/search_simd.h"
#include "quant/simd/test_util.h"

#include <gtest/gtest.h>
#include <algorithm>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "quant/search.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

using test_util::Encode;
using test_util::RunQuantizer;
using Output = test_util::QuantizerOutput;

constexpr DType kFloatTypes[] = {DType::kBF16, DType::kF16, DType::kF32};

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }

// Gaussian values of `dtype` with a few outliers, exact zeros and values on half-levels of `tie`
// (so that w * inv lands on .5 and the rounding of ties is exercised).
std::vector<float> Values(std::mt19937& rng, DType dtype, size_t n, float tie) {
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<float> w(n);
  for (size_t i = 0; i < n; ++i) {
    switch (rng() % 16) {
      case 0:
        w[i] = gauss(rng) * 10;
        break;
      case 1:
        w[i] = 0.0f;
        break;
      case 2:
        w[i] = (static_cast<float>(rng() % 16) - 7.5f) * tie;
        break;
      default:
        w[i] = gauss(rng);
    }
    w[i] = RoundToDType(w[i], dtype);
  }
  return w;
}

class SearchSimdTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(SearchSimdTest);

TEST_P(SearchSimdTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(simd::ActiveSearchTargetName(), hwy::TargetName(GetParam()));
}

// Each kernel on every dtype, size and bit width, with the code ranges of zero point 0 (symmetric)
// and of other zero points (asymmetric), mixed within a batch.
TEST_P(SearchSimdTest, KernelsMatchTheScalarKernelsBitForBit) {
  const SearchKernels& ref = ScalarSearchKernels();
  const SearchKernels& fast = simd::ActiveSearchKernels();
  std::mt19937 rng(42);
  for (DType dtype : kFloatTypes) {
    for (size_t n : {1u, 7u, 15u, 16u, 17u, 32u, 100u, 128u, 131u, 4096u}) {
      for (int bits : {4, 8}) {
        std::vector<float> scales = {0.005f, -0.005f, 0.0031f, -0.0123f, 3e-4f, 0.0042f};
        const std::vector<int32_t> zero_points = {0, 3, 0, QMin(bits), QMax(bits), -1};
        std::vector<float> invs, lo, hi;
        for (size_t k = 0; k < scales.size(); ++k) {
          scales[k] = RoundToDType(scales[k], dtype);
          invs.push_back(1.0f / scales[k]);
          lo.push_back(static_cast<float>(QMin(bits) - zero_points[k]));
          hi.push_back(static_cast<float>(QMax(bits) - zero_points[k]));
        }
        const std::vector<float> w = Values(rng, dtype, n, scales[0]);
        SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " n " << n << " bits " << bits);
        // The weights of the objective, for a peak like the group's and for none (0: all ones).
        std::vector<float> imp(n), imp_ref(n);
        for (float inv_peak : {0.0f, 1.0f / (5 * scales[2]), 1.0f / (8 * scales[0])}) {
          ref.importance(w.data(), n, inv_peak, imp_ref.data());
          fast.importance(w.data(), n, inv_peak, imp.data());
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(Bits(imp[i]), Bits(imp_ref[i])) << i;
        }
        EXPECT_GT(*std::max_element(imp.begin(), imp.end()), 1.0f);
        // Every batch size, each candidate at every position of a batch.
        for (size_t count = 1; count <= kMaxSearchBatch; ++count) {
          for (size_t first = 0; first + count <= scales.size(); ++first) {
            float cw_ref[kMaxSearchBatch], cc_ref[kMaxSearchBatch], cw[kMaxSearchBatch],
                cc[kMaxSearchBatch], e_ref[kMaxSearchBatch], e[kMaxSearchBatch];
            const float* ip = imp.data();
            ref.fit_sums(w.data(), ip, n, &invs[first], &lo[first], &hi[first], count, cw_ref,
                         cc_ref);
            fast.fit_sums(w.data(), ip, n, &invs[first], &lo[first], &hi[first], count, cw, cc);
            ref.nearest_errors(dtype, w.data(), ip, n, &invs[first], &scales[first], &lo[first],
                               &hi[first], count, e_ref);
            fast.nearest_errors(dtype, w.data(), ip, n, &invs[first], &scales[first], &lo[first],
                                &hi[first], count, e);
            for (size_t k = 0; k < count; ++k) {
              EXPECT_EQ(Bits(cw[k]), Bits(cw_ref[k])) << count << " " << first + k;
              EXPECT_EQ(Bits(cc[k]), Bits(cc_ref[k])) << count << " " << first + k;
              EXPECT_EQ(Bits(e[k]), Bits(e_ref[k])) << count << " " << first + k;
            }
          }
        }
        for (size_t k = 0; k < scales.size(); ++k) {
          const float scale = scales[k], inv = invs[k];
          const int32_t zp = zero_points[k];
          std::vector<int8_t> q_ref(n), q(n);
          ref.nearest_codes(w.data(), n, inv, lo[k], hi[k], zp, q_ref.data());
          fast.nearest_codes(w.data(), n, inv, lo[k], hi[k], zp, q.data());
          EXPECT_EQ(q, q_ref) << k;
          for (int8_t v : q) {
            ASSERT_GE(v, QMin(bits));
            ASSERT_LE(v, QMax(bits));
          }
          EXPECT_EQ(Bits(fast.codes_error(dtype, w.data(), imp.data(), q.data(), n, scale, zp)),
                    Bits(ref.codes_error(dtype, w.data(), imp.data(), q.data(), n, scale, zp)))
              << k;
        }
      }
    }
  }
}

TEST_P(SearchSimdTest, QuantizeRowsMatchesReferenceForEveryScheme) {
  std::mt19937 rng(7);
  for (DType dtype : kFloatTypes) {
    for (int bits : {4, 8}) {
      for (bool symmetric : {true, false}) {
        for (int64_t group : {int64_t{32}, int64_t{64}, int64_t{128}, kChannelWise}) {
          for (int64_t cols : {int64_t{256}, int64_t{136}}) {
            if (group != kChannelWise && cols % group != 0) continue;
            const QuantParams p{bits, symmetric, group};
            const int64_t rows = 6;
            const std::vector<uint8_t> bytes =
                Encode(dtype, Values(rng, dtype, rows * cols, 0.0037f));
            SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " bits " << bits << " sym "
                                            << symmetric << " group " << group << " cols " << cols);
            const Output ref = RunQuantizer(QuantizeRowsSearch, p, dtype, bytes, rows, cols);
            const Output fast = RunQuantizer(QuantizeRowsSearchFast, p, dtype, bytes, rows, cols);
            ASSERT_TRUE(ref.status.ok()) << ref.status.message();
            ASSERT_TRUE(fast.status.ok()) << fast.status.message();
            EXPECT_EQ(fast.packed, ref.packed);
            EXPECT_EQ(fast.scales, ref.scales);
            EXPECT_EQ(fast.zero_points, ref.zero_points);
          }
        }
      }
    }
  }
}

TEST_P(SearchSimdTest, RowBlocksGiveTheSameBytesAsTheWholeTensor) {
  const QuantParams p{4, true, 128};
  const int64_t rows = 7, cols = 256;
  std::mt19937 rng(3);
  const std::vector<uint8_t> bytes =
      Encode(DType::kBF16, Values(rng, DType::kBF16, rows * cols, 0.002f));
  const Output whole = RunQuantizer(QuantizeRowsSearchFast, p, DType::kBF16, bytes, rows, cols);
  Output split = whole;
  for (int64_t r = 0; r < rows; r += 3) {
    const int64_t n = std::min<int64_t>(3, rows - r);
    const RowBlockQuantOutput view{split.packed.data() + r * PackedWords(cols, 4),
                                   split.scales.data() + r * 2 * 2, nullptr};
    std::fill(view.packed, view.packed + n * PackedWords(cols, 4), 0);
    ASSERT_TRUE(
        QuantizeRowsSearchFast(p, DType::kBF16, bytes.data() + r * cols * 2, n, cols, view).ok());
  }
  EXPECT_EQ(split.packed, whole.packed);
  EXPECT_EQ(split.scales, whole.scales);
}

TEST_P(SearchSimdTest, BadDataGivesTheReferenceError) {
  const QuantParams p{4, true, 128};
  std::mt19937 rng(5);
  std::vector<float> w = Values(rng, DType::kF32, 2 * 128, 0.01f);
  w[128 + 9] = std::numeric_limits<float>::infinity();
  const std::vector<uint8_t> bytes = Encode(DType::kF32, w);
  const Output ref = RunQuantizer(QuantizeRowsSearch, p, DType::kF32, bytes, 2, 128);
  const Output fast = RunQuantizer(QuantizeRowsSearchFast, p, DType::kF32, bytes, 2, 128);
  EXPECT_EQ(fast.status.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(fast.status.code(), ref.status.code());
  EXPECT_EQ(fast.status.message(), ref.status.message());
  // Rejected before any data is read: the reference's message too.
  const Output bad_group =
      RunQuantizer(QuantizeRowsSearchFast, {4, true, 96}, DType::kF32, bytes, 2, 128);
  EXPECT_EQ(bad_group.status.code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace spk
