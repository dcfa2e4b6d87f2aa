#include "check/draft_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "check/finding_codes.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

bool HasLagunaArchitecture(const ModelConfig& config) {
  return std::any_of(config.architectures.begin(), config.architectures.end(),
                     [](const std::string& a) { return a.find("Laguna") != std::string::npos; });
}

std::vector<int64_t> IntList(const Json& obj, const char* key) {
  std::vector<int64_t> out;
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_array()) return out;
  for (const Json& v : obj[key]) {
    if (v.is_number_integer()) out.push_back(v.get<int64_t>());
  }
  return out;
}

// "first (and N more)".
std::string FirstAndCount(const std::vector<std::string>& modules) {
  if (modules.size() == 1) return modules.front();
  return fmt::format("{} (and {} more)", modules.front(), modules.size() - 1);
}

Severity SeverityOf(Verdict v) {
  return v == Verdict::kFails   ? Severity::kError
         : v == Verdict::kWorks ? Severity::kInfo
                                : Severity::kWarning;
}

void QuantizedQkv(const DraftFacts& f, const VllmTarget& target, std::vector<Finding>* out) {
  if (f.quantized_qkv.empty()) return;
  std::string file = DFlashModelFile(*f.config);
  const VllmRule& rule = VllmRuleById(file == "laguna_dflash.py" ? "laguna-dflash-quantized-qkv"
                                                                 : "qwen3-dflash-quantized-qkv");
  RuleJudgement j = JudgeRule(rule, target);
  if (j.verdict == Verdict::kFails) {
    // One finding per module: each is a module the user has to keep dense.
    for (const std::string& m : f.quantized_qkv) {
      out->push_back(
          MakeFinding(rule.code, Severity::kError, m, "",
                      fmt::format("quantized q/k/v of a DFlash draft: {} builds the context K/V "
                                  "from qkv_proj.weight and fails with \"{}\" ({})",
                                  rule.model_file, rule.vllm_error, j.basis),
                      std::string(rule.fix)));
    }
    return;
  }
  std::string message =
      j.verdict == Verdict::kWorks
          ? fmt::format(
                "{} quantized q/k/v module(s): {} projects the context K/V through the "
                "quant method, so it loads ({}); older vLLM fails with \"{}\" ({})",
                f.quantized_qkv.size(), rule.model_file, j.basis, rule.vllm_error, rule.evidence)
          : fmt::format(
                "{} quantized q/k/v module(s): whether {} of this vLLM handles them is "
                "not verified ({}); if it reads qkv_proj.weight it fails with \"{}\"",
                f.quantized_qkv.size(), rule.model_file, j.basis, rule.vllm_error);
  out->push_back(MakeFinding(rule.code, SeverityOf(j.verdict), FirstAndCount(f.quantized_qkv), "",
                             message, std::string(rule.fix)));
}

void UnfusedLagunaQkv(const DraftFacts& f, const VllmTarget& target, std::vector<Finding>* out) {
  if (f.unfused_qkv.empty() || DFlashModelFile(*f.config) != "laguna_dflash.py") return;
  const VllmRule& rule = VllmRuleById("laguna-dflash-unfused-qkv");
  RuleJudgement j = JudgeRule(rule, target);
  if (j.verdict == Verdict::kWorks) return;
  out->push_back(
      MakeFinding(rule.code, SeverityOf(j.verdict), FirstAndCount(f.unfused_qkv), "",
                  fmt::format("a Laguna DFlash draft with q/k/v stored unfused: {} looks every "
                              "tensor up by name and has no qkv_proj stacking, so vLLM fails "
                              "with \"{}\" ({})",
                              rule.model_file, rule.vllm_error, j.basis),
                  std::string(rule.fix)));
}

void Eagle3AuxLayers(const DraftFacts& f, const VllmTarget& target, std::vector<Finding>* out) {
  const Json& j = f.config->json;
  const Json eagle = j.contains("eagle_config") && j["eagle_config"].is_object() ? j["eagle_config"]
                                                                                 : Json::object();
  if (eagle.contains("use_aux_hidden_state") && eagle["use_aux_hidden_state"] == false) return;
  if (!f.fc_shape || f.fc_shape->size() != 2 || (*f.fc_shape)[0] <= 0) return;
  int64_t per_state = (*f.fc_shape)[0];
  if (j.contains("target_hidden_size") && j["target_hidden_size"].is_number_integer()) {
    per_state = j["target_hidden_size"].get<int64_t>();
  }
  if (per_state <= 0 || (*f.fc_shape)[1] % per_state != 0) return;
  const int64_t wanted = (*f.fc_shape)[1] / per_state;
  std::vector<int64_t> ids = Eagle3AuxLayerIds(*f.config);
  if (!ids.empty()) {
    if (!f.target_layers) return;
    std::vector<int64_t> bad;
    for (int64_t id : ids) {
      if (id < 0 || id > *f.target_layers) bad.push_back(id);
    }
    if (!bad.empty()) {
      out->push_back(
          MakeFinding(FindingCode::kTargetLayerIds, "", "config.json",
                      fmt::format("eagle_aux_hidden_state_layer_ids holds {}, but the target "
                                  "collects hidden states 0..{} only: fc gets fewer than {} and "
                                  "the first request fails",
                                  fmt::join(bad, ", "), *f.target_layers, wanted),
                      "use the draft built for this target"));
    }
    return;
  }
  const VllmRule& rule = VllmRuleById("eagle3-default-aux-layers");
  if (!f.target_layers) {
    out->push_back(MakeFinding(
        rule.code, Severity::kWarning, "", "config.json",
        fmt::format("no eagle_aux_hidden_state_layer_ids: vLLM uses its default layers of the "
                    "target, which give fc's {} hidden states only for some layer counts",
                    wanted),
        "pass --target TARGET or --target-layers N to check it, or " + std::string(rule.fix)));
    return;
  }
  RuleJudgement judged = JudgeRule(rule, target);
  std::vector<int64_t> got = Eagle3DefaultAuxLayers(*f.target_layers);
  if (judged.verdict == Verdict::kNotVerified) {
    out->push_back(
        MakeFinding(rule.code, Severity::kWarning, "", "config.json",
                    fmt::format("no eagle_aux_hidden_state_layer_ids, and this vLLM's default "
                                "aux layers are not the verified ones ({})",
                                judged.basis),
                    std::string(rule.fix)));
    return;
  }
  if (static_cast<int64_t>(got.size()) == wanted) return;
  out->push_back(
      MakeFinding(rule.code, Severity::kError, "", "config.json",
                  fmt::format("no eagle_aux_hidden_state_layer_ids: for a target of {} layers "
                              "vLLM's default collects layers [{}] ({} hidden state(s)), but fc "
                              "takes {} x {}; the first request fails with \"{}\" ({})",
                              *f.target_layers, fmt::join(got, ", "), got.size(), wanted, per_state,
                              rule.vllm_error, judged.basis),
                  fmt::format("{}; for this target e.g. [{}]", rule.fix,
                              fmt::join(Eagle3AuxLayersFor(*f.target_layers), ", "))));
}

}  // namespace

std::string DFlashModelFile(const ModelConfig& config) {
  return HasLagunaArchitecture(config) ? "laguna_dflash.py" : "qwen3_dflash.py";
}

std::vector<int64_t> Eagle3AuxLayerIds(const ModelConfig& config) {
  std::vector<int64_t> ids = IntList(config.json, "eagle_aux_hidden_state_layer_ids");
  if (ids.empty() && config.json.contains("eagle_config")) {
    ids = IntList(config.json["eagle_config"], "eagle_aux_hidden_state_layer_ids");
  }
  return ids;
}

std::vector<Finding> CheckDraftAgainstVllm(const DraftFacts& facts, const VllmTarget& target) {
  std::vector<Finding> out;
  if (facts.family.family == ModelFamily::kDFlash) {
    QuantizedQkv(facts, target, &out);
    UnfusedLagunaQkv(facts, target, &out);
  } else if (facts.family.family == ModelFamily::kEagle3) {
    Eagle3AuxLayers(facts, target, &out);
  }
  return out;
}

}  // namespace spk
