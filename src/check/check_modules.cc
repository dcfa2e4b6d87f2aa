// Checker parts: each module under vLLM's naming: ignore and targets, quantized or dense,
// family rules, kernel rules, fused shards, ignore entries that match nothing.
#include "check/checker.h"

#include <algorithm>

#include "checkpoint/moe.h"
#include "quant/scheme.h"

namespace spk::check_internal {

void Checker::CollectModules() {
  for (const auto& [name, located] : tensors_) {
    for (auto [suffix, slot] : {std::pair{kPacked, &ModuleTensors::packed},
                                {kScale, &ModuleTensors::scale},
                                {kShape, &ModuleTensors::shape},
                                {kZeroPoint, &ModuleTensors::zero_point},
                                {kGlobalScale, &ModuleTensors::global_scale},
                                {kWeight, &ModuleTensors::weight}}) {
      if (HasSuffix(name, suffix)) {
        modules_[name.substr(0, name.size() - suffix.size())].*slot = located;
        break;
      }
    }
  }
  MarkUnpackedValues();
}

const ConfigGroup* Checker::MatchingGroup(const std::string& vllm_name,
                                          const std::string& fused) const {
  if (!qc_) return nullptr;
  for (size_t g = 0; g < qc_->groups.size() && g < targets_.size(); ++g) {
    if (!qc_->groups[g].weights) continue;
    for (const auto& target : targets_[g]) {
      if (!target || target->Matches(vllm_name) || target->Matches(fused)) {
        return &qc_->groups[g];
      }
    }
  }
  return nullptr;
}

namespace {

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

}  // namespace

void Checker::CheckModules() {
  if (IsDraft(family_.family)) draft_mapping_ = JudgeDraftFusedMapping();
  for (const auto& [module, mt] : modules_) {
    vllm_module_names_.insert(ToVllmModuleName(naming_, module));
    if (!mt.packed && !mt.weight) {
      if (mt.scale || mt.shape || mt.zero_point) {
        Add(FindingCode::kMissingWeightPacked, module,
            FileOf(mt.scale   ? *mt.scale
                   : mt.shape ? *mt.shape
                              : *mt.zero_point),
            "quantization tensors without weight_packed or weight: the module has no weights",
            "requantize the module");
      }
      continue;
    }
    TensorMeta meta;
    if (mt.weight && !mt.packed) {
      meta = {module + std::string(kWeight), mt.weight->entry->dtype, mt.weight->entry->shape,
              /*split_from=*/""};
    } else {
      // A quantized weight is a 2-D float weight before quantization; only its name decides.
      meta = {module + std::string(kPacked), DType::kBF16, {1, 1}, /*split_from=*/""};
    }
    if (auto not_linear = NotALinearReason(meta, module)) {
      if (!mt.packed) continue;
      FixedCode code =
          not_linear->starts_with("embedding") ? FixedCode(FindingCode::kQuantizedEmbedding)
          : not_linear->starts_with("lm_head") ? FixedCode(FindingCode::kQuantizedLmHead)
                                               : FixedCode(FindingCode::kQuantizedNonLinear);
      Add(code, module, FileOf(*mt.packed),
          fmt::format("stored quantized ({}), but {}: vLLM cannot load it", mt.packed->entry->name,
                      *not_linear),
          "keep it dense (add it to ignore and requantize)");
      continue;
    }
    CheckLinear(module, mt, meta);
  }
  CheckFusedAgreement();
  CheckVllmShapeRules();
}

void Checker::CheckLinear(const std::string& module, const ModuleTensors& mt,
                          const TensorMeta& meta) {
  static const FusedMapping kNoMapping;
  LinearModule lm;
  lm.module = module;
  lm.vllm_name = ToVllmModuleName(naming_, module);
  lm.fused = FusedModuleName(lm.vllm_name);
  lm.packed = mt.packed.has_value();
  if (mt.scale) lm.scale_dtype = std::string(DTypeName(mt.scale->entry->dtype));
  vllm_module_names_.insert(lm.fused);
  const std::string file = FileOf(mt.packed ? *mt.packed : *mt.weight);
  (lm.packed ? report_.quantized_modules : report_.dense_linear_modules)++;

  IgnoreDecision with = DecideIgnore(lm.fused, ignore_, StandardFusedMapping());
  IgnoreDecision without = DecideIgnore(lm.fused, ignore_, kNoMapping);
  // The decision vLLM makes: targets get the model's mapping; drafts none where the rule holds.
  const bool no_mapping = draft_mapping_ && draft_mapping_->verdict == Verdict::kFails;
  const IgnoreDecision& vllm = no_mapping ? without : with;
  if (vllm.shards_disagree) {
    Add(FindingCode::kFusedShardsDisagree, lm.fused, "config.json",
        "the ignore list ignores some shards of the fused module and not others: older vLLM "
        "fails, newer vLLM loads the whole fused layer dense",
        "make the ignore entries cover all of q/k/v (or gate/up), e.g. "
        "re:.*self_attn\\.(q|k|v|qkv)_proj$");
  }
  if (draft_mapping_ && draft_mapping_->verdict != Verdict::kWorks &&
      with.ignored != without.ignored) {
    ReportMappingDependence(lm, with);
  }
  const ConfigGroup* group = MatchingGroup(lm.vllm_name, lm.fused);
  bool vllm_quantized = group != nullptr && !vllm.ignored;
  if (mt.packed && mt.weight) {
    Add(FindingCode::kWeightAndPacked, module, file,
        "both .weight and .weight_packed are stored; vLLM fails on whichever it did not expect",
        "keep one form");
  }
  if (vllm_quantized && !mt.packed) {
    Add(FindingCode::kVllmExpectsQuantized, module, file,
        fmt::format("config group {} targets vLLM module '{}' and no ignore entry matches it, but "
                    "the checkpoint holds .weight: loading fails (KeyError / no parameter named "
                    "'{}.weight')",
                    group->name, lm.fused, lm.fused),
        fmt::format("add \"{}\" (vLLM's name) to ignore, or quantize the module", lm.fused));
  }
  if (!vllm_quantized && mt.packed) {
    std::string why = !qc_ ? "config.json has no compressed-tensors quantization_config"
                      : group == nullptr
                          ? "no config group targets it"
                          : fmt::format("the ignore list matches vLLM module '{}'", lm.fused);
    Add(FindingCode::kVllmExpectsDense, module, file,
        fmt::format("stored quantized ({}), but vLLM builds it dense ({}): loading fails with "
                    "\"There is no module or parameter named '{}{}'\"",
                    mt.packed->entry->name, why, lm.vllm_name,
                    HasSuffix(mt.packed->entry->name, kPacked) ? kPacked : kScale),
        "remove the ignore entry that matches it (or store the module dense)");
  }
  if (mt.packed) CheckRouter(module, file);
  // DFlash q/k/v depend on the vLLM release (draft_rules.h); the other family rules do not.
  bool dflash_qkv = family_.family == ModelFamily::kDFlash && IsAttentionQkv(module);
  if ((mt.packed || vllm_quantized) && !dflash_qkv) {
    if (auto keep = FamilyKeepReason(family_, map_, module)) {
      Add(FindingCode::kFamilyKeepsDense, module, file, fmt::format("quantized, but {}", *keep),
          "keep it dense: requantize with sparkulator quantize (it applies the family preset)");
    }
  }
  std::optional<std::pair<int64_t, int64_t>> dims;
  if (mt.packed) {
    const WeightQuantArgs* args = ArgsFor(group, qc_);
    const bool pack_quantized =
        args != nullptr && (args->format.empty() || args->format == "pack-quantized");
    if (pack_quantized) {
      dims = CheckPackedTensors(module, mt, *args);
      if (dims) {
        int64_t g = args->strategy == "group" ? args->group_size.value_or(0) : kChannelWise;
        lm.packed_shape = {dims->first, dims->second, g, args->num_bits, args->symmetric, file};
      }
    } else if (scheme_ && args != nullptr && args->format == scheme_->scheme->format) {
      dims = CheckCodecTensors(module, mt, &lm);
      if (dims) lm.codec_shape = {dims->first, dims->second, file};  // CheckVllmShapeRules
    }
  }
  if (mt.weight && !mt.packed && meta.shape.size() == 2)
    dims = std::pair{meta.shape[0], meta.shape[1]};
  if (dims) lm.out_features = dims->first;
  NoteDraftModule(module, mt, vllm_quantized, dims);
  linears_.push_back(std::move(lm));
}

// A quantized router or gate that vLLM builds with quant_config=None (checkpoint/moe.h): vLLM
// registers only a dense `.weight` for it, whatever the ignore list says.
void Checker::CheckRouter(const std::string& module, const std::string& file) {
  auto rule = RouterKeepRule(config_, module);
  if (!rule || !rule->built_without_quant_config) return;
  Add(FindingCode::kQuantizedRouter, module, file,
      fmt::format("stored as weight_packed, but {}: it has no quantized parameters and loading "
                  "fails (\"There is no module or parameter named '{}.weight_packed'\")",
                  rule->reason, ToVllmModuleName(naming_, module)),
      "keep the router dense (add it to ignore and requantize; sparkulator quantize does both)");
}

// Whether vLLM matches a draft's ignore entries against fused names only: what the module map saw
// vLLM do (the draft's quant config held a packed_modules_mapping or not when vLLM asked it about
// the Linears), so a release that gives drafts the mapping (vllm#53122) is judged by what it
// does; without a map entry, the rule's reading of vLLM's source.
RuleJudgement Checker::JudgeDraftFusedMapping() const {
  using PackedMapping = MappedArchitecture::PackedMapping;
  const MappedArchitecture* arch = map_.architecture;
  if (arch == nullptr || !arch->is_draft ||
      arch->quant_config_packed_mapping == PackedMapping::kUnknown) {
    return JudgeRule(VllmRuleById("draft-quant-config-no-fused-mapping"), vllm_);
  }
  const bool held = arch->quant_config_packed_mapping == PackedMapping::kHeld;
  return {held ? Verdict::kWorks : Verdict::kFails,
          fmt::format("vLLM {}'s module map: building {}, vLLM asked a quant config holding {} "
                      "packed_modules_mapping about its Linears",
                      map_.map->release, arch->name, held ? "a" : "no")};
}

// A draft module that the ignore list covers only with (or only without) fused-name expansion.
// Where vLLM gives drafts no mapping, only "ignored through the shard names" is a fault (vLLM
// builds the module quantized); elsewhere vLLM could go either way.
void Checker::ReportMappingDependence(const LinearModule& lm, const IgnoreDecision& with) {
  const VllmRule& rule = VllmRuleById("draft-quant-config-no-fused-mapping");
  if (draft_mapping_->verdict == Verdict::kFails) {
    if (!with.ignored) return;  // the fused name itself is ignored: vLLM keeps it dense
    Add(rule.code, Severity::kError, lm.fused, "config.json",
        fmt::format("the ignore list names only the shards of '{}'; a draft's quant config has no "
                    "packed_modules_mapping ({}), so vLLM compares the fused name, builds the "
                    "module quantized and fails: \"{}\"",
                    lm.fused, draft_mapping_->basis, rule.vllm_error),
        std::string(rule.fix));
    return;
  }
  Add(rule.code, Severity::kError, lm.fused, "config.json",
      fmt::format(
          "the module is {} only {} fused-name expansion; whether this vLLM gives a draft's "
          "quant config a packed_modules_mapping is not verified ({})",
          with.ignored ? "ignored" : "quantized", with.ignored ? "with" : "without",
          draft_mapping_->basis),
      "write entries that match both the fused and the shard names, e.g. "
      "re:.*self_attn\\.(q|k|v|qkv)_proj$");
}

// What the vLLM-dependent draft rules need to know about one Linear module.
void Checker::NoteDraftModule(const std::string& module, const ModuleTensors& mt,
                              bool vllm_quantized,
                              std::optional<std::pair<int64_t, int64_t>> dims) {
  if (!IsDraft(family_.family)) return;
  if (IsAttentionQkv(module)) {
    if (mt.packed || vllm_quantized) draft_.quantized_qkv.push_back(module);
    if (!module.ends_with("qkv_proj")) draft_.unfused_qkv.push_back(module);
  }
  if ((module == "fc" || module == "model.fc") && dims) {
    draft_.fc_shape = std::vector<int64_t>{dims->first, dims->second};
  }
}

void Checker::CheckFusedAgreement() {
  std::map<std::string, std::vector<const LinearModule*>> by_fused;
  for (const LinearModule& lm : linears_) by_fused[lm.fused].push_back(&lm);
  for (const auto& [fused, members] : by_fused) {
    if (members.size() < 2) continue;
    bool any_packed = false, any_dense = false;
    std::set<std::string> scale_dtypes;
    for (const LinearModule* m : members) {
      (m->packed ? any_packed : any_dense) = true;
      if (m->packed && !m->scale_dtype.empty()) scale_dtypes.insert(m->scale_dtype);
    }
    if (any_packed && any_dense) {
      Add(FindingCode::kFusedShardsDisagree, fused, "",
          "some shards of the fused module are quantized and others dense; vLLM loads one fused "
          "layer and fails",
          "quantize all shards or keep all dense");
    } else if (scale_dtypes.size() > 1) {
      Add(FindingCode::kFusedShardsDisagree, fused, "",
          fmt::format("the shards' weight_scale dtypes differ ({})", fmt::join(scale_dtypes, ", ")),
          "requantize the shards from one source dtype");
    }
    CheckGlobalScaleAgreement(members, fused);
  }
}

std::set<std::string> Checker::NamesVllmMatches() const {
  // Shard names of fused modules stored fused (Laguna qkv_proj) are names vLLM matches too.
  std::set<std::string> names = vllm_module_names_;
  for (const std::string& name : vllm_module_names_) {
    size_t dot = name.rfind('.');
    std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    auto it = StandardFusedMapping().find(leaf);
    if (it == StandardFusedMapping().end()) continue;
    for (const std::string& shard : it->second) names.insert(name.substr(0, dot + 1) + shard);
  }
  for (const LinearModule& lm : linears_) names.insert(lm.vllm_name);
  return names;
}

std::string Checker::NameMatchedInstead(const ModulePattern& pattern) const {
  VllmNaming unprefixed = naming_;
  unprefixed.proposer_prefix.clear();
  for (const auto& [module, mt] : modules_) {
    if (pattern.Matches(module)) return module;
    const std::string vllm = ToVllmModuleName(unprefixed, module);
    if (pattern.Matches(vllm) || pattern.Matches(FusedModuleName(vllm))) return module;
  }
  return "";
}

namespace {

// An entry that matches vLLM's name of a module whether or not a proposer prefix comes before it
// ("re:(.*\.)?model\.layers\.0\.mlp\.down_proj$"): it holds for the model served on its own
// and as a draft_model draft.
std::string PrefixTolerantEntry(std::string_view vllm_name_without_prefix) {
  return "re:(.*\\.)?" + EscapeRegex(vllm_name_without_prefix) + "$";
}

}  // namespace

void Checker::CheckIgnoreEntries() {
  const std::set<std::string> names = NamesVllmMatches();
  VllmNaming unprefixed = naming_;
  unprefixed.proposer_prefix.clear();
  for (const ModulePattern& p : ignore_) {
    if (p.text() == "lm_head") continue;  // vLLM's model always has it (the target's, for drafts)
    bool matched =
        std::any_of(names.begin(), names.end(), [&](const std::string& n) { return p.Matches(n); });
    if (matched) continue;
    const std::string literal = NameMatchedInstead(p);
    if (literal.empty()) {
      Add(FindingCode::kIgnoreMatchesNothing, Severity::kWarning, p.text(), "config.json",
          "the entry matches no module of the model under vLLM's naming",
          "remove it, or fix it to vLLM's module names");
      continue;
    }
    const std::string vllm = FusedModuleName(ToVllmModuleName(naming_, literal));
    // Another entry that covers the module keeps it dense all the same: this one is dead weight.
    const bool covered = AnyMatches(ignore_, vllm);
    std::string fix =
        naming_.proposer_prefix.empty()
            ? fmt::format("write vLLM's name: \"{}\" (or a re: pattern for it)", vllm)
            : fmt::format(
                  "write \"{}\", which matches it served alone and as a draft_model draft",
                  PrefixTolerantEntry(FusedModuleName(ToVllmModuleName(unprefixed, literal))));
    Add(FindingCode::kIgnoreMatchesNothing, covered ? Severity::kWarning : Severity::kError,
        p.text(), "config.json",
        fmt::format("the entry matches the name '{}' but no vLLM module name; vLLM calls it '{}', "
                    "so the entry is silently ignored{}",
                    literal, vllm,
                    covered ? " (another entry keeps the module dense)"
                            : " and the module is treated as quantized"),
        fix);
  }
}

// A config group's named targets (a "Linear"-like class target matches every Linear) that match no
// module under vLLM's naming: vLLM builds those modules dense while the checkpoint stores them
// quantized (vllm-expects-dense says which); this finding says why and what to write.
void Checker::CheckTargetsMatchSomething() {
  if (!qc_) return;
  const std::set<std::string> names = NamesVllmMatches();
  VllmNaming unprefixed = naming_;
  unprefixed.proposer_prefix.clear();
  for (size_t g = 0; g < qc_->groups.size() && g < targets_.size(); ++g) {
    for (const auto& target : targets_[g]) {
      if (!target) continue;
      if (std::any_of(names.begin(), names.end(),
                      [&](const std::string& n) { return target->Matches(n); })) {
        continue;
      }
      const std::string literal = NameMatchedInstead(*target);
      if (literal.empty()) {
        Add(FindingCode::kTargetMatchesNothing, Severity::kWarning, target->text(), "config.json",
            fmt::format("config group {}'s target matches no module of the model under vLLM's "
                        "naming",
                        qc_->groups[g].name),
            "remove it, or fix it to vLLM's module names");
        continue;
      }
      const std::string vllm = FusedModuleName(ToVllmModuleName(naming_, literal));
      const std::string why =
          naming_.proposer_prefix.empty()
              ? ""
              : fmt::format(
                    " (served beside --target, vLLM builds it as a draft_model draft and "
                    "names its modules under '{}')",
                    naming_.proposer_prefix);
      Add(FindingCode::kTargetMatchesNothing, Severity::kError, target->text(), "config.json",
          fmt::format("config group {}'s target matches the name '{}' but no vLLM module name; "
                      "vLLM calls it '{}'{}, so it builds the module dense and loading the "
                      "quantized tensors fails",
                      qc_->groups[g].name, literal, vllm, why),
          fmt::format("write \"{}\" (matches it served alone and as a draft_model draft)",
                      PrefixTolerantEntry(FusedModuleName(ToVllmModuleName(unprefixed, literal)))));
    }
  }
}

}  // namespace spk::check_internal
