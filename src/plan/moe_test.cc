#include "model/moe.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "model/test_util.h"
#include "plan/plan.h"

namespace spk {
namespace {

TEST(MoeTest, SplitsGateUpLikeModelFreePtq) {
  // [E=2, 2I=4, H=8] BF16: expert e, part p holds rows [p*2, p*2+2) of expert e.
  auto s = SplitFusedExperts("m.safetensors", "model.layers.0.mlp.experts.gate_up_proj",
                             DType::kBF16, {2, 4, 8}, std::nullopt);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0].name, "model.layers.0.mlp.experts.0.gate_proj.weight");
  EXPECT_EQ((*s)[1].name, "model.layers.0.mlp.experts.0.up_proj.weight");
  EXPECT_EQ((*s)[3].name, "model.layers.0.mlp.experts.1.up_proj.weight");
  EXPECT_EQ((*s)[3].shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ((*s)[1].byte_offset, 2u * 8 * 2);
  EXPECT_EQ((*s)[3].byte_offset, 3u * 2 * 8 * 2);
}

TEST(MoeTest, SplitKeepsAWeightSuffixAndLeavesOtherTensors) {
  auto down =
      SplitFusedExperts("f", "l.experts.down_proj.weight", DType::kF32, {3, 8, 4}, std::nullopt);
  ASSERT_TRUE(down.ok());
  ASSERT_EQ(down->size(), 3u);
  EXPECT_EQ((*down)[2].name, "l.experts.2.down_proj.weight");
  EXPECT_EQ((*down)[2].byte_offset, 2u * 8 * 4 * 4);
  // 2-D (gpt-oss's bias [E, 2I]) and unrelated 3-D tensors stay as they are, as in the reference.
  EXPECT_TRUE(
      SplitFusedExperts("f", "l.experts.gate_up_proj_bias", DType::kBF16, {2, 8}, std::nullopt)
          ->empty());
  EXPECT_TRUE(
      SplitFusedExperts("f", "l.conv.weight", DType::kBF16, {2, 8, 3}, std::nullopt)->empty());
}

TEST(MoeTest, SplitRefusesExpertsStoredHiddenFirst) {
  // Llama4's and gpt-oss's batched-matmul experts, H = 8, I = 4: gate_up_proj [E, H, 2I] and
  // down_proj [E, I, H]; the reference would split their hidden axis.
  auto gate_up = SplitFusedExperts("a.safetensors", "model.layers.0.mlp.experts.gate_up_proj",
                                   DType::kBF16, {2, 8, 8 + 8}, 8);
  ASSERT_FALSE(gate_up.ok());
  EXPECT_EQ(gate_up.status().code(), StatusCode::kInvalidInput);
  for (const char* part : {"a.safetensors: fused expert tensor 'model.layers.0.mlp.experts."
                           "gate_up_proj' [2, 8, 16]",
                           "hidden size (8) on axis 1, where", "[in, out]"}) {
    EXPECT_NE(gate_up.status().message().find(part), std::string::npos)
        << part << " in " << gate_up.status().message();
  }
  auto down = SplitFusedExperts("a", "l.experts.down_proj", DType::kBF16, {2, 4, 8}, 8);
  ASSERT_FALSE(down.ok());
  EXPECT_NE(
      down.status().message().find("on axis 2, where a Linear weight [out, in] has it on axis 1"),
      std::string::npos);
  // The layout the split assumes passes, and so does one that cannot tell (2I = H).
  EXPECT_EQ(SplitFusedExperts("a", "l.experts.gate_up_proj", DType::kBF16, {2, 16, 8}, 8)->size(),
            4u);
  EXPECT_EQ(SplitFusedExperts("a", "l.experts.down_proj", DType::kBF16, {2, 8, 4}, 8)->size(), 2u);
  EXPECT_EQ(SplitFusedExperts("a", "l.experts.gate_up_proj", DType::kBF16, {2, 8, 8}, 8)->size(),
            4u);
}

TEST(MoeTest, SplitRefusesWhatTheReferenceRefuses) {
  auto odd =
      SplitFusedExperts("a.safetensors", "x.gate_up_proj", DType::kBF16, {2, 5, 8}, std::nullopt);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("a.safetensors"), std::string::npos);
  EXPECT_NE(odd.status().message().find("divisible by 2"), std::string::npos);
  auto f4 = SplitFusedExperts("a", "x.down_proj", DType::kF4, {2, 4, 8}, std::nullopt);
  ASSERT_FALSE(f4.ok());
  EXPECT_NE(f4.status().message().find("sub-byte"), std::string::npos);
  auto both =
      SplitFusedExperts("a", "gate_up_proj.down_proj", DType::kBF16, {2, 4, 8}, std::nullopt);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("both"), std::string::npos);
}

TEST(MoeTest, RoutedExpertsModule) {
  EXPECT_EQ(RoutedExpertsModule("model.layers.3.mlp.experts.17.gate_up_proj"),
            "model.layers.3.mlp.experts");
  EXPECT_EQ(RoutedExpertsModule("model.layers.3.block_sparse_moe.experts.0.w2"),
            "model.layers.3.block_sparse_moe.experts");
  EXPECT_EQ(RoutedExpertsModule("model.layers.3.mlp.gate_up_proj"), std::nullopt);
  EXPECT_EQ(RoutedExpertsModule("model.layers.3.mlp.shared_expert.down_proj"), std::nullopt);
  EXPECT_EQ(RoutedExpertsModule("model.layers.3.mlp.experts.x.down_proj"), std::nullopt);
}

TEST(MoeTest, RouterRulesNameHowVllmBuildsThem) {
  ModelConfig qwen = test_util::ConfigFromJson(R"({"architectures":["Qwen3MoeForCausalLM"]})");
  ModelConfig laguna = test_util::ConfigFromJson(R"({"architectures":["LagunaForCausalLM"]})");
  auto q = RouterKeepRule(qwen, "model.layers.0.mlp.gate");
  ASSERT_TRUE(q.has_value());
  EXPECT_FALSE(q->built_without_quant_config);
  EXPECT_NE(q->reason.find("quant_config=quant_config"), std::string::npos);
  auto l = RouterKeepRule(laguna, "model.layers.0.mlp.gate");
  ASSERT_TRUE(l.has_value());
  EXPECT_TRUE(l->built_without_quant_config);
  EXPECT_TRUE(
      RouterKeepRule(qwen, "model.layers.0.mlp.shared_expert_gate")->built_without_quant_config);
  EXPECT_EQ(RouterKeepRule(qwen, "model.layers.0.mlp.gate_proj"), std::nullopt);
}

std::vector<TensorMeta> MoeLayer(const std::string& p, int64_t experts, int64_t inter) {
  std::vector<TensorMeta> t = {{p + "mlp.gate.weight", DType::kBF16, {experts, 256}, ""}};
  for (int64_t e = 0; e < experts; ++e) {
    std::string x = p + "mlp.experts." + std::to_string(e) + ".";
    t.push_back({x + "gate_proj.weight", DType::kBF16, {inter, 256}, ""});
    t.push_back({x + "up_proj.weight", DType::kBF16, {inter, 256}, ""});
    t.push_back({x + "down_proj.weight", DType::kBF16, {256, inter}, ""});
  }
  return t;
}

TEST(MoeTest, PlanQuantizesExpertsKeepsTheRouterAndIgnoresIt) {
  ModelConfig config = test_util::ConfigFromJson(R"({"architectures":["Qwen3MoeForCausalLM"]})");
  auto plan = BuildPlan(MoeLayer("model.layers.0.", 128, 128), config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // A 128-expert router is [128, 256]: Marlin-legal, dense only by the router rule.
  EXPECT_EQ(plan->tensors[0].action, TensorAction::kKeep);
  EXPECT_NE(plan->tensors[0].reason.find("MoE router"), std::string::npos);
  EXPECT_EQ(plan->quantized_count(), 3u * 128);
  EXPECT_EQ(plan->ignore_entries, (std::vector<std::string>{"re:.*mlp\\.gate$"}));
}

TEST(MoeTest, OneDenseExpertKeepsTheWholeRoutedExpertsDense) {
  ModelConfig config = test_util::ConfigFromJson(R"({"architectures":["Qwen3MoeForCausalLM"]})");
  std::vector<TensorMeta> t = MoeLayer("model.layers.0.", 4, 128);
  PlanOptions options;
  options.ignore = {"model.layers.0.mlp.experts.2.down_proj"};
  auto plan = BuildPlan(t, config, options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->quantized_count(), 0u);
  EXPECT_NE(plan->tensors[1].reason.find("model.layers.0.mlp.experts with"), std::string::npos);
}

// vLLM 0.34.0 refused a Qwen3-MoE draft quantized w8a16-asym while building it ("No WNA16 MoE
// backend supports the deployment configuration."): no MoE backend takes uint8 with zero points.
// The experts are built from the config whatever the checkpoint stores, so the scheme is refused
// for the architecture; w4a16-asym (Triton's int4 with zero points) is planned.
TEST(MoeTest, AsymmetricInt8IsRefusedForAnArchitectureWithRoutedExperts) {
  ModelConfig config = test_util::ConfigFromJson(R"({"architectures":["Qwen3MoeForCausalLM"]})");
  PlanOptions options;
  options.scheme = FindScheme("w8a16-asym");
  options.vllm_version = "0.34.0";
  auto plan = BuildPlan(MoeLayer("model.layers.0.", 4, 128), config, options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUsage);
  EXPECT_NE(plan.status().message().find("No WNA16 MoE backend supports"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("model.layers.0.mlp.experts"), std::string::npos)
      << plan.status().message();
  options.scheme = FindScheme("w4a16-asym");
  EXPECT_TRUE(BuildPlan(MoeLayer("model.layers.0.", 4, 128), config, options).ok());
  // A dense architecture takes w8a16-asym.
  options.scheme = FindScheme("w8a16-asym");
  ModelConfig dense = test_util::ConfigFromJson(R"({"architectures":["Qwen3ForCausalLM"]})");
  EXPECT_TRUE(BuildPlan({{"model.layers.0.mlp.down_proj.weight", DType::kBF16, {256, 256}, ""}},
                        dense, options)
                  .ok());
}

// Kimi-K3 MTP's load_weights renames every .weight_packed to .weight, and then skips it, when its
// routed experts registered no w13_weight_packed (the map's weight_packed_renamed): a checkpoint
// that quantizes the Linears and keeps the experts dense loads none of the Linears' weights.
TEST(MoeTest, KimiK3MtpRefusesQuantizedLinearsBesideDenseExperts) {
  ModelConfig config = test_util::ConfigFromJson(
      R"({"architectures":["KimiK3MTPModel"],"model_type":"kimi_k3","num_nextn_predict_layers":1,
          "text_config":{"model_type":"kimi_linear","num_nextn_predict_layers":1}})");
  std::vector<TensorMeta> t = {
      {"model.layers.2.self_attn.o_proj.weight", DType::kBF16, {256, 256}, ""}};
  for (const char* w : {"w1", "w2", "w3"}) {
    t.push_back({fmt::format("model.layers.2.block_sparse_moe.experts.0.{}.weight", w),
                 DType::kBF16,
                 {256, 256},
                 ""});
  }
  PlanOptions options;
  options.scheme = FindScheme("w4a16");
  options.vllm_version = "0.34.0";
  auto all = BuildPlan(t, config, options);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->quantized_count(), 4u);
  options.ignore = {"re:.*experts.*"};
  auto dense_experts = BuildPlan(t, config, options);
  ASSERT_FALSE(dense_experts.ok());
  EXPECT_EQ(dense_experts.status().code(), StatusCode::kUsage);
  EXPECT_NE(dense_experts.status().message().find("kimi_k3/nvidia/mtp.py:327"), std::string::npos)
      << dense_experts.status().message();
  // FP8 stores `.weight`, which the rename does not touch.
  options.scheme = FindScheme("fp8-dynamic");
  EXPECT_TRUE(BuildPlan(t, config, options).ok());
}

}  // namespace
}  // namespace spk
