#include "bench/stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <random>

namespace spk::bench {
namespace {

double Mean(std::span<const double> v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

std::optional<double> SampleStdev(std::span<const double> v) {
  if (v.size() < 2) return std::nullopt;
  double m = Mean(v), ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

double Median(std::vector<double> values) {
  assert(!values.empty());
  return Percentile(std::move(values), 0.5);
}

Summary Summarize(std::span<const double> values) {
  assert(!values.empty());
  Summary s;
  s.n = values.size();
  s.mean = Mean(values);
  s.stdev = SampleStdev(values);
  s.median = Median({values.begin(), values.end()});
  std::vector<double> deviations;
  for (double x : values) deviations.push_back(std::fabs(x - s.median));
  s.mad = Median(deviations);
  s.relative_mad = s.median != 0 ? s.mad / std::fabs(s.median) : 0;
  return s;
}

double StudentT975(size_t df) {
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                      2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                      2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                      2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  assert(df >= 1);
  if (df <= 30) return kTable[df - 1];
  if (df <= 40) return 2.042 + (2.021 - 2.042) * static_cast<double>(df - 30) / 10.0;
  if (df <= 60) return 2.021 + (2.000 - 2.021) * static_cast<double>(df - 40) / 20.0;
  if (df <= 120) return 2.000 + (1.980 - 2.000) * static_cast<double>(df - 60) / 60.0;
  return 1.960;
}

RatioEstimate EstimateRatio(std::span<const Pair> pairs, std::span<const size_t> group_of_pair,
                            uint64_t seed, size_t bootstrap_reps) {
  assert(pairs.size() == group_of_pair.size());
  RatioEstimate e;
  e.n_pairs = pairs.size();
  if (pairs.empty()) return e;
  double sum_base = 0, sum_arm = 0;
  std::map<size_t, std::vector<double>> logs_by_group;
  std::map<size_t, std::vector<size_t>> members;
  for (size_t i = 0; i < pairs.size(); ++i) {
    sum_base += pairs[i].baseline;
    sum_arm += pairs[i].arm;
    logs_by_group[group_of_pair[i]].push_back(std::log(pairs[i].arm / pairs[i].baseline));
    members[group_of_pair[i]].push_back(i);
  }
  e.ratio = sum_arm / sum_base;
  std::vector<double> group_logs;
  for (const auto& [group, logs] : logs_by_group) group_logs.push_back(Mean(logs));
  e.log_ratio = Mean(group_logs);
  if (group_logs.size() < 2) return e;
  double se = *SampleStdev(group_logs) / std::sqrt(static_cast<double>(group_logs.size()));
  double t = StudentT975(group_logs.size() - 1);
  e.log_ratio_se = se;
  e.ci_low = std::exp(e.log_ratio - t * se);
  e.ci_high = std::exp(e.log_ratio + t * se);

  // Block bootstrap: resample whole groups with replacement, recompute the ratio of means.
  std::vector<const std::vector<size_t>*> groups;
  for (const auto& [group, idx] : members) groups.push_back(&idx);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, groups.size() - 1);
  std::vector<double> ratios;
  ratios.reserve(bootstrap_reps);
  for (size_t r = 0; r < bootstrap_reps; ++r) {
    double b = 0, a = 0;
    for (size_t k = 0; k < groups.size(); ++k) {
      for (size_t i : *groups[pick(rng)]) {
        b += pairs[i].baseline;
        a += pairs[i].arm;
      }
    }
    ratios.push_back(a / b);
  }
  e.bootstrap_low = Percentile(ratios, 0.025);
  e.bootstrap_high = Percentile(ratios, 0.975);
  return e;
}

RatioOfTotals EstimateRatioOfTotals(std::span<const double> numerators,
                                    std::span<const double> denominators, double max_ratio) {
  assert(numerators.size() == denominators.size());
  RatioOfTotals r;
  r.n_groups = numerators.size();
  double sum_num = 0, sum_den = 0;
  for (size_t g = 0; g < r.n_groups; ++g) {
    sum_num += numerators[g];
    sum_den += denominators[g];
  }
  assert(sum_den > 0);
  r.ratio = sum_num / sum_den;
  if (r.n_groups < 2) return r;
  const double n = static_cast<double>(r.n_groups);
  double ss = 0;
  for (size_t g = 0; g < r.n_groups; ++g) {
    double residual = numerators[g] - r.ratio * denominators[g];
    ss += residual * residual;
  }
  double se = std::sqrt(ss / (n * (n - 1))) / (sum_den / n);
  double half = StudentT975(r.n_groups - 1) * se;
  r.se = se;
  r.ci_low = std::max(0.0, r.ratio - half);
  r.ci_high = std::min(max_ratio, r.ratio + half);
  return r;
}

PooledEstimate PoolInverseVariance(std::span<const LogRatio> machines) {
  assert(!machines.empty());
  double weight_sum = 0, weighted = 0;
  for (const LogRatio& m : machines) {
    double w = 1.0 / (m.se * m.se);
    weight_sum += w;
    weighted += w * m.log_ratio;
  }
  PooledEstimate p;
  p.n = machines.size();
  p.log_ratio = weighted / weight_sum;
  p.log_ratio_se = 1.0 / std::sqrt(weight_sum);
  p.ratio = std::exp(p.log_ratio);
  p.ci_low = std::exp(p.log_ratio - 1.96 * p.log_ratio_se);
  p.ci_high = std::exp(p.log_ratio + 1.96 * p.log_ratio_se);
  return p;
}

}  // namespace spk::bench
