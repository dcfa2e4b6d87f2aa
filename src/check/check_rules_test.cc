// The rules table of check/check_rules.h against the finding-code table: every code is raised by
// rules of the table, every rule raises some code, the kinds are laid out as the runner reads them;
// and checks of planted faults, where each finding must come from a rule its code's row names and
// the rules must have run in table order.
#include "check/check_rules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "check/check_test_util.h"

namespace spk::check_internal {
namespace {

using namespace check_test;  // NOLINT: the test helpers

size_t IndexOf(const CheckRule* rule) { return static_cast<size_t>(rule - CheckRules().data()); }

TEST(CheckRules, EveryCodeNamesRulesOfTheTable) {
  std::set<std::string_view> names;
  for (const CheckRule& rule : CheckRules()) names.insert(rule.name);
  for (const FindingCodeRow& row : kFindingCodes) {
    ASSERT_FALSE(RulesOf(row).empty()) << row.code;
    for (std::string_view rule : RulesOf(row)) {
      EXPECT_TRUE(names.count(rule)) << row.code << " names no rule of the table: '" << rule << "'";
    }
  }
}

TEST(CheckRules, EveryRuleRaisesACodeAndRunsAsItsKindSays) {
  std::set<std::string_view> seen;
  bool module_block_ended = false, in_module_block = false;
  for (const CheckRule& rule : CheckRules()) {
    EXPECT_TRUE(seen.insert(rule.name).second) << "duplicate rule " << rule.name;
    EXPECT_FALSE(CodesOf(rule).empty()) << rule.name << " raises no code of the table";
    EXPECT_FALSE(rule.doc.empty()) << rule.name;
    EXPECT_EQ(rule.run != nullptr, rule.kind == RuleKind::kCheckpoint) << rule.name;
    EXPECT_EQ(rule.run_module != nullptr, rule.kind == RuleKind::kModule) << rule.name;
    // The module rules are one block: the runner runs it for each module.
    if (rule.kind == RuleKind::kModule) {
      EXPECT_FALSE(module_block_ended) << rule.name << " is outside the block of module rules";
      in_module_block = true;
    } else if (in_module_block) {
      module_block_ended = true;
    }
  }
  EXPECT_EQ(RuleNamed("module-tensors").name, "module-tensors");
}

// Runs the check and asserts what the sink recorded: each finding from a rule its row names, and
// the rules in table order (the module block counts as one place: it repeats per module).
CheckReport CheckTraced(const std::string& dir, CheckOptions o = {}) {
  o.checkpoint = dir;
  auto run = RunCheck(FileSystem::Default(), o);
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return {};
  EXPECT_EQ(run->raised_by.size(), run->report.findings.size());
  size_t first_module_rule = CheckRules().size();
  for (const CheckRule& rule : CheckRules()) {
    if (rule.kind == RuleKind::kModule)
      first_module_rule = std::min(first_module_rule, IndexOf(&rule));
  }
  size_t last = 0;
  for (size_t i = 0; i < run->raised_by.size(); ++i) {
    const Finding& f = run->report.findings[i];
    const CheckRule* rule = run->raised_by[i];
    EXPECT_NE(rule, nullptr) << f.code;
    if (rule == nullptr) continue;
    const std::vector<FindingCode> codes = CodesOf(*rule);
    EXPECT_TRUE(std::any_of(codes.begin(), codes.end(),
                            [&](FindingCode c) { return CodeName(c) == f.code; }))
        << "rule " << rule->name << " raised " << f.code << ", which its row does not name";
    const size_t at = rule->kind == RuleKind::kModule ? first_module_rule : IndexOf(rule);
    EXPECT_GE(at, last) << rule->name << " reported after a later rule of the table";
    last = std::max(last, at);
  }
  return run->report;
}

TEST(CheckRules, PlantedFaultsComeFromTheRulesTheirRowsName) {
  spk::testing::ScopedTempDir dir;
  std::string clean = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto);
  std::set<std::string> codes;
  auto note = [&](const CheckReport& r) {
    for (const Finding& f : r.findings) codes.insert(f.code);
  };
  auto copy = [&](const std::string& name) {
    std::string d = dir / name;
    std::filesystem::copy(clean, d, std::filesystem::copy_options::recursive);
    return d;
  };
  // Config faults, several at once: their findings interleave rules.
  std::string config = copy("config");
  EditConfig(config, [](Json& j) {
    auto& q = j["quantization_config"];
    q["format"] = "marlin-24";
    q["ignore"] = {"lm_head", "model.nothing", "model.layers.0.mlp.down_proj"};
    q["config_groups"]["group_0"]["weights"]["zp_dtype"] = nullptr;
  });
  note(CheckTraced(config));
  std::string width3 = copy("width3");
  EditConfig(width3, [](Json& j) {
    j["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 3;
  });
  note(CheckTraced(width3));
  // Tensor faults: a zero scale, a weight_shape gone, a stray shard the index does not name.
  std::string tensors = copy("tensors");
  EditTensors(tensors, [](Tensors& t) {
    for (auto& [name, tensor] : t) {
      if (name.ends_with("q_proj.weight_scale"))
        std::fill(tensor.bytes.begin(), tensor.bytes.end(), 0);
    }
    for (auto it = t.begin(); it != t.end();) {
      it = it->first.ends_with("k_proj.weight_shape") ? t.erase(it) : std::next(it);
    }
  });
  std::filesystem::copy_file(tensors + "/model.safetensors", tensors + "/extra.safetensors");
  note(CheckTraced(tensors));
  CheckOptions tp4;
  tp4.tp = 4;
  note(CheckTraced(clean, tp4));
  // Drafts, judged by two releases, and a target that does not fit.
  std::string dflash = Quantize(Example(dir, "dflash", "dflash"), dir / "dflash_q", Preset::kNone);
  CheckOptions old_vllm;
  old_vllm.vllm_version = "0.20.0";
  note(CheckTraced(dflash));
  note(CheckTraced(dflash, old_vllm));
  CheckOptions paired;
  paired.target = Example(dir, "target", "llm");
  EditConfig(paired.target, [](Json& j) { j["vocab_size"] = 7; });
  note(CheckTraced(Example(dir, "draft", "dflash"), paired));
  std::string eagle = Example(dir, "eagle", "eagle3");
  note(CheckTraced(eagle));
  // The run reached rules of every kind of fault planted.
  for (const char* code : {"format-not-checked", "ignore-matches-nothing", "vllm-expects-dense",
                           "quant-args-key", "no-vllm-kernel", "scale-zero", "missing-weight-shape",
                           "kernel-rule", "dflash-qkv-quantized", "target-vocab-size"}) {
    EXPECT_TRUE(codes.count(code)) << code;
  }
}

}  // namespace
}  // namespace spk::check_internal
