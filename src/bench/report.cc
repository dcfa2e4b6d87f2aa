#include "bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

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

json SpecJson(const std::vector<const RequestRecord*>& measured) {
  SpecCounters total;
  size_t with = 0;
  for (const RequestRecord* r : measured) {
    if (!r->spec) continue;
    total += *r->spec;
    ++with;
  }
  if (with == 0 || total.draft_tokens <= 0) return nullptr;
  json per_pos = json::array();
  for (const auto& [pos, value] : total.accepted_per_position) {
    per_pos.push_back(total.drafts > 0 ? json(value / total.drafts) : json(nullptr));
  }
  return {{"drafts", total.drafts},
          {"draft_tokens", total.draft_tokens},
          {"accepted_tokens", total.accepted_tokens},
          {"acceptance_rate", total.accepted_tokens / total.draft_tokens},
          {"mean_acceptance_length",
           total.drafts > 0 ? json(1.0 + total.accepted_tokens / total.drafts) : json(nullptr)},
          {"per_position_rates", per_pos},
          {"requests", with},
          {"source", "/metrics counter deltas around each complete measured request"}};
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

// The delta of an arm: the geometric mean of its paired per-block ratios with their 95% t interval,
// so that the point and its interval come from the same estimator (the ratio of means, which one
// outlier can move outside that interval, is in the JSON and the decomposition table with its
// bootstrap interval).
std::string DeltaCell(const json& cmp) {
  if (!cmp.is_object() || !cmp["ratio"].is_number()) return "-";
  if (!cmp["ci_low"].is_number()) {
    return Percent(cmp["ratio"].get<double>()) + " (no CI: fewer than 2 paired blocks)";
  }
  return fmt::format("{} (95% CI {} .. {})", Percent(std::exp(cmp["log_ratio"].get<double>())),
                     Percent(cmp["ci_low"].get<double>()), Percent(cmp["ci_high"].get<double>()));
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

std::string RenderMarkdown(const json& results) {
  const json& arms = results["arms"];
  const json& comparisons = results["comparisons"];
  std::string out = "### Decode rate (tok/s, mean ± sample stdev)\n\n| prompt |";
  for (const json& arm : arms) out += " " + arm["name"].get<std::string>() + " tok/s |";
  for (const json& cmp : comparisons) out += " delta " + cmp["arm"].get<std::string>() + " |";
  out += "\n|---|";
  for (size_t i = 0; i < arms.size() + comparisons.size(); ++i) out += "---|";
  out += "\n";
  if (arms.empty()) return out;
  for (size_t c = 0; c < arms[0]["cells"].size(); ++c) {
    out += fmt::format("| {} |", arms[0]["cells"][c]["prompt_tokens"].get<size_t>());
    for (const json& arm : arms) {
      const json& cell = arm["cells"][c];
      out += " " + NumOr(cell["mean_tok_s"], "{:.1f}", "failed");
      if (cell["stdev_tok_s"].is_number()) out += NumOr(cell["stdev_tok_s"], " ± {:.1f}");
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

  out +=
      "\n### Speculative decoding\n\n| arm | drafted | accepted | acceptance | mean acceptance "
      "length | per position |\n"
      "|---|---|---|---|---|---|\n";
  for (const json& arm : arms) {
    const json& s = arm["spec_decode"];
    if (s.is_null()) {
      out += "| " + arm["name"].get<std::string>() + " | no speculative decoding | | | | |\n";
      continue;
    }
    std::string per_pos;
    for (const json& rate : s["per_position_rates"]) {
      per_pos += (per_pos.empty() ? "" : ", ") + NumOr(rate, "{:.3f}");
    }
    out += fmt::format("| {} | {:.0f} | {:.0f} | {:.1f}% | {} | {} |\n",
                       arm["name"].get<std::string>(), s["draft_tokens"].get<double>(),
                       s["accepted_tokens"].get<double>(), s["acceptance_rate"].get<double>() * 100,
                       NumOr(s["mean_acceptance_length"], "{:.3f}"), per_pos);
  }

  out +=
      "\n### Cells\n\n| arm | prompt | n | failures | mean tok/s | stdev | median | MAD | rel. MAD "
      "| median TTFT s |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const json& arm : arms) {
    for (const json& cell : arm["cells"]) {
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {}{} | {} |\n",
                         arm["name"].get<std::string>(), cell["prompt_tokens"].get<size_t>(),
                         cell["n"].get<size_t>(), cell["failures"].get<size_t>(),
                         NumOr(cell["mean_tok_s"], "{:.2f}"), NumOr(cell["stdev_tok_s"], "{:.2f}"),
                         NumOr(cell["median_tok_s"], "{:.2f}"), NumOr(cell["mad_tok_s"], "{:.2f}"),
                         (cell["relative_mad"].is_number()
                              ? fmt::format("{:.1f}%", cell["relative_mad"].get<double>() * 100)
                              : "-"),
                         cell["noisy"].get<bool>() ? " noisy" : "",
                         NumOr(cell["median_ttft_s"], "{:.3f}"));
    }
  }
  if (!comparisons.empty()) {
    out +=
        "\n### Speedup decomposition (decode time = verify steps x time per step)\n\n"
        "| arm vs baseline | decode tok/s ratio | bootstrap 95% CI | decode time | verify steps | "
        "time per step |\n"
        "|---|---|---|---|---|---|\n";
    for (const json& cmp : comparisons) {
      const json& d = cmp["decomposition"];
      std::string boot =
          cmp["bootstrap_ci_low"].is_number()
              ? fmt::format("{:.3f} .. {:.3f}", cmp["bootstrap_ci_low"].get<double>(),
                            cmp["bootstrap_ci_high"].get<double>())
              : "-";
      out += fmt::format("| {} vs {} | {} | {} | {} | {} | {} |\n", cmp["arm"].get<std::string>(),
                         cmp["baseline"].get<std::string>(), NumOr(cmp["ratio"], "{:.3f}"), boot,
                         d.is_null() ? "-" : NumOr(d["decode_time_ratio"], "{:.3f}"),
                         d.is_null() ? "-" : NumOr(d["verify_steps_ratio"], "{:.3f}"),
                         d.is_null() ? "-" : NumOr(d["time_per_step_ratio"], "{:.3f}"));
    }
  }
  return out;
}

std::string RenderSvg(const json& results) {
  constexpr double kWidth = 720, kHeight = 440, kLeft = 70, kRight = 170, kTop = 40, kBottom = 60;
  static constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c",
                                            "#9467bd", "#ff7f0e", "#17becf"};
  const json& arms = results["arms"];
  size_t cells = arms.empty() ? 0 : arms[0]["cells"].size();
  double y_max = 1;
  for (const json& arm : arms) {
    for (const json& cell : arm["cells"]) {
      if (!cell["mean_tok_s"].is_number()) continue;
      double top = cell["mean_tok_s"].get<double>() +
                   (cell["stdev_tok_s"].is_number() ? cell["stdev_tok_s"].get<double>() : 0);
      y_max = std::max(y_max, top * 1.1);
    }
  }
  double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x_of = [&](size_t i) {
    return kLeft + plot_w * (static_cast<double>(i) + 0.5) / std::max<size_t>(cells, 1);
  };
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / y_max); };
  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">Decode rate by prompt length (mean ± sample "
      "stdev)</text>\n",
      kWidth, kHeight, kLeft);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n",
                     kLeft, kTop, kTop + plot_h);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n",
                     kLeft, kTop + plot_h, kLeft + plot_w);
  for (int t = 0; t <= 5; ++t) {
    double v = y_max * t / 5;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.0f}</text>\n",
        kLeft, y_of(v), kLeft + plot_w, kLeft - 6, y_of(v) + 4, v);
  }
  for (size_t i = 0; i < cells; ++i) {
    svg +=
        fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x_of(i),
                    kTop + plot_h + 18, arms[0]["cells"][i]["prompt_tokens"].get<size_t>());
  }
  svg +=
      fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">prompt tokens</text>\n",
                  kLeft + plot_w / 2, kHeight - 15);
  svg += fmt::format(
      "<text transform=\"translate(18 {:.1f}) rotate(-90)\" text-anchor=\"middle\">decode "
      "tok/s</text>\n",
      kTop + plot_h / 2);
  for (size_t a = 0; a < arms.size(); ++a) {
    const char* color = kColors[a % std::size(kColors)];
    double offset = (static_cast<double>(a) - (static_cast<double>(arms.size()) - 1) / 2) * 6;
    std::string points;
    for (size_t i = 0; i < cells; ++i) {
      const json& cell = arms[a]["cells"][i];
      if (!cell["mean_tok_s"].is_number()) continue;
      double x = x_of(i) + offset, mean = cell["mean_tok_s"].get<double>();
      points += fmt::format("{:.1f},{:.1f} ", x, y_of(mean));
      if (cell["stdev_tok_s"].is_number()) {
        double sd = cell["stdev_tok_s"].get<double>();
        svg += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>"
            "<line x1=\"{4:.1f}\" y1=\"{1:.1f}\" x2=\"{5:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\"/>"
            "<line x1=\"{4:.1f}\" y1=\"{2:.1f}\" x2=\"{5:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>\n",
            x, y_of(mean - sd), y_of(mean + sd), color, x - 4, x + 4);
      }
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", x,
                         y_of(mean), color);
    }
    if (!points.empty()) {
      svg += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", points,
          color);
    }
    double ly = kTop + 10 + 20 * static_cast<double>(a);
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        kLeft + plot_w + 15, ly - 10, color, kLeft + plot_w + 32, ly,
        EscapeXml(arms[a]["name"].get<std::string>()));
  }
  svg += "</svg>\n";
  return svg;
}

Result<json> PoolResults(const std::vector<json>& results, const std::vector<std::string>& names) {
  // key: (baseline, arm, prompt or "all") -> per-machine log ratios
  struct Entry {
    std::vector<LogRatio> logs;
    json machines = json::array();
  };
  std::map<std::tuple<std::string, std::string, long long>, Entry> entries;
  auto add = [&](const std::string& base, const std::string& arm, long long prompt, const json& est,
                 const std::string& machine) {
    if (!est.contains("log_ratio_se") || !est["log_ratio_se"].is_number() ||
        est["log_ratio_se"].get<double>() <= 0) {
      return;
    }
    Entry& e = entries[{base, arm, prompt}];
    e.logs.push_back({est["log_ratio"].get<double>(), est["log_ratio_se"].get<double>()});
    e.machines.push_back({{"file", machine},
                          {"ratio", est["ratio"]},
                          {"log_ratio", est["log_ratio"]},
                          {"log_ratio_se", est["log_ratio_se"]}});
  };
  for (size_t f = 0; f < results.size(); ++f) {
    const json& doc = results[f];
    if (!doc.is_object() || !doc.contains("comparisons") || !doc["comparisons"].is_array()) {
      return Status::InvalidInput(names[f] +
                                  ": not a sparkulator bench results file (no \"comparisons\")");
    }
    try {
      for (const json& cmp : doc["comparisons"]) {
        std::string base = cmp.at("baseline").get<std::string>(),
                    arm = cmp.at("arm").get<std::string>();
        add(base, arm, -1, cmp, names[f]);
        for (const json& cell : cmp.value("cells", json::array())) {
          add(base, arm, cell.at("prompt_tokens").get<long long>(), cell, names[f]);
        }
      }
    } catch (const json::exception& e) {
      return Status::InvalidInput(names[f] + ": malformed comparison: " + e.what());
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
    std::string prompt = p["prompt_tokens"].is_string()
                             ? "all"
                             : std::to_string(p["prompt_tokens"].get<long long>());
    out += fmt::format("| {} vs {} | {} | {} | {:.4f} | {} | {} .. {} |\n",
                       p["arm"].get<std::string>(), p["baseline"].get<std::string>(), prompt,
                       p["n_machines"].get<size_t>(), p["ratio"].get<double>(),
                       Percent(p["ratio"].get<double>()), Percent(p["ci_low"].get<double>()),
                       Percent(p["ci_high"].get<double>()));
  }
  return out;
}

}  // namespace spk::bench
