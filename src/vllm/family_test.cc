#include "vllm/family.h"

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "model/test_util.h"

namespace spk {
namespace {

ModelConfig Config(std::string_view json) { return test_util::ConfigFromJson(json); }

TEST(FamilyTest, DetectsEachFamily) {
  std::vector<std::string> qwen = {"layers.0.self_attn.q_proj.weight", "fc.weight"};
  EXPECT_EQ(DetectFamily(Config(R"({"architectures":["DFlashDraftModel"],"dflash_config":{}})"),
                         qwen, Preset::kAuto)
                .family,
            ModelFamily::kDFlash);
  EXPECT_EQ(
      DetectFamily(Config(R"({"speculators_model_type":"eagle3"})"), qwen, Preset::kAuto).family,
      ModelFamily::kEagle3);
  EXPECT_EQ(DetectFamily(Config(R"({"num_nextn_predict_layers":1})"), qwen, Preset::kAuto).family,
            ModelFamily::kMtp);
  EXPECT_EQ(DetectFamily(Config(R"({"architectures":["Qwen3ForCausalLM"]})"),
                         {"model.layers.0.mlp.up_proj.weight"}, Preset::kAuto)
                .family,
            ModelFamily::kLlm);
  auto laguna = DetectFamily(Config(R"({"dflash_config":{}})"),
                             {"layers.40.self_attn.qkv_proj.weight"}, Preset::kAuto);
  EXPECT_TRUE(laguna.laguna_style);
}

// Which speculators formats are EAGLE-3 heads comes from the module maps' speculators table:
// vLLM serves peagle as eagle3; it registers no "eagle" format (EAGLE-1 has none).
TEST(FamilyTest, SpeculatorsFormatsServedAsEagle3AreEagle3Heads) {
  std::vector<std::string> head = {"layers.0.self_attn.q_proj.weight", "fc.weight"};
  EXPECT_EQ(
      DetectFamily(Config(R"({"speculators_model_type":"peagle"})"), head, Preset::kAuto).family,
      ModelFamily::kEagle3);
  EXPECT_NE(
      DetectFamily(Config(R"({"speculators_model_type":"eagle"})"), head, Preset::kAuto).family,
      ModelFamily::kEagle3);
}

TEST(FamilyTest, DraftNamesGetPrefixAndTargetOffset) {
  ModelConfig c = Config(R"({"dflash_config":{"target_layer_ids":[1,9]},"num_target_layers":36})");
  std::vector<std::string> names = {"layers.0.self_attn.q_proj.weight", "fc.weight"};
  FamilyDetection f = DetectFamily(c, names, Preset::kAuto);
  VllmNaming n = NamingFor(f, c, names, std::nullopt);
  EXPECT_EQ(ToVllmModuleName(n, "layers.0.self_attn.q_proj"), "model.layers.36.self_attn.q_proj");
  EXPECT_EQ(ToVllmModuleName(n, "fc"), "model.fc");
  EXPECT_EQ(FusedModuleName("model.layers.36.self_attn.q_proj"),
            "model.layers.36.self_attn.qkv_proj");
  EXPECT_EQ(FusedModuleName("model.layers.36.mlp.up_proj"), "model.layers.36.mlp.gate_up_proj");
  EXPECT_EQ(FusedModuleName("model.layers.36.mlp.down_proj"), "model.layers.36.mlp.down_proj");
  // --target-layers overrides; without any the offset is unknown.
  EXPECT_EQ(NamingFor(f, c, names, 48).layer_offset, 48);
  ModelConfig bare = Config(R"({"dflash_config":{}})");
  EXPECT_FALSE(NamingFor(f, bare, names, std::nullopt).offset_known);
}

TEST(FamilyTest, MalformedConfigIsAnError) {
  test_util::ExpectError(ParseModelConfig("cfg", "{"), StatusCode::kInvalidInput,
                         "cfg: not valid JSON");
  test_util::ExpectError(ParseModelConfig("cfg", "[]"), StatusCode::kInvalidInput,
                         "cfg: must be a JSON object");
  test_util::ExpectError(ParseModelConfig("cfg", R"({"num_hidden_layers":"six"})"),
                         StatusCode::kInvalidInput,
                         "cfg: 'num_hidden_layers' must be an integer, found string");
  test_util::ExpectError(ParsePreset("qwen"), StatusCode::kUsage, "unknown preset 'qwen'");
}

TEST(FamilyTest, LayerIndexNeedsWholeComponent) {
  EXPECT_EQ(LayerIndex("model.layers.12.mlp"), 12);
  EXPECT_EQ(LayerIndex("layers.3.mlp"), 3);
  EXPECT_FALSE(LayerIndex("model.sublayers.2.x").has_value());
  EXPECT_FALSE(LayerIndex("model.layers.x").has_value());
}

TEST(FamilyTest, Eagle1LayoutIsOneLayerAndFcOfTwiceTheWidth) {
  // EAGLE-1's common layout names no Eagle* architecture: one decoder layer and fc [H, 2H].
  const ModelConfig llama = Config(R"({"architectures":["LlamaForCausalLM"],"hidden_size":8})");
  const std::vector<std::string> names = {"fc.weight", "layers.0.self_attn.q_proj.weight"};
  std::vector<std::vector<int64_t>> shapes = {{8, 16}, {8, 8}};
  auto d = DetectFamily(llama, names, Preset::kAuto, &shapes);
  EXPECT_TRUE(d.eagle1_layout);
  EXPECT_EQ(d.family, ModelFamily::kLlm);  // the map makes it a draft (map_rules.h)
  // Stored quantized, only its name is seen.
  EXPECT_TRUE(IsEagle1Layout(llama, {"fc.weight_packed", "layers.0.mlp.up_proj.weight"}, nullptr));
  shapes[0] = {8, 8};  // a square fc is not EAGLE-1's
  EXPECT_FALSE(IsEagle1Layout(llama, names, &shapes));
  EXPECT_FALSE(IsEagle1Layout(llama, {"fc.weight", "layers.1.mlp.up_proj.weight"}, nullptr));
  EXPECT_FALSE(IsEagle1Layout(llama, {"layers.0.mlp.up_proj.weight"}, nullptr));
  EXPECT_FALSE(IsEagle1Layout(Config(R"({"architectures":["EagleLlamaForCausalLM"]})"),
                              {"fc.weight"}, nullptr));
  EXPECT_FALSE(DetectFamily(llama, names, Preset::kLlm, nullptr).eagle1_layout);
}

}  // namespace
}  // namespace spk
