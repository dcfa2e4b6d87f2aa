#include "bench/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "http/prometheus.h"
#include "http/sse.h"

namespace spk::bench {
namespace {

// A stream was not observed as it was decoded when at least half of its token chunks (and at least
// kMinBurstChunks) arrived within kBurstWindow: real servers take milliseconds per verification
// step, a burst delivered at once takes microseconds per chunk.
constexpr auto kBurstWindow = std::chrono::milliseconds(1);
constexpr size_t kMinBurstChunks = 4;

using nlohmann::json;

double Seconds(http::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

json CountersToJson(const SpecCounters& c) {
  json per_pos = json::array();
  for (const auto& [pos, value] : c.accepted_per_position)
    per_pos.push_back({{"position", pos}, {"accepted", value}});
  return {{"drafts", c.drafts},
          {"draft_tokens", c.draft_tokens},
          {"accepted_tokens", c.accepted_tokens},
          {"accepted_per_position", per_pos}};
}

// State of one streamed response, fed event by event.
struct StreamState {
  bool done = false;
  std::string error;
  bool saw_first = false;
  http::Clock::time_point first, last;
  long long first_chunk_tokens = 1;
  bool first_from_ids = false;
  size_t token_chunks = 0;
  std::vector<http::Clock::time_point> chunk_times;  // arrival of every token chunk, in order
  json usage = nullptr;
  json spec_stats = nullptr;
};

// Tokens in a chunk: the count of token_ids when the server sends them, else whether it has any
// text.
void AccountChoice(const json& choice, http::Clock::time_point arrived, StreamState* state) {
  long long ids = -1;
  if (choice.contains("token_ids") && choice["token_ids"].is_array()) {
    ids = static_cast<long long>(choice["token_ids"].size());
  }
  bool has_text = false;
  auto non_empty = [](const json& obj, const char* key) {
    return obj.contains(key) && obj[key].is_string() &&
           !obj[key].get_ref<const std::string&>().empty();
  };
  if (non_empty(choice, "text")) has_text = true;
  if (choice.contains("delta") && choice["delta"].is_object()) {
    const json& delta = choice["delta"];
    has_text = has_text || non_empty(delta, "content") || non_empty(delta, "reasoning_content") ||
               non_empty(delta, "reasoning");
  }
  bool has_tokens = ids > 0 || (ids < 0 && has_text);
  if (!has_tokens) return;
  if (!state->saw_first) {
    state->saw_first = true;
    state->first = arrived;
    if (ids > 0) {
      state->first_chunk_tokens = ids;
      state->first_from_ids = true;
    }
  }
  state->last = arrived;
  ++state->token_chunks;
  state->chunk_times.push_back(arrived);
}

// The most token chunks that arrived within any kBurstWindow: a stalled server (or client) delivers
// what it held back at once, and those chunks say nothing about decoding speed.
size_t LargestBurst(const std::vector<http::Clock::time_point>& times) {
  size_t best = 0;
  for (size_t begin = 0, end = 0; end < times.size(); ++end) {
    while (times[end] - times[begin] > kBurstWindow) ++begin;
    best = std::max(best, end - begin + 1);
  }
  return best;
}

void AccountEvent(const http::SseEvent& event, http::Clock::time_point arrived,
                  StreamState* state) {
  if (!state->error.empty()) return;
  if (event.data == "[DONE]") {
    state->done = true;
    return;
  }
  if (!event.valid_utf8) {
    state->error = "malformed stream: event is not valid UTF-8";
    return;
  }
  json chunk = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    state->error =
        "malformed stream: event is not a JSON object: '" + event.data.substr(0, 120) + "'";
    return;
  }
  if (chunk.contains("error")) {
    state->error = "server reported an error mid-stream: " + chunk["error"].dump().substr(0, 300);
    return;
  }
  if (chunk.contains("choices") && chunk["choices"].is_array()) {
    for (const json& choice : chunk["choices"]) {
      if (choice.is_object()) AccountChoice(choice, arrived, state);
    }
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) state->usage = chunk["usage"];
  // vLLM --per-request-spec-decode-metrics; SGLang meta_info.spec_verify_ct.
  if (chunk.contains("metrics") && chunk["metrics"].is_object() &&
      chunk["metrics"].contains("speculative_decoding")) {
    state->spec_stats = chunk["metrics"]["speculative_decoding"];
  } else if (state->usage.is_object() && state->usage.contains("speculative_decoding")) {
    state->spec_stats = state->usage["speculative_decoding"];
  }
  if (chunk.contains("meta_info") && chunk["meta_info"].is_object() &&
      chunk["meta_info"].contains("spec_verify_ct")) {
    state->spec_stats = {{"spec_verify_ct", chunk["meta_info"]["spec_verify_ct"]}};
  }
}

std::optional<long long> UsageField(const json& usage, const char* key) {
  if (usage.is_object() && usage.contains(key) && usage[key].is_number_integer()) {
    return usage[key].get<long long>();
  }
  return std::nullopt;
}

}  // namespace

json RequestRecord::ToJson() const {
  json j = {{"arm", arm},
            {"block", warmup ? json(nullptr) : json(block)},
            {"prompt_length", prompt_length},
            {"variant", variant},
            {"warmup", warmup},
            {"started_s", started_s},
            {"ok", ok},
            {"complete", complete},
            {"error", error.empty() ? json(nullptr) : json(error)},
            {"http_status", http_status},
            {"prompt_tokens", prompt_tokens ? json(*prompt_tokens) : json(nullptr)},
            {"completion_tokens", completion_tokens ? json(*completion_tokens) : json(nullptr)},
            {"first_chunk_tokens", first_chunk_tokens},
            {"first_chunk_tokens_source", first_chunk_tokens_source},
            {"token_chunks", token_chunks},
            {"ttft_s", ttft_s},
            {"decode_s", decode_s},
            {"total_s", total_s},
            {"decode_tok_s", ok ? json(decode_tok_s) : json(nullptr)},
            {"spec_decode", spec ? CountersToJson(*spec) : json(nullptr)},
            {"response_spec_stats", response_spec_stats},
            {"server_spec_gauges", server_spec_gauges}};
  if (!spec_note.empty()) j["spec_decode_note"] = spec_note;
  return j;
}

json BuildRequestBody(const json& prompt, const RequestSettings& settings) {
  json body = {{"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"temperature", 0},
               {"max_tokens", settings.max_tokens}};
  if (settings.ignore_eos) {
    body["min_tokens"] = settings.max_tokens;
    body["ignore_eos"] = true;
  }
  if (!settings.model.empty()) body["model"] = settings.model;
  if (settings.chat) {
    body["messages"] =
        prompt.is_array() ? prompt : json::array({{{"role", "user"}, {"content", prompt}}});
    body["chat_template_kwargs"] = {{"enable_thinking", false}};
  } else {
    body["prompt"] = prompt;
  }
  return body;
}

Result<MetricsSnapshot> ScrapeSettled(const http::Url& url, const RequestSettings& settings) {
  http::RequestOptions options;
  options.idle_timeout = std::chrono::milliseconds(10000);
  options.cancel = settings.cancel;
  std::optional<MetricsSnapshot> previous;
  auto deadline = http::Clock::now() + settings.settle_timeout;
  for (;;) {
    SPK_ASSIGN_OR_RETURN(http::Response response, http::Get(url, "/metrics", options));
    if (response.status != 200) {
      return Status::Unavailable("/metrics answered HTTP " + std::to_string(response.status));
    }
    SPK_ASSIGN_OR_RETURN(auto samples, http::ParsePrometheusText(response.body));
    MetricsSnapshot snapshot = ExtractMetrics(samples);
    bool idle = snapshot.requests_running.value_or(0) == 0;
    bool agrees = previous && previous->spec == snapshot.spec;
    if ((idle && agrees) || http::Clock::now() >= deadline) return snapshot;
    previous = idle ? std::optional<MetricsSnapshot>(snapshot) : std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
}

Status MeasureRequest(const http::Url& url, const json& prompt, const RequestSettings& settings,
                      std::chrono::steady_clock::time_point bench_start, RequestRecord* record) {
  std::optional<MetricsSnapshot> before;
  if (settings.scrape_metrics) {
    Result<MetricsSnapshot> scraped = ScrapeSettled(url, settings);
    if (!scraped.ok() && scraped.status().code() == StatusCode::kCancelled) return scraped.status();
    if (scraped.ok())
      before = *scraped;
    else
      record->spec_note = "metrics unavailable before the request: " + scraped.status().message();
  }

  http::RequestOptions options;
  options.idle_timeout = settings.timeout;
  options.total_timeout = settings.timeout * 4;
  options.cancel = settings.cancel;
  http::SseParser parser;
  std::vector<http::SseEvent> events;
  StreamState state;
  const auto start = http::Clock::now();
  record->started_s = Seconds(start - bench_start);
  auto sink = [&](std::string_view bytes, http::Clock::time_point arrived) {
    events.clear();
    Status fed = parser.Feed(bytes, &events);
    if (!fed.ok()) {
      state.error = "malformed stream: " + fed.message();
      return false;
    }
    for (const http::SseEvent& event : events) AccountEvent(event, arrived, &state);
    return state.error.empty() && !state.done;
  };
  const char* path = settings.chat ? "/v1/chat/completions" : "/v1/completions";
  Result<http::Response> response =
      http::PostJson(url, path, BuildRequestBody(prompt, settings).dump(), options, sink);
  const auto end = http::Clock::now();
  record->total_s = Seconds(end - start);
  if (!response.ok()) {
    if (response.status().code() == StatusCode::kCancelled) return response.status();
    record->error = response.status().message();
    return Status::Ok();
  }
  events.clear();
  parser.Finish(&events);
  for (const http::SseEvent& event : events) AccountEvent(event, end, &state);

  record->http_status = response->status;
  record->prompt_tokens = UsageField(state.usage, "prompt_tokens");
  record->completion_tokens = UsageField(state.usage, "completion_tokens");
  record->first_chunk_tokens = state.first_chunk_tokens;
  record->first_chunk_tokens_source =
      state.first_from_ids ? "token_ids" : "assumed 1 (no token_ids in the stream)";
  record->token_chunks = state.token_chunks;
  record->response_spec_stats = state.spec_stats;
  if (state.saw_first) {
    record->ttft_s = Seconds(state.first - start);
    record->decode_s = Seconds(state.last - state.first);
  }

  if (response->status < 200 || response->status >= 300) {
    record->error =
        "HTTP " + std::to_string(response->status) + ": " + response->body.substr(0, 300);
  } else if (!state.error.empty()) {
    record->error = state.error;
  } else if (!state.done) {
    record->error = "stream ended without data: [DONE]";
  } else if (!record->completion_tokens) {
    record->error = "no usage.completion_tokens in the stream (server ignored stream_options)";
  } else if (settings.ignore_eos &&
             *record->completion_tokens < static_cast<long long>(settings.max_tokens)) {
    record->error = "truncated: " + std::to_string(*record->completion_tokens) + " of " +
                    std::to_string(settings.max_tokens) + " tokens";
  } else if (record->complete = true;  // every token came back; what follows is about timing
             state.token_chunks < 2) {
    record->error = "only one token chunk: no decode interval to time";
  } else if (size_t burst = LargestBurst(state.chunk_times);
             burst >= kMinBurstChunks && 2 * burst >= state.token_chunks) {
    // The server or this client stalled and the stream was delivered at once, so first-to-last
    // timing says nothing about decoding. Counted as a failure, never dropped silently.
    record->error = fmt::format(
        "stream arrived in a burst ({} of {} token chunks within 1 ms; decode span {:.3f} ms after "
        "a "
        "{:.3f} s wait): decode rate not measurable (server or client stalled)",
        burst, state.token_chunks, record->decode_s * 1e3, record->ttft_s);
  } else {
    record->ok = true;
    record->decode_tok_s =
        static_cast<double>(*record->completion_tokens - record->first_chunk_tokens) /
        record->decode_s;
  }

  if (before) {
    Result<MetricsSnapshot> after = ScrapeSettled(url, settings);
    if (!after.ok() && after.status().code() == StatusCode::kCancelled) return after.status();
    if (!after.ok()) {
      record->spec_note = "metrics unavailable after the request: " + after.status().message();
    } else if (before->spec && after->spec) {
      record->spec = *after->spec - *before->spec;
    } else if (after->sglang_accept_length || after->sglang_accept_rate) {
      auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
      record->server_spec_gauges = {{"sglang:spec_accept_length", opt(after->sglang_accept_length)},
                                    {"sglang:spec_accept_rate", opt(after->sglang_accept_rate)}};
      record->spec_note =
          "SGLang exposes windowed gauges, not counters: drafted/accepted not available";
    } else {
      record->spec_note = "no speculative decoding counters on /metrics";
    }
  }
  return Status::Ok();
}

}  // namespace spk::bench
