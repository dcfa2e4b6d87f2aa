// Speculative-decoding counters read from a server's /metrics page, and their differences.
//
// Schemas: vLLM `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
// `..._num_accepted_tokens_total`, `..._num_accepted_tokens_per_pos_total{position}`; llama-server
// the same names under `llamacpp:`, with or without `_total`. Series are SUMMED over every label
// set (the `engine` label of a multi-engine server, model names); `*_created` series are ignored.
// SGLang has no spec-decode counters, only windowed gauges (`sglang:spec_accept_length`,
// `sglang:spec_accept_rate`, averaged over label sets) that cannot be differenced; they are kept as
// server-reported context, and `sglang:num_running_reqs` is its idle signal.
// Absent counters mean "no speculative decoding", never zero. Ownership: plain values. Thread
// safety: pure functions. Error policy: no exceptions; nothing can fail.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "http/prometheus.h"

namespace spk::bench {

struct SpecCounters {
  double drafts = 0;           // verification steps
  double draft_tokens = 0;     // tokens proposed by the draft
  double accepted_tokens = 0;  // proposed tokens the target accepted
  std::map<int, double> accepted_per_position;

  SpecCounters operator-(const SpecCounters& before) const;
  SpecCounters& operator+=(const SpecCounters& other);
  bool operator==(const SpecCounters& other) const = default;
};

struct MetricsSnapshot {
  std::optional<SpecCounters> spec;  // nullopt: the server exposes no spec-decode counters
  std::optional<double>
      requests_running;  // vllm:num_requests_running, llamacpp:requests_processing, sglang:...
  std::optional<double> sglang_accept_length;  // gauges: not differenceable
  std::optional<double> sglang_accept_rate;
};

MetricsSnapshot ExtractMetrics(const std::vector<http::MetricSample>& samples);

}  // namespace spk::bench
