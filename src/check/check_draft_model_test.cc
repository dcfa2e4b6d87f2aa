// A plain causal LM checked beside --target: vLLM serves it as a method="draft_model" draft, whose
// modules it names under the proposer's prefix ("draft_model.model.layers.0..."), so literal and
// anchored config_groups targets and ignore entries match nothing there (vllm#49893).
#include <gtest/gtest.h>

#include "check/check_test_util.h"
#include "vllm/serve_line.h"
#include "vllm/vllm_module_map.h"

namespace spk {
namespace {

using namespace check_test;  // NOLINT: the test helpers

TEST(CheckDraftModel, EveryMapRecordsTheProposersPrefix) {
  for (const ModuleMap& map : ModuleMaps()) {
    EXPECT_EQ(map.draft_model_prefix, "draft_model.") << map.release;
  }
}

TEST(CheckDraftModel, DefaultOutputServesAsADraftModelDraft) {
  spk::testing::ScopedTempDir dir;
  std::string target = Example(dir, "target", "llm");
  std::string q = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto);
  CheckReport alone = Check(q);
  EXPECT_EQ(alone.serve, "vllm serve " + q);
  CheckOptions o;
  o.target = target;
  CheckReport r = Check(q, o);
  EXPECT_TRUE(r.ok()) << RenderCheckReport(r);
  EXPECT_EQ(r.serve, DraftModelServeLine(q, target));
  EXPECT_NE(r.serve.find("\"method\":\"draft_model\""), std::string::npos) << r.serve;
  EXPECT_NE(r.naming.find("'draft_model.'"), std::string::npos) << r.naming;
}

TEST(CheckDraftModel, ALayersOwnIgnoreEntryHoldsUnderThePrefix) {
  spk::testing::ScopedTempDir dir;
  std::string target = Example(dir, "target", "llm");
  // One layer's down_proj dense, the others quantized: a per-module ignore entry.
  std::string q = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto,
                           {"model.layers.0.mlp.down_proj"});
  auto text = ReadWholeFile(q + "/config.json");
  ASSERT_TRUE(text.ok());
  const Json ignore = Json::parse(*text)["quantization_config"]["ignore"];
  EXPECT_NE(std::find(ignore.begin(), ignore.end(),
                      Json("re:(.*\\.)?model\\.layers\\.0\\.mlp\\.down_proj$")),
            ignore.end())
      << ignore.dump();
  CheckOptions o;
  o.target = target;
  CheckReport r = Check(q, o);
  EXPECT_TRUE(r.ok()) << RenderCheckReport(r);
  EXPECT_TRUE(Check(q).ok());
}

TEST(CheckDraftModel, AnAnchoredIgnoreEntryMatchesNothingUnderThePrefix) {
  spk::testing::ScopedTempDir dir;
  std::string target = Example(dir, "target", "llm");
  std::string q = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto,
                           {"model.layers.0.mlp.down_proj"});
  EditConfig(q, [](Json& j) {
    j["quantization_config"]["ignore"] = Json::array({"lm_head", "model.layers.0.mlp.down_proj"});
  });
  EXPECT_TRUE(Check(q).ok()) << RenderCheckReport(Check(q));  // served alone, the literal holds
  CheckOptions o;
  o.target = target;
  CheckReport r = Check(q, o);
  auto ignore = WithCode(r, "ignore-matches-nothing");
  ASSERT_EQ(ignore.size(), 1u) << RenderCheckReport(r);
  EXPECT_EQ(ignore[0]->severity, Severity::kError);
  EXPECT_NE(ignore[0]->message.find("draft_model.model.layers.0.mlp.down_proj"), std::string::npos)
      << ignore[0]->message;
  EXPECT_NE(ignore[0]->fix.find("re:(.*\\.)?model\\.layers\\.0\\.mlp\\.down_proj$"),
            std::string::npos)
      << ignore[0]->fix;
  // vLLM builds the dense module quantized and finds no weight_packed for it.
  EXPECT_TRUE(HasCode(r, "vllm-expects-quantized")) << RenderCheckReport(r);
}

TEST(CheckDraftModel, LiteralConfigGroupTargetsMatchNothingUnderThePrefix) {
  spk::testing::ScopedTempDir dir;
  std::string target = Example(dir, "target", "llm");
  std::string q = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto);
  // A mixed-precision recipe's style: the group names its modules.
  EditConfig(q, [](Json& j) {
    Json& group = j["quantization_config"]["config_groups"]["group_0"];
    group["targets"] = Json::array({"model.layers.0.mlp.down_proj", "re:.*self_attn\\..*",
                                    "re:.*mlp\\.(gate|up)_proj$", "re:model\\.layers\\.1\\..*"});
  });
  CheckReport alone = Check(q);
  EXPECT_FALSE(HasCode(alone, "target-matches-nothing")) << RenderCheckReport(alone);
  CheckOptions o;
  o.target = target;
  CheckReport r = Check(q, o);
  auto missed = WithCode(r, "target-matches-nothing");
  ASSERT_EQ(missed.size(), 2u) << RenderCheckReport(r);
  for (const Finding* f : missed) EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(missed[0]->module, "model.layers.0.mlp.down_proj");
  EXPECT_NE(missed[0]->fix.find("re:(.*\\.)?model\\.layers\\.0\\.mlp\\.down_proj$"),
            std::string::npos)
      << missed[0]->fix;
  EXPECT_TRUE(HasCode(r, "vllm-expects-dense")) << RenderCheckReport(r);
}

TEST(CheckDraftModel, ATargetNamingNoModuleIsAWarning) {
  spk::testing::ScopedTempDir dir;
  std::string q = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto);
  EditConfig(q, [](Json& j) {
    j["quantization_config"]["config_groups"]["group_0"]["targets"] =
        Json::array({"Linear", "re:.*no_such_module$"});
  });
  CheckReport r = Check(q);
  auto missed = WithCode(r, "target-matches-nothing");
  ASSERT_EQ(missed.size(), 1u) << RenderCheckReport(r);
  EXPECT_EQ(missed[0]->severity, Severity::kWarning);
}

}  // namespace
}  // namespace spk
