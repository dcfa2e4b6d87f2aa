#include "vllm/map_rules.h"
#include "base/strings.h"
#include "vllm/kernel_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace spk {
namespace {

MapJudgement Judged(MapVerdict verdict, std::string reason, std::string read_at = "") {
  return {verdict, std::move(reason), std::move(read_at)};
}

// The verdict of one architecture's map on `module` under the compressed-tensors format `format`
// ("" for the base one); kNotListed when it does not list it. Where the generator could not build
// the architecture under `format`, the map records no module of it there: the base verdict judges
// (SchemeNotBuiltWarning says so).
MapJudgement VerdictOf(const ModuleMap& map, const MappedArchitecture& arch,
                       std::string_view module, std::string_view tensor, std::string_view format) {
  if (const MappedModule* m = FindModule(arch, module)) {
    if (m->read_directly) {
      return Judged(
          MapVerdict::kReadDirectly,
          fmt::format("vLLM {} reads {}.weight in its forward ({}); a quantized layer has "
                      "no .weight unless vLLM guards the read",
                      map.release, Leaf(m->vllm_prefix),
                      m->read_at.empty() ? arch.file : m->read_at),
          m->read_at);
    }
    if (!m->QuantizedUnder(format)) {
      return Judged(MapVerdict::kNoScheme,
                    fmt::format("vLLM {} builds it as {} with no quantization scheme{} ({}, {}): a "
                                "quantized weight would not load",
                                map.release, m->module_class,
                                m->QuantizedUnder("") ? fmt::format(" under {}", format) : "",
                                arch.name, arch.file));
    }
    return Judged(MapVerdict::kQuantized, "");
  }
  if (IsPlainParam(arch, tensor)) {
    return Judged(MapVerdict::kPlainParam,
                  fmt::format("vLLM {} holds it as a plain parameter of {}, not a Linear ({})",
                              map.release, arch.name, arch.file));
  }
  return Judged(
      MapVerdict::kNotListed,
      fmt::format("not in vLLM {}'s module map of {}: vLLM may not build it as a quantized "
                  "Linear",
                  map.release, arch.name));
}

}  // namespace

bool IsStandardDecoderLinear(std::string_view module) {
  static constexpr std::array<std::string_view, 20> kLeaves = {"q_proj",
                                                               "k_proj",
                                                               "v_proj",
                                                               "o_proj",
                                                               "qkv_proj",
                                                               "gate_proj",
                                                               "up_proj",
                                                               "down_proj",
                                                               "gate_up_proj",
                                                               "q_a_proj",
                                                               "q_b_proj",
                                                               "kv_a_proj_with_mqa",
                                                               "kv_b_proj",
                                                               "w1",
                                                               "w2",
                                                               "w3",
                                                               "query_key_value",
                                                               "dense_h_to_4h",
                                                               "dense_4h_to_h",
                                                               "out_proj"};
  return std::find(kLeaves.begin(), kLeaves.end(), Leaf(module)) != kLeaves.end();
}

MapContext ResolveMapContext(const ModuleMap* map, const ModelConfig& config,
                             const FamilyDetection& family) {
  MapContext context;
  if (map == nullptr || !family.family_rules) return context;
  context.map = map;
  context.architecture = FindArchitecture(*map, config);
  // EAGLE-1's layout is served as method "eagle", and vLLM's EAGLEConfig renames the draft's
  // architectures to Eagle<arch> for that method (vllm/transformers_utils/configs/eagle.py:
  // `f"Eagle{arch}" if not arch.startswith("Eagle")`), so LlamaForCausalLM builds as
  // EagleLlamaForCausalLM (llama_eagle.py, whose fc is Linear(2H, H)).
  if (family.eagle1_layout && !config.architectures.empty()) {
    auto eagle = map->architectures.find("Eagle" + config.architectures[0]);
    if (eagle != map->architectures.end()) context.architecture = &eagle->second;
  }
  if (family.family == ModelFamily::kMtp) context.mtp = FindMtpArchitecture(*map, config);
  context.draft = IsDraft(family.family) || family.family == ModelFamily::kMtp ||
                  family.map_draft || family.eagle1_layout;
  context.architecture_name =
      config.architectures.empty() ? std::string("(none in config.json)") : config.architectures[0];
  return context;
}

namespace {

// DSpark's block size as vLLM reads it for the default num_speculative_tokens (config/
// speculative.py: hf_config.block_size, else dspark_block_size; Qwen3-Omni's check also looks in
// dflash_config), or 0.
int64_t DSparkBlockSize(const ModelConfig& config) {
  const auto& j = config.json;
  for (const auto* scope : {&j, j.contains("dflash_config") ? &j["dflash_config"] : nullptr}) {
    if (scope == nullptr || !scope->is_object()) continue;
    for (const char* key : {"block_size", "dspark_block_size"}) {
      auto it = scope->find(key);
      if (it != scope->end() && it->is_number_integer() && it->get<int64_t>() > 0) {
        return it->get<int64_t>();
      }
    }
  }
  return 0;
}

}  // namespace

void ApplyModuleMap(const MapContext& context, const ModelConfig& config, FamilyDetection* family) {
  const MappedArchitecture* arch = context.architecture;
  if (arch == nullptr || !arch->is_draft || arch->method().empty()) return;
  family->vllm_method = std::string(arch->method());
  family->map_no_layer_offset = arch->layers_from_zero();
  family->map_layers_follow_target = arch->layers_follow_target();
  if (family->vllm_method == "dspark") {
    // Unlike DFlash (block_size - 1), vLLM's default for dspark is the whole block.
    if (int64_t block = DSparkBlockSize(config); block > 0) {
      family->num_speculative_tokens = static_cast<int>(block);
      family->speculative_tokens_reason = fmt::format(
          "block_size {}: vLLM's default for method dspark (num_speculative_tokens = block_size)",
          block);
    }
  }
  if (family->family == ModelFamily::kLlm) {
    family->map_draft = true;
    family->num_speculative_tokens = 3;
    family->speculative_tokens_reason =
        fmt::format("{} drafts one token per step (vLLM {}'s map: method {}): 3, as for EAGLE-3",
                    arch->name, context.map->release, family->vllm_method);
  }
  // A speculators-format draft is served as its format says (speculators/base.py
  // build_vllm_speculative_config locks the method and sets the format's fields), with its own
  // token count.
  if (const SpeculatorsFormat* format = FindSpeculatorsFormat(*context.map, config);
      format != nullptr && !format->method.empty()) {
    family->vllm_method = format->method;
    family->speculative_config_fields = format->fields;
    if (std::optional<int> n = SpeculatorsSpeculativeTokens(config)) {
      family->num_speculative_tokens = *n;
      family->speculative_tokens_reason = std::string(kSpeculatorsTokensReason);
    }
  }
}

MapJudgement JudgeByMap(const MapContext& context, std::string_view module,
                        std::string_view tensor) {
  if (context.map == nullptr) return {};
  // The MTP layers are the MTP draft's: its map speaks for every module it lists.
  if (context.mtp != nullptr) {
    MapJudgement j = VerdictOf(*context.map, *context.mtp, module, tensor, context.scheme_format);
    if (j.verdict != MapVerdict::kNotListed) return j;
  }
  if (context.architecture != nullptr) {
    return VerdictOf(*context.map, *context.architecture, module, tensor, context.scheme_format);
  }
  return Judged(
      MapVerdict::kUnmapped,
      fmt::format("architecture {} is not in vLLM {}'s module map: only the standard decoder "
                  "Linears are quantized (--preset none quantizes every Linear weight)",
                  context.architecture_name, context.map->release));
}

std::string SchemeNotBuiltWarning(const MapContext& context, std::string_view format) {
  if (context.map == nullptr) return "";
  for (const MappedArchitecture* arch : {context.mtp, context.architecture}) {
    if (arch == nullptr) continue;
    auto error = arch->refused_by_format.find(format);
    if (error == arch->refused_by_format.end()) continue;
    auto scheme = context.map->schemes.find(format);
    return fmt::format(
        "vLLM {}'s module map could not build {} ({}) under a {} quantization config ({}: {}): "
        "its modules are judged by the W4A16 build's verdict, not verified for {}",
        context.map->release, arch->name, arch->file, format,
        scheme == context.map->schemes.end() ? std::string("?") : scheme->second.platform,
        error->second, format);
  }
  return "";
}

ParallelStyle MapParallelStyle(const MapContext& context, std::string_view module) {
  for (const MappedArchitecture* arch : {context.mtp, context.architecture}) {
    if (arch == nullptr) continue;
    if (const MappedModule* m = FindModule(*arch, module)) return m->parallel;
  }
  return ParallelStyle::kUnknown;
}

std::optional<std::string> MapKeepReason(const MapContext& context, std::string_view module,
                                         std::string_view tensor) {
  if (context.map == nullptr) return std::nullopt;
  MapJudgement j = JudgeByMap(context, module, tensor);
  if (j.verdict == MapVerdict::kQuantized) return std::nullopt;
  if (j.verdict == MapVerdict::kUnmapped && (IsStandardDecoderLinear(module) || !context.draft)) {
    return std::nullopt;
  }
  return j.reason;
}

bool IsUnverifiedByMap(const MapContext& context, std::string_view module) {
  return context.map != nullptr && context.architecture == nullptr &&
         !IsStandardDecoderLinear(module) &&
         JudgeByMap(context, module, "").verdict == MapVerdict::kUnmapped;
}

std::string UnmappedArchitectureWarning(const MapContext& context,
                                        const std::vector<std::string>& unverified) {
  if (context.map == nullptr || context.architecture != nullptr || unverified.empty()) return "";
  constexpr size_t kNamed = 4;
  std::vector<std::string> named(unverified.begin(),
                                 unverified.begin() + std::min(kNamed, unverified.size()));
  const std::string list =
      fmt::format("{}{}", fmt::join(named, ", "), unverified.size() > kNamed ? ", ..." : "");
  if (context.draft) {
    return fmt::format(
        "vLLM {}'s module map does not know architecture {}: {} Linear module(s) of this draft "
        "that are not standard decoder Linears stay dense ({}); check that vLLM builds them as "
        "quantized Linears and pass --preset none to quantize them",
        context.map->release, context.architecture_name, unverified.size(), list);
  }
  return fmt::format(
      "vLLM {}'s module map does not know architecture {}: every Linear weight is quantized, as "
      "model_free_ptq does, but {} of them are not standard decoder Linears and are not verified "
      "({}); `sparkulator check` says what vLLM then loads, and --ignore keeps one dense",
      context.map->release, context.architecture_name, unverified.size(), list);
}

std::optional<UnstoredRefusal> RefusalForUnstoredParams(
    const MapContext& context, const std::function<bool(const std::string&)>& stored) {
  for (const MappedArchitecture* a : {context.mtp, context.architecture}) {
    if (a == nullptr || a->refuses_without.empty()) continue;
    UnstoredRefusal r;
    r.architecture = a;
    for (const std::string& p : a->refuses_without) {
      if (!stored(p)) r.missing.push_back(p);
    }
    if (r.missing.empty()) return std::nullopt;
    std::string error = a->unstored_refusal;
    if (size_t at = error.find("{param}"); at != std::string::npos) {
      error.replace(at, 7, r.missing.front());
    }
    r.message = fmt::format(
        "vLLM {} refuses to load {} ({}) from a compressed-tensors checkpoint: under its "
        "quantization_config the attention holds KV-cache parameters that a checkpoint without "
        "a kv_cache_scheme does not store ({}), and its load_weights requires them: \"{}\"",
        context.map->release, a->name, a->file, fmt::join(r.missing, ", "), error);
    r.fix = a == context.mtp
                ? "serve this checkpoint without --speculative-config (the target's own layers "
                  "load), or serve the dense checkpoint for MTP speculative decoding"
                : "serve the dense draft";
    return r;
  }
  return std::nullopt;
}

std::optional<std::string> LoadWeightsRefusal(const MapContext& context, const ModelConfig& config,
                                              std::string_view module,
                                              const std::vector<std::string_view>& stored,
                                              std::string_view scheme) {
  if (context.map == nullptr) return std::nullopt;
  // The MTP layers are loaded by the MTP draft's load_weights, the rest by the model's own.
  const bool in_mtp_layers =
      context.mtp != nullptr &&
      (FindModule(*context.mtp, module) != nullptr || !MtpLayerPrefix(config, module).empty());
  const MappedArchitecture* a = in_mtp_layers ? context.mtp : context.architecture;
  if (a == nullptr || !a->load_weights_takes_only) return std::nullopt;
  const MappedArchitecture::TakesOnly& only = *a->load_weights_takes_only;
  std::vector<std::string> refused;
  for (std::string_view name : stored) {
    if (std::find(only.params.begin(), only.params.end(), name) == only.params.end()) {
      refused.push_back(fmt::format(".{}", name));
    }
  }
  if (refused.empty()) return std::nullopt;
  std::vector<std::string> taken;
  for (const std::string& p : only.params) taken.push_back("." + p);
  return fmt::format(
      "vLLM {}'s load_weights for {} takes only {} of {}, not the {} that {} stores ({}{}{})",
      context.map->release, a->name, fmt::join(taken, " and "), module, fmt::join(refused, ", "),
      scheme, only.error_at, only.error_at.empty() ? "" : ": ", only.error);
}

std::optional<MoeRefusal> MoeRefusalFor(const MapContext& context, const QuantScheme& scheme) {
  const KernelRule* row = KernelRuleFor(scheme);
  if (row == nullptr || row->moe_builds_nowhere.empty()) return std::nullopt;
  for (const MappedArchitecture* a : {context.mtp, context.architecture}) {
    if (a == nullptr) continue;
    for (const auto& [name, m] : a->modules) {
      if (m.module_class != "RoutedExperts" || !m.QuantizedUnder(scheme.format)) continue;
      return MoeRefusal{
          .experts = m.vllm_prefix,
          .message = fmt::format("{}: {} ({}) has routed experts ({}), and {}", scheme.name,
                                 a->name, a->file, m.vllm_prefix, row->moe_builds_nowhere),
          .fix = "w8a16 (symmetric int8) or w4a16-asym"};
    }
  }
  return std::nullopt;
}

std::optional<std::string> PackedDroppedBesideDenseExperts(const MapContext& context,
                                                           const QuantScheme& scheme,
                                                           std::string_view dense_expert) {
  // pack-quantized, nvfp4-pack-quantized and mxfp4-pack-quantized store `.weight_packed`.
  if (!scheme.format.ends_with("pack-quantized")) return std::nullopt;
  for (const MappedArchitecture* a : {context.mtp, context.architecture}) {
    if (a == nullptr || a->weight_packed_renamed_at.empty()) continue;
    return fmt::format(
        "{}: {} ({}) keeps the routed expert {} dense, and vLLM {}'s load_weights then renames "
        "every quantized Linear's .weight_packed to .weight ({}{}) and skips it without a word: "
        "the Linears would load no weights. Quantize the routed experts with the Linears, or keep "
        "the draft dense",
        scheme.name, a->name, a->file, dense_expert, context.map->release,
        a->weight_packed_renamed_at,
        a->weight_packed_renamed_guard.empty() ? "" : ", when " + a->weight_packed_renamed_guard);
  }
  return std::nullopt;
}

void AttachModuleMap(const MapContext& context, const ModelConfig& config, VllmNaming* naming) {
  if (context.mtp != nullptr) {
    // MTP layers stored in the target's checkpoint: vLLM numbers them after its decoder layers
    // where it renumbers them at all (Qwen4-exp MTP's mtp.layers.0 is vLLM's mtp.layers.N).
    naming->map_architecture = context.mtp;
    naming->map_layer_shift = config.num_hidden_layers.value_or(0);
  } else if (context.architecture != nullptr && context.architecture->is_draft) {
    // (A draft the markers call an LLM, as EagleMistralLarge3's layout, is one by the map.)
    const MappedArchitecture& arch = *context.architecture;
    naming->map_architecture = &arch;
    naming->map_layer_shift = naming->layer_offset;
    // A draft whose tiny model was shifted by another count than its target's layers takes it
    // from its own config's num_hidden_layers, as vLLM reads it there (DeepSeek-V4 DSpark).
    if (arch.layers_follow_target() && arch.tiny_target_layers > 0 &&
        *arch.layer_offset != arch.tiny_target_layers) {
      naming->map_layer_shift = config.num_hidden_layers.value_or(naming->layer_offset);
    }
  }
}

}  // namespace spk
