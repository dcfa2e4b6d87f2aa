#include "vllm/module_pattern.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

ModulePattern P(std::string_view entry) {
  auto p = ModulePattern::Parse(entry);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

TEST(ModulePatternTest, RegexIsAnchoredAtStartOnlyLikePythonReMatch) {
  ModulePattern p = P("re:.*self_attn\\.(q|k|v|qkv)_proj$");
  EXPECT_TRUE(p.Matches("model.layers.36.self_attn.qkv_proj"));
  EXPECT_TRUE(p.Matches("model.layers.0.self_attn.k_proj"));
  EXPECT_FALSE(p.Matches("model.layers.0.self_attn.o_proj"));
  // re.match does not anchor the end: a pattern without $ matches a longer name.
  EXPECT_TRUE(P("re:model\\.fc").Matches("model.fc_extra"));
  // ... but it does anchor the start.
  EXPECT_FALSE(P("re:fc").Matches("model.fc"));
  EXPECT_TRUE(P("re:(?P<prefix>model)\\.fc\\Z").Matches("model.fc"));
}

TEST(ModulePatternTest, ExactEntriesCompareWholeNames) {
  EXPECT_TRUE(P("lm_head").Matches("lm_head"));
  EXPECT_FALSE(P("lm_head").Matches("model.lm_head"));
  EXPECT_FALSE(P("layers.0.self_attn.q_proj").Matches("model.layers.36.self_attn.q_proj"));
}

TEST(ModulePatternTest, BadRegexIsAnErrorNamingTheEntry) {
  auto p = ModulePattern::Parse("re:model\\.(fc");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("model\\.(fc"), std::string::npos);
}

TEST(ModulePatternTest, FusedLayersAreDecidedShardByShard) {
  std::vector<ModulePattern> ignore = {P("re:.*q_proj$")};
  IgnoreDecision d =
      DecideIgnore("model.layers.0.self_attn.qkv_proj", ignore, StandardFusedMapping());
  EXPECT_TRUE(d.shards_disagree);
  ignore = {P("re:.*self_attn\\.(q|k|v)_proj$")};
  d = DecideIgnore("model.layers.0.self_attn.qkv_proj", ignore, StandardFusedMapping());
  EXPECT_TRUE(d.ignored);
  EXPECT_FALSE(d.shards_disagree);
  // Without the mapping (drafts, vllm#53116) the fused name itself must match.
  d = DecideIgnore("model.layers.0.self_attn.qkv_proj", ignore, {});
  EXPECT_FALSE(d.ignored);
  // A fused name listed literally is decided by that entry alone.
  ignore = {P("model.layers.0.self_attn.qkv_proj")};
  d = DecideIgnore("model.layers.0.self_attn.qkv_proj", ignore, StandardFusedMapping());
  EXPECT_TRUE(d.ignored);
}

// q/k/v come from the module map's fused qkv_proj set, and only under attention.
TEST(ModulePatternTest, AttentionQkvIsTheMapsQkvSetUnderSelfAttn) {
  for (const char* m : {"model.layers.0.self_attn.q_proj", "layers.3.self_attn.k_proj",
                        "self_attn.v_proj", "model.layers.1.self_attn.qkv_proj"}) {
    EXPECT_TRUE(IsAttentionQkv(m)) << m;
  }
  for (const char* m :
       {"model.layers.0.self_attn.o_proj", "model.layers.0.mlp.q_proj", "q_proj",
        "model.layers.0.cross_self_attn.q_proj", "model.layers.0.self_attn.q_proj.bias_q_proj"}) {
    EXPECT_FALSE(IsAttentionQkv(m)) << m;
  }
}

}  // namespace
}  // namespace spk
