#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace spk::bench {
namespace {

TEST(Summarize, HandComputed) {
  std::vector<double> v{1, 2, 3, 4, 10};
  Summary s = Summarize(v);
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 4.0);
  ASSERT_TRUE(s.stdev.has_value());
  EXPECT_NEAR(*s.stdev, 3.5355339, 1e-6);  // sqrt(50 / 4): SAMPLE stdev, n-1
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_DOUBLE_EQ(s.mad, 1.0);  // |dev| = {2,1,0,1,7}
  EXPECT_NEAR(s.relative_mad, 1.0 / 3.0, 1e-12);
}

TEST(Summarize, EvenCountMedianAndSingleValue) {
  std::vector<double> even{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Summarize(even).median, 2.5);
  std::vector<double> one{7};
  Summary s = Summarize(one);
  EXPECT_FALSE(s.stdev.has_value());
  EXPECT_DOUBLE_EQ(s.mad, 0);
}

TEST(StudentT, TableValues) {
  EXPECT_DOUBLE_EQ(StudentT975(1), 12.706);
  EXPECT_DOUBLE_EQ(StudentT975(2), 4.303);
  EXPECT_DOUBLE_EQ(StudentT975(11), 2.201);
  EXPECT_DOUBLE_EQ(StudentT975(1000), 1.960);
}

TEST(EstimateRatio, PairedLogRatiosByBlock) {
  std::vector<Pair> pairs{{100, 110}, {100, 120}, {100, 115}};
  std::vector<size_t> blocks{0, 1, 2};
  RatioEstimate e = EstimateRatio(pairs, blocks);
  EXPECT_EQ(e.n_pairs, 3u);
  EXPECT_NEAR(e.ratio, 1.15, 1e-12);  // 345 / 300
  EXPECT_NEAR(e.log_ratio, 0.13913121, 1e-7);
  ASSERT_TRUE(e.log_ratio_se.has_value());
  EXPECT_NEAR(*e.log_ratio_se, 0.02512000, 1e-7);
  EXPECT_NEAR(*e.ci_low, 1.03152662, 1e-6);
  EXPECT_NEAR(*e.ci_high, 1.28046410, 1e-6);
  ASSERT_TRUE(e.bootstrap_low.has_value());
  EXPECT_GE(*e.bootstrap_low, 1.10 - 1e-9);  // resampled ratios lie within the block ratios
  EXPECT_LE(*e.bootstrap_high, 1.20 + 1e-9);
  // Fixed seed: the same input gives the same bootstrap interval.
  RatioEstimate again = EstimateRatio(pairs, blocks);
  EXPECT_EQ(*again.bootstrap_low, *e.bootstrap_low);
}

TEST(EstimateRatio, PairsInOneBlockAreAveragedFirst) {
  // Two cells per block: the t interval uses one log ratio per block.
  std::vector<Pair> pairs{{100, 110}, {50, 55}, {100, 120}, {50, 60}};
  std::vector<size_t> blocks{0, 0, 1, 1};
  RatioEstimate e = EstimateRatio(pairs, blocks);
  double l1 = std::log(1.1), l2 = std::log(1.2);
  EXPECT_NEAR(e.log_ratio, (l1 + l2) / 2, 1e-12);
  EXPECT_NEAR(*e.log_ratio_se, std::fabs(l2 - l1) / std::sqrt(2.0) / std::sqrt(2.0), 1e-12);
}

TEST(EstimateRatio, OneBlockHasNoInterval) {
  std::vector<Pair> pairs{{100, 110}};
  std::vector<size_t> blocks{0};
  RatioEstimate e = EstimateRatio(pairs, blocks);
  EXPECT_NEAR(e.ratio, 1.1, 1e-12);
  EXPECT_FALSE(e.ci_low.has_value());
  EXPECT_FALSE(e.bootstrap_low.has_value());
}

TEST(EstimateRatioOfTotals, EqualDenominatorsIsTheTIntervalOverGroupRatios) {
  // Per-block ratios 0.6, 0.9, 0.75: mean 0.75, sample stdev 0.15, se 0.15 / sqrt(3), t(2) 4.303.
  std::vector<double> accepted{6, 9, 7.5}, drafts{10, 10, 10};
  RatioOfTotals r = EstimateRatioOfTotals(accepted, drafts);
  EXPECT_EQ(r.n_groups, 3u);
  EXPECT_DOUBLE_EQ(r.ratio, 0.75);
  ASSERT_TRUE(r.se.has_value());
  EXPECT_NEAR(*r.se, 0.15 / std::sqrt(3.0), 1e-15);
  EXPECT_NEAR(*r.ci_low, 0.75 - 4.303 * 0.15 / std::sqrt(3.0), 1e-15);   // 0.377349...
  EXPECT_NEAR(*r.ci_high, 0.75 + 4.303 * 0.15 / std::sqrt(3.0), 1e-15);  // 1.122651...
  EXPECT_NEAR(*r.ci_low, 0.37734926875155606, 1e-15);
  EXPECT_NEAR(*r.ci_high, 1.122650731248444, 1e-15);
}

TEST(EstimateRatioOfTotals, UnequalDenominatorsAreCenteredOnTheRatioOfTotals) {
  // ratio = 8 / 12; residuals num - ratio * den = -1/3, 0, 1/3; se = sqrt((2/9) / 6) / 4.
  std::vector<double> accepted{1, 4, 3}, drafts{2, 6, 4};
  RatioOfTotals r = EstimateRatioOfTotals(accepted, drafts);
  EXPECT_DOUBLE_EQ(r.ratio, 2.0 / 3.0);
  EXPECT_NEAR(*r.se, std::sqrt(1.0 / 27.0) / 4.0, 1e-15);
  EXPECT_NEAR(*r.ci_low, 0.4596384826397533, 1e-15);
  EXPECT_NEAR(*r.ci_high, 0.87369485069358, 1e-15);
}

TEST(EstimateRatioOfTotals, BoundsClampedAndBlocksThatAcceptedNothing) {
  // ratio 1/3, se 1/3, half width 4.303 / 3 > 1/3: the low bound is 0, not negative.
  std::vector<double> accepted{0, 0, 3}, drafts{3, 3, 3};
  RatioOfTotals r = EstimateRatioOfTotals(accepted, drafts);
  EXPECT_DOUBLE_EQ(r.ratio, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(*r.ci_low, 0.0);
  EXPECT_NEAR(*r.ci_high, 1.0 / 3.0 + 4.303 / 3.0, 1e-15);
  // A rate's high bound is clamped at its largest possible value.
  EXPECT_DOUBLE_EQ(*EstimateRatioOfTotals(accepted, drafts, 1.0).ci_high, 1.0);
}

TEST(EstimateRatioOfTotals, OneBlockHasNoInterval) {
  std::vector<double> accepted{5}, drafts{4};
  RatioOfTotals r = EstimateRatioOfTotals(accepted, drafts);
  EXPECT_DOUBLE_EQ(r.ratio, 1.25);
  EXPECT_FALSE(r.se.has_value());
  EXPECT_FALSE(r.ci_low.has_value());
  EXPECT_FALSE(r.ci_high.has_value());
}

TEST(PoolInverseVariance, HandComputed) {
  std::vector<LogRatio> machines{{0.1, 0.05}, {0.2, 0.1}};
  PooledEstimate p = PoolInverseVariance(machines);
  EXPECT_NEAR(p.log_ratio, 0.12, 1e-12);  // weights 400 and 100
  EXPECT_NEAR(p.log_ratio_se, 1 / std::sqrt(500.0), 1e-12);
  EXPECT_NEAR(p.ratio, std::exp(0.12), 1e-12);
  EXPECT_NEAR(p.ci_low, std::exp(0.12 - 1.96 / std::sqrt(500.0)), 1e-12);
}

}  // namespace
}  // namespace spk::bench
