// `sparkulator check`: the run (check_rules.cc RunCheck: the view, then the rules table) and the
// report in JSON and text.
#include "check/check.h"

#include <fmt/ranges.h>

#include "check/check_rules.h"

namespace spk {

using Json = nlohmann::ordered_json;
Result<CheckReport> CheckCheckpoint(const RunContext& run, const CheckOptions& options) {
  SPK_ASSIGN_OR_RETURN(check_internal::CheckRun checked, check_internal::RunCheck(run.fs, options));
  return std::move(checked.report);
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
              {"unreadable_shards", r.unreadable_shards},
              {"rules_not_run", r.rules_not_run},
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
  if (!r.rules_not_run.empty()) {
    out += fmt::format(
        "  not judged until {} can be read: the {} rules over the stored tensors ({})\n",
        fmt::join(r.unreadable_shards, ", "), r.rules_not_run.size(),
        fmt::join(r.rules_not_run, ", "));
  }
  size_t errors = CountSeverity(r.findings, Severity::kError);
  size_t warnings = CountSeverity(r.findings, Severity::kWarning);
  out += errors == 0 ? fmt::format("OK: vLLM loads it right ({} warning(s))\n", warnings)
                     : fmt::format("FAILED: {} error(s), {} warning(s)\n", errors, warnings);
  if (!r.serve.empty()) out += fmt::format("serve with: {}\n", r.serve);
  return out;
}

}  // namespace spk
