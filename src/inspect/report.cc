#include "inspect/report.h"

#include <fmt/format.h>

#include <map>

#include "checkpoint/quant_config.h"
#include "checkpoint/serve_line.h"
#include "checkpoint/source.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

double Gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

// The target a draft names in its config (EAGLE-3 speculators: verifier.name_or_path).
std::string TargetOf(const ModelConfig& config) {
  const Json& j = config.json;
  if (j.contains("speculators_config") && j["speculators_config"].is_object()) {
    const Json& sc = j["speculators_config"];
    if (sc.contains("verifier") && sc["verifier"].is_object() &&
        sc["verifier"].contains("name_or_path") && sc["verifier"]["name_or_path"].is_string()) {
      return sc["verifier"]["name_or_path"].get<std::string>();
    }
  }
  return "<target>";
}

Json SizeJson(uint64_t before, uint64_t after) {
  return Json{{"bytes_before", before},
              {"bytes_after", after},
              {"gib_before", Gib(before)},
              {"gib_after", Gib(after)},
              {"ratio", before ? static_cast<double>(after) / static_cast<double>(before) : 0.0}};
}

Result<Json> InspectQuantized(SourceCheckpoint src) {
  SPK_ASSIGN_OR_RETURN(QuantizationConfigView qc,
                       ParseQuantizationConfig(src.dir + "/config.json", src.config.json));
  std::vector<std::string> names;
  for (const TensorMeta& t : src.tensors) names.push_back(t.name);
  FamilyDetection family = DetectFamily(src.config, names, Preset::kAuto);
  Json groups = Json::array();
  for (const ConfigGroup& g : qc.groups) {
    Json jg = {{"name", g.name}, {"targets", g.targets}, {"format", g.format}};
    if (g.weights) jg["scheme"] = SchemeLabel(*g.weights);
    groups.push_back(jg);
  }
  Json tensors = Json::array();
  uint64_t total = 0;
  size_t packed_modules = 0;
  for (const TensorMeta& t : src.tensors) {
    total += t.nbytes();
    bool packed = t.name.ends_with(".weight_packed");
    packed_modules += packed;
    tensors.push_back({{"name", t.name},
                       {"dtype", DTypeName(t.dtype)},
                       {"shape", t.shape},
                       {"bytes", t.nbytes()},
                       {"action", packed ? "quantized" : "as stored"},
                       {"reason", ""}});
  }
  return Json{{"path", src.dir},
              {"quantized", true},
              {"quant_method", qc.quant_method},
              {"format", qc.format},
              {"config_groups", groups},
              {"ignore", qc.ignore},
              {"family", FamilyName(family.family)},
              {"family_reason", family.reason},
              {"quantized_modules", packed_modules},
              {"tensors", tensors},
              {"size", SizeJson(total, total)},
              {"serve", ServeLine(family, src.dir, TargetOf(src.config))},
              {"num_speculative_tokens_reason", family.speculative_tokens_reason},
              {"warnings", src.files.warnings()}};
}

}  // namespace

Json PlanReport(const QuantizeSummary& s, bool with_tensors) {
  const QuantPlan& plan = s.plan;
  Json tensors = Json::array();
  if (with_tensors) {
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const TensorPlan& p = plan.tensors[i];
      const TensorMeta& t = s.tensors[i];
      Json jt = {{"name", t.name},
                 {"dtype", DTypeName(t.dtype)},
                 {"shape", t.shape},
                 {"bytes", t.nbytes()},
                 {"action", p.action == TensorAction::kQuantize ? "quantize" : "keep"},
                 {"reason", p.reason}};
      if (p.is_linear) jt["vllm_module"] = p.vllm_module;
      tensors.push_back(jt);
    }
  }
  std::string out_path = s.destination.empty() ? "<quantized checkpoint>" : s.destination;
  return Json{{"path", s.source_dir},
              {"quantized", false},
              {"destination", s.destination},
              {"family", FamilyName(plan.family.family)},
              {"family_reason", plan.family.reason},
              {"vllm_naming", plan.naming.ToString()},
              {"scheme", s.scheme},
              {"group_size", plan.options.group_size},
              {"quantized_tensors", plan.quantized_count()},
              {"kept_tensors", plan.tensors.size() - plan.quantized_count()},
              {"ignore", plan.ignore_entries},
              {"shards", s.shards},
              {"tensors", tensors},
              {"size", SizeJson(s.source_tensor_bytes, s.output_tensor_bytes)},
              {"serve", ServeLine(plan.family, out_path, "<target>")},
              {"num_speculative_tokens_reason", plan.family.speculative_tokens_reason},
              {"copied_files", s.copied_files},
              {"warnings", s.warnings},
              {"seconds", s.seconds}};
}

Result<Json> InspectCheckpoint(const QuantizeOptions& options, FileSystem* fs) {
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(fs, options.source));
  if (src.config.has_quantization_config) return InspectQuantized(std::move(src));
  QuantizeOptions dry = options;
  dry.dry_run = true;
  dry.destination.clear();
  SPK_ASSIGN_OR_RETURN(QuantizeSummary summary, QuantizeCheckpoint(dry, fs, nullptr));
  return PlanReport(summary, /*with_tensors=*/true);
}

std::string RenderReport(const Json& r, bool with_tensors) {
  std::string out;
  auto line = [&](std::string s) { out += s + "\n"; };
  line(fmt::format("checkpoint: {}", r.value("path", "")));
  line(fmt::format("family:     {} ({})", r.value("family", ""), r.value("family_reason", "")));
  if (r.value("quantized", false)) {
    for (const Json& g : r["config_groups"]) {
      line(fmt::format("scheme:     {} {} targets {}", g.value("scheme", "?"),
                       g.value("format", ""), g["targets"].dump()));
    }
    line(fmt::format("quantized modules: {}", r["quantized_modules"].get<size_t>()));
  } else {
    line(fmt::format("naming:     vLLM module names with {}", r.value("vllm_naming", "")));
    line(fmt::format("plan:       {} tensors quantized, {} kept as they are",
                     r["quantized_tensors"].get<size_t>(), r["kept_tensors"].get<size_t>()));
  }
  line(fmt::format("ignore:     {}", r["ignore"].dump()));
  const Json& size = r["size"];
  line(fmt::format("size:       {} bytes ({:.3f} GiB) -> {} bytes ({:.3f} GiB), x{:.3f}",
                   size["bytes_before"].get<uint64_t>(), size["gib_before"].get<double>(),
                   size["bytes_after"].get<uint64_t>(), size["gib_after"].get<double>(),
                   size["ratio"].get<double>()));
  if (with_tensors && !r["tensors"].empty()) {
    line("");
    line(fmt::format("{:<56} {:<5} {:<16} {:<9} {}", "tensor", "dtype", "shape", "action",
                     "reason"));
    for (const Json& t : r["tensors"]) {
      line(fmt::format("{:<56} {:<5} {:<16} {:<9} {}", t["name"].get<std::string>(),
                       t["dtype"].get<std::string>(), t["shape"].dump(),
                       t["action"].get<std::string>(), t["reason"].get<std::string>()));
    }
  }
  for (const Json& w : r["warnings"]) line(fmt::format("warning:    {}", w.get<std::string>()));
  line("");
  line(fmt::format("serve with: {}", r.value("serve", "")));
  std::string why = r.value("num_speculative_tokens_reason", "");
  if (!why.empty() && why != "not a draft") line(fmt::format("  num_speculative_tokens: {}", why));
  return out;
}

}  // namespace spk
