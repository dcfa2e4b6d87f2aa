// Unit tests of the scale search: never worse than RTN per group (on many random groups of several
// distributions, dtypes and schemes), valid output, determinism, and the row driver's contract
// (same errors as RTN, dequantizes through DequantizeRows). The checkpoint-level comparison with
// compressed-tensors is tests/python/test_search.py.
#include "quant/search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tensor/float_convert.h"

namespace spk {
namespace {

enum class Shape { kGaussian, kLaplace, kOutlier, kTiny };

// A group of `n` values of `dtype` (as floats): Gaussian, Laplace, Gaussian with one large outlier,
// or values near the smallest normal numbers of the dtype.
std::vector<float> RandomGroup(std::mt19937& rng, Shape shape, DType dtype, size_t n) {
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::exponential_distribution<float> expo(50.0f);
  std::bernoulli_distribution coin(0.5);
  std::vector<float> w(n);
  for (float& v : w) {
    switch (shape) {
      case Shape::kGaussian:
      case Shape::kOutlier:
        v = gauss(rng);
        break;
      case Shape::kLaplace:
        v = coin(rng) ? expo(rng) : -expo(rng);
        break;
      case Shape::kTiny:
        v = gauss(rng) * (dtype == DType::kF16 ? 1e-3f : 1e-30f);
        break;
    }
  }
  if (shape == Shape::kOutlier) w[rng() % n] = coin(rng) ? 0.3f : -0.3f;
  for (float& v : w) v = RoundToDType(v, dtype);
  return w;
}

struct Case {
  QuantParams params;
  DType dtype;
};

std::string Name(const Case& c) {
  return std::string(DTypeName(c.dtype)) + " bits " + std::to_string(c.params.bits) +
         (c.params.symmetric ? " sym" : " asym");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int bits : {3, 4, 8}) {  // 3: a width whose values straddle int32 words
      for (bool symmetric : {true, false}) cases.push_back({{bits, symmetric, 128}, dtype});
    }
  }
  return cases;
}

struct GroupResult {
  GroupQuantParams rtn, search;
  std::vector<int8_t> q_rtn, q_search;
  double rtn_error, search_error;  // the search's objective (weighted by GroupImportance)
  double rtn_sse, search_sse;      // plain squared error
};

GroupResult QuantizeBoth(const Case& c, const std::vector<float>& w) {
  GroupResult r;
  r.rtn = ComputeGroupScale(c.params, c.dtype, GroupMinMax(w));
  r.q_rtn.resize(w.size());
  QuantizeGroupWithScale(c.params, c.dtype, w, r.rtn, r.q_rtn);
  r.q_search = r.q_rtn;
  r.search = SearchGroup(c.params, c.dtype, w, r.rtn, r.q_search);
  std::vector<float> importance(w.size());
  GroupImportance(w, importance);
  r.rtn_error = GroupSquaredError(c.dtype, w, r.q_rtn, r.rtn, importance);
  r.search_error = GroupSquaredError(c.dtype, w, r.q_search, r.search, importance);
  r.rtn_sse = GroupSquaredError(c.dtype, w, r.q_rtn, r.rtn);
  r.search_sse = GroupSquaredError(c.dtype, w, r.q_search, r.search);
  return r;
}

void ExpectValidFormat(const Case& c, const GroupResult& r) {
  EXPECT_TRUE(std::isfinite(r.search.scale) && r.search.scale != 0) << r.search.scale;
  if (!c.params.symmetric) {
    EXPECT_GT(r.search.scale, 0);
  }
  EXPECT_EQ(RoundToDType(r.search.scale, c.dtype), r.search.scale) << "scale not in the dtype";
  if (c.params.symmetric) {
    EXPECT_EQ(r.search.zero_point, 0);
  } else {
    EXPECT_GE(r.search.zero_point, QMin(c.params.bits));
    EXPECT_LE(r.search.zero_point, QMax(c.params.bits));
  }
  for (int8_t v : r.q_search) {
    ASSERT_GE(v, QMin(c.params.bits));
    ASSERT_LE(v, QMax(c.params.bits));
  }
}

TEST(SearchGroup, NeverWorseThanRtnAndValidOnManyRandomGroups) {
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Name(c));
    std::mt19937 rng(1234);
    for (Shape shape : {Shape::kGaussian, Shape::kLaplace, Shape::kOutlier, Shape::kTiny}) {
      for (int trial = 0; trial < 150; ++trial) {
        const std::vector<float> w = RandomGroup(rng, shape, c.dtype, 128);
        const GroupResult r = QuantizeBoth(c, w);
        ASSERT_LE(r.search_error, r.rtn_error) << "shape " << static_cast<int>(shape);
        ExpectValidFormat(c, r);
      }
    }
  }
}

// The gain on Gaussian groups, 4-bit symmetric: in the search's weighted objective and in plain
// squared error (lower, by less: the objective gives up some plain error to keep the large weights
// close; docs/quality.md).
TEST(SearchGroup, CutsFourBitErrorOnGaussianGroups) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    const Case c{{4, true, 128}, dtype};
    std::mt19937 rng(7);
    double rtn = 0, search = 0, rtn_sse = 0, search_sse = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const GroupResult r = QuantizeBoth(c, RandomGroup(rng, Shape::kGaussian, dtype, 128));
      rtn += r.rtn_error, search += r.search_error;
      rtn_sse += r.rtn_sse, search_sse += r.search_sse;
    }
    EXPECT_LT(search / rtn, 0.90) << DTypeName(dtype);
    EXPECT_LT(search_sse / rtn_sse, 0.96) << DTypeName(dtype);
  }
}

// The point of the weights: the search may not buy a lower error of the small weights by clipping
// a group's largest one far (as plain squared error does): its error stays within RTN's half step.
TEST(SearchGroup, KeepsEachGroupsPeakWeightClose) {
  const Case c{{4, true, 128}, DType::kBF16};
  std::mt19937 rng(11);
  for (Shape shape : {Shape::kGaussian, Shape::kLaplace, Shape::kOutlier}) {
    for (int trial = 0; trial < 200; ++trial) {
      const std::vector<float> w = RandomGroup(rng, shape, c.dtype, 128);
      const GroupResult r = QuantizeBoth(c, w);
      size_t peak = 0;
      for (size_t i = 1; i < w.size(); ++i) peak = std::abs(w[i]) > std::abs(w[peak]) ? i : peak;
      const float rebuilt = RoundToDType(r.q_search[peak] * r.search.scale, c.dtype);
      ASSERT_LE(std::abs(w[peak] - rebuilt), 0.75f * r.rtn.scale)
          << "shape " << static_cast<int>(shape) << " trial " << trial;
    }
  }
}

// The asymmetric search's gain on Gaussian BF16 groups, in its weighted objective and in plain
// squared error; larger at 8 bits, where the neighbouring scales of the refit matter most.
TEST(SearchGroup, CutsAsymmetricErrorOnGaussianGroups) {
  for (int bits : {4, 8}) {
    const Case c{{bits, false, 128}, DType::kBF16};
    std::mt19937 rng(17);
    double rtn = 0, search = 0, rtn_sse = 0, search_sse = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const GroupResult r = QuantizeBoth(c, RandomGroup(rng, Shape::kGaussian, c.dtype, 128));
      rtn += r.rtn_error, search += r.search_error;
      rtn_sse += r.rtn_sse, search_sse += r.search_sse;
    }
    EXPECT_LT(search / rtn, bits == 4 ? 0.97 : 0.85) << bits;
    EXPECT_LT(search_sse / rtn_sse, bits == 4 ? 0.99 : 0.85) << bits;
  }
}

// Groups of one sign put RTN's zero point at an end of the range: the candidates next to it must
// not leave the range.
TEST(SearchGroup, KeepsZeroPointsInRangeForOneSidedGroups) {
  for (const Case& c : AllCases()) {
    if (c.params.symmetric) continue;
    SCOPED_TRACE(Name(c));
    std::mt19937 rng(21);
    for (float sign : {1.0f, -1.0f}) {
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> w = RandomGroup(rng, Shape::kLaplace, c.dtype, 128);
        for (float& v : w) v = sign * std::fabs(v);
        const GroupResult r = QuantizeBoth(c, w);
        ASSERT_LE(r.search_error, r.rtn_error);
        ExpectValidFormat(c, r);
      }
    }
  }
}

TEST(SearchGroup, KeepsAllZeroGroupAsRtn) {
  const Case c{{4, true, 128}, DType::kBF16};
  const GroupResult r = QuantizeBoth(c, std::vector<float>(128, 0.0f));
  EXPECT_EQ(r.search.scale, r.rtn.scale);
  EXPECT_EQ(r.q_search, r.q_rtn);
  EXPECT_EQ(r.search_error, 0.0);
}

TEST(SearchGroup, HandlesGroupsWhoseWidthIsNotAMultipleOfEight) {
  const Case c{{4, true, 128}, DType::kBF16};
  std::mt19937 rng(3);
  for (size_t n : {1u, 3u, 13u, 100u}) {
    const GroupResult r = QuantizeBoth(c, RandomGroup(rng, Shape::kGaussian, c.dtype, n));
    EXPECT_LE(r.search_error, r.rtn_error) << n;
    ExpectValidFormat(c, r);
  }
}

TEST(SearchGroup, IsDeterministic) {
  const Case c{{4, true, 128}, DType::kBF16};
  std::mt19937 rng(11);
  const std::vector<float> w = RandomGroup(rng, Shape::kLaplace, c.dtype, 128);
  const GroupResult a = QuantizeBoth(c, w), b = QuantizeBoth(c, w);
  EXPECT_EQ(a.search.scale, b.search.scale);
  EXPECT_EQ(a.q_search, b.q_search);
}

// A weight matrix quantized by the row driver, with RTN's outputs for comparison.
struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Matrix RandomMatrix(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Matrix m;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row = RandomGroup(rng, Shape::kOutlier, dtype, cols);
    m.values.insert(m.values.end(), row.begin(), row.end());
  }
  m.bytes.resize(m.values.size() * DTypeBits(dtype) / 8);
  ConvertFromFloat(dtype, m.values.data(), m.bytes.data(), m.values.size());
  return m;
}

struct RowOutput {
  std::vector<int32_t> packed;
  std::vector<uint8_t> scales;
  std::vector<int32_t> zero_points;
  RowBlockQuantOutput view() {
    return {packed.data(), scales.data(), zero_points.empty() ? nullptr : zero_points.data()};
  }
};

RowOutput MakeOutput(const QuantParams& p, DType dtype, int64_t rows, int64_t cols) {
  RowOutput o;
  o.packed.resize(static_cast<size_t>(rows * PackedWords(cols, p.bits)));
  o.scales.resize(static_cast<size_t>(rows * GroupsPerRow(cols, p.group_size)) * DTypeBits(dtype) /
                  8);
  if (!p.symmetric)
    o.zero_points.resize(static_cast<size_t>(rows * GroupsPerRow(cols, p.group_size)));
  return o;
}

// Sum of squared differences between `m` and the dequantized output; `weighted`: each weighted by
// GroupImportance of its group, the symmetric search's objective.
double MatrixError(const QuantParams& p, DType dtype, const Matrix& m, RowOutput& o, int64_t rows,
                   int64_t cols, bool weighted = false) {
  std::vector<uint8_t> out(m.bytes.size());
  const Status s = DequantizeRows(p, dtype, o.packed.data(), o.scales.data(),
                                  o.zero_points.empty() ? nullptr : o.zero_points.data(), rows,
                                  cols, out.data());
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<float> values(m.values.size());
  ConvertToFloat(dtype, out.data(), values.data(), values.size());
  std::vector<float> importance(values.size(), 1.0f);
  const size_t width = static_cast<size_t>(GroupWidth(cols, p.group_size));
  for (size_t first = 0; weighted && first < values.size(); first += width) {
    GroupImportance(std::span(m.values).subspan(first, width),
                    std::span(importance).subspan(first, width));
  }
  double err = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    err +=
        importance[i] * (static_cast<double>(m.values[i]) - values[i]) * (m.values[i] - values[i]);
  }
  return err;
}

TEST(QuantizeRowsSearch, BeatsRtnThroughDequantizeRowsForEveryScheme) {
  const int64_t rows = 16, cols = 256;
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Name(c));
    for (int64_t group : {int64_t{128}, kChannelWise}) {
      const QuantParams p{c.params.bits, c.params.symmetric, group};
      const Matrix m = RandomMatrix(c.dtype, rows, cols, 5);
      RowOutput rtn = MakeOutput(p, c.dtype, rows, cols);
      RowOutput search = MakeOutput(p, c.dtype, rows, cols);
      ASSERT_TRUE(QuantizeRowsRtn(p, c.dtype, m.bytes.data(), rows, cols, rtn.view()).ok());
      ASSERT_TRUE(QuantizeRowsSearch(p, c.dtype, m.bytes.data(), rows, cols, search.view()).ok());
      // The objective, weighted by GroupImportance.
      const double rtn_error = MatrixError(p, c.dtype, m, rtn, rows, cols, /*weighted=*/true);
      const double search_error = MatrixError(p, c.dtype, m, search, rows, cols, true);
      EXPECT_LE(search_error, rtn_error);
      if (c.params.bits == 4 && c.params.symmetric) {
        EXPECT_LT(search_error, 0.9 * rtn_error);
        EXPECT_LT(MatrixError(p, c.dtype, m, search, rows, cols),
                  MatrixError(p, c.dtype, m, rtn, rows, cols));
      }
    }
  }
}

TEST(QuantizeRowsSearch, OutputDoesNotDependOnTheRowBlocks) {
  const QuantParams p{4, true, 128};
  const int64_t rows = 8, cols = 256;
  const Matrix m = RandomMatrix(DType::kBF16, rows, cols, 9);
  RowOutput whole = MakeOutput(p, DType::kBF16, rows, cols);
  ASSERT_TRUE(QuantizeRowsSearch(p, DType::kBF16, m.bytes.data(), rows, cols, whole.view()).ok());
  RowOutput split = MakeOutput(p, DType::kBF16, rows, cols);
  for (int64_t r = 0; r < rows; r += 3) {
    const int64_t n = std::min<int64_t>(3, rows - r);
    const RowBlockQuantOutput view{split.packed.data() + r * PackedWords(cols, p.bits),
                                   split.scales.data() + r * 2 * 2, nullptr};
    ASSERT_TRUE(
        QuantizeRowsSearch(p, DType::kBF16, m.bytes.data() + r * cols * 2, n, cols, view).ok());
  }
  EXPECT_EQ(whole.packed, split.packed);
  EXPECT_EQ(whole.scales, split.scales);
}

TEST(QuantizeRowsSearch, RejectsNonFiniteWeightsLikeRtn) {
  const QuantParams p{4, true, 128};
  Matrix m = RandomMatrix(DType::kF32, 2, 128, 1);
  m.values[128 + 5] = std::nanf("");
  ConvertFromFloat(DType::kF32, m.values.data(), m.bytes.data(), m.values.size());
  RowOutput o = MakeOutput(p, DType::kF32, 2, 128);
  const Status s = QuantizeRowsSearch(p, DType::kF32, m.bytes.data(), 2, 128, o.view());
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("row 1 column 5"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace spk
