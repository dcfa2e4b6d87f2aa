// `sparkulator check CKPT [--target T] [--tp N] [--json]` and `check --vllm DIR`: will vLLM load
// the checkpoint right (exit 0) or not (exit 1, findings printed); does an installed vLLM carry the
// known blockers of quantized drafts (exit 1, with the patches).
#include <cstdio>
#include <memory>

#include "check/check.h"
#include "check/vllm_source.h"
#include "commands.h"

namespace spk::cli {
namespace {

int RunVllmInspection(const std::string& dir, bool json) {
  auto findings = InspectVllmSource(dir);
  if (!findings.ok()) return ReportError(findings.status());
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Finding& f : *findings) out.push_back(FindingToJson(f));
    std::printf("%s\n", nlohmann::ordered_json{{"vllm", dir}, {"findings", out}}.dump(2).c_str());
  } else {
    for (const Finding& f : *findings) {
      std::printf("%s  %s: %s\n\n%s\n", SeverityName(f.severity).data(), f.file.c_str(),
                  f.message.c_str(), f.fix.c_str());
    }
    if (findings->empty()) std::printf("%s: no known blocker of quantized drafts\n", dir.c_str());
  }
  return CountSeverity(*findings, Severity::kError) == 0 ? 0 : 1;
}

}  // namespace

void AddCheckCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<CheckOptions>();
  auto json = std::make_shared<bool>(false);
  auto vllm_dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "check",
      "Check that vLLM loads a checkpoint, and loads it right: module naming and the ignore list, "
      "quantized tensors, scales, kernel rules, the config, the shard index and safetensors "
      "rules; with --target, the draft/target pairing. Exit 0: OK; 1: errors found.");
  sub->add_option("CKPT", options->checkpoint, "Model folder or org/name");
  sub->add_option("--target", options->target,
                  "The target model a draft is served with (folder or org/name)");
  sub->add_option("--tp", options->tp, "Tensor-parallel size the kernel rules are checked for")
      ->check(CLI::PositiveNumber);
  sub->add_option("--target-layers", options->target_layers,
                  "The target's layer count, when the draft's config.json lacks it");
  sub->add_option("--vllm", *vllm_dir,
                  "Instead: inspect the vLLM installed in DIR (the folder holding the `vllm` "
                  "package) for known blockers of quantized drafts and print the patches");
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([=] {
    *run = [=] {
      if (!vllm_dir->empty()) return RunVllmInspection(*vllm_dir, *json);
      if (options->checkpoint.empty()) {
        return ReportError(Status::Usage("check: pass CKPT (or --vllm DIR)"));
      }
      auto report = CheckCheckpoint(FileSystem::Default(), *options);
      if (!report.ok()) return ReportError(report.status());
      if (*json) {
        std::printf("%s\n", CheckReportToJson(*report).dump(2).c_str());
      } else {
        std::fputs(RenderCheckReport(*report).c_str(), stdout);
      }
      return report->ok() ? 0 : 1;
    };
  });
}

}  // namespace spk::cli
