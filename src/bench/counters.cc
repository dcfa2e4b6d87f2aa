#include "bench/counters.h"

#include <cstdlib>
#include <string_view>

namespace spk::bench {
namespace {

// Strips a known server prefix and an optional `_total`; returns "" for other metrics and
// `_created`.
std::string_view CounterBaseName(std::string_view name) {
  for (std::string_view prefix : {"vllm:", "llamacpp:"}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    name.remove_prefix(prefix.size());
    constexpr std::string_view kCreated = "_created";
    if (name.size() >= kCreated.size() && name.substr(name.size() - kCreated.size()) == kCreated) {
      return {};
    }
    constexpr std::string_view kTotal = "_total";
    if (name.size() >= kTotal.size() && name.substr(name.size() - kTotal.size()) == kTotal) {
      name.remove_suffix(kTotal.size());
    }
    return name;
  }
  return {};
}

// Mean of the series of one gauge over its label sets.
struct GaugeMean {
  double sum = 0;
  int n = 0;
  void Add(double v) {
    sum += v;
    ++n;
  }
  std::optional<double> Value() const {
    return n > 0 ? std::optional<double>(sum / n) : std::nullopt;
  }
};

}  // namespace

SpecCounters SpecCounters::operator-(const SpecCounters& before) const {
  SpecCounters d;
  d.drafts = drafts - before.drafts;
  d.draft_tokens = draft_tokens - before.draft_tokens;
  d.accepted_tokens = accepted_tokens - before.accepted_tokens;
  for (const auto& [pos, value] : accepted_per_position) {
    auto it = before.accepted_per_position.find(pos);
    d.accepted_per_position[pos] =
        value - (it == before.accepted_per_position.end() ? 0 : it->second);
  }
  return d;
}

SpecCounters& SpecCounters::operator+=(const SpecCounters& other) {
  drafts += other.drafts;
  draft_tokens += other.draft_tokens;
  accepted_tokens += other.accepted_tokens;
  for (const auto& [pos, value] : other.accepted_per_position) accepted_per_position[pos] += value;
  return *this;
}

MetricsSnapshot ExtractMetrics(const std::vector<http::MetricSample>& samples) {
  MetricsSnapshot snapshot;
  SpecCounters spec;
  bool any_spec = false;
  GaugeMean accept_length, accept_rate;
  for (const http::MetricSample& s : samples) {
    if (s.name == "sglang:num_running_reqs") {
      snapshot.requests_running = snapshot.requests_running.value_or(0) + s.value;
      continue;
    }
    if (s.name == "sglang:spec_accept_length") accept_length.Add(s.value);
    if (s.name == "sglang:spec_accept_rate") accept_rate.Add(s.value);
    std::string_view base = CounterBaseName(s.name);
    if (base.empty()) continue;
    if (base == "num_requests_running" || base == "requests_processing") {
      snapshot.requests_running = snapshot.requests_running.value_or(0) + s.value;
      continue;
    }
    double* target = nullptr;
    if (base == "spec_decode_num_drafts") target = &spec.drafts;
    if (base == "spec_decode_num_draft_tokens") target = &spec.draft_tokens;
    if (base == "spec_decode_num_accepted_tokens") target = &spec.accepted_tokens;
    if (base == "spec_decode_num_accepted_tokens_per_pos") {
      std::string position = s.Label("position");
      if (position.empty()) continue;
      target = &spec.accepted_per_position[std::atoi(position.c_str())];
    }
    if (target == nullptr) continue;
    *target += s.value;
    any_spec = true;
  }
  if (any_spec) snapshot.spec = spec;
  snapshot.sglang_accept_length = accept_length.Value();
  snapshot.sglang_accept_rate = accept_rate.Value();
  return snapshot;
}

}  // namespace spk::bench
