#include "plan_flags.h"

#include <fmt/format.h>

#include "quant/scheme.h"
#include "vllm/vllm_module_map.h"

namespace spk::cli {
namespace {

using Row = OptionRow<PlanFlags>;

// In the order of the CLI's --help; the Python functions pick theirs by name, in their own order.
constexpr Row kPlanRows[] = {
    {"--scheme", "scheme", ParamType::kStr, "\"W4A16\"",
     "Quantization scheme, by name or llm-compressor preset name (any case)", &PlanFlags::scheme},
    {"--group-size", "group_size", ParamType::kOptionalInt, "None",
     "Columns per scale, one of the scheme's group sizes (listed under --scheme); -1 for one "
     "scale per output channel. Default: the scheme's first (128 for the integer schemes)",
     &PlanFlags::group_size},
    {"--preset", "preset", ParamType::kStr, "\"auto\"",
     "Draft family rules: auto (detect from config.json), dflash, eagle3, mtp, llm, or none (only "
     "the universal rules)",
     &PlanFlags::preset},
    {"--ignore", "ignore", ParamType::kStrList, "()",
     "Keep matching modules dense (repeatable). An exact vLLM module name or 're:REGEX' matched "
     "with Python re.match against vLLM's names (model. prefix, fused qkv_proj / gate_up_proj, a "
     "draft's layers offset by the target's layer count)",
     &PlanFlags::ignore},
    {"--tp", "tp", ParamType::kInt, "1", "Tensor-parallel size to check the Marlin shape rules for",
     &PlanFlags::tp},
    {"--vllm-version", "vllm_version", ParamType::kOptionalStr, "None",
     "The vLLM release to plan for: what it builds as a quantized Linear comes from vLLM's module "
     "map of that release (docs/draft-kinds.md). A newer release is judged by the newest map, with "
     "a warning. Default: the newest map's release, as check's",
     &PlanFlags::vllm_version},
    {"--target", "target", ParamType::kOptionalPath, "None",
     "The target model a draft is served with (folder or org/name): a draft vLLM builds under the "
     "target's quantization config (Gemma4 DSpark) is planned from it, and refused without it",
     &PlanFlags::target},
    {"--target-layers", "target_layers", ParamType::kOptionalInt, "None",
     "For drafts: the target model's num_hidden_layers, when config.json does not give "
     "num_target_layers",
     &PlanFlags::target_layers},
    {"--allow-unloadable", "allow_unloadable", ParamType::kBool, "False",
     "Write a scheme whose layout no vLLM release loads (W4AFP8 as model_free_ptq writes it), "
     "with a warning, instead of refusing it: for another engine, or to compare bytes with "
     "model_free_ptq. check still reports layout-loads-nowhere",
     &PlanFlags::allow_unloadable},
};

std::string ModuleMapReleases() {
  std::string releases;
  for (const ModuleMap& map : ModuleMaps())
    releases += (releases.empty() ? "" : ", ") + map.release;
  return releases;
}

}  // namespace

std::span<const OptionRow<PlanFlags>> PlanOptionRows() { return kPlanRows; }

void AddPlanFlags(CLI::App* sub, PlanFlags* flags) {
  AddOptionRows(sub, PlanOptionRows(), flags);
  // What only the binary knows goes after the row's text: the scheme registry (quant/scheme.h),
  // so a new row shows up here by itself, and the module maps compiled in.
  std::string schemes = ":";
  for (const QuantScheme& s : AllSchemes()) {
    schemes += fmt::format("\n  {:<11} {}", s.name, s.summary);
    schemes += s.preset.empty() ? fmt::format("\n  {:<11} group sizes {}", "", GroupSizeList(s))
                                : fmt::format("\n  {:<11} llm-compressor preset {}; group sizes {}",
                                              "", s.preset, GroupSizeList(s));
  }
  CLI::Option* scheme = sub->get_option("--scheme");
  scheme->description(scheme->get_description() + schemes);
  CLI::Option* release = sub->get_option("--vllm-version");
  release->description(release->get_description() + " (built in: " + ModuleMapReleases() + ")");
}

Status ApplyPlanFlags(const PlanFlags& flags, QuantizeOptions* options) {
  SPK_ASSIGN_OR_RETURN(SchemeSelection scheme, SelectScheme(flags.scheme, flags.group_size));
  options->plan.scheme = scheme.scheme;
  options->plan.group_size = scheme.group_size;
  SPK_ASSIGN_OR_RETURN(options->plan.preset, ParsePreset(flags.preset));
  options->plan.ignore = flags.ignore;
  options->plan.tp = flags.tp;
  if (flags.target_layers.value_or(0) > 0) options->plan.target_layers = flags.target_layers;
  options->plan.vllm_version = flags.vllm_version;
  options->target = flags.target;
  options->plan.allow_unloadable = flags.allow_unloadable;
  return Status::Ok();
}

}  // namespace spk::cli
