#include "card/card.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "base/json_at.h"
#include "base/strings.h"
#include "bench/report.h"
#include "card/front_matter.h"
#include "check/check.h"
#include "check/vllm_source.h"
#include "quant/pack_quantized.h"
#include "quant/scheme.h"

namespace spk::card {
namespace {

using nlohmann::json;

Result<json> ReadJson(FileSystem* fs, const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::InvalidInput(path + ": not valid JSON");
  return parsed;
}

// The "sparkulator" record quantize wrote (quantize/record.h), read field by field through JsonAt:
// a field of the wrong type is InvalidInput naming config.json and the field
// ("sparkulator.group_size: expected a number, got a string"); a missing field takes the default
// the card has always shown for it.
struct Record {
  std::string scheme, source, version, method, family, preset;
  std::optional<std::string> target_precision;  // drafts only
  std::optional<long long> group_size;
  uint64_t source_tensor_bytes = 0, output_tensor_bytes = 0;
  bool data_free = true;
  std::vector<std::pair<std::string, std::string>> kept_dense;  // reason, tensor
  std::string ignore = "[]";  // quantization_config.ignore, as JSON
};

// A string field, or `fallback` when it is absent.
Result<std::string> StringOr(const JsonAt& at, std::string fallback) {
  if (at.missing()) return fallback;
  return at.String();
}

Result<std::optional<long long>> GroupSize(const JsonAt& at) {
  if (at.missing()) return std::optional<long long>();
  SPK_ASSIGN_OR_RETURN(double group, at.Number());
  if (group != std::floor(group) || std::fabs(group) > 1e15) {
    return at.Error(fmt::format("expected an integer, got {}", group));
  }
  return std::optional<long long>(static_cast<long long>(group));
}

Result<uint64_t> CountOr0(const JsonAt& at) { return at.missing() ? 0 : at.Count(); }

// `record` is config.json's "sparkulator" object, `quant_config` its quantization_config.
Result<Record> ReadRecord(const JsonAt& record, const json& quant_config) {
  Record r;
  SPK_ASSIGN_OR_RETURN(r.scheme, StringOr(record.Key("scheme"), ""));
  SPK_ASSIGN_OR_RETURN(r.source, StringOr(record.Key("source"), ""));
  SPK_ASSIGN_OR_RETURN(r.version, StringOr(record.Key("version"), "?"));
  SPK_ASSIGN_OR_RETURN(r.method, StringOr(record.Key("method"), "rtn"));
  SPK_ASSIGN_OR_RETURN(r.family, StringOr(record.Key("family"), "?"));
  SPK_ASSIGN_OR_RETURN(r.preset, StringOr(record.Key("preset"), "auto"));
  if (!record.Key("target_precision").missing()) {
    SPK_ASSIGN_OR_RETURN(r.target_precision, record.Key("target_precision").String());
  }
  SPK_ASSIGN_OR_RETURN(r.group_size, GroupSize(record.Key("group_size")));
  SPK_ASSIGN_OR_RETURN(r.source_tensor_bytes, CountOr0(record.Key("source_tensor_bytes")));
  SPK_ASSIGN_OR_RETURN(r.output_tensor_bytes, CountOr0(record.Key("output_tensor_bytes")));
  if (!record.Key("data_free").missing()) {
    SPK_ASSIGN_OR_RETURN(r.data_free, record.Key("data_free").Bool());
  }
  const JsonAt kept = record.Key("kept_dense");
  if (!kept.missing()) {
    SPK_ASSIGN_OR_RETURN(size_t n, kept.Array());
    for (size_t i = 0; i < n; ++i) {
      SPK_RETURN_IF_ERROR(kept.Index(i).Object());
      SPK_ASSIGN_OR_RETURN(std::string reason, StringOr(kept.Index(i).Key("reason"), ""));
      SPK_ASSIGN_OR_RETURN(std::string tensor, StringOr(kept.Index(i).Key("tensor"), ""));
      r.kept_dense.emplace_back(std::move(reason), std::move(tensor));
    }
  }
  // Any JSON: the card quotes it as it is.
  if (const json& ignore = FieldOrNull(quant_config, "ignore"); !ignore.is_null()) {
    r.ignore = ignore.dump();
  }
  return r;
}

double Gib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024 * 1024); }

// The Hub id of the source: --base-model, else "org/name" of a Hugging Face cache path
// (.../models--org--name/snapshots/...), else the source itself when it reads like "org/name".
std::string BaseModel(FileSystem* fs, const std::string& source, const std::string& override_id) {
  if (!override_id.empty()) return override_id;
  size_t at = source.find("models--");
  if (at != std::string::npos) {
    std::string rest = source.substr(at + 8);
    rest = rest.substr(0, rest.find('/'));
    size_t sep = rest.find("--");
    if (sep != std::string::npos) return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
  }
  bool repo_like = !source.empty() && source[0] != '/' && source[0] != '.' &&
                   std::count(source.begin(), source.end(), '/') == 1 &&
                   fs->KindOf(source) == FileKind::kMissing;
  return repo_like ? source : "";
}

// The source's license: its README front matter, else its config.json; "" when neither says.
std::string SourceLicense(FileSystem* fs, const std::string& source) {
  if (auto readme = fs->ReadFile(source + "/README.md"); readme.ok()) {
    std::string license = FrontMatterScalar(*readme, "license");
    if (!license.empty()) return license;
  }
  // Another tool's file: a license that is not a string is no license, not an error.
  const std::string config_path = source + "/config.json";
  if (auto config = ReadJson(fs, config_path); config.ok()) {
    if (auto license = JsonAt(*config, config_path).Key("license").String(); license.ok()) {
      return *license;
    }
  }
  return "";
}

// What the weights are, from the scheme row: for the integer pack-quantized rows their width,
// zero points and the recorded group size (a row takes several); for the others, whose grouping the
// row fixes, the row's summary.
std::string SchemeWords(const QuantScheme& scheme, const Record& record) {
  if (scheme.codec != &PackQuantizedCodec()) return std::string(scheme.summary);
  long long group = record.group_size.value_or(0);
  std::string grouping = group > 0 ? fmt::format("groups of {}", group) : "per output channel";
  std::string each = scheme.symmetric ? "one BF16 scale each"
                                      : fmt::format("one BF16 scale and one {} zero point each",
                                                    WeightNumberName(scheme));
  return fmt::format("{}-bit integer weights ({}, {}), 16-bit activations", scheme.bits, grouping,
                     each);
}

std::string WhatItIs(const std::string& name, const QuantScheme& scheme, const Record& record,
                     const std::string& family, const std::string& base_model,
                     const std::string& target) {
  std::string draft = family == "llm" ? "model" : family + " speculative-decoding draft";
  std::string out = fmt::format(
      "# {name}\n\nA {scheme} quantization of the {draft} `{source}`: {words}. It is written in "
      "the compressed-tensors `{format}` format that vLLM loads on {kernels}, made with "
      "sparkulator {version}, data-free (no calibration set).\n",
      fmt::arg("name", name), fmt::arg("scheme", record.scheme),
      fmt::arg("words", SchemeWords(scheme, record)), fmt::arg("draft", draft),
      fmt::arg("format", scheme.format), fmt::arg("kernels", scheme.kernels),
      fmt::arg("source", base_model.empty() ? record.source : base_model),
      fmt::arg("version", record.version));
  if (family == "llm") return out;
  std::string precision = record.target_precision.value_or("unquantized");
  out += fmt::format(
      "\n## Pairing\n\nThis draft pairs with the **{precision}** target{named}: that is the target "
      "it was trained against, recorded when it was quantized (`config.json`, "
      "`sparkulator.target_precision`). Serve it with a target of that precision only: a "
      "cross-paired draft (trained against one precision of the target, served with another) gets "
      "about 0% acceptance. `sparkulator check DRAFT --target TARGET` checks the pairing.\n",
      fmt::arg("precision", precision),
      fmt::arg("named", target.empty() || target == "<target>" ? "" : " (`" + target + "`)"));
  return out;
}

std::string SizesAndRecipe(const Record& record, const std::string& checkpoint) {
  double before = Gib(record.source_tensor_bytes), after = Gib(record.output_tensor_bytes);
  std::string out = "\n## Size\n\n| | weights |\n|---|---|\n";
  out += fmt::format("| source | {:.3f} GiB ({} bytes) |\n", before, record.source_tensor_bytes);
  out += fmt::format("| this checkpoint | {:.3f} GiB ({} bytes) |\n", after,
                     record.output_tensor_bytes);
  if (before > 0) out += fmt::format("| ratio | x{:.3f} |\n", after / before);
  std::string command = fmt::format(
      "sparkulator quantize {} {} --scheme {} --method {} --group-size {}", record.source,
      Basename(checkpoint), record.scheme, record.method, record.group_size.value_or(128));
  if (record.target_precision) command += " --target-precision " + *record.target_precision;
  out += fmt::format(
      "\n## Recipe\n\n| | |\n|---|---|\n| scheme | {} |\n| group size | {} |\n| method | {} |\n"
      "| data-free | {} |\n| family (preset) | {} ({}) |\n| sparkulator | {} |\n\n"
      "```\n{}\n```\n",
      record.scheme, record.group_size.value_or(0),
      record.method == "search" ? "search (per-group scale search for a lower reconstruction error)"
                                : "rtn (min-max round-to-nearest, bit-exact with llm-compressor)",
      record.data_free ? "yes" : "no", record.family, record.preset, record.version, command);
  return out;
}

// One row per reason, with every tensor it keeps dense.
std::string KeptDense(const Record& record) {
  std::string out = "\n## Modules kept dense\n\n";
  if (record.kept_dense.empty()) {
    return out + "Every Linear module is quantized (`quantization_config.ignore`: `" +
           record.ignore + "`).\n";
  }
  std::vector<std::pair<std::string, std::string>> rows;  // reason, tensors
  for (const auto& kept : record.kept_dense) {
    // Not a structured binding: clang (C++20) cannot capture one in the lambda below.
    const std::string& reason = kept.first;
    std::string tensor = "`" + kept.second + "`";
    auto row =
        std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == reason; });
    if (row == rows.end()) {
      rows.emplace_back(reason, tensor);
    } else {
      row->second += ", " + tensor;
    }
  }
  out += "| tensors | reason |\n|---|---|\n";
  for (const auto& [reason, tensors] : rows) out += "| " + tensors + " | " + reason + " |\n";
  return out + "\n`quantization_config.ignore`: `" + record.ignore + "`\n";
}

std::string Serving(const CheckReport& report, const CardOptions& options) {
  std::string serve = report.serve;
  if (!options.target.empty()) serve = ReplaceAll(serve, "<target>", options.target);
  if (!options.repo_id.empty()) serve = ReplaceAll(serve, options.checkpoint, options.repo_id);
  return "\n## Serving with vLLM\n\n```\n" + serve + "\n```\n";
}

// The patches `check --vllm DIR` reports for that vLLM tree, and `check`'s findings.
Result<std::string> CheckSections(const RunContext& run, const CardOptions& options, Card* card) {
  FileSystem* fs = run.fs;
  std::string out;
  if (!options.vllm_dir.empty()) {
    SPK_ASSIGN_OR_RETURN(std::vector<Finding> patches, InspectVllmSource(fs, options.vllm_dir));
    out += "\n## vLLM patches\n\nWhat `sparkulator check --vllm` reports for the vLLM in `" +
           Basename(options.vllm_dir) +
           "`; each patch applies to the model file it names (a draft whose model file is not "
           "named needs none). Apply with `patch -p1` in the folder that holds `vllm`.\n\n";
    if (patches.empty()) out += "`sparkulator check --vllm` finds no blocker in this vLLM.\n";
    for (const Finding& p : patches) {
      out +=
          fmt::format("- **{}** `{}`: {}\n\n```diff\n{}\n```\n", p.code, p.file, p.message, p.fix);
    }
  }
  if (!options.check) return out;
  CheckOptions check;
  check.checkpoint = options.checkpoint;
  check.vllm_dir = options.vllm_dir;
  SPK_ASSIGN_OR_RETURN(CheckReport report, CheckCheckpoint(run, check));
  card->check_errors = CountSeverity(report.findings, Severity::kError);
  out += fmt::format(
      "\n## Check\n\n`sparkulator check` (judged for vLLM {}: {}): {} error(s), {} "
      "warning(s).\n\n",
      report.vllm_version, report.vllm_version_source, card->check_errors,
      CountSeverity(report.findings, Severity::kWarning));
  for (const Finding& f : report.findings) {
    out += fmt::format("- {} `{}` {}: {}\n", SeverityName(f.severity), f.code, f.module, f.message);
  }
  return out;
}

}  // namespace

Result<Card> MakeCard(const RunContext& run, const CardOptions& options,
                      const std::string& existing) {
  FileSystem* fs = run.fs;
  const std::string config_path = options.checkpoint + "/config.json";
  SPK_ASSIGN_OR_RETURN(json config, ReadJson(fs, config_path));
  const JsonAt doc(config, config_path);
  if (doc.Key("quantization_config").missing() || !doc.Key("sparkulator").Object().ok()) {
    return Status::InvalidInput(
        config_path +
        ": no quantization_config and \"sparkulator\" record; sparkulator card describes a "
        "checkpoint written by `sparkulator quantize` (quantize it first)");
  }
  SPK_ASSIGN_OR_RETURN(Record record, ReadRecord(doc.Key("sparkulator"),
                                                 FieldOrNull(config, "quantization_config")));
  const QuantScheme* scheme = FindScheme(record.scheme);
  if (scheme == nullptr) {
    return Status::InvalidInput(fmt::format(
        "{}: sparkulator.scheme \"{}\" is none of the schemes this sparkulator knows ({})",
        config_path, record.scheme, SchemeNames()));
  }
  CheckOptions check_options;
  check_options.checkpoint = options.checkpoint;
  SPK_ASSIGN_OR_RETURN(CheckReport report, CheckCheckpoint(run, check_options));

  Card card;
  const std::string& source = record.source;
  std::string base_model = BaseModel(fs, source, options.base_model);
  std::vector<nlohmann::json> results;
  for (const std::string& path : options.bench_files) {
    SPK_ASSIGN_OR_RETURN(json doc, ReadJson(fs, path));
    SPK_RETURN_IF_ERROR(bench::CheckResults(doc, path));
    results.push_back(std::move(doc));
  }

  OwnedKeys keys;
  keys.base_model = base_model;
  keys.license = SourceLicense(fs, source);
  keys.scheme = record.scheme;
  keys.number_type = WeightNumberName(*scheme);
  keys.family = report.family;
  std::string name = Basename(options.checkpoint);
  std::string body = WhatItIs(name, *scheme, record, report.family, base_model, options.target);
  if (base_model.empty()) {
    body += "\nThe source was a local folder (`" + source +
            "`) with no Hugging Face id; pass `--base-model ORG/NAME` to name it.\n";
  }
  body += SizesAndRecipe(record, options.checkpoint);
  body += KeptDense(record);
  body += Serving(report, options);
  SPK_ASSIGN_OR_RETURN(std::string checks, CheckSections(run, options, &card));
  body += checks;
  if (!results.empty()) {
    body +=
        "\n## Benchmarks\n\n" + BenchSections(results, options.bench_files, options.chart_files);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    bool wanted = i < options.chart_files.size() && !options.chart_files[i].empty();
    card.chart_svgs.push_back(wanted ? bench::RenderDeltaSvg(results[i]) : "");
  }
  card.markdown = MergeCard(existing, keys, body);
  return card;
}

}  // namespace spk::card
