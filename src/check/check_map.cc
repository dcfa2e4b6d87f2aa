// Checker part: every module stored quantized, judged by vLLM's module map of the release the
// check is for (checkpoint/map_rules.h): a module vLLM builds with no quantization scheme, a weight
// its forward reads directly and a plain parameter cannot take quantized weights.
#include "check/checker.h"
#include "checkpoint/map_rules.h"

namespace spk::check_internal {
namespace {

constexpr std::string_view kRequantize =
    "keep it dense: requantize with sparkulator quantize (its plan follows vLLM's module map) or "
    "add the module to ignore";

}  // namespace

void Checker::CheckAgainstModuleMap() {
  // By number: "0.32.0+cpu" is 0.32.0's map; a pre-release is judged by its release's.
  const VllmVersion& v = vllm_.version;
  auto choice = ChooseModuleMap(fmt::format("{}.{}.{}", v.major, v.minor, v.patch));
  if (!choice.ok() || choice->map == nullptr) return;  // a release older than every map
  if (!choice->warning.empty()) {
    Add(Severity::kWarning, "vllm-release-not-mapped", "", "", choice->warning,
        "regenerate the map for that release (tools/vllm_module_map/generate.py) to verify it");
  }
  const MapContext context = ResolveMapContext(choice->map, config_, family_);
  report_.module_map = choice->map->release;
  if (context.architecture == nullptr && context.mtp == nullptr) {
    Add(Severity::kInfo, "vllm-map-architecture-unknown", "", "config.json",
        fmt::format("vLLM {}'s module map does not know architecture {}: which of its modules "
                    "vLLM builds quantized is not verified",
                    choice->map->release, context.architecture_name),
        "");
    return;
  }
  report_.module_map_architecture =
      context.architecture != nullptr ? context.architecture->name : context.mtp->name;
  for (const auto& [module, mt] : modules_) {
    if (!mt.packed) continue;
    MapJudgement j = JudgeByMap(context, module, module + std::string(kWeight));
    const std::string file = FileOf(*mt.packed);
    switch (j.verdict) {
      case MapVerdict::kQuantized:
      case MapVerdict::kUnmapped:
        break;
      case MapVerdict::kReadDirectly:
        // q/k/v read by a DFlash model file (laguna_dflash.py): the release rules of
        // draft_rules.h judge them, quoting vLLM's error (dflash-qkv-quantized).
        if (family_.family == ModelFamily::kDFlash && IsAttentionQkv(module) &&
            j.read_at.find("_dflash.py:") != std::string::npos) {
          break;
        }
        Add(Severity::kError, "vllm-map-weight-read-directly", module, file,
            "stored quantized, but " + j.reason, std::string(kRequantize));
        break;
      case MapVerdict::kNoScheme:
        Add(Severity::kError, "vllm-map-no-scheme", module, file,
            "stored quantized, but " + j.reason, std::string(kRequantize));
        break;
      case MapVerdict::kPlainParam:
        Add(Severity::kError, "vllm-map-plain-param", module, file,
            "stored quantized, but " + j.reason +
                ": it loads by name, and no parameter is called "
                "weight_packed",
            std::string(kRequantize));
        break;
      case MapVerdict::kNotListed:
        Add(Severity::kWarning, "vllm-map-module-unknown", module, file,
            "stored quantized, but " + j.reason, "check that vLLM builds it as a quantized Linear");
        break;
    }
  }
}

}  // namespace spk::check_internal
