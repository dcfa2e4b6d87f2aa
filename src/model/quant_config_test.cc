// The config writer and reader against the scheme registry: every row writes compressed-tensors'
// own preset fields and reads back as itself; configs with no row are named for what they are.
#include "model/quant_config.h"

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "model/test_util.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

ModelConfig WithQuantization(const Json& qc) {
  return test_util::ConfigFromJson(Json{{"quantization_config", qc}}.dump());
}

TEST(QuantConfigTest, EveryRowWritesItsFieldsAndReadsBackAsItself) {
  for (const QuantScheme& s : AllSchemes()) {
    for (int64_t g : s.group_sizes) {
      Json qc = MakeQuantizationConfig(s, g, {"lm_head"});
      ASSERT_EQ(qc["config_groups"].size(), 1u);
      const Json& group = qc["config_groups"].begin().value();
      const Json& w = group["weights"];
      EXPECT_EQ(qc["format"], s.format);
      EXPECT_EQ(group["format"], s.format);
      EXPECT_EQ(w["type"], WeightTypeName(s.type));
      EXPECT_EQ(w["num_bits"], s.bits);
      EXPECT_EQ(w["symmetric"], s.symmetric);
      EXPECT_EQ(w["strategy"], StrategyName(s.strategy, g));
      const bool grouped = g != kChannelWise && s.strategy != WeightStrategy::kBlock;
      EXPECT_EQ(w["group_size"], grouped ? Json(g) : Json(nullptr));
      EXPECT_EQ(group["input_activations"].is_null(), s.input_activations.empty());
      auto read = SchemeFromConfig("config.json", WithQuantization(qc));
      ASSERT_TRUE(read.ok()) << read.status().message();
      EXPECT_EQ(read->scheme, &s);
      EXPECT_EQ(read->params.group_size, g);
      EXPECT_EQ(read->params.bits, s.bits);
      auto view = ParseQuantizationConfig("config.json", Json{{"quantization_config", qc}});
      ASSERT_TRUE(view.ok());
      EXPECT_EQ(SchemeLabel(*view->groups[0].weights), SchemeLabel(s, g));
    }
  }
  EXPECT_EQ(SchemeLabel(*FindScheme("w8a16-asym"), 128), "w8a16-asym (group 128)");
  EXPECT_EQ(SchemeLabel(*FindScheme("W3A16"), 128), "w3a16 (group 128)");
  EXPECT_EQ(SchemeLabel(*FindScheme("w7a16_asym"), kChannelWise), "w7a16-asym (channel)");
}

// The 2/3/5/6/7-bit rows are written as model_free_ptq writes them: every QuantizationArgs key,
// observer and scale_dtype null, zp_dtype null when symmetric and "torch.int8" when not; the group
// named after the preset (W3A16, group 128), or "config_group_0" as for the QuantizationScheme
// object of an asymmetric width or another group.
TEST(QuantConfigTest, WidthRowsWriteTheReferenceConfig) {
  const Json qc = MakeQuantizationConfig(*FindScheme("w3a16"), 128, {"lm_head"});
  ASSERT_TRUE(qc["config_groups"].contains("W3A16")) << qc.dump();
  EXPECT_EQ(qc["config_groups"]["W3A16"]["weights"].dump(),
            R"({"actorder":null,"block_structure":null,"dynamic":false,"group_size":128,)"
            R"("num_bits":3,"observer":null,"observer_kwargs":{},"scale_dtype":null,)"
            R"("strategy":"group","symmetric":true,"type":"int","zp_dtype":null})");
  // Asymmetric: QuantizationArgs serializes the zero points' dtype.
  const Json asym = MakeQuantizationConfig(*FindScheme("w5a16-asym"), 128, {});
  EXPECT_EQ(asym["config_groups"]["config_group_0"]["weights"]["zp_dtype"], "torch.int8");
  const std::pair<const char*, int64_t> scheme_objects[] = {
      {"w3a16", kChannelWise}, {"w3a16", 64}, {"w5a16-asym", 128}};
  for (const auto& [name, group] : scheme_objects) {
    EXPECT_TRUE(MakeQuantizationConfig(*FindScheme(name), group, {})["config_groups"].contains(
        "config_group_0"))
        << name << " " << group;
  }
  // The rows written before keep the group name they always had.
  EXPECT_TRUE(
      MakeQuantizationConfig(*FindScheme("w4a16"), 128, {})["config_groups"].contains("group_0"));
}

// A static per-tensor FP8 checkpoint (the FP8 preset: type "float", 8 bits, strategy "tensor") has
// no row: it is not shown as fp8-dynamic or w8a16, and dequantize/compare refuse it by name
// instead of misreading its tensors.
TEST(QuantConfigTest, SchemesWithNoRowAreNamedAndRefused) {
  WeightQuantArgs fp8;
  fp8.num_bits = 8;
  fp8.type = "float";
  fp8.strategy = "tensor";
  fp8.format = "float-quantized";
  EXPECT_EQ(SchemeLabel(fp8), "float 8-bit (tensor), not a sparkulator scheme");
  EXPECT_EQ(FindSchemeFor(fp8), nullptr);
  Json qc = {
      {"config_groups",
       {{"group_0",
         {{"targets", {"Linear"}},
          {"weights",
           {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "tensor"}}}}}}}};
  auto read = SchemeFromConfig("ckpt/config.json", WithQuantization(qc));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(
      read.status().message().find("ckpt/config.json: config group group_0 has weights format "
                                   "'' type 'float' num_bits 8 strategy 'tensor'"),
      std::string::npos)
      << read.status().message();
  auto none = SchemeFromConfig("ckpt/config.json", WithQuantization(Json::object()));
  test_util::ExpectError(none, StatusCode::kInvalidInput,
                         "ckpt/config.json: quantization_config has no config group with weights");
}

}  // namespace
}  // namespace spk
