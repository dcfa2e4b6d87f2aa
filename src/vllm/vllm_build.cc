#include "vllm/vllm_build.h"

#include <fmt/format.h>

#include <array>
#include <cassert>

#include "base/checked_math.h"
#include "base/strings.h"
#include "model/moe.h"
#include "quant/stored_names.h"

namespace spk {
namespace {

BuildDecision Decided(Built built, DenseBy by, std::string reason) {
  BuildDecision d;
  d.built = built;
  d.by = by;
  d.reason = std::move(reason);
  return d;
}

// A draft vLLM builds under the target's quantization config: what that config makes of the
// Linear `module`, or nullopt when it is the draft's own config that counts (the other rules
// then decide). vLLM never reads the draft's quantization_config, so a draft quantized on its
// own is written and then fails: the plan follows the target instead, or refuses.
std::optional<BuildDecision> UnderTargetConfig(const BuildInputs& in, std::string_view module) {
  const std::string owner = TargetConfigOwner(*in.map);
  if (owner.empty()) return std::nullopt;
  if (in.target == nullptr) {
    return Decided(Built::kRefused, DenseBy::kTargetConfig,
                   owner +
                       ": pass --target T (the target it is served with): beside a dense "
                       "target its Linears stay dense, beside a compressed-tensors target "
                       "they take the target's scheme");
  }
  const TargetModel& target = *in.target;
  if (!target.precision.quantized) {
    return Decided(Built::kDenseLinear, DenseBy::kTargetConfig,
                   fmt::format("{}, and the target is {}: vLLM builds the draft's Linears dense",
                               owner, target.label));
  }
  if (!target.scheme) {
    return Decided(Built::kRefused, DenseBy::kTargetConfig,
                   fmt::format("{}, and the target is {}: vLLM builds the draft's Linears as "
                               "that config says, which no compressed-tensors draft (nor a dense "
                               "one) stores: serve the draft beside a dense or compressed-tensors "
                               "target",
                               owner, target.label));
  }
  const CheckpointScheme& want = *target.scheme;
  if (in.scheme != nullptr &&
      (want.scheme != in.scheme || want.params.group_size != in.group_size)) {
    return Decided(
        Built::kRefused, DenseBy::kTargetConfig,
        fmt::format("{}, and the target is {}: the draft's Linears load only with that scheme: "
                    "pass --scheme {} --group-size {}",
                    owner, target.label, want.scheme->name, want.params.group_size));
  }
  const std::string fused = ToFusedVllmModuleName(*in.naming, module);
  if (DecideIgnore(fused, target.ignore, StandardFusedMapping()).ignored) {
    return Decided(Built::kDenseLinear, DenseBy::kTargetConfig,
                   fmt::format("{}, and the target's ignore list matches {}: vLLM builds it dense",
                               owner, fused));
  }
  return std::nullopt;
}

// The parameter names of a Linear stored as `scheme` ("weight_packed", "weight_scale", ...): the
// codec's suffixes, less the zero point that a symmetric row does not store.
std::vector<std::string_view> StoredParams(const QuantScheme& scheme) {
  std::vector<std::string_view> out;
  for (std::string_view suffix : scheme.codec->suffixes()) {
    if (scheme.symmetric && suffix == kZeroPointSuffix) continue;
    out.push_back(suffix.substr(1));
  }
  return out;
}

}  // namespace

BuildDecision DecideVllmBuild(const BuildInputs& in, const TensorMeta& t) {
  std::string_view module = t.name;
  if (!module.ends_with(kWeightSuffix)) {
    return Decided(Built::kNotALinear, DenseBy::kNone, "not a weight (bias or buffer)");
  }
  module.remove_suffix(kWeightSuffix.size());
  // The map's verdict is vLLM's under the format of the scheme written (scheme_verdicts): every
  // rule below that asks the map asks it of that format.
  MapContext context = *in.map;
  if (in.scheme != nullptr) context.scheme_format = in.scheme->format;
  MapJudgement map = JudgeByMap(context, module, t.name);
  // The embedding / lm_head / norm rules go by the name; where the release's map lists the
  // module as a Linear vLLM quantizes, the map decides (Qwen4-exp MTP's mtp.fc_embedding is a
  // ColumnParallelLinear: kept dense and unlisted in the ignore list, it would not load).
  std::optional<BuildDecision> d;
  if (auto not_linear = NotALinearReason(t, module)) {
    const bool map_says_linear =
        IsQuantizableFloat(t.dtype) && t.shape.size() == 2 && map.verdict == MapVerdict::kQuantized;
    if (!map_says_linear) d = Decided(Built::kNotALinear, DenseBy::kNone, *not_linear);
  }
  if (!d) {
    if (auto why = EmbeddedDraftKeepReason(module)) {
      d = Decided(Built::kDenseLinear, DenseBy::kEmbeddedDraft, *why);
    }
  }
  if (!d) d = UnderTargetConfig(in, module);
  std::optional<std::string> load_weights_refusal;
  if (in.scheme != nullptr) {
    load_weights_refusal =
        LoadWeightsRefusal(context, *in.config, module, StoredParams(*in.scheme), in.scheme->name);
  }
  if (!d && load_weights_refusal) {
    d = Decided(Built::kDenseLinear, DenseBy::kLoadWeights, *load_weights_refusal);
  }
  if (!d) {
    if (auto router = RouterKeepRule(*in.config, module)) {
      d = Decided(Built::kDenseLinear, DenseBy::kRouter, router->reason);
    } else if (auto why = FamilyKeepReason(*in.family, context, module)) {
      d = Decided(Built::kDenseLinear, DenseBy::kFamily, *why);
    } else if (auto map_says = MapKeepReason(context, module, t.name)) {
      d = Decided(Built::kDenseLinear, DenseBy::kMap, *map_says);
    } else {
      d = Decided(Built::kQuantizedLinear, DenseBy::kNone, "Linear weight");
    }
  }
  d->map = std::move(map);
  d->family_keep = FamilyKeepReason(*in.family, context, module);
  // Only of a Linear: a norm or embedding is loaded by its own name.
  if (d->is_linear()) d->load_weights_refusal = std::move(load_weights_refusal);
  return *d;
}

// Rules that hold for every family: what vLLM never builds as a quantizable Linear.
std::optional<std::string> NotALinearReason(const TensorMeta& t, std::string_view module) {
  if (!IsQuantizableFloat(t.dtype)) {
    return fmt::format("{} tensor: only BF16/F16/F32 weights are quantized", DTypeName(t.dtype));
  }
  if (t.shape.size() != 2) return fmt::format("{}-D tensor (norm, bias or buffer)", t.shape.size());
  if (Contains(module, "embed") || Leaf(module) == "wte") {
    return "embedding: vLLM builds VocabParallelEmbedding, not a Linear";
  }
  if (Contains(module, "lm_head") || Contains(module, "shared_head.head")) {
    return "lm_head: vLLM builds ParallelLMHead, not a Linear";
  }
  if (Contains(Leaf(module), "norm")) return "norm weight";
  return std::nullopt;
}

namespace {

// The drafts a target's checkpoint carries that vLLM builds with quantization_config None, by the
// prefix of their tensors' names.
struct DenseEmbeddedDraft {
  std::string_view prefix;
  std::string_view why;
};
constexpr std::array kDenseEmbeddedDrafts = {
    DenseEmbeddedDraft{
        "mtp_dspark.",
        "Mistral Large 4's DSpark draft (mtp_dspark.*): vLLM builds it as "
        "MistralLarge4DSparkModel with quantization_config None whatever the target's "
        "quantization (0.34: transformers_utils/configs/mistral.py "
        "get_mistral_large_4_dspark_config; dspark/config.py: \"Mistral Large 4 DSpark drafts "
        "ship in BF16\"), so its Linears load a BF16 .weight only"},
};

}  // namespace

std::optional<std::string> EmbeddedDraftKeepReason(std::string_view module) {
  for (const DenseEmbeddedDraft& d : kDenseEmbeddedDrafts) {
    if (module.starts_with(d.prefix)) return std::string(d.why);
  }
  return std::nullopt;
}

std::optional<std::string> FamilyKeepReason(const FamilyDetection& family,
                                            std::string_view module) {
  if (!family.family_rules) return std::nullopt;
  std::string_view leaf = Leaf(module);
  switch (family.family) {
    case ModelFamily::kDFlash:
      if (IsQkvLeaf(leaf)) {
        return "DFlash: q/k/v stay dense so that every vLLM loads the draft: Laguna DFlash and "
               "vLLM up to 0.26 build the context K/V from qkv_proj.weight directly (vllm#51581); "
               "Qwen3 DFlash on vLLM 0.32 would also load them quantized (--preset none)";
      }
      if (leaf == "g_proj") return "DFlash (Laguna): per-head gate, out = heads, not Marlin-legal";
      return std::nullopt;
    case ModelFamily::kMtp:
      if (leaf == "eh_proj" || module == "mtp.fc") return "MTP: eh_proj stays dense (docs/vllm.md)";
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<std::string> FamilyKeepReason(const FamilyDetection& family, const MapContext& map,
                                            std::string_view module) {
  std::optional<std::string> keep = FamilyKeepReason(family, module);
  if (keep && family.family == ModelFamily::kMtp &&
      JudgeByMap(map, module, std::string(module) + std::string(kWeightSuffix)).verdict ==
          MapVerdict::kQuantized) {
    return std::nullopt;
  }
  return keep;
}

std::string TargetConfigOwner(const MapContext& map) {
  const MappedArchitecture* a = map.architecture;
  if (a == nullptr || !a->takes_target_quant_config()) return "";
  return fmt::format(
      "vLLM {} builds {} ({}) under the target's quantization config and never reads the "
      "draft's own",
      map.map->release, a->name, a->file);
}

}  // namespace spk
