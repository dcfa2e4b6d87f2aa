#include "check/check.h"

#include "check/checker.h"
#include "checkpoint/serve_line.h"
#include "checkpoint/source.h"

namespace spk {
namespace check_internal {

Result<CheckReport> Checker::Run() {
  if (options_.tp < 1) return Status::Usage("--tp must be at least 1");
  SPK_RETURN_IF_ERROR(ResolveVllm());
  SPK_RETURN_IF_ERROR(LoadFiles());
  SPK_ASSIGN_OR_RETURN(bool config_loaded, LoadConfig());
  if (!config_loaded) return std::move(report_);
  std::vector<std::string> names;
  for (const auto& [name, located] : tensors_) names.push_back(name);
  family_ = DetectFamily(config_, names, Preset::kAuto);
  SPK_RETURN_IF_ERROR(ResolveModuleMap());
  if (!options_.target.empty()) SPK_RETURN_IF_ERROR(CheckTarget());
  naming_ = NamingFor(family_, config_, names, options_.target_layers);
  if (ServedAsDraftModel() && map_.map != nullptr) {
    naming_.proposer_prefix = map_.map->draft_model_prefix;
  }
  report_.family = std::string(FamilyName(family_.family));
  report_.naming = naming_.ToString();
  if (report_.serve.empty()) report_.serve = ServeLine(family_, dir_, "<target>");
  if (IsDraft(family_.family) && !naming_.offset_known) {
    Add(FindingCode::kDraftOffsetUnknown, "", "config.json",
        "the draft's vLLM layer names depend on the target's layer count, which config.json does "
        "not give; per-layer ignore entries cannot be checked",
        "pass --target TARGET or --target-layers N");
  }
  CheckQuantConfig();
  CollectModules();
  CheckModules();
  CheckIgnoreEntries();
  CheckTargetsMatchSomething();
  CheckAgainstModuleMap();
  CheckMtpLayerBits();
  CheckUnstoredParams();
  draft_.config = &config_;
  draft_.family = family_;
  draft_.target_layers = target_layers_           ? target_layers_
                         : options_.target_layers ? options_.target_layers
                                                  : config_.num_target_layers;
  for (Finding& f : CheckDraftAgainstVllm(draft_, vllm_)) {
    Push(std::move(f));
  }
  return std::move(report_);
}

// A plain causal LM (no draft marker, no speculative method in the map) is a draft only as
// vLLM's method="draft_model" (v1/spec_decode/draft_model.py), which is how `--target` pairs it.
bool Checker::ServedAsDraftModel() const {
  return !options_.target.empty() && family_.family == ModelFamily::kLlm && !family_.map_draft &&
         family_.vllm_method.empty();
}

// The vLLM the version-dependent rules are judged for (CheckOptions).
Status Checker::ResolveVllm() {
  std::optional<VllmVersion> version;
  if (!options_.vllm_dir.empty()) {
    SPK_ASSIGN_OR_RETURN(VllmVersionSource read, ReadVllmVersion(fs_, options_.vllm_dir));
    vllm_.tree = options_.vllm_dir;
    vllm_.fs = fs_;
    version = read.version;
    vllm_.version_source = read.source;
  }
  if (!version && !options_.vllm_version.empty()) {
    SPK_ASSIGN_OR_RETURN(VllmVersion v, ParseVllmVersion(options_.vllm_version));
    version = v;
    vllm_.version_source = "--vllm-version";
  }
  if (!version) {
    version = *ParseVllmVersion(kNewestVerifiedVllm);
    vllm_.version_source = vllm_.tree.empty()
                               ? "the newest version verified; pass --vllm-version V or --vllm DIR"
                               : vllm_.version_source + "; judged by its code, versions as " +
                                     std::string(kNewestVerifiedVllm);
  }
  vllm_.version = *version;
  report_.vllm_version = version->text;
  report_.vllm_version_source = vllm_.version_source;
  report_.vllm_tree = vllm_.tree;
  return Status::Ok();
}

}  // namespace check_internal

using Json = nlohmann::ordered_json;
using check_internal::Checker;

Result<CheckReport> CheckCheckpoint(const RunContext& run, const CheckOptions& options) {
  SPK_ASSIGN_OR_RETURN(std::string dir, ResolveModelPath(run.fs, options.checkpoint));
  Checker checker(run.fs, options, dir);
  return checker.Run();
}

Json CheckReportToJson(const CheckReport& r) {
  Json findings = Json::array();
  for (const Finding& f : r.findings) findings.push_back(FindingToJson(f));
  return Json{{"path", r.path},
              {"ok", r.ok()},
              {"errors", CountSeverity(r.findings, Severity::kError)},
              {"warnings", CountSeverity(r.findings, Severity::kWarning)},
              {"family", r.family},
              {"vllm_naming", r.naming},
              {"scheme", r.scheme},
              {"shards", r.shards},
              {"quantized_modules", r.quantized_modules},
              {"dense_linear_modules", r.dense_linear_modules},
              {"vllm_version", r.vllm_version},
              {"vllm_version_source", r.vllm_version_source},
              {"vllm_tree", r.vllm_tree},
              {"vllm_module_map", r.module_map},
              {"vllm_module_map_source", r.module_map_source},
              {"vllm_module_map_architecture", r.module_map_architecture},
              {"serve", r.serve},
              {"findings", findings}};
}

std::string RenderCheckReport(const CheckReport& r) {
  std::string out = fmt::format(
      "{}\n  family {}, vLLM naming: {}\n  scheme {}; {} quantized Linear module(s), {} dense\n",
      r.path, r.family.empty() ? "?" : r.family, r.naming.empty() ? "?" : r.naming, r.scheme,
      r.quantized_modules, r.dense_linear_modules);
  if (!r.vllm_version.empty()) {
    out += fmt::format("  judged for vLLM {} ({}){}\n", r.vllm_version, r.vllm_version_source,
                       r.vllm_tree.empty() ? "" : ", model code of " + r.vllm_tree);
  }
  if (!r.module_map.empty()) {
    out += fmt::format("  by vLLM {}'s module map{}{}\n", r.module_map,
                       r.module_map_source.empty() || r.module_map_source == "compiled in"
                           ? ""
                           : " (" + r.module_map_source + ")",
                       r.module_map_architecture.empty()
                           ? " (architecture not in it)"
                           : ", architecture " + r.module_map_architecture);
  }
  for (const Finding& f : r.findings) out += RenderFinding(f);
  size_t errors = CountSeverity(r.findings, Severity::kError);
  size_t warnings = CountSeverity(r.findings, Severity::kWarning);
  out += errors == 0 ? fmt::format("OK: vLLM loads it right ({} warning(s))\n", warnings)
                     : fmt::format("FAILED: {} error(s), {} warning(s)\n", errors, warnings);
  if (!r.serve.empty()) out += fmt::format("serve with: {}\n", r.serve);
  return out;
}

}  // namespace spk
