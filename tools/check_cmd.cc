// `sparkulator check CKPT [--target T] [--tp N] [--vllm-version V | --vllm DIR] [--json]` and
// `check --vllm DIR`: will vLLM (that release, or that tree's code) load the checkpoint right
// (exit 0) or not (exit 1, findings printed); does a vLLM tree carry unguarded blockers of
// quantized drafts (exit 1, with the patches).
#include <cstdio>
#include <memory>

#include "check/check.h"
#include "check/vllm_rules.h"
#include "check/vllm_source.h"
#include "check_flags.h"
#include "commands.h"
#include "vllm/vllm_module_map.h"

namespace spk::cli {
namespace {

// In the order of the CLI's --help; the Python check() picks them by name, in its own order.
constexpr OptionRow<CheckOptions> kCheckRows[] = {
    {"--target", "target", ParamType::kOptionalPath, "None",
     "The target model a draft is served with (folder or org/name), for the pairing checks",
     &CheckOptions::target},
    {"--tp", "tp", ParamType::kInt, "1", "Tensor-parallel size the kernel rules are checked for",
     &CheckOptions::tp},
    {"--target-layers", "target_layers", ParamType::kOptionalInt, "None",
     "The target's layer count, when the draft's config.json lacks it",
     &CheckOptions::target_layers},
    {"--vllm", "vllm", ParamType::kOptionalPath, "None",
     "The vLLM in DIR (site-packages holding `vllm`, or a vLLM source tree): with CKPT, judge the "
     "version-dependent rules by its version and model code, and what it builds as a quantized "
     "Linear by the module map that tree builds for the checkpoint's architectures (its Python "
     "runs vLLM's own code, about 15 s; --vllm-python, --no-vllm-map-build); alone, scan its model "
     "code for unguarded blockers of quantized drafts and print the patches",
     &CheckOptions::vllm_dir},
    {"--vllm-version", "vllm_version", ParamType::kOptionalStr, "None",
     "Judge the version-dependent rules for this vLLM release (default: the newest module map's, "
     "as quantize and inspect), and what it builds as a quantized Linear by vLLM's module map of "
     "that release (a release without a map of its own: the newest map at or below it, with a "
     "warning; docs/draft-kinds.md)",
     &CheckOptions::vllm_version},
    {"--vllm-module-map", "vllm_module_map", ParamType::kOptionalPath, "None",
     "Judge what vLLM builds as a quantized Linear by this module map (the JSON that "
     "tools/vllm_module_map/generate.py --print writes in your vLLM's environment) instead of the "
     "compiled-in ones",
     &CheckOptions::vllm_module_map},
    {"--vllm-python", "vllm_python", ParamType::kOptionalPath, "None",
     "With CKPT and --vllm DIR: the Python that imports DIR's vLLM and torch, which builds the "
     "module map from DIR (default: the virtual environment's python when DIR is its "
     "site-packages, else python3)",
     &CheckOptions::vllm_python},
    {"--no-vllm-map-build", "vllm_map_build", ParamType::kBool, "True",
     "With CKPT and --vllm DIR: do not build the module map from DIR; judge by the compiled-in map "
     "of its release (vllm_map_build=False in Python)",
     &CheckOptions::build_map_from_tree},
    {"--vllm-batch-invariant", "vllm_batch_invariant", ParamType::kBool, "False",
     "The checkpoint is served with VLLM_BATCH_INVARIANT=1: where the release judged then loads a "
     "WNA16 Linear without choosing a kernel (vLLM 0.33, by its module map), the kernel shape "
     "findings (no-vllm-kernel, kernel-rule, kernel-rule-platform) become the info finding "
     "vllm-batch-invariant-no-kernel (it loads, on vLLM's slower batch-invariant path); elsewhere "
     "they stay, their fix saying the variable does not avoid them",
     &CheckOptions::vllm_batch_invariant},
    {"--vllm-map-out", "vllm_map_out", ParamType::kOptionalPath, "None",
     "With CKPT and --vllm DIR: write the module map built from DIR to FILE (the JSON generate.py "
     "printed), to compare with a committed map",
     &CheckOptions::vllm_map_out},
};

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

std::span<const OptionRow<CheckOptions>> CheckOptionRows() { return kCheckRows; }

void AddCheckCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<CheckOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "check",
      "Check that vLLM loads a checkpoint, and loads it right: module naming and the ignore list, "
      "quantized tensors, scales, kernel rules, the config, the shard index and safetensors "
      "rules; with --target, the draft/target pairing. Exit 0: OK; 1: errors found.");
  sub->add_option("CKPT", options->checkpoint, "Model folder or org/name");
  AddOptionRows(sub, CheckOptionRows(), options.get());
  sub->get_option("--tp")->check(CLI::PositiveNumber);
  CLI::Option* release = sub->get_option("--vllm-version");
  release->description(release->get_description() + " (newest built in: " + DefaultVllmRelease() +
                       ")");
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
