// One measured request: stream a completion, time every token-carrying chunk, read the token count
// from `usage` (never from the number of chunks: under speculative decoding one chunk carries
// several tokens), and difference the server's speculative-decoding counters around it.
//
// Ownership: values. Thread safety: reentrant. Error policy: no exceptions; a request that fails
// (HTTP error, malformed stream, timeout, truncated output) is a RequestRecord with ok=false and
// the reason, so that failures are counted, not hidden. Only cancellation is returned as a Status.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "base/status.h"
#include "bench/counters.h"
#include "http/http_client.h"

namespace spk::bench {

struct RequestSettings {
  std::string model;  // sent as "model" when not empty
  bool chat = false;
  size_t max_tokens = 256;
  // true: exactly max_tokens tokens (min_tokens = max_tokens, ignore_eos), fewer is a truncated,
  // failed request. false (--prompts): generation ends at EOS as it would in use, so a response
  // with fewer tokens is complete.
  bool ignore_eos = true;
  std::chrono::milliseconds timeout{300000};
  bool scrape_metrics = true;
  std::chrono::milliseconds settle_timeout{10000};  // waiting for counters to settle
  const std::atomic<bool>* cancel = nullptr;
};

struct RequestRecord {
  std::string arm;
  size_t arm_index = 0;
  size_t block = 0;          // ABBA block; meaningless for warm-up requests
  size_t prompt_length = 0;  // the cell (target prompt tokens)
  size_t variant = 0;
  bool warmup = false;
  double started_s = 0;  // seconds since the benchmark started

  bool ok = false;        // complete and timed: counts for the decode rate
  bool complete = false;  // every requested token came back: counts for acceptance even when the
                          // stream could not be timed (it arrived in a burst, or in one chunk)
  std::string error;
  int http_status = 0;
  std::optional<long long> prompt_tokens;      // from usage
  std::optional<long long> completion_tokens;  // from usage
  long long first_chunk_tokens = 1;
  std::string first_chunk_tokens_source;  // "token_ids" or "assumed 1 (no token_ids in the stream)"
  size_t token_chunks = 0;
  double ttft_s = 0;
  double decode_s = 0;  // first to last token chunk
  double total_s = 0;
  double decode_tok_s = 0;
  std::optional<SpecCounters> spec;              // counter deltas around this request
  std::string spec_note;                         // why spec is absent, when it is
  nlohmann::json response_spec_stats = nullptr;  // per-request stats sent by the server, verbatim
  nlohmann::json server_spec_gauges = nullptr;   // SGLang's windowed gauges after the request

  nlohmann::json ToJson() const;
};

// The request body for a completion (or chat completion) of `prompt`: greedy, fixed output length
// (unless !ignore_eos), streaming with usage, thinking off.
// `prompt` is a string, or (completions only) an array of token ids, or (chat only) the messages
// array itself, sent verbatim.
nlohmann::json BuildRequestBody(const nlohmann::json& prompt, const RequestSettings& settings);

// Scrapes /metrics until the server is idle (running == 0) and two scrapes agree. Returns nullopt
// counters inside the snapshot when the server has none; an error when /metrics cannot be read.
Result<MetricsSnapshot> ScrapeSettled(const http::Url& url, const RequestSettings& settings);

// Measures one request. `record` carries the identification fields in and the measurement out.
Status MeasureRequest(const http::Url& url, const nlohmann::json& prompt,
                      const RequestSettings& settings,
                      std::chrono::steady_clock::time_point bench_start, RequestRecord* record);

}  // namespace spk::bench
