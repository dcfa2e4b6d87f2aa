// The rule for a Linear whose architecture's load_weights takes only dense parameter names
// (the map's load_weights_takes_only: LongCat-Flash MTP's literal rename dict, whose names end in
// .weight and .weight_scale_inv only): LoadWeightsRefusal on a small map written here, and the
// plan of a LongCat MTP checkpoint under the compiled-in maps, which keeps those Linears dense
// and refuses a checkpoint where that leaves nothing quantized.
#include <gtest/gtest.h>

#include <map>

#include "model/test_util.h"
#include "plan/plan.h"
#include "vllm/map_rules.h"
#include "vllm/vllm_module_map.h"

namespace spk {
namespace {

constexpr std::string_view kSmallMap = R"({"schema_version": 3, "vllm_version": "0.34.0",
  "schemes": {"pack-quantized": {"base": true, "platform": "CUDA capability 90",
    "quantization_config": {"format": "pack-quantized"}}},
  "architectures": {"LongCatFlashMTPModel": {"error": null, "role": "draft", "methods": ["mtp"],
    "file": "vllm/model_executor/models/longcat_flash_mtp.py",
    "built": {"target": "LongcatFlashForCausalLM"}, "weight_reads": [], "scheme_verdicts": {},
    "modules": {"eh_proj": {"prefix": "eh_proj", "path": "model.layers.2.eh_proj",
      "class": "ReplicatedLinear", "quantized": true, "scheme": "CompressedTensorsWNA16"}},
    "load_weights_takes_only": {"params": ["weight", "weight_scale_inv"],
      "error": "KeyError: 'model.mtp.layers.0.eh_proj.weight_packed'",
      "error_at": "vllm/model_executor/models/longcat_flash_mtp.py:263"}}}})";

ModelConfig LongCat() {
  return test_util::ConfigFromJson(
      R"({"architectures":["LongcatFlashForCausalLM"],"model_type":"longcat_flash",
          "num_hidden_layers":2,"num_nextn_predict_layers":1})");
}

std::vector<TensorMeta> Square(const std::vector<std::string>& names) {
  std::vector<TensorMeta> out;
  for (const std::string& name : names) out.push_back({name, DType::kBF16, {256, 256}, ""});
  return out;
}

const std::vector<std::string> kMtpLinears = {
    "model.mtp.layers.0.eh_proj.weight",
    "model.mtp.layers.0.self_attn.o_proj.weight",
    "model.mtp.layers.0.transformer_layer.mlp.down_proj.weight",
};

TEST(LoadWeightsRuleTest, ANameTheMtpLoadWeightsDoesNotTakeIsRefusedWithVllmsError) {
  Result<ModuleMap> map = ParseModuleMap(kSmallMap, "test");
  ASSERT_TRUE(map.ok()) << map.status().message();
  MapContext context;
  context.map = &*map;
  context.mtp = FindMtpArchitecture(*map, LongCat());
  ASSERT_NE(context.mtp, nullptr);
  const std::vector<std::string_view> w4a16 = {"weight_packed", "weight_scale", "weight_shape"};
  // A module of the MTP layers by its checkpoint name (the map lists it under vLLM's path).
  std::optional<std::string> refusal =
      LoadWeightsRefusal(context, LongCat(), "model.mtp.layers.0.eh_proj", w4a16, "w4a16");
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(*refusal,
            "vLLM 0.34.0's load_weights for LongCatFlashMTPModel takes only .weight and "
            ".weight_scale_inv of model.mtp.layers.0.eh_proj, not the .weight_packed, "
            ".weight_scale, .weight_shape that w4a16 stores "
            "(vllm/model_executor/models/longcat_flash_mtp.py:263: KeyError: "
            "'model.mtp.layers.0.eh_proj.weight_packed')");
  // FP8 stores .weight, which it takes, and .weight_scale, which it does not.
  refusal = LoadWeightsRefusal(context, LongCat(), "model.mtp.layers.0.eh_proj",
                               {"weight", "weight_scale"}, "fp8-dynamic");
  ASSERT_TRUE(refusal.has_value());
  EXPECT_NE(refusal->find("not the .weight_scale that fp8-dynamic"), std::string::npos) << *refusal;
  // What it takes passes; the target's own layers are not the MTP draft's to load.
  EXPECT_FALSE(LoadWeightsRefusal(context, LongCat(), "model.mtp.layers.0.eh_proj",
                                  {"weight", "weight_scale_inv"}, "fp8-block"));
  EXPECT_FALSE(
      LoadWeightsRefusal(context, LongCat(), "model.layers.0.mlp.down_proj", w4a16, "w4a16"));
}

TEST(LoadWeightsRuleTest, TheReleasesMapsRecordItForLongCatMtp) {
  for (std::string_view release : {"0.32.0", "0.33.0", "0.34.0"}) {
    Result<MapChoice> choice = ChooseModuleMap(release);
    ASSERT_TRUE(choice.ok());
    const MappedArchitecture* mtp = FindMtpArchitecture(*choice->map, LongCat());
    ASSERT_NE(mtp, nullptr) << release;
    ASSERT_TRUE(mtp->load_weights_takes_only.has_value()) << release;
    EXPECT_EQ(mtp->load_weights_takes_only->params,
              (std::vector<std::string>{"weight", "weight_scale_inv"}));
  }
}

TEST(LoadWeightsRuleTest, ThePlanKeepsTheMtpLayersDenseAndRefusesWhenNothingIsLeft) {
  PlanOptions options;
  options.vllm_version = "0.34.0";
  // The MTP layers alone: nothing would be quantized, so nothing is written.
  Result<QuantPlan> alone = BuildPlan(Square(kMtpLinears), LongCat(), options);
  ASSERT_EQ(alone.status().code(), StatusCode::kUsage);
  const std::string& message = alone.status().message();
  EXPECT_NE(message.find("--scheme w4a16 --group-size 128: vLLM 0.34.0's load_weights takes none "
                         "of this model's Linears as the scheme stores them, so nothing would be "
                         "quantized (vLLM 0.34.0's load_weights for LongCatFlashMTPModel takes "
                         "only .weight and .weight_scale_inv of model.mtp.layers.0.eh_proj"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("serve the source checkpoint unquantized"), std::string::npos) << message;
  // Beside the target's layers: they are quantized, the MTP layers stay dense, with a warning.
  std::vector<std::string> names = kMtpLinears;
  names.push_back("model.layers.0.mlp.down_proj.weight");
  Result<QuantPlan> plan = BuildPlan(Square(names), LongCat(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::map<std::string, const TensorPlan*> by_tensor;
  for (const TensorPlan& t : plan->tensors) by_tensor[t.tensor] = &t;
  EXPECT_EQ(by_tensor.at("model.layers.0.mlp.down_proj.weight")->action, TensorAction::kQuantize);
  for (const std::string& mtp : kMtpLinears) {
    EXPECT_EQ(by_tensor.at(mtp)->action, TensorAction::kKeep) << mtp;
    EXPECT_NE(by_tensor.at(mtp)->reason.find("load_weights for LongCatFlashMTPModel takes only"),
              std::string::npos)
        << by_tensor.at(mtp)->reason;
  }
  bool warned = false;
  for (const std::string& w : plan->warnings) {
    warned |= w.find("3 weight(s) kept dense because vLLM's load_weights takes none") !=
              std::string::npos;
  }
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace spk
