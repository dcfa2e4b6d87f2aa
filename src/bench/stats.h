// Statistics for the benchmark: per-cell summaries, the ratio of two arms with a 95% confidence
// interval (paired log ratios by block, and a block bootstrap), and inverse-variance pooling of
// per-machine log ratios.
//
// Conventions: stdev is the SAMPLE standard deviation (n-1); MAD is the raw median absolute
// deviation from the median (not scaled to sigma); relative MAD = MAD / median. Ownership: values
// in, values out. Thread safety: pure functions (the bootstrap seeds its own generator). Error
// policy: no exceptions; figures that need more data than given are nullopt.
#pragma once

#include <cstddef>
#include <cstdint>
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
