// `sparkulator check CKPT [--target T] [--tp N] [--vllm-version V | --vllm DIR] [--json]` and
// `check --vllm DIR`: will vLLM (that release, or that tree's code) load the checkpoint right
// (exit 0) or not (exit 1, findings printed); does a vLLM tree carry unguarded blockers of
// quantized drafts (exit 1, with the patches).
#include <cstdio>
#include <memory>

#include "check/check.h"
#include "check/vllm_rules.h"
#include "check/vllm_source.h"
#include "checkpoint/target_model.h"
#include "checkpoint/vllm_module_map.h"
#include "commands.h"

namespace spk::cli {
namespace {

int RunVllmInspection(FileSystem* fs, const std::string& dir, bool json) {
  auto findings = InspectVllmSource(fs, dir);
  if (!findings.ok()) return ReportError(findings.status());
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Finding& f : *findings) out.push_back(FindingToJson(f));
    auto version = ReadVllmVersion(fs, dir);
    nlohmann::ordered_json report = {{"vllm", dir}};
    if (version.ok()) {
      report["vllm_version"] = version->version ? version->version->text : "";
      report["vllm_version_source"] = version->source;
    }
    report["findings"] = out;
    std::printf("%s\n", report.dump(2).c_str());
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
  CLI::App* sub = app.add_subcommand(
      "check",
      "Check that vLLM loads a checkpoint, and loads it right: module naming and the ignore list, "
      "quantized tensors, scales, kernel rules, the config, the shard index and safetensors "
      "rules; with --target, the draft/target pairing. Exit 0: OK; 1: errors found.");
  sub->add_option("CKPT", options->checkpoint, "Model folder or org/name");
  sub->add_option("--target", options->target, std::string(kTargetFlagHelp));
  sub->add_option("--tp", options->tp, "Tensor-parallel size the kernel rules are checked for")
      ->check(CLI::PositiveNumber);
  sub->add_option("--target-layers", options->target_layers,
                  "The target's layer count, when the draft's config.json lacks it");
  sub->add_option("--vllm", options->vllm_dir,
                  "The vLLM in DIR (site-packages holding `vllm`, or a vLLM source tree): with "
                  "CKPT, judge the version-dependent rules by its version and model code, and what "
                  "it builds as a quantized Linear by the module map that tree builds for the "
                  "checkpoint's architectures (its Python runs vLLM's own code, about 15 s; "
                  "--vllm-python, --no-vllm-map-build); alone, scan its model code for unguarded "
                  "blockers of quantized drafts and print the patches");
  sub->add_option("--vllm-version", options->vllm_version,
                  "Judge the version-dependent rules for this vLLM release (default: the newest "
                  "module map's, " +
                      DefaultVllmRelease() +
                      ", as quantize and inspect), and what it builds as a quantized Linear by "
                      "vLLM's module map of that "
                      "release (a release without a map of its own: the newest map at or below "
                      "it, with a warning; docs/draft-kinds.md)");
  sub->add_option("--vllm-module-map", options->vllm_module_map,
                  "Judge what vLLM builds as a quantized Linear by this module map (the JSON that "
                  "tools/vllm_module_map/generate.py --print writes in your vLLM's environment) "
                  "instead of the compiled-in ones");
  sub->add_option("--vllm-python", options->vllm_python,
                  "With CKPT and --vllm DIR: the Python that imports DIR's vLLM and torch, which "
                  "builds the module map from DIR (default: the virtual environment's python when "
                  "DIR is its site-packages, else python3)");
  sub->add_option("--vllm-map-out", options->vllm_map_out,
                  "With CKPT and --vllm DIR: write the module map built from DIR to FILE (the "
                  "JSON generate.py printed), to compare with a committed map");
  sub->add_flag(
      "--no-vllm-map-build", [options](int64_t) { options->build_map_from_tree = false; },
      "With CKPT and --vllm DIR: do not build the module map from DIR; judge by the "
      "compiled-in map of its release");
  sub->add_flag("--vllm-batch-invariant", options->vllm_batch_invariant,
                "The checkpoint is served with VLLM_BATCH_INVARIANT=1: where the release judged "
                "then loads a WNA16 Linear without choosing a kernel (vLLM 0.33, by its module "
                "map), the kernel shape findings (no-vllm-kernel, kernel-rule, "
                "kernel-rule-platform) become the info finding vllm-batch-invariant-no-kernel "
                "(it loads, on vLLM's slower batch-invariant path); elsewhere they stay, their fix "
                "saying the variable does not avoid them");
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([=] {
    *run = [=] {
      if (options->checkpoint.empty() && !options->vllm_dir.empty()) {
        return RunVllmInspection(FileSystem::Default(), options->vllm_dir, *json);
      }
      if (options->checkpoint.empty()) {
        return ReportError(Status::Usage("check: pass CKPT (or --vllm DIR)"));
      }
      options->notice = [](const std::string& text) {
        std::fprintf(stderr, "check: %s\n", text.c_str());
      };
      auto report = CheckCheckpoint(RunContext{}, *options);
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
