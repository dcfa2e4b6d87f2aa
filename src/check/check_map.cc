// The module-map rules: every module stored quantized, judged by vLLM's module map of the release
// the check is for (vllm/map_rules.h): a module vLLM builds with no quantization scheme, a
// weight its forward reads directly, a plain parameter and a Linear whose load_weights takes only
// dense names cannot take quantized weights; MTP layers
// stored at 4 bits or fewer (a quality risk, not a load failure).
#include <algorithm>
#include <set>

#include "check/check_rules.h"
#include "vllm/map_rules.h"
#include "vllm/vllm_build.h"

namespace spk::check_internal {
namespace {

constexpr std::string_view kRequantize =
    "keep it dense: requantize with sparkulator quantize (its plan follows vLLM's module map) or "
    "add the module to ignore";

}  // namespace

namespace {

// The map knows the checkpoint's architecture (or its MTP layers).
bool MapKnowsArchitecture(const MapContext& context) {
  return context.map != nullptr && (context.architecture != nullptr || context.mtp != nullptr);
}

}  // namespace

void MapRelease(const CheckView& v, FindingSink& sink) {
  if (v.map.map == nullptr || v.map_warning.empty()) return;
  sink.Add(FindingCode::kVllmReleaseNotMapped, "", "", v.map_warning,
           "regenerate the map for that release (tools/vllm_module_map/generate.py) to verify it");
}

void MapArchitecture(const CheckView& v, FindingSink& sink) {
  const MapContext& context = v.map;
  if (context.map == nullptr) return;
  if (std::optional<LackedKind> lacked = ReleaseLacksKind(*context.map, v.config)) {
    sink.Add(FindingCode::kVllmReleaseLacksArchitecture, "", "config.json", lacked->message,
             lacked->serving_release.empty()
                 ? fmt::format("use a draft kind vLLM {} serves", context.map->release)
                 : fmt::format("serve it with vLLM {} (a release that builds it), or use a draft "
                               "kind vLLM {} serves",
                               lacked->serving_release, context.map->release));
    return;
  }
  if (MapKnowsArchitecture(context)) {
    const std::optional<CheckpointScheme>& scheme = v.quant.scheme;
    if (scheme && scheme->scheme != nullptr) {
      std::string warning = SchemeNotBuiltWarning(context, scheme->scheme->format);
      if (!warning.empty()) {
        sink.Add(FindingCode::kVllmMapSchemeNotBuilt, "", "config.json", warning,
                 "serve it once on the GPU to verify, or write a scheme the map verified");
      }
    }
    return;
  }
  sink.Add(FindingCode::kVllmMapArchitectureUnknown, "", "config.json",
           fmt::format("vLLM {}'s module map does not know architecture {}: which of its modules "
                       "vLLM builds quantized is not verified",
                       context.map->release, context.architecture_name),
           "");
}

void MapModules(const CheckView& v, FindingSink& sink) {
  const MapContext& context = v.map;
  if (!MapKnowsArchitecture(context)) return;
  for (const ModuleEntry& m : v.modules) {
    const std::string& module = m.name;
    const ModuleTensors& mt = m.tensors;
    if (!mt.packed || !m.build) continue;
    const MapJudgement& j = m.build->map;
    const std::string file = v.FileOf(*mt.packed);
    // Its load_weights refuses the names before the map's verdict on the module matters.
    if (m.build->load_weights_refusal) {
      sink.Add(FindingCode::kVllmLoadWeightsDenseOnly, module, file,
               "stored quantized, but " + *m.build->load_weights_refusal, std::string(kRequantize));
      continue;
    }
    switch (j.verdict) {
      case MapVerdict::kQuantized:
      case MapVerdict::kUnmapped:
        break;
      case MapVerdict::kReadDirectly:
        // q/k/v read by a DFlash model file (laguna_dflash.py): the release rules of
        // draft_rules.h judge them, quoting vLLM's error (dflash-qkv-quantized).
        if (v.family.family == ModelFamily::kDFlash && IsAttentionQkv(module) &&
            j.read_at.find("_dflash.py:") != std::string::npos) {
          break;
        }
        sink.Add(FindingCode::kVllmMapWeightReadDirectly, module, file,
                 "stored quantized, but " + j.reason, std::string(kRequantize));
        break;
      case MapVerdict::kNoScheme:
        sink.Add(FindingCode::kVllmMapNoScheme, module, file, "stored quantized, but " + j.reason,
                 std::string(kRequantize));
        break;
      case MapVerdict::kPlainParam:
        sink.Add(FindingCode::kVllmMapPlainParam, module, file,
                 "stored quantized, but " + j.reason +
                     ": it loads by name, and no parameter is called "
                     "weight_packed",
                 std::string(kRequantize));
        break;
      case MapVerdict::kNotListed:
        sink.Add(FindingCode::kVllmMapModuleUnknown, module, file,
                 "stored quantized, but " + j.reason,
                 "check that vLLM builds it as a quantized Linear");
        break;
    }
  }
}

// A speculators-format config is read by the format's code in vLLM (transformers_utils/configs/
// speculators): a format the release does not register, or a layer model_type it refuses, stops
// vLLM before anything loads. A parallel-drafting EAGLE-3 format (peagle) sends the 1-D
// mask_hidden through fc when the drafter loads (v1/spec_decode/llm_base_proposer.py,
// combine_hidden_states), which the CPU build's WNA16 GEMM refuses (measured on vLLM 0.32 CPU:
// tests/python/test_e2e_draft_kinds.py).
void SpeculatorsFormatRule(const CheckView& v, FindingSink& sink) {
  if (v.map.map == nullptr || v.map.map->stand_in || v.config.speculators_model_type.empty()) {
    return;
  }
  const ModuleMap& map = *v.map.map;
  const SpeculatorsFormat* format = FindSpeculatorsFormat(map, v.config);
  if (format == nullptr && ReleaseLacksKind(map, v.config)) return;  // MapArchitecture's finding
  if (format == nullptr || SpeculatorsArchitecture(*format, v.config).empty()) {
    // What the judged release reads: its formats, or the layer model_types of this one.
    std::vector<std::string> reads;
    if (format == nullptr) {
      for (const auto& [name, f] : map.speculators) reads.push_back("'" + name + "'");
    } else {
      for (const auto& [type, arch] : format->architectures) {
        if (!type.empty()) reads.push_back("'" + type + "'");
      }
    }
    const std::string what =
        format == nullptr
            ? fmt::format("speculators_model_type '{}' (it reads {})",
                          v.config.speculators_model_type, fmt::join(reads, ", "))
            : fmt::format(
                  "a '{}' draft of this transformer_layer_config model_type (it reads "
                  "model_type {})",
                  v.config.speculators_model_type, fmt::join(reads, ", "));
    sink.Add(FindingCode::kVllmSpeculatorsFormatUnknown, "", "config.json",
             fmt::format("vLLM {} does not read {}: it stops with ValueError before loading",
                         map.release, what),
             "convert the draft to a format the release reads, or serve it with a vLLM that "
             "reads it");
    return;
  }
  const bool parallel_eagle3 = format->method == "eagle3" &&
                               std::find(format->fields.begin(), format->fields.end(),
                                         std::pair<std::string, std::string>(
                                             "parallel_drafting", "true")) != format->fields.end();
  if (!parallel_eagle3) return;
  for (const ModuleEntry& m : v.modules) {
    const std::string& module = m.name;
    const ModuleTensors& mt = m.tensors;
    if (!mt.packed || (module != "fc" && !module.ends_with(".fc"))) continue;
    sink.Add(FindingCode::kParallelDraftingFcCpu, module, v.FileOf(*mt.packed),
             "stored quantized: it loads on CUDA, but vLLM's CPU build fails at load (its proposer "
             "passes the 1-D mask_hidden through fc, and its WNA16 GEMM takes 2-D input only: "
             "IndexError: Dimension out of range)",
             "for the CPU build, requantize with --ignore " + ToVllmModuleName(v.naming, module) +
                 " (fc stays dense)");
  }
}

// A draft that vLLM builds under the target's quantization config (gemma4_dspark.py,
// deepseek_eagle.py, ...: vllm_config.quant_config, not get_draft_quant_config): the draft's own
// quantization_config is never read, so what loads is decided by the target's. MTP layers are
// the target checkpoint's own, so for them this is the normal case.
void DraftQuantConfigOwner(const CheckView& v, FindingSink& sink) {
  if (v.map.map == nullptr || v.map.architecture == nullptr) return;
  // The sentence the plan refuses such a draft with (vllm/vllm_build.h).
  const std::string where = TargetConfigOwner(v.map);
  if (where.empty()) return;
  const bool target_quantized = v.target && v.target->precision.quantized;
  if (v.quantized_modules > 0) {
    // Beside a BF16 target the draft's Linears are built dense: weight_packed has nowhere to go.
    sink.Add(
        FindingCode::kVllmMapDraftTakesTargetConfig,
        target_quantized ? Severity::kWarning : Severity::kError, "", "config.json",
        fmt::format("{}: its {} quantized module(s) load only where the target's "
                    "quantization_config quantizes the same modules with the same scheme{}",
                    where, v.quantized_modules,
                    v.target ? fmt::format(" (the target is {})", v.target->label)
                             : std::string(" (no --target given)")),
        "serve this draft unquantized (sparkulator dequantize), or pass --target with a target "
        "quantized by the same scheme and check that its ignore list leaves the draft's modules "
        "as the draft stores them");
    return;
  }
  if (target_quantized) {
    // A dense draft beside a quantized target: vLLM builds the draft's Linears from the target's
    // config, which expects quantized tensors the draft does not store.
    sink.Add(
        FindingCode::kVllmMapDraftTakesTargetConfig, Severity::kError, "", "config.json",
        fmt::format("{}: this draft is dense, but the target is {}, so vLLM builds the draft's "
                    "Linears as that config says and they expect tensors this draft does not "
                    "store",
                    where, v.target->label),
        "serve beside an unquantized target, or quantize the draft with the target's scheme and "
        "ignore list (sparkulator quantize --scheme ...)");
  }
}

// An MTP layer quantized to 4 bits or fewer (a model's own MTP layers, or an MTP draft): vLLM
// builds them under the model's quant config and loads them, so nothing fails; the risk is the
// acceptance rate (reported for int4 MTP heads, kept at int8), which only a measurement shows.
void MtpLayerBits(const CheckView& v, FindingSink& sink) {
  if (v.family.family != ModelFamily::kMtp) return;
  std::vector<std::pair<std::string, int>> quantized;
  for (const LinearModule& lm : v.linears) {
    if (lm.packed_shape) quantized.emplace_back(lm.vllm_name, lm.packed_shape->bits);
  }
  if (std::optional<MtpLowBitsNote> note = MtpLayersAtLowBits(v.config, quantized)) {
    sink.Add(
        FindingCode::kMtpLayerLowBits, "", "", note->message,
        "measure acceptance against the dense MTP layers (sparkulator bench), or requantize with "
        "them dense: " +
            note->ignore_flags);
  }
}

// A compressed-tensors checkpoint whose architecture's load_weights wants the attention's
// KV-cache parameters, which only a kv_cache_scheme writes: vLLM refuses it whatever its Linears.
// A parameter counts as stored when a tensor ends with its name (`.k_scale`): a kv_cache_scheme
// checkpoint stores `self_attn.k_scale`, which vLLM's loaders remap onto `self_attn.attn`.
void UnstoredParams(const CheckView& v, FindingSink& sink) {
  if (!v.quant.qc || v.quant.qc->quant_method != "compressed-tensors") return;
  auto stored = [&v](const std::string& vllm_name) {
    const size_t dot = vllm_name.rfind('.');
    const std::string suffix = dot == std::string::npos ? "." + vllm_name : vllm_name.substr(dot);
    return std::any_of(v.tensors.begin(), v.tensors.end(),
                       [&](const auto& t) { return t.first.ends_with(suffix); });
  };
  if (auto refusal = RefusalForUnstoredParams(v.map, stored)) {
    sink.Add(FindingCode::kVllmRefusesUnstoredParams, "", "config.json", refusal->message,
             refusal->fix);
  }
}

}  // namespace spk::check_internal
