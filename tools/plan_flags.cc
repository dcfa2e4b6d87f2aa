#include "plan_flags.h"

#include <fmt/format.h>

#include "checkpoint/target_model.h"
#include "checkpoint/vllm_module_map.h"
#include "quant/scheme.h"

namespace spk::cli {
namespace {

std::string ModuleMapReleases() {
  std::string releases;
  for (const ModuleMap& map : ModuleMaps())
    releases += (releases.empty() ? "" : ", ") + map.release;
  return releases;
}

}  // namespace

void AddPlanFlags(CLI::App* sub, QuantizeOptions* options, PlanFlags* flags) {
  // Generated from the scheme registry (quant/scheme.h), so a new row shows up here by itself.
  std::string schemes;
  for (const QuantScheme& s : AllSchemes()) {
    schemes += fmt::format("\n  {:<11} {}", s.name, s.summary);
    schemes += s.preset.empty() ? fmt::format("\n  {:<11} group sizes {}", "", GroupSizeList(s))
                                : fmt::format("\n  {:<11} llm-compressor preset {}; group sizes {}",
                                              "", s.preset, GroupSizeList(s));
  }
  sub->add_option(
         "--scheme", flags->scheme,
         "Quantization scheme, by name or llm-compressor preset name (any case):" + schemes)
      ->capture_default_str();
  sub->add_option("--group-size", flags->group_size,
                  "Columns per scale, one of the scheme's group sizes (listed under --scheme); -1 "
                  "for one scale per output channel. Default: the scheme's first (128 for the "
                  "integer schemes)");
  sub->add_option(
         "--preset", flags->preset,
         "Draft family rules: auto (detect from config.json), dflash, eagle3, mtp, llm, or "
         "none (only the universal rules)")
      ->capture_default_str();
  sub->add_option(
      "--ignore", options->plan.ignore,
      "Keep matching modules dense (repeatable). An exact vLLM module name or 're:REGEX' "
      "matched with Python re.match against vLLM's names (model. prefix, fused qkv_proj / "
      "gate_up_proj, a draft's layers offset by the target's layer count)");
  sub->add_option("--tp", options->plan.tp,
                  "Tensor-parallel size to check the Marlin shape rules for")
      ->capture_default_str();
  sub->add_option("--vllm-version", options->plan.vllm_release,
                  "The vLLM release to plan for: what it builds as a quantized Linear comes from "
                  "vLLM's module map of that release (" +
                      ModuleMapReleases() +
                      " built in; docs/draft-kinds.md). A newer release is judged by the newest "
                      "map, with a warning. Default: the newest map's release, as check's");
  sub->add_option("--target", options->target,
                  std::string(kTargetFlagHelp) +
                      ": a draft vLLM builds under the target's quantization config (Gemma4 "
                      "DSpark) is planned from it, and refused without it");
  sub->add_option("--target-layers", flags->target_layers,
                  "For drafts: the target model's num_hidden_layers, when config.json does not "
                  "give num_target_layers");
}

Status ApplyPlanFlags(const PlanFlags& flags, QuantizeOptions* options) {
  SPK_ASSIGN_OR_RETURN(SchemeSelection scheme, SelectScheme(flags.scheme, flags.group_size));
  options->plan.scheme = scheme.scheme;
  options->plan.group_size = scheme.group_size;
  SPK_ASSIGN_OR_RETURN(options->plan.preset, ParsePreset(flags.preset));
  if (flags.target_layers > 0) options->plan.target_layers = flags.target_layers;
  return Status::Ok();
}

}  // namespace spk::cli
