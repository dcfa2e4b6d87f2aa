// The modules of the CheckView and its one derived step (DeriveLinears): each Linear module under
// vLLM's naming, the ignore decisions and config group vLLM applies to it, whether vLLM builds it
// quantized, the verdict on its tensors, and the names and draft facts the rules read.
#include <algorithm>

#include "check/check_rules.h"

namespace spk::check_internal {
namespace {

const ConfigGroup* MatchingGroup(const CheckView& v, const std::string& vllm_name,
                                 const std::string& fused) {
  const auto& qc = v.quant.qc;
  if (!qc) return nullptr;
  for (size_t g = 0; g < qc->groups.size() && g < v.quant.targets.size(); ++g) {
    if (!qc->groups[g].weights) continue;
    for (const auto& target : v.quant.targets[g].patterns) {
      if (!target || target->Matches(vllm_name) || target->Matches(fused)) {
        return &qc->groups[g];
      }
    }
  }
  return nullptr;
}

// The quantization args used for the shape rules of a packed module: its group's, else the first
// group's (a packed module no group targets is reported separately).
const WeightQuantArgs* ArgsFor(const ConfigGroup* group,
                               const std::optional<QuantizationConfigView>& qc) {
  if (group && group->weights) return &*group->weights;
  if (!qc) return nullptr;
  for (const ConfigGroup& g : qc->groups) {
    if (g.weights) return &*g.weights;
  }
  return nullptr;
}

// Whether vLLM matches a draft's ignore entries against fused names only: what the module map saw
// vLLM do (the draft's quant config held a packed_modules_mapping or not when vLLM asked it about
// the Linears), so a release that gives drafts the mapping (vllm#53122) is judged by what it
// does; without a map entry, the rule's reading of vLLM's source.
RuleJudgement JudgeDraftFusedMapping(const CheckView& v) {
  using PackedMapping = MappedArchitecture::PackedMapping;
  const MappedArchitecture* arch = v.map.architecture;
  if (arch == nullptr || !arch->is_draft ||
      arch->quant_config_packed_mapping == PackedMapping::kUnknown) {
    return JudgeRule(VllmRuleById("draft-quant-config-no-fused-mapping"), v.vllm);
  }
  const bool held = arch->quant_config_packed_mapping == PackedMapping::kHeld;
  return {held ? Verdict::kWorks : Verdict::kFails,
          fmt::format("vLLM {}'s module map: building {}, vLLM asked a quant config holding {} "
                      "packed_modules_mapping about its Linears",
                      v.map.map->release, arch->name, held ? "a" : "no")};
}

LinearModule DeriveLinear(CheckView* v, const ModuleEntry& entry, const TensorMeta& meta) {
  static const FusedMapping kNoMapping;
  const std::string& module = entry.name;
  const ModuleTensors& mt = entry.tensors;
  LinearModule lm;
  lm.module = module;
  lm.vllm_name = ToVllmModuleName(v->naming, module);
  lm.fused = ToFusedVllmModuleName(v->naming, module);
  lm.packed = mt.packed.has_value();
  if (mt.scale) lm.scale_dtype = std::string(DTypeName(mt.scale->entry->dtype));
  lm.file = v->FileOf(mt.packed ? *mt.packed : *mt.weight);
  v->vllm_module_names.insert(lm.fused);
  (lm.packed ? v->quantized_modules : v->dense_linear_modules)++;

  lm.with_mapping = DecideIgnore(lm.fused, v->quant.ignore, StandardFusedMapping());
  lm.without_mapping = DecideIgnore(lm.fused, v->quant.ignore, kNoMapping);
  // The decision vLLM makes: targets get the model's mapping; drafts none where the rule holds.
  const bool no_mapping = v->draft_mapping && v->draft_mapping->verdict == Verdict::kFails;
  lm.vllm_decision = no_mapping ? lm.without_mapping : lm.with_mapping;
  lm.group = MatchingGroup(*v, lm.vllm_name, lm.fused);
  lm.vllm_quantized = lm.group != nullptr && !lm.vllm_decision.ignored;

  std::optional<std::pair<int64_t, int64_t>> dims;
  if (mt.packed) {
    FindingList problems;
    const WeightQuantArgs* args = ArgsFor(lm.group, v->quant.qc);
    const bool pack_quantized =
        args != nullptr && (args->format.empty() || args->format == "pack-quantized");
    const auto& scheme = v->quant.scheme;
    if (pack_quantized) {
      dims = VerifyPackedTensors(*v, module, mt, *args, &problems);
      if (dims) {
        int64_t g = args->strategy == "group" ? args->group_size.value_or(0) : kChannelWise;
        lm.packed_shape = {dims->first, dims->second, g, args->num_bits, args->symmetric, lm.file};
      }
    } else if (scheme && args != nullptr && args->format == scheme->scheme->format) {
      dims = VerifyCodecTensors(*v, module, mt, &lm, &problems);
      if (dims) lm.codec_shape = {dims->first, dims->second, lm.file};
    }
    lm.tensor_problems = std::move(problems.items);
  }
  if (mt.weight && !mt.packed && meta.shape.size() == 2) {
    dims = std::pair{meta.shape[0], meta.shape[1]};
  }
  if (dims) lm.out_features = dims->first;

  // What the vLLM-dependent draft rules need to know about the module.
  if (IsDraft(v->family.family)) {
    if (IsAttentionQkv(module)) {
      if (mt.packed || lm.vllm_quantized) v->draft.quantized_qkv.push_back(module);
      if (!module.ends_with("qkv_proj")) v->draft.unfused_qkv.push_back(module);
    }
    if ((module == "fc" || module == "model.fc") && dims) {
      v->draft.fc_shape = std::vector<int64_t>{dims->first, dims->second};
    }
  }
  return lm;
}

}  // namespace

void CollectModules(CheckView* v) {
  std::map<std::string, ModuleTensors> modules;
  for (const auto& [name, located] : v->tensors) {
    for (auto [suffix, slot] : {std::pair{kPackedSuffix, &ModuleTensors::packed},
                                {kScaleSuffix, &ModuleTensors::scale},
                                {kShapeSuffix, &ModuleTensors::shape},
                                {kZeroPointSuffix, &ModuleTensors::zero_point},
                                {kGlobalScaleSuffix, &ModuleTensors::global_scale},
                                {kWeightSuffix, &ModuleTensors::weight}}) {
      if (HasSuffix(name, suffix)) {
        modules[name.substr(0, name.size() - suffix.size())].*slot = located;
        break;
      }
    }
  }
  for (auto& [name, tensors] : modules) v->modules.push_back({name, tensors, {}, {}});
  MarkUnpackedValues(v);
}

void DeriveLinears(CheckView* v) {
  if (IsDraft(v->family.family)) v->draft_mapping = JudgeDraftFusedMapping(*v);
  const std::optional<CheckpointScheme>& scheme = v->quant.scheme;
  const BuildInputs inputs{.config = &v->config,
                           .family = &v->family,
                           .map = &v->map,
                           .naming = &v->naming,
                           .scheme = scheme ? scheme->scheme : nullptr,
                           .group_size = scheme ? scheme->params.group_size : 0,
                           .target = v->target ? &*v->target : nullptr};
  for (ModuleEntry& entry : v->modules) {
    const std::string& module = entry.name;
    const ModuleTensors& mt = entry.tensors;
    v->vllm_module_names.insert(ToVllmModuleName(v->naming, module));
    if (!entry.has_values()) continue;
    TensorMeta meta;
    if (mt.weight && !mt.packed) {
      meta = {module + std::string(kWeightSuffix), mt.weight->entry->dtype, mt.weight->entry->shape,
              /*split_from=*/""};
    } else {
      // A quantized weight is a 2-D float weight before quantization; only its name decides.
      meta = {module + std::string(kWeightSuffix), DType::kBF16, {1, 1}, /*split_from=*/""};
    }
    // The decision the plan made when it wrote the checkpoint, so that check cannot disagree.
    entry.build = DecideVllmBuild(inputs, meta);
    if (entry.build->built == Built::kNotALinear) entry.not_linear = entry.build->reason;
    if (entry.not_linear) continue;
    entry.linear = v->linears.size();
    v->linears.push_back(DeriveLinear(v, entry, meta));
  }

  // Shard names of fused modules stored fused (Laguna qkv_proj) are names vLLM matches too.
  std::set<std::string>& names = v->names_vllm_matches;
  names = v->vllm_module_names;
  for (const std::string& name : v->vllm_module_names) {
    size_t dot = name.rfind('.');
    std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    auto it = StandardFusedMapping().find(leaf);
    if (it == StandardFusedMapping().end()) continue;
    for (const std::string& shard : it->second) names.insert(name.substr(0, dot + 1) + shard);
  }
  for (const LinearModule& lm : v->linears) names.insert(lm.vllm_name);

  v->draft.config = &v->config;
  v->draft.family = v->family;
  v->draft.target_layers = v->target && v->target->config.num_hidden_layers
                               ? v->target->config.num_hidden_layers
                           : v->naming_target_layers ? v->naming_target_layers
                                                     : v->config.num_target_layers;
}

std::string CheckView::NameMatchedInstead(const ModulePattern& pattern) const {
  VllmNaming unprefixed = naming;
  unprefixed.proposer_prefix.clear();
  for (const ModuleEntry& m : modules) {
    if (pattern.Matches(m.name)) return m.name;
    const std::string vllm = ToVllmModuleName(unprefixed, m.name);
    if (pattern.Matches(vllm) || pattern.Matches(FusedModuleName(vllm))) return m.name;
  }
  return "";
}

}  // namespace spk::check_internal
