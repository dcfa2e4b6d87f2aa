#include "card/card.h"

#include <fmt/format.h>

#include <algorithm>

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

std::string Str(const json& j, const char* key, const std::string& fallback = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                : fallback;
}

double Gib(const json& bytes) {
  return bytes.is_number() ? bytes.get<double>() / (1024.0 * 1024 * 1024) : 0;
}

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
  if (auto config = ReadJson(fs, source + "/config.json"); config.ok()) {
    return Str(*config, "license");
  }
  return "";
}

// What the weights are, from the scheme row: for the integer pack-quantized rows their width,
// zero points and the recorded group size (a row takes several); for the others, whose grouping the
// row fixes, the row's summary.
std::string SchemeWords(const QuantScheme& scheme, const json& record) {
  if (scheme.codec != &PackQuantizedCodec()) return std::string(scheme.summary);
  long long group = record.value("group_size", 0LL);
  std::string grouping = group > 0 ? fmt::format("groups of {}", group) : "per output channel";
  std::string each = scheme.symmetric ? "one BF16 scale each"
                                      : fmt::format("one BF16 scale and one {} zero point each",
                                                    WeightNumberName(scheme));
  return fmt::format("{}-bit integer weights ({}, {}), 16-bit activations", scheme.bits, grouping,
                     each);
}

std::string WhatItIs(const std::string& name, const QuantScheme& scheme, const json& record,
                     const std::string& family, const std::string& base_model,
                     const std::string& target) {
  std::string draft = family == "llm" ? "model" : family + " speculative-decoding draft";
  std::string out = fmt::format(
      "# {name}\n\nA {scheme} quantization of the {draft} `{source}`: {words}. It is written in "
      "the compressed-tensors `{format}` format that vLLM loads on {kernels}, made with "
      "sparkulator {version}, data-free (no calibration set).\n",
      fmt::arg("name", name), fmt::arg("scheme", Str(record, "scheme", "?")),
      fmt::arg("words", SchemeWords(scheme, record)), fmt::arg("draft", draft),
      fmt::arg("format", scheme.format), fmt::arg("kernels", scheme.kernels),
      fmt::arg("source", base_model.empty() ? Str(record, "source") : base_model),
      fmt::arg("version", Str(record, "version", "?")));
  if (family == "llm") return out;
  std::string precision = Str(record, "target_precision", "unquantized");
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

std::string SizesAndRecipe(const json& record, const std::string& checkpoint) {
  double before = Gib(record["source_tensor_bytes"]), after = Gib(record["output_tensor_bytes"]);
  std::string out = "\n## Size\n\n| | weights |\n|---|---|\n";
  out += fmt::format("| source | {:.3f} GiB ({} bytes) |\n", before,
                     record.value("source_tensor_bytes", 0ULL));
  out += fmt::format("| this checkpoint | {:.3f} GiB ({} bytes) |\n", after,
                     record.value("output_tensor_bytes", 0ULL));
  if (before > 0) out += fmt::format("| ratio | x{:.3f} |\n", after / before);
  std::string method = Str(record, "method", "rtn");
  std::string command = fmt::format(
      "sparkulator quantize {} {} --scheme {} --method {} --group-size {}", Str(record, "source"),
      Basename(checkpoint), Str(record, "scheme"), method, record.value("group_size", 128LL));
  if (record.contains("target_precision")) {
    command += " --target-precision " + Str(record, "target_precision");
  }
  out += fmt::format(
      "\n## Recipe\n\n| | |\n|---|---|\n| scheme | {} |\n| group size | {} |\n| method | {} |\n"
      "| data-free | {} |\n| family (preset) | {} ({}) |\n| sparkulator | {} |\n\n"
      "```\n{}\n```\n",
      Str(record, "scheme"), record.value("group_size", 0LL),
      method == "search" ? "search (per-group scale search for a lower reconstruction error)"
                         : "rtn (min-max round-to-nearest, bit-exact with llm-compressor)",
      record.value("data_free", true) ? "yes" : "no", Str(record, "family", "?"),
      Str(record, "preset", "auto"), Str(record, "version", "?"), command);
  return out;
}

// One row per reason, with every tensor it keeps dense.
std::string KeptDense(const json& record, const json& quant_config) {
  std::string out = "\n## Modules kept dense\n\n";
  std::string ignore = quant_config.value("ignore", json::array()).dump();
  const json kept = record.value("kept_dense", json::array());
  if (kept.empty()) {
    return out + "Every Linear module is quantized (`quantization_config.ignore`: `" + ignore +
           "`).\n";
  }
  std::vector<std::pair<std::string, std::string>> rows;  // reason, tensors
  for (const json& k : kept) {
    std::string reason = Str(k, "reason"), tensor = "`" + Str(k, "tensor") + "`";
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
  return out + "\n`quantization_config.ignore`: `" + ignore + "`\n";
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
  if (!config.contains("quantization_config") || !config.contains("sparkulator") ||
      !config["sparkulator"].is_object()) {
    return Status::InvalidInput(
        config_path +
        ": no quantization_config and \"sparkulator\" record; sparkulator card describes a "
        "checkpoint written by `sparkulator quantize` (quantize it first)");
  }
  const json& record = config["sparkulator"];
  const QuantScheme* scheme = FindScheme(Str(record, "scheme"));
  if (scheme == nullptr) {
    return Status::InvalidInput(fmt::format(
        "{}: sparkulator.scheme \"{}\" is none of the schemes this sparkulator knows ({})",
        config_path, Str(record, "scheme"), SchemeNames()));
  }
  CheckOptions check_options;
  check_options.checkpoint = options.checkpoint;
  SPK_ASSIGN_OR_RETURN(CheckReport report, CheckCheckpoint(run, check_options));

  Card card;
  std::string source = Str(record, "source");
  std::string base_model = BaseModel(fs, source, options.base_model);
  std::vector<nlohmann::json> results;
  for (const std::string& path : options.bench_files) {
    SPK_ASSIGN_OR_RETURN(json doc, ReadJson(fs, path));
    if (!doc.contains("arms") || !doc.contains("comparisons")) {
      return Status::InvalidInput(path + ": not a `sparkulator bench --json` results file");
    }
    results.push_back(std::move(doc));
  }

  OwnedKeys keys;
  keys.base_model = base_model;
  keys.license = SourceLicense(fs, source);
  keys.scheme = Str(record, "scheme");
  keys.number_type = WeightNumberName(*scheme);
  keys.family = report.family;
  std::string name = Basename(options.checkpoint);
  std::string body = WhatItIs(name, *scheme, record, report.family, base_model, options.target);
  if (base_model.empty()) {
    body += "\nThe source was a local folder (`" + source +
            "`) with no Hugging Face id; pass `--base-model ORG/NAME` to name it.\n";
  }
  body += SizesAndRecipe(record, options.checkpoint);
  body += KeptDense(record, config["quantization_config"]);
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
