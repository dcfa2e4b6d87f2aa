#include "bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "base/json_at.h"
#include "base/xml_escape.h"
#include "bench/stats.h"

namespace spk::bench {
namespace {

using nlohmann::json;

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Verify steps of one request: the counter delta when the server has spec decoding, else one step
// per generated token after the first chunk.
double VerifySteps(const RequestRecord& r) {
  if (r.spec && r.spec->drafts > 0) return r.spec->drafts;
  return static_cast<double>(r.completion_tokens.value_or(0) - r.first_chunk_tokens);
}

// SGLang: no counters; its per-request meta_info.spec_verify_ct gives the mean acceptance length
// (tokens per verify step), and its gauges are kept as the server reported them.
json SglangSpecJson(const std::vector<const RequestRecord*>& measured) {
  double verify_steps = 0, tokens = 0;
  json gauges = nullptr;
  for (const RequestRecord* r : measured) {
    if (!r->server_spec_gauges.is_null()) gauges = r->server_spec_gauges;
    const json& stats = r->response_spec_stats;
    if (!stats.is_object() || !stats.contains("spec_verify_ct") ||
        !stats["spec_verify_ct"].is_number() || !r->completion_tokens) {
      continue;
    }
    verify_steps += stats["spec_verify_ct"].get<double>();
    tokens += static_cast<double>(*r->completion_tokens);
  }
  if (verify_steps <= 0 && gauges.is_null()) return nullptr;
  return {
      {"drafts", verify_steps > 0 ? json(verify_steps) : json(nullptr)},
      {"draft_tokens", nullptr},
      {"accepted_tokens", nullptr},
      {"acceptance_rate", nullptr},
      {"mean_acceptance_length", verify_steps > 0 ? json(tokens / verify_steps) : json(nullptr)},
      {"per_position_rates", json::array()},
      {"server_gauges", gauges},
      {"source",
       "SGLang: completion tokens / meta_info.spec_verify_ct; drafted and accepted counts are "
       "not available (SGLang exposes windowed gauges, not counters)"}};
}

// 95% intervals of the acceptance figures over ABBA blocks (stats.h, EstimateRatioOfTotals): a
// block's counters are summed over its requests, and each figure is a ratio of totals, centered on
// the number vLLM's definition gives. Null bounds with fewer than 2 blocks.
void AddAcceptanceIntervals(const std::map<size_t, SpecCounters>& blocks, const SpecCounters& total,
                            json* spec) {
  std::vector<double> drafts, draft_tokens, accepted;
  for (const auto& [block, c] : blocks) {
    drafts.push_back(c.drafts);
    draft_tokens.push_back(c.draft_tokens);
    accepted.push_back(c.accepted_tokens);
  }
  auto bounds = [](const RatioOfTotals& r, double offset) {
    return std::pair{r.ci_low ? json(*r.ci_low + offset) : json(nullptr),
                     r.ci_high ? json(*r.ci_high + offset) : json(nullptr)};
  };
  auto rate = bounds(EstimateRatioOfTotals(accepted, draft_tokens, 1.0), 0);
  (*spec)["acceptance_rate_ci_low"] = rate.first;
  (*spec)["acceptance_rate_ci_high"] = rate.second;
  json lows = json::array(), highs = json::array();
  if (total.drafts > 0) {
    auto length = bounds(EstimateRatioOfTotals(accepted, drafts), 1.0);
    (*spec)["mean_acceptance_length_ci_low"] = length.first;
    (*spec)["mean_acceptance_length_ci_high"] = length.second;
    for (const auto& [pos, value] : total.accepted_per_position) {
      std::vector<double> at_pos;
      for (const auto& [block, c] : blocks) {
        auto it = c.accepted_per_position.find(pos);
        at_pos.push_back(it == c.accepted_per_position.end() ? 0.0 : it->second);
      }
      auto p = bounds(EstimateRatioOfTotals(at_pos, drafts, 1.0), 0);
      lows.push_back(p.first);
      highs.push_back(p.second);
    }
  } else {
    (*spec)["mean_acceptance_length_ci_low"] = nullptr;
    (*spec)["mean_acceptance_length_ci_high"] = nullptr;
  }
  (*spec)["per_position_ci_low"] = lows;
  (*spec)["per_position_ci_high"] = highs;
  (*spec)["ci_blocks"] = blocks.size();
  (*spec)["ci_method"] =
      "95% t interval over ABBA blocks of a ratio of totals (delta-method standard error, "
      "t with blocks - 1 degrees of freedom)";
}

json SpecJson(const std::vector<const RequestRecord*>& measured) {
  SpecCounters total;
  std::map<size_t, SpecCounters> blocks;
  size_t with = 0;
  for (const RequestRecord* r : measured) {
    if (!r->spec) continue;
    total += *r->spec;
    blocks[r->block] += *r->spec;
    ++with;
  }
  if (with == 0 || total.draft_tokens <= 0) return SglangSpecJson(measured);
  json per_pos = json::array();
  for (const auto& [pos, value] : total.accepted_per_position) {
    per_pos.push_back(total.drafts > 0 ? json(value / total.drafts) : json(nullptr));
  }
  json spec = {
      {"drafts", total.drafts},
      {"draft_tokens", total.draft_tokens},
      {"accepted_tokens", total.accepted_tokens},
      {"acceptance_rate", total.accepted_tokens / total.draft_tokens},
      {"mean_acceptance_length",
       total.drafts > 0 ? json(1.0 + total.accepted_tokens / total.drafts) : json(nullptr)},
      {"per_position_rates", per_pos},
      {"requests", with},
      {"source", "/metrics counter deltas around each complete measured request"}};
  AddAcceptanceIntervals(blocks, total, &spec);
  return spec;
}

json CellJson(size_t length, const std::vector<const RequestRecord*>& cell, double noisy) {
  std::vector<double> rates, ttfts, decode_s, steps;
  size_t failures = 0;
  for (const RequestRecord* r : cell) {
    if (!r->ok) {
      ++failures;
      continue;
    }
    rates.push_back(r->decode_tok_s);
    ttfts.push_back(r->ttft_s);
    decode_s.push_back(r->decode_s);
    steps.push_back(VerifySteps(*r));
  }
  json j = {{"prompt_tokens", length}, {"n", rates.size()}, {"failures", failures}};
  if (rates.empty()) {
    for (const char* k : {"mean_tok_s", "stdev_tok_s", "median_tok_s", "mad_tok_s", "relative_mad",
                          "mean_ttft_s", "median_ttft_s", "mean_decode_s", "mean_verify_steps"}) {
      j[k] = nullptr;
    }
    j["noisy"] = false;
    return j;
  }
  Summary s = Summarize(rates);
  j["mean_tok_s"] = s.mean;
  j["stdev_tok_s"] = Opt(s.stdev);
  j["median_tok_s"] = s.median;
  j["mad_tok_s"] = s.mad;
  j["relative_mad"] = s.relative_mad;
  j["noisy"] = s.relative_mad > noisy;
  j["mean_ttft_s"] = Mean(ttfts);
  j["median_ttft_s"] = Median(ttfts);
  j["mean_decode_s"] = Mean(decode_s);
  j["mean_verify_steps"] = Mean(steps);
  return j;
}

json RatioJson(const RatioEstimate& e) {
  return {{"n_pairs", e.n_pairs},
          {"ratio", e.n_pairs ? json(e.ratio) : json(nullptr)},
          {"ci_low", Opt(e.ci_low)},
          {"ci_high", Opt(e.ci_high)},
          {"bootstrap_ci_low", Opt(e.bootstrap_low)},
          {"bootstrap_ci_high", Opt(e.bootstrap_high)},
          {"log_ratio", e.n_pairs ? json(e.log_ratio) : json(nullptr)},
          {"paired_ratio", e.n_pairs ? json(std::exp(e.log_ratio)) : json(nullptr)},
          {"log_ratio_se", Opt(e.log_ratio_se)}};
}

json CompareArms(const std::vector<const RequestRecord*>& base,
                 const std::vector<const RequestRecord*>& arm, const AnalysisOptions& options) {
  // Pair by (block, cell): both arms must have succeeded there.
  std::map<std::pair<size_t, size_t>, const RequestRecord*> base_by_key;
  for (const RequestRecord* r : base) {
    if (r->ok) base_by_key[{r->block, r->prompt_length}] = r;
  }
  std::vector<Pair> all_pairs;
  std::vector<size_t> all_groups;
  std::map<size_t, std::vector<Pair>> cell_pairs;
  std::map<size_t, std::vector<size_t>> cell_groups;
  std::vector<double> decode_base, decode_arm, steps_base, steps_arm;
  for (const RequestRecord* r : arm) {
    if (!r->ok) continue;
    auto it = base_by_key.find({r->block, r->prompt_length});
    if (it == base_by_key.end()) continue;
    Pair p{it->second->decode_tok_s, r->decode_tok_s};
    all_pairs.push_back(p);
    all_groups.push_back(r->block);
    cell_pairs[r->prompt_length].push_back(p);
    cell_groups[r->prompt_length].push_back(r->block);
    decode_base.push_back(it->second->decode_s);
    decode_arm.push_back(r->decode_s);
    steps_base.push_back(VerifySteps(*it->second));
    steps_arm.push_back(VerifySteps(*r));
  }
  json j = RatioJson(EstimateRatio(all_pairs, all_groups));
  j["cells"] = json::array();
  for (size_t length : options.prompt_lengths) {
    json cell = RatioJson(EstimateRatio(cell_pairs[length], cell_groups[length]));
    cell["prompt_tokens"] = length;
    j["cells"].push_back(cell);
  }
  if (!all_pairs.empty() && Mean(steps_base) > 0 && Mean(decode_base) > 0) {
    double time_ratio = Mean(decode_arm) / Mean(decode_base);
    double steps_ratio = Mean(steps_arm) / Mean(steps_base);
    j["decomposition"] = {
        {"decode_time_ratio", time_ratio},
        {"verify_steps_ratio", steps_ratio},
        {"time_per_step_ratio", steps_ratio > 0 ? json(time_ratio / steps_ratio) : json(nullptr)},
        {"mean_verify_steps_baseline", Mean(steps_base)},
        {"mean_verify_steps_arm", Mean(steps_arm)}};
  } else {
    j["decomposition"] = nullptr;
  }
  return j;
}

std::string Percent(double ratio) { return fmt::format("{:+.1f}%", (ratio - 1) * 100); }

std::string NumOr(const json& v, const char* format, const char* missing = "-") {
  return v.is_number() ? fmt::format(fmt::runtime(format), v.get<double>()) : missing;
}

// " [low, high]" of a 95% interval, or "" when it has no bounds (fewer than 2 blocks).
std::string Interval(const json& low, const json& high, const char* format) {
  if (!low.is_number() || !high.is_number()) return "";
  return " [" + NumOr(low, format) + ", " + NumOr(high, format) + "]";
}

// The delta of an arm: the geometric mean of its paired per-block ratios with their 95% t interval,
// so that the point and its interval come from the same estimator (the ratio of means, which one
// outlier can move outside that interval, is in the JSON and the decomposition table with its
// bootstrap interval).
std::string DeltaCell(const json& cmp) {
  const json &ratio = FieldOrNull(cmp, "ratio"), &log_ratio = FieldOrNull(cmp, "log_ratio");
  const json &low = FieldOrNull(cmp, "ci_low"), &high = FieldOrNull(cmp, "ci_high");
  if (!ratio.is_number()) return "-";
  if (!low.is_number() || !high.is_number() || !log_ratio.is_number()) {
    return Percent(ratio.get<double>()) + " (no CI: fewer than 2 paired blocks)";
  }
  return fmt::format("{} (95% CI {} .. {})", Percent(std::exp(log_ratio.get<double>())),
                     Percent(low.get<double>()), Percent(high.get<double>()));
}

}  // namespace

json Analyze(const std::vector<RequestRecord>& records, const AnalysisOptions& options) {
  std::vector<std::vector<const RequestRecord*>> by_arm(options.arm_names.size());
  for (const RequestRecord& r : records) {
    if (!r.warmup && r.arm_index < by_arm.size()) by_arm[r.arm_index].push_back(&r);
  }
  json arms = json::array();
  for (size_t a = 0; a < by_arm.size(); ++a) {
    json arm = {{"name", options.arm_names[a]}, {"cells", json::array()}};
    size_t failures = 0;
    // Acceptance counts every complete request: the server's counters are right even when the
    // client could not time the stream, and dropping those would compare arms over different
    // prompts.
    std::vector<const RequestRecord*> complete;
    for (size_t length : options.prompt_lengths) {
      std::vector<const RequestRecord*> cell;
      for (const RequestRecord* r : by_arm[a]) {
        if (r->prompt_length == length) cell.push_back(r);
      }
      json c = CellJson(length, cell, options.noisy_relative_mad);
      failures += c["failures"].get<size_t>();
      arm["cells"].push_back(c);
    }
    for (const RequestRecord* r : by_arm[a]) {
      if (r->complete) complete.push_back(r);
    }
    arm["failures"] = failures;
    arm["spec_decode"] = SpecJson(complete);
    if (arm["spec_decode"].is_null()) arm["spec_decode_note"] = "no speculative decoding";
    arms.push_back(arm);
  }
  json comparisons = json::array();
  for (size_t a = 1; a < by_arm.size(); ++a) {
    json cmp = CompareArms(by_arm[0], by_arm[a], options);
    cmp["baseline"] = options.arm_names[0];
    cmp["arm"] = options.arm_names[a];
    comparisons.push_back(cmp);
  }
  return {{"arms", arms}, {"comparisons", comparisons}};
}

std::string CellLabel(const json& prompt_tokens) {
  if (!prompt_tokens.is_number_integer() || prompt_tokens.get<long long>() < 0) return "-";
  long long n = prompt_tokens.get<long long>();
  return n == 0 ? "prompts file" : std::to_string(n);
}

std::string RenderMemoryTable(const json& results) {
  auto gib = [](const json& v) { return NumOr(v, "{:.2f} GiB", "not available"); };
  auto bytes_gib = [](const json& v) {
    return v.is_number() ? fmt::format("{:.2f} GiB", v.get<double>() / (1024.0 * 1024 * 1024))
                         : std::string("not available");
  };
  std::string out =
      "| arm | model memory (vLLM log) | target checkpoint (vLLM log) | draft checkpoint (vLLM "
      "log) | resident memory, all processes (RSS / PSS) | /metrics process RSS |\n"
      "|---|---|---|---|---|---|\n";
  for (const json& arm : results["arms"]) {
    // operator[] on a const json with a missing key is undefined behaviour (it read past the
    // object for arms without memory): look every optional field up with FieldOrNull.
    const json& memory = FieldOrNull(arm, "memory");
    const json& log = FieldOrNull(memory, "vllm_log");
    const json& process = FieldOrNull(memory, "process");
    const json& metrics = FieldOrNull(memory, "metrics");
    std::string resident = !process.is_object()
                               ? "not available"
                               : bytes_gib(FieldOrNull(process, "peak_rss_bytes")) + " / " +
                                     bytes_gib(FieldOrNull(process, "peak_pss_bytes"));
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", arm["name"].get<std::string>(),
                       gib(FieldOrNull(log, "model_loading_gib")),
                       gib(FieldOrNull(log, "target_checkpoint_gib")),
                       gib(FieldOrNull(log, "draft_checkpoint_gib")), resident,
                       bytes_gib(FieldOrNull(metrics, "process_resident_memory_bytes")));
  }
  return out;
}

std::string RenderDecodeTable(const json& results) {
  const json& arms = results["arms"];
  const json& comparisons = results["comparisons"];
  std::string out = "| prompt |";
  for (const json& arm : arms) out += " " + arm["name"].get<std::string>() + " tok/s |";
  for (const json& cmp : comparisons) out += " delta " + cmp["arm"].get<std::string>() + " |";
  out += "\n|---|";
  for (size_t i = 0; i < arms.size() + comparisons.size(); ++i) out += "---|";
  out += "\n";
  if (arms.empty()) return out;
  for (size_t c = 0; c < arms[0]["cells"].size(); ++c) {
    out += "| " + CellLabel(arms[0]["cells"][c]["prompt_tokens"]) + " |";
    for (const json& arm : arms) {
      const json& cell = arm["cells"][c];
      out += " " + NumOr(FieldOrNull(cell, "mean_tok_s"), "{:.1f}", "failed");
      out += NumOr(FieldOrNull(cell, "stdev_tok_s"), " ± {:.1f}", "");
      if (cell["noisy"].get<bool>()) out += " (noisy)";
      if (cell["failures"].get<size_t>() > 0)
        out += fmt::format(" [{} failed]", cell["failures"].get<size_t>());
      out += " |";
    }
    for (const json& cmp : comparisons) out += " " + DeltaCell(cmp["cells"][c]) + " |";
    out += "\n";
  }
  if (!comparisons.empty()) {
    out += "| all |";
    for (size_t i = 0; i < arms.size(); ++i) out += " |";
    for (const json& cmp : comparisons) out += " " + DeltaCell(cmp) + " |";
    out += "\n\ndelta: geometric mean of the paired per-block ratios, with its 95% t interval.\n";
  }
  return out;
}

std::string RenderSpecTable(const json& results) {
  size_t blocks = 0;
  std::string out =
      "| arm | drafted | accepted | acceptance | mean acceptance length | per position |\n"
      "|---|---|---|---|---|---|\n";
  for (const json& arm : results["arms"]) {
    const json& s = FieldOrNull(arm, "spec_decode");
    const json& rate = FieldOrNull(s, "acceptance_rate");
    if (s.is_null()) {
      out += "| " + arm["name"].get<std::string>() + " | no speculative decoding | | | | |\n";
      continue;
    }
    std::string per_pos;
    const json& rates = FieldOrNull(s, "per_position_rates");
    const json& lows = FieldOrNull(s, "per_position_ci_low");
    const json& highs = FieldOrNull(s, "per_position_ci_high");
    for (size_t i = 0; i < rates.size(); ++i) {
      per_pos += (per_pos.empty() ? "" : ", ") + NumOr(rates[i], "{:.3f}");
      if (i < lows.size() && i < highs.size()) per_pos += Interval(lows[i], highs[i], "{:.3f}");
    }
    const char* na = "not available";
    const json& mean_length = FieldOrNull(s, "mean_acceptance_length");
    std::string length = NumOr(mean_length, "{:.3f}", na);
    if (mean_length.is_number()) {
      length += Interval(FieldOrNull(s, "mean_acceptance_length_ci_low"),
                         FieldOrNull(s, "mean_acceptance_length_ci_high"), "{:.3f}");
    }
    const json& ci_blocks = FieldOrNull(s, "ci_blocks");
    if (ci_blocks.is_number_integer()) blocks = std::max(blocks, ci_blocks.get<size_t>());
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", arm["name"].get<std::string>(),
                       NumOr(FieldOrNull(s, "draft_tokens"), "{:.0f}", na),
                       NumOr(FieldOrNull(s, "accepted_tokens"), "{:.0f}", na),
                       rate.is_number() ? fmt::format("{:.1f}%", rate.get<double>() * 100) : na,
                       length, per_pos.empty() ? "-" : per_pos);
  }
  if (blocks > 0) {
    out +=
        "\n[low, high]: 95% t interval over the ABBA blocks (a ratio of totals, delta-method "
        "standard error); none with fewer than 2 blocks.\n";
  }
  return out;
}

std::string RenderMarkdown(const json& results) {
  const json& arms = results["arms"];
  const json& comparisons = results["comparisons"];
  std::string out;
  if (results.contains("prompts") && results["prompts"].is_object()) {
    const json& p = results["prompts"];
    out += "prompts: " + p.value("description", std::string()) + "\n";
    for (const json& what : p.value("degraded", json::array())) {
      out += "degraded: " + what.get<std::string>() + "\n";
    }
    out += "\n";
  }
  out += "### Decode rate (tok/s, mean ± sample stdev)\n\n" + RenderDecodeTable(results);
  out += "\n### Speculative decoding\n\n" + RenderSpecTable(results);
  out += "\n### Memory per arm\n\n" + RenderMemoryTable(results);

  out +=
      "\n### Cells\n\n| arm | prompt | n | failures | mean tok/s | stdev | median | MAD | rel. MAD "
      "| median TTFT s |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const json& arm : arms) {
    for (const json& cell : arm["cells"]) {
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {}{} | {} |\n",
                         arm["name"].get<std::string>(), CellLabel(cell["prompt_tokens"]),
                         cell["n"].get<size_t>(), cell["failures"].get<size_t>(),
                         NumOr(FieldOrNull(cell, "mean_tok_s"), "{:.2f}"),
                         NumOr(FieldOrNull(cell, "stdev_tok_s"), "{:.2f}"),
                         NumOr(FieldOrNull(cell, "median_tok_s"), "{:.2f}"),
                         NumOr(FieldOrNull(cell, "mad_tok_s"), "{:.2f}"),
                         (FieldOrNull(cell, "relative_mad").is_number()
                              ? fmt::format("{:.1f}%", cell["relative_mad"].get<double>() * 100)
                              : "-"),
                         cell["noisy"].get<bool>() ? " noisy" : "",
                         NumOr(FieldOrNull(cell, "median_ttft_s"), "{:.3f}"));
    }
  }
  if (!comparisons.empty()) {
    out +=
        "\n### Speedup decomposition (decode time = verify steps x time per step)\n\n"
        "| arm vs baseline | decode tok/s ratio | bootstrap 95% CI | decode time | verify steps | "
        "time per step |\n"
        "|---|---|---|---|---|---|\n";
    for (const json& cmp : comparisons) {
      const json& d = FieldOrNull(cmp, "decomposition");
      const json &low = FieldOrNull(cmp, "bootstrap_ci_low"),
                 &high = FieldOrNull(cmp, "bootstrap_ci_high");
      std::string boot =
          low.is_number() && high.is_number()
              ? fmt::format("{:.3f} .. {:.3f}", low.get<double>(), high.get<double>())
              : "-";
      out += fmt::format("| {} vs {} | {} | {} | {} | {} | {} |\n", cmp["arm"].get<std::string>(),
                         cmp["baseline"].get<std::string>(),
                         NumOr(FieldOrNull(cmp, "ratio"), "{:.3f}"), boot,
                         NumOr(FieldOrNull(d, "decode_time_ratio"), "{:.3f}"),
                         NumOr(FieldOrNull(d, "verify_steps_ratio"), "{:.3f}"),
                         NumOr(FieldOrNull(d, "time_per_step_ratio"), "{:.3f}"));
    }
  }
  return out;
}

Result<json> PoolResults(const std::vector<json>& results, const std::vector<std::string>& names) {
  // key: (baseline, arm, prompt or "all") -> per-machine log ratios
  struct Entry {
    std::vector<LogRatio> logs;
    json machines = json::array();
  };
  std::map<std::tuple<std::string, std::string, long long>, Entry> entries;
  // One estimate of `machine`: pooled when it has a standard error (>= 2 paired blocks).
  auto add = [&](const std::string& base, const std::string& arm, long long prompt,
                 const JsonAt& est, const std::string& machine) -> Status {
    SPK_ASSIGN_OR_RETURN(std::optional<double> se, est.Key("log_ratio_se").NumberOrNull());
    if (!se || *se <= 0) return Status::Ok();
    SPK_ASSIGN_OR_RETURN(double log_ratio, est.Key("log_ratio").Number());
    SPK_ASSIGN_OR_RETURN(std::optional<double> ratio, est.Key("ratio").NumberOrNull());
    Entry& e = entries[{base, arm, prompt}];
    e.logs.push_back({log_ratio, *se});
    e.machines.push_back({{"file", machine},
                          {"ratio", Opt(ratio)},
                          {"log_ratio", log_ratio},
                          {"log_ratio_se", *se}});
    return Status::Ok();
  };
  for (size_t f = 0; f < results.size(); ++f) {
    const JsonAt comparisons = JsonAt(results[f], names[f]).Key("comparisons");
    SPK_ASSIGN_OR_RETURN(size_t n, comparisons.Array());
    for (size_t c = 0; c < n; ++c) {
      const JsonAt cmp = comparisons.Index(c);
      SPK_ASSIGN_OR_RETURN(std::string base, cmp.Key("baseline").String());
      SPK_ASSIGN_OR_RETURN(std::string arm, cmp.Key("arm").String());
      SPK_RETURN_IF_ERROR(add(base, arm, -1, cmp, names[f]));
      const JsonAt cells = cmp.Key("cells");
      size_t n_cells = 0;
      if (!cells.missing()) {
        SPK_ASSIGN_OR_RETURN(n_cells, cells.Array());
      }
      for (size_t i = 0; i < n_cells; ++i) {
        const JsonAt cell = cells.Index(i);
        SPK_ASSIGN_OR_RETURN(uint64_t prompt, cell.Key("prompt_tokens").Count());
        if (prompt > static_cast<uint64_t>(INT64_MAX)) {
          return cell.Key("prompt_tokens").Error("too large");
        }
        SPK_RETURN_IF_ERROR(add(base, arm, static_cast<long long>(prompt), cell, names[f]));
      }
    }
  }
  json pooled = json::array();
  for (const auto& [key, entry] : entries) {
    PooledEstimate p = PoolInverseVariance(entry.logs);
    pooled.push_back(
        {{"baseline", std::get<0>(key)},
         {"arm", std::get<1>(key)},
         {"prompt_tokens", std::get<2>(key) < 0 ? json("all") : json(std::get<2>(key))},
         {"machines", entry.machines},
         {"n_machines", p.n},
         {"log_ratio", p.log_ratio},
         {"log_ratio_se", p.log_ratio_se},
         {"ratio", p.ratio},
         {"ci_low", p.ci_low},
         {"ci_high", p.ci_high}});
  }
  if (pooled.empty()) {
    return Status::InvalidInput(
        "no comparison in these files has a standard error to pool (each needs at least 2 paired "
        "blocks)");
  }
  return json{
      {"pooled", pooled},
      {"files", names},
      {"method",
       "inverse-variance weighted mean of per-machine log ratios; 95% CI = exp(mean ± 1.96 se)"}};
}

std::string RenderPooledMarkdown(const json& pooled) {
  std::string out =
      "### Pooled across machines (inverse-variance weighted log ratios)\n\n"
      "| arm vs baseline | prompt | machines | ratio | delta | 95% CI "
      "|\n|---|---|---|---|---|---|\n";
  for (const json& p : pooled["pooled"]) {
    std::string prompt = p["prompt_tokens"].is_string() ? "all" : CellLabel(p["prompt_tokens"]);
    out += fmt::format("| {} vs {} | {} | {} | {:.4f} | {} | {} .. {} |\n",
                       p["arm"].get<std::string>(), p["baseline"].get<std::string>(), prompt,
                       p["n_machines"].get<size_t>(), p["ratio"].get<double>(),
                       Percent(p["ratio"].get<double>()), Percent(p["ci_low"].get<double>()),
                       Percent(p["ci_high"].get<double>()));
  }
  return out;
}

}  // namespace spk::bench
