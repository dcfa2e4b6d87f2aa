// The benchmark part of the card (declared in card/card.h): bench's own tables per machine
// (bench/report.h), pooled across machines, and each machine's chart. The documents passed
// bench::CheckResults when they were read (card.cc): the typed reads here are of what it checked,
// optional counts go through FieldOrNull.
#include <fmt/format.h>

#include <map>

#include "base/json_at.h"
#include "bench/report.h"
#include "card/card.h"
#include "io/file.h"

namespace spk::card {
namespace {

using nlohmann::json;

std::string MachineName(const json& results, const std::string& file) {
  const json host = results.value("host", json::object());
  std::string hardware = host.value("cpu", std::string());
  for (const json& gpu : host.value("gpus", json::array())) {
    if (gpu.is_string()) hardware += ", " + gpu.get<std::string>();
  }
  return fmt::format("{} ({}; results {})", host.value("hostname", std::string("unknown host")),
                     hardware, Basename(file));
}

std::string PromptsLine(const json& results) {
  const json p = results.value("prompts", json(nullptr));
  if (!p.is_object()) return "";
  std::string out = "Prompts: " + p.value("description", std::string()) + ".";
  for (const json& d : p.value("degraded", json::array()))
    out += " Degraded: " + d.get<std::string>() + ".";
  return out + "\n\n";
}

// Acceptance summed over machines per arm: the counts add, the rates are recomputed from them.
std::string PooledAcceptance(const std::vector<json>& results) {
  struct Sum {
    double drafts = 0, drafted = 0, accepted = 0;
    size_t machines = 0;
  };
  std::map<std::string, Sum> sums;
  std::vector<std::string> order;
  for (const json& doc : results) {
    for (const json& arm : doc["arms"]) {
      const json& s = FieldOrNull(arm, "spec_decode");
      const json &drafts = FieldOrNull(s, "drafts"), &drafted = FieldOrNull(s, "draft_tokens"),
                 &accepted = FieldOrNull(s, "accepted_tokens");
      if (!drafts.is_number() || !drafted.is_number() || !accepted.is_number()) continue;
      std::string name = arm["name"].get<std::string>();
      if (!sums.count(name)) order.push_back(name);
      Sum& sum = sums[name];
      sum.drafts += drafts.get<double>();
      sum.drafted += drafted.get<double>();
      sum.accepted += accepted.get<double>();
      ++sum.machines;
    }
  }
  std::string out =
      "| arm | machines | drafted | accepted | acceptance | mean acceptance length |\n"
      "|---|---|---|---|---|---|\n";
  for (const std::string& name : order) {
    const Sum& s = sums[name];
    out += fmt::format("| {} | {} | {:.0f} | {:.0f} | {:.1f}% | {:.3f} |\n", name, s.machines,
                       s.drafted, s.accepted, s.drafted > 0 ? 100 * s.accepted / s.drafted : 0.0,
                       s.drafts > 0 ? 1 + s.accepted / s.drafts : 0.0);
  }
  return out;
}

// Whether every machine's responses had a fixed length: a `bench --prompts` run without
// --ignore-eos stops at EOS ("prompts": {"ignore_eos": false}), so its lengths vary.
bool FixedLength(const std::vector<json>& results) {
  for (const json& doc : results) {
    if (FieldOrNull(FieldOrNull(doc, "prompts"), "ignore_eos") == json(false)) return false;
  }
  return true;
}

}  // namespace

std::string BenchSections(const std::vector<json>& results, const std::vector<std::string>& names,
                          const std::vector<std::string>& charts) {
  std::string out = fmt::format(
      "Measured with `sparkulator bench` (counterbalanced ABBA blocks, greedy, concurrency 1, {}); "
      "the first arm is the baseline.\n",
      FixedLength(results) ? "a fixed output length"
                           : "responses that end at EOS or at the most tokens allowed");
  for (size_t i = 0; i < results.size(); ++i) {
    const json& doc = results[i];
    out += fmt::format("\n### Machine {}: {}\n\n", i + 1, MachineName(doc, names[i]));
    out += PromptsLine(doc);
    out += "Decode rate (tok/s, mean ± sample stdev):\n\n" + bench::RenderDecodeTable(doc);
    if (i < charts.size() && !charts[i].empty() && !doc["comparisons"].empty()) {
      out +=
          fmt::format("\n![decode rate against the baseline, machine {}]({})\n", i + 1, charts[i]);
    }
    out += "\nSpeculative decoding (counter deltas around the measured requests):\n\n" +
           bench::RenderSpecTable(doc);
    out += "\nMemory per arm:\n\n" + bench::RenderMemoryTable(doc);
  }
  if (results.size() > 1) {
    auto pooled = bench::PoolResults(results, names);
    out += pooled.ok() ? "\n" + bench::RenderPooledMarkdown(*pooled)
                       : "\n### Pooled across machines\n\nDecode rate: not pooled (" +
                             pooled.status().message() + ").\n";
    out += "\nAcceptance, counts summed over machines:\n\n" + PooledAcceptance(results);
  }
  return out;
}

}  // namespace spk::card
