// The module rules of `sparkulator check` (run for each module, check_rules.h): a module's
// tensors against what vLLM builds of it (ignore and targets, quantized or dense, family rules,
// fused shards, routers, its quantized tensors), and the checkpoint rules fused-agreement,
// ignore-entries and targets-match.
#include <algorithm>

#include "check/check_rules.h"
#include "model/moe.h"

namespace spk::check_internal {

void ModuleWeights(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const ModuleTensors& mt = m.tensors;
  if (m.has_values() || !(mt.scale || mt.shape || mt.zero_point)) return;
  sink.Add(FindingCode::kMissingWeightPacked, m.name,
           v.FileOf(mt.scale   ? *mt.scale
                    : mt.shape ? *mt.shape
                               : *mt.zero_point),
           "quantization tensors without weight_packed or weight: the module has no weights",
           "requantize the module");
}

void NotALinear(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  if (!m.not_linear || !m.tensors.packed) return;
  const std::string& why = *m.not_linear;
  FixedCode code = why.starts_with("embedding") ? FixedCode(FindingCode::kQuantizedEmbedding)
                   : why.starts_with("lm_head") ? FixedCode(FindingCode::kQuantizedLmHead)
                                                : FixedCode(FindingCode::kQuantizedNonLinear);
  sink.Add(code, m.name, v.FileOf(*m.tensors.packed),
           fmt::format("stored quantized ({}), but {}: vLLM cannot load it",
                       m.tensors.packed->entry->name, why),
           "keep it dense (add it to ignore and requantize)");
}

void IgnoreSplitsFused(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* lm = v.LinearOf(m);
  if (lm == nullptr || !lm->vllm_decision.shards_disagree) return;
  sink.Add(FindingCode::kFusedShardsDisagree, lm->fused, "config.json",
           "the ignore list ignores some shards of the fused module and not others: older vLLM "
           "fails, newer vLLM loads the whole fused layer dense",
           "make the ignore entries cover all of q/k/v (or gate/up), e.g. "
           "re:.*self_attn\\.(q|k|v|qkv)_proj$");
}

// A draft module that the ignore list covers only with (or only without) fused-name expansion.
// Where vLLM gives drafts no mapping, only "ignored through the shard names" is a fault (vLLM
// builds the module quantized); elsewhere vLLM could go either way.
void DraftFusedMapping(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* linear = v.LinearOf(m);
  const std::optional<RuleJudgement>& mapping = v.draft_mapping;
  if (linear == nullptr || !mapping || mapping->verdict == Verdict::kWorks ||
      linear->with_mapping.ignored == linear->without_mapping.ignored) {
    return;
  }
  const LinearModule& lm = *linear;
  const IgnoreDecision& with = lm.with_mapping;
  const VllmRule& rule = VllmRuleById("draft-quant-config-no-fused-mapping");
  if (mapping->verdict == Verdict::kFails) {
    if (!with.ignored) return;  // the fused name itself is ignored: vLLM keeps it dense
    sink.Add(
        rule.code, Severity::kError, lm.fused, "config.json",
        fmt::format("the ignore list names only the shards of '{}'; a draft's quant config has no "
                    "packed_modules_mapping ({}), so vLLM compares the fused name, builds the "
                    "module quantized and fails: \"{}\"",
                    lm.fused, mapping->basis, rule.vllm_error),
        std::string(rule.fix));
    return;
  }
  sink.Add(rule.code, Severity::kError, lm.fused, "config.json",
           fmt::format(
               "the module is {} only {} fused-name expansion; whether this vLLM gives a draft's "
               "quant config a packed_modules_mapping is not verified ({})",
               with.ignored ? "ignored" : "quantized", with.ignored ? "with" : "without",
               mapping->basis),
           "write entries that match both the fused and the shard names, e.g. "
           "re:.*self_attn\\.(q|k|v|qkv)_proj$");
}

void WeightAndPacked(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* lm = v.LinearOf(m);
  if (lm == nullptr || !m.tensors.packed || !m.tensors.weight) return;
  sink.Add(FindingCode::kWeightAndPacked, m.name, lm->file,
           "both .weight and .weight_packed are stored; vLLM fails on whichever it did not expect",
           "keep one form");
}

void QuantizedOrDense(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* lm = v.LinearOf(m);
  if (lm == nullptr) return;
  const ModuleTensors& mt = m.tensors;
  if (lm->vllm_quantized && !mt.packed) {
    sink.Add(FindingCode::kVllmExpectsQuantized, m.name, lm->file,
             fmt::format("config group {} targets vLLM module '{}' and no ignore entry matches "
                         "it, but the checkpoint holds .weight: loading fails (KeyError / no "
                         "parameter named '{}.weight')",
                         lm->group->name, lm->fused, lm->fused),
             fmt::format("add \"{}\" (vLLM's name) to ignore, or quantize the module", lm->fused));
  }
  if (!lm->vllm_quantized && mt.packed) {
    std::string why = !v.quant.qc ? "config.json has no compressed-tensors quantization_config"
                      : lm->group == nullptr
                          ? "no config group targets it"
                          : fmt::format("the ignore list matches vLLM module '{}'", lm->fused);
    sink.Add(FindingCode::kVllmExpectsDense, m.name, lm->file,
             fmt::format(
                 "stored quantized ({}), but vLLM builds it dense ({}): loading fails "
                 "with \"There is no module or parameter named '{}{}'\"",
                 mt.packed->entry->name, why, lm->vllm_name,
                 HasSuffix(mt.packed->entry->name, kPackedSuffix) ? kPackedSuffix : kScaleSuffix),
             "remove the ignore entry that matches it (or store the module dense)");
  }
}

// A quantized router or gate that vLLM builds with quant_config=None (model/moe.h): vLLM
// registers only a dense `.weight` for it, whatever the ignore list says.
void QuantizedRouter(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* lm = v.LinearOf(m);
  if (lm == nullptr || !m.tensors.packed) return;
  const std::string& module = m.name;
  auto rule = RouterKeepRule(v.config, module);
  if (!rule || !rule->built_without_quant_config) return;
  sink.Add(
      FindingCode::kQuantizedRouter, module, lm->file,
      fmt::format("stored as weight_packed, but {}: it has no quantized parameters and loading "
                  "fails (\"There is no module or parameter named '{}.weight_packed'\")",
                  rule->reason, ToVllmModuleName(v.naming, module)),
      "keep the router dense (add it to ignore and requantize; sparkulator quantize does both)");
}

// A quantized module of a draft embedded in its target that vLLM builds with quantization_config
// None: the same decision the plan keeps it dense by (DenseBy::kEmbeddedDraft), so that check
// fails what quantize would never write.
void QuantizedEmbeddedDraft(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* lm = v.LinearOf(m);
  if (lm == nullptr || !m.tensors.packed || !m.build || m.build->by != DenseBy::kEmbeddedDraft) {
    return;
  }
  sink.Add(
      FindingCode::kQuantizedEmbeddedDraft, m.name, lm->file,
      fmt::format("stored as {}, but {}: loading fails (\"Unexpected DSpark weight: {}\", "
                  "or a KeyError for a fused w1/w2/w3)",
                  m.tensors.packed->entry->name, m.build->reason, m.tensors.packed->entry->name),
      "keep the draft dense: requantize the target with sparkulator quantize (it keeps "
      "mtp_dspark.* BF16), or copy its BF16 mtp_dspark.* tensors back");
}

void FamilyKeepsDense(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* lm = v.LinearOf(m);
  if (lm == nullptr || !(m.tensors.packed || lm->vllm_quantized)) return;
  // DFlash q/k/v depend on the vLLM release (draft_rules.h); the other family rules do not.
  if (v.family.family == ModelFamily::kDFlash && IsAttentionQkv(m.name)) return;
  if (const std::optional<std::string>& keep = m.build->family_keep) {
    sink.Add(FindingCode::kFamilyKeepsDense, m.name, lm->file,
             fmt::format("quantized, but {}", *keep),
             "keep it dense: requantize with sparkulator quantize (it applies the family preset)");
  }
}

// The problems DeriveLinears found reading the module's quantized tensors, where the checks that
// read them report.
void ModuleTensorsRule(const CheckView& v, const ModuleEntry& m, FindingSink& sink) {
  const LinearModule* lm = v.LinearOf(m);
  if (lm == nullptr) return;
  for (const Finding& f : lm->tensor_problems) sink.Push(f);
}

void FusedAgreement(const CheckView& v, FindingSink& sink) {
  std::map<std::string, std::vector<const LinearModule*>> by_fused;
  for (const LinearModule& lm : v.linears) by_fused[lm.fused].push_back(&lm);
  for (const auto& [fused, members] : by_fused) {
    if (members.size() < 2) continue;
    bool any_packed = false, any_dense = false;
    std::set<std::string> scale_dtypes;
    for (const LinearModule* m : members) {
      (m->packed ? any_packed : any_dense) = true;
      if (m->packed && !m->scale_dtype.empty()) scale_dtypes.insert(m->scale_dtype);
    }
    if (any_packed && any_dense) {
      sink.Add(
          FindingCode::kFusedShardsDisagree, fused, "",
          "some shards of the fused module are quantized and others dense; vLLM loads one fused "
          "layer and fails",
          "quantize all shards or keep all dense");
    } else if (scale_dtypes.size() > 1) {
      sink.Add(
          FindingCode::kFusedShardsDisagree, fused, "",
          fmt::format("the shards' weight_scale dtypes differ ({})", fmt::join(scale_dtypes, ", ")),
          "requantize the shards from one source dtype");
    }
    GlobalScaleAgreement(members, fused, sink);
  }
}

namespace {

// An entry that matches vLLM's name of a module whether or not a proposer prefix comes before it
// ("re:(.*\.)?model\.layers\.0\.mlp\.down_proj$"): it holds for the model served on its own
// and as a draft_model draft.
std::string PrefixTolerantEntry(std::string_view vllm_name_without_prefix) {
  return "re:(.*\\.)?" + EscapeRegex(vllm_name_without_prefix) + "$";
}

}  // namespace

void IgnoreEntries(const CheckView& v, FindingSink& sink) {
  const std::set<std::string>& names = v.names_vllm_matches;
  VllmNaming unprefixed = v.naming;
  unprefixed.proposer_prefix.clear();
  for (const ModulePattern& p : v.quant.ignore) {
    if (p.text() == "lm_head") continue;  // vLLM's model always has it (the target's, for drafts)
    bool matched =
        std::any_of(names.begin(), names.end(), [&](const std::string& n) { return p.Matches(n); });
    if (matched) continue;
    const std::string literal = v.NameMatchedInstead(p);
    if (literal.empty()) {
      sink.Add(FindingCode::kIgnoreMatchesNothing, Severity::kWarning, p.text(), "config.json",
               "the entry matches no module of the model under vLLM's naming",
               "remove it, or fix it to vLLM's module names");
      continue;
    }
    const std::string vllm = ToFusedVllmModuleName(v.naming, literal);
    // Another entry that covers the module keeps it dense all the same: this one is dead weight.
    const bool covered = AnyMatches(v.quant.ignore, vllm);
    std::string fix =
        v.naming.proposer_prefix.empty()
            ? fmt::format("write vLLM's name: \"{}\" (or a re: pattern for it)", vllm)
            : fmt::format("write \"{}\", which matches it served alone and as a draft_model draft",
                          PrefixTolerantEntry(ToFusedVllmModuleName(unprefixed, literal)));
    sink.Add(
        FindingCode::kIgnoreMatchesNothing, covered ? Severity::kWarning : Severity::kError,
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
void TargetsMatch(const CheckView& v, FindingSink& sink) {
  const auto& qc = v.quant.qc;
  if (!qc) return;
  const std::set<std::string>& names = v.names_vllm_matches;
  VllmNaming unprefixed = v.naming;
  unprefixed.proposer_prefix.clear();
  for (size_t g = 0; g < qc->groups.size() && g < v.quant.targets.size(); ++g) {
    for (const auto& target : v.quant.targets[g].patterns) {
      if (!target) continue;
      if (std::any_of(names.begin(), names.end(),
                      [&](const std::string& n) { return target->Matches(n); })) {
        continue;
      }
      const std::string literal = v.NameMatchedInstead(*target);
      if (literal.empty()) {
        sink.Add(FindingCode::kTargetMatchesNothing, Severity::kWarning, target->text(),
                 "config.json",
                 fmt::format("config group {}'s target matches no module of the model under vLLM's "
                             "naming",
                             qc->groups[g].name),
                 "remove it, or fix it to vLLM's module names");
        continue;
      }
      const std::string vllm = ToFusedVllmModuleName(v.naming, literal);
      const std::string why =
          v.naming.proposer_prefix.empty()
              ? ""
              : fmt::format(
                    " (served beside --target, vLLM builds it as a draft_model draft and "
                    "names its modules under '{}')",
                    v.naming.proposer_prefix);
      sink.Add(
          FindingCode::kTargetMatchesNothing, Severity::kError, target->text(), "config.json",
          fmt::format("config group {}'s target matches the name '{}' but no vLLM module name; "
                      "vLLM calls it '{}'{}, so it builds the module dense and loading the "
                      "quantized tensors fails",
                      qc->groups[g].name, literal, vllm, why),
          fmt::format("write \"{}\" (matches it served alone and as a draft_model draft)",
                      PrefixTolerantEntry(ToFusedVllmModuleName(unprefixed, literal))));
    }
  }
}

}  // namespace spk::check_internal
