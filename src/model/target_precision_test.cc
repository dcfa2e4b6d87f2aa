// TargetPrecision: every spelling users write, every quantization config a target carries, and the
// pairing verdict between them (an fp8-trained draft fits any FP8 target, not an int4 one).
#include "model/target_precision.h"

#include <gtest/gtest.h>

#include <string>

namespace spk {
namespace {

TargetPrecision Parse(std::string_view text) {
  Result<TargetPrecision> p = ParseTargetPrecision(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().message();
  return p.ok() ? *p : TargetPrecision{};
}

TargetPrecision OfConfig(const std::string& quantization_config) {
  const std::string text =
      quantization_config.empty()
          ? std::string(R"({"architectures": ["LlamaForCausalLM"]})")
          : R"({"architectures": ["LlamaForCausalLM"], "quantization_config": )" +
                quantization_config + "}";
  Result<ModelConfig> config = ParseModelConfig("config.json", text);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return TargetPrecisionOf(*config);
}

TEST(TargetPrecision, SpellingsNameTheWeightFormat) {
  for (const char* dense : {"unquantized", "BF16", "bfloat16", "fp16", "float32"}) {
    EXPECT_EQ(Parse(dense).Name(), "unquantized") << dense;
  }
  EXPECT_EQ(Parse("fp8").Name(), "fp8");
  EXPECT_EQ(Parse("FP8_DYNAMIC").Name(), "fp8");
  EXPECT_EQ(Parse("fp8_block").Name(), "fp8");
  EXPECT_EQ(Parse("w4a16").Name(), "int4");
  EXPECT_EQ(Parse("W8A8").Name(), "int8");
  EXPECT_EQ(Parse("int3").Name(), "int3");
  EXPECT_EQ(Parse("nvfp4").Name(), "fp4");
  EXPECT_EQ(Parse("mxfp4").Name(), "fp4");
}

TEST(TargetPrecision, EveryTableSchemeIsASpelling) {
  for (const QuantScheme& s : AllSchemes()) {
    TargetPrecision p = Parse(s.name);
    EXPECT_TRUE(p.quantized && p.type == s.type && p.bits == s.bits) << s.name;
  }
}

TEST(TargetPrecision, UnknownSpellingIsAUsageErrorListingTheForms) {
  for (const char* bad : {"", "fp9", "int9", "int1", "w4a17", "bf16 "}) {
    Result<TargetPrecision> p = ParseTargetPrecision(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kUsage);
    EXPECT_NE(p.status().message().find("unquantized"), std::string::npos);
    EXPECT_NE(p.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(TargetPrecision, ReadOffEveryQuantizationConfigKind) {
  EXPECT_EQ(OfConfig("").Name(), "unquantized");
  EXPECT_EQ(OfConfig(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})").Name(), "fp8");
  EXPECT_EQ(OfConfig(R"({"quant_method": "gptq", "bits": 8})").Name(), "int8");
  EXPECT_EQ(OfConfig(R"({"quant_method": "awq", "w_bit": 4})").Name(), "int4");
  EXPECT_EQ(OfConfig(R"({"quant_method": "modelopt", "quant_algo": "NVFP4"})").Name(), "fp4");
  EXPECT_EQ(OfConfig(R"({"quant_method": "modelopt", "quant_algo": "FP8"})").Name(), "fp8");
  EXPECT_EQ(OfConfig(R"({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"})").Name(),
            "quantized");
  EXPECT_EQ(OfConfig(R"({"quant_method": "mxfp4"})").Name(), "fp4");
  EXPECT_EQ(OfConfig(R"({"quant_method": "bitsandbytes"})").Name(), "quantized");
  EXPECT_EQ(OfConfig(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4,
      "type": "int", "symmetric": true, "strategy": "group", "group_size": 128}}}})")
                .Name(),
            "int4");
  EXPECT_EQ(OfConfig(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8,
      "type": "float", "symmetric": true, "strategy": "channel"}}}})")
                .Name(),
            "fp8");
}

TEST(TargetPrecision, ModeloptSideFileWhenConfigHasNone) {
  Result<ModelConfig> config = ParseModelConfig("config.json", R"({"architectures": ["X"]})");
  ASSERT_TRUE(config.ok());
  nlohmann::ordered_json side = {{"quant_algo", "FP8"}};
  EXPECT_EQ(TargetPrecisionOf(*config, &side).Name(), "fp8");
  EXPECT_EQ(TargetPrecisionOf(*config).Name(), "unquantized");
}

TEST(TargetPrecision, PairingComparesTypeAndWidth) {
  const TargetPrecision fp8_target =
      OfConfig(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})");
  EXPECT_TRUE(fp8_target.Satisfies(Parse("fp8")));
  EXPECT_TRUE(fp8_target.Satisfies(Parse("fp8_dynamic")));
  EXPECT_FALSE(fp8_target.Satisfies(Parse("unquantized")));
  EXPECT_FALSE(fp8_target.Satisfies(Parse("w8a16")));  // int8, not fp8
  EXPECT_FALSE(fp8_target.Satisfies(Parse("nvfp4")));
  const TargetPrecision gptq4 = OfConfig(R"({"quant_method": "gptq", "bits": 4})");
  EXPECT_TRUE(gptq4.Satisfies(Parse("w4a16")));
  EXPECT_FALSE(gptq4.Satisfies(Parse("int8")));
  EXPECT_TRUE(OfConfig("").Satisfies(Parse("bf16")));
  EXPECT_FALSE(OfConfig("").Satisfies(Parse("fp8")));
  // A format that cannot be read matches any quantized expectation, never an unquantized one.
  const TargetPrecision unknown = OfConfig(R"({"quant_method": "bitsandbytes"})");
  EXPECT_TRUE(unknown.Satisfies(Parse("int4")));
  EXPECT_FALSE(unknown.Satisfies(Parse("unquantized")));
}

}  // namespace
}  // namespace spk
