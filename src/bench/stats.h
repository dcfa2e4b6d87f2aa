// Statistics for the benchmark: per-cell summaries, the ratio of two arms with a 95% confidence
// interval (paired log ratios by block, and a block bootstrap), a ratio of totals over blocks with
// its 95% interval (acceptance figures), and inverse-variance pooling of per-machine log ratios.
//
// Conventions: stdev is the SAMPLE standard deviation (n-1); MAD is the raw median absolute
// deviation from the median (not scaled to sigma); relative MAD = MAD / median. Ownership: values
// in, values out. Thread safety: pure functions (the bootstrap seeds its own generator). Error
// policy: no exceptions; figures that need more data than given are nullopt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace spk::bench {

struct Summary {
  size_t n = 0;
  double mean = 0;
  std::optional<double> stdev;  // needs n >= 2
  double median = 0;
  double mad = 0;
  double relative_mad = 0;
};

// REQUIRES: !values.empty()
Summary Summarize(std::span<const double> values);

double Median(std::vector<double> values);

// Two-sided 95% quantile of Student's t with `df` degrees of freedom (df >= 1).
double StudentT975(size_t df);

// One paired observation: the same block and cell measured on the baseline and the other arm.
struct Pair {
  double baseline = 0;
  double arm = 0;
};

struct RatioEstimate {
  size_t n_pairs = 0;
  double ratio = 0;                       // mean(arm) / mean(baseline)
  double log_ratio = 0;                   // mean of log(arm / baseline) over pairs
  std::optional<double> log_ratio_se;     // standard error of log_ratio (needs 2 pairs)
  std::optional<double> ci_low, ci_high;  // exp(log_ratio -/+ t * se)
  std::optional<double> bootstrap_low, bootstrap_high;  // percentile CI of the ratio of means
};

// REQUIRES: every value > 0. Groups: pairs sharing a group index (a block) are resampled together
// by the bootstrap; the t interval uses one log ratio per group (the mean over its pairs).
RatioEstimate EstimateRatio(std::span<const Pair> pairs, std::span<const size_t> group_of_pair,
                            uint64_t seed = 20240611, size_t bootstrap_reps = 2000);

// A ratio of totals, sum(numerator) / sum(denominator) over groups (blocks), such as vLLM's
// accepted tokens per draft, with a 95% interval that treats the groups as the independent units:
// the linearized (delta-method) standard error of a ratio estimator,
//   se = sqrt(sum_g (num_g - ratio * den_g)^2 / (n (n - 1))) / mean(den_g),
// and ratio -/+ StudentT975(n - 1) * se, clamped to [0, max_ratio] (totals are never negative; a
// rate such as accepted at position i per draft is at most 1).
// It is centered on the ratio of totals itself (the figure vLLM reports), weights a group by its
// denominator, accepts groups that accepted nothing, and with equal denominators is exactly the
// t interval over per-group ratios.
struct RatioOfTotals {
  size_t n_groups = 0;
  double ratio = 0;
  std::optional<double> se;               // needs 2 groups
  std::optional<double> ci_low, ci_high;  // needs 2 groups
};

// REQUIRES: numerators.size() == denominators.size(), every value >= 0, sum(denominators) > 0.
RatioOfTotals EstimateRatioOfTotals(std::span<const double> numerators,
                                    std::span<const double> denominators,
                                    double max_ratio = std::numeric_limits<double>::infinity());

struct PooledEstimate {
  size_t n = 0;
  double log_ratio = 0;
  double log_ratio_se = 0;
  double ratio = 0, ci_low = 0, ci_high = 0;  // exp(pooled -/+ 1.96 se)
};

struct LogRatio {
  double log_ratio = 0;
  double se = 0;  // > 0
};

// Inverse-variance weighted mean of per-machine log ratios. REQUIRES: !machines.empty().
PooledEstimate PoolInverseVariance(std::span<const LogRatio> machines);

}  // namespace spk::bench
