#include "plan/plan.h"

#include <gtest/gtest.h>

#include "model/test_util.h"
#include "vllm/gemm.h"

#include <map>

namespace spk {
namespace {

ModelConfig Config(std::string_view json) { return test_util::ConfigFromJson(json); }

std::vector<TensorMeta> QwenLayer(std::string prefix, int64_t hidden, int64_t inter, int64_t q,
                                  int64_t kv) {
  return {
      {prefix + "self_attn.q_proj.weight", DType::kBF16, {q, hidden}, ""},
      {prefix + "self_attn.k_proj.weight", DType::kBF16, {kv, hidden}, ""},
      {prefix + "self_attn.v_proj.weight", DType::kBF16, {kv, hidden}, ""},
      {prefix + "self_attn.o_proj.weight", DType::kBF16, {hidden, q}, ""},
      {prefix + "self_attn.q_norm.weight", DType::kBF16, {128}, ""},
      {prefix + "mlp.gate_proj.weight", DType::kBF16, {inter, hidden}, ""},
      {prefix + "mlp.up_proj.weight", DType::kBF16, {inter, hidden}, ""},
      {prefix + "mlp.down_proj.weight", DType::kBF16, {hidden, inter}, ""},
      {prefix + "input_layernorm.weight", DType::kBF16, {hidden}, ""},
  };
}

std::map<std::string, TensorAction> Actions(const QuantPlan& plan) {
  std::map<std::string, TensorAction> out;
  for (const auto& t : plan.tensors) out[t.tensor] = t.action;
  return out;
}

TEST(PlanTest, DFlashKeepsQkvDenseAndWritesVerifiedIgnore) {
  std::vector<TensorMeta> tensors = QwenLayer("layers.0.", 512, 1536, 512, 128);
  auto more = QwenLayer("layers.1.", 512, 1536, 512, 128);
  tensors.insert(tensors.end(), more.begin(), more.end());
  tensors.push_back({"fc.weight", DType::kBF16, {512, 1536}, ""});
  tensors.push_back({"hidden_norm.weight", DType::kBF16, {512}, ""});
  ModelConfig config = Config(R"({"architectures":["DFlashDraftModel"],"num_target_layers":36,
                                  "dflash_config":{"target_layer_ids":[1,2,3]}})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto a = Actions(*plan);
  EXPECT_EQ(a["layers.0.self_attn.q_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["layers.1.self_attn.v_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["layers.0.self_attn.o_proj.weight"], TensorAction::kQuantize);
  EXPECT_EQ(a["layers.0.mlp.gate_proj.weight"], TensorAction::kQuantize);
  EXPECT_EQ(a["fc.weight"], TensorAction::kQuantize);
  EXPECT_EQ(a["hidden_norm.weight"], TensorAction::kKeep);
  EXPECT_EQ(plan->quantized_count(), 9u);
  ASSERT_EQ(plan->ignore_entries.size(), 1u);
  EXPECT_EQ(plan->ignore_entries[0], "re:.*self_attn\\.(q|k|v|qkv)_proj$");
  EXPECT_EQ(plan->tensors[0].vllm_module, "model.layers.36.self_attn.qkv_proj");
}

TEST(PlanTest, LiteralCheckpointNamesInIgnoreAreCaughtByVerify) {
  std::vector<TensorMeta> tensors = QwenLayer("layers.0.", 512, 1536, 512, 128);
  ModelConfig config = Config(R"({"dflash_config":{},"num_target_layers":36})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // The silent miss of docs/vllm.md: literal checkpoint names match no vLLM module.
  Status s = VerifyIgnoreList(*plan, {"layers.0.self_attn.q_proj", "layers.0.self_attn.k_proj",
                                      "layers.0.self_attn.v_proj"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.36.self_attn.qkv_proj"), std::string::npos);
  // Shard-only regex works with vLLM's fused mapping but not without it (vllm#53116).
  s = VerifyIgnoreList(*plan, {"re:.*self_attn\\.(q|k|v)_proj$"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("without fused-name expansion"), std::string::npos);
  // Catching a quantized module.
  s = VerifyIgnoreList(*plan, {"re:.*self_attn\\.(q|k|v|qkv)_proj$", "re:.*down_proj$"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("down_proj' is quantized"), std::string::npos);
}

TEST(PlanTest, LlmQuantizesEverythingLinearButEmbeddingsAndHead) {
  std::vector<TensorMeta> tensors = {{"model.embed_tokens.weight", DType::kBF16, {1000, 256}, ""}};
  auto layer = QwenLayer("model.layers.0.", 256, 768, 256, 128);
  tensors.insert(tensors.end(), layer.begin(), layer.end());
  tensors.push_back({"lm_head.weight", DType::kBF16, {1000, 256}, ""});
  auto plan =
      BuildPlan(tensors, Config(R"({"architectures":["Qwen3ForCausalLM"]})"), PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto a = Actions(*plan);
  EXPECT_EQ(a["model.embed_tokens.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["lm_head.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.0.self_attn.q_proj.weight"], TensorAction::kQuantize);
  EXPECT_EQ(plan->ignore_entries, std::vector<std::string>{"lm_head"});
}

TEST(PlanTest, KernelRulesKeepOddShapesDenseAndFusedGroupsAgree) {
  // k/v with 32 outputs break out % 64: the whole q/k/v group stays dense.
  std::vector<TensorMeta> tensors = QwenLayer("model.layers.0.", 256, 768, 256, 32);
  auto plan = BuildPlan(tensors, Config("{}"), PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto a = Actions(*plan);
  EXPECT_EQ(a["model.layers.0.self_attn.k_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.0.self_attn.q_proj.weight"], TensorAction::kKeep);
  EXPECT_NE(plan->tensors[0].reason.find("fused"), std::string::npos);
  EXPECT_EQ(a["model.layers.0.mlp.up_proj.weight"], TensorAction::kQuantize);
  // --tp 4 splits down_proj's in (768/4 = 192, not a multiple of 128).
  PlanOptions tp4;
  tp4.tp = 4;
  plan = BuildPlan(tensors, Config("{}"), tp4);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Actions(*plan)["model.layers.0.mlp.down_proj.weight"], TensorAction::kKeep);
}

TEST(PlanTest, UserIgnoreMustMatchSomething) {
  std::vector<TensorMeta> tensors = QwenLayer("model.layers.0.", 256, 768, 256, 128);
  PlanOptions opts;
  opts.ignore = {"re:.*mlp\\.down_proj$"};
  auto plan = BuildPlan(tensors, Config("{}"), opts);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Actions(*plan)["model.layers.0.mlp.down_proj.weight"], TensorAction::kKeep);
  opts.ignore = {"re:.*nothing_here$"};
  EXPECT_EQ(BuildPlan(tensors, Config("{}"), opts).status().code(), StatusCode::kUsage);
}

TEST(PlanTest, MixedLayersInADraftNeedTheTargetLayerCount) {
  std::vector<TensorMeta> tensors = QwenLayer("layers.0.", 512, 1536, 512, 128);
  auto odd = QwenLayer("layers.1.", 512, 1600, 512, 128);  // 1600 % 128 != 0: down_proj dense
  tensors.insert(tensors.end(), odd.begin(), odd.end());
  ModelConfig config = Config(R"({"dflash_config":{}})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  EXPECT_EQ(plan.status().code(), StatusCode::kUsage);
  PlanOptions opts;
  opts.target_layers = 36;
  plan = BuildPlan(tensors, config, opts);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  bool has_layer_entry = false;
  for (const auto& e : plan->ignore_entries) {
    has_layer_entry |= e == "re:model\\.layers\\.37\\.mlp\\.down_proj$";
  }
  EXPECT_TRUE(has_layer_entry);
}

TEST(PlanTest, LagunaDFlashKeepsFusedQkvAndGateDenseWithoutOffset) {
  // Laguna-style: fused qkv_proj and a per-head g_proj stored, layer keys already offset (40 = T).
  std::vector<TensorMeta> tensors = {
      {"model.layers.40.self_attn.qkv_proj.weight", DType::kBF16, {768, 512}, ""},
      {"model.layers.40.self_attn.g_proj.weight", DType::kBF16, {8, 512}, ""},
      {"model.layers.40.self_attn.o_proj.weight", DType::kBF16, {512, 512}, ""},
      {"model.layers.40.mlp.gate_proj.weight", DType::kBF16, {1536, 512}, ""},
      {"model.layers.40.mlp.up_proj.weight", DType::kBF16, {1536, 512}, ""},
      {"model.layers.40.mlp.down_proj.weight", DType::kBF16, {512, 1536}, ""},
      {"model.fc.weight", DType::kBF16, {512, 2560}, ""},
      {"model.aux_hidden_norms.0.weight", DType::kBF16, {512}, ""},
  };
  ModelConfig config =
      Config(R"({"architectures":["DFlashLagunaForCausalLM"],"dflash_config":{}})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->family.laguna_style);
  auto a = Actions(*plan);
  EXPECT_EQ(a["model.layers.40.self_attn.qkv_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.40.self_attn.g_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.40.self_attn.o_proj.weight"], TensorAction::kQuantize);
  EXPECT_EQ(a["model.fc.weight"], TensorAction::kQuantize);
  EXPECT_EQ(plan->tensors[0].vllm_module, "model.layers.40.self_attn.qkv_proj");
  EXPECT_EQ(plan->quantized_count(), 5u);
  std::vector<std::string> want = {"re:.*self_attn\\.g_proj$",
                                   "re:.*self_attn\\.(q|k|v|qkv)_proj$"};
  EXPECT_EQ(plan->ignore_entries, want);
}

TEST(PlanTest, MtpKeepsEhProjAndSharedHead) {
  std::vector<TensorMeta> tensors = QwenLayer("model.layers.61.", 256, 768, 256, 128);
  tensors.push_back({"model.layers.61.eh_proj.weight", DType::kBF16, {256, 512}, ""});
  tensors.push_back({"model.layers.61.shared_head.head.weight", DType::kBF16, {1000, 256}, ""});
  auto plan = BuildPlan(tensors, Config(R"({"num_nextn_predict_layers":1})"), PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->family.family, ModelFamily::kMtp);
  auto a = Actions(*plan);
  EXPECT_EQ(a["model.layers.61.eh_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.61.shared_head.head.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.61.mlp.up_proj.weight"], TensorAction::kQuantize);
}

// Mistral Large 4's DSpark draft rides in the target's checkpoint as mtp_dspark.*, and vLLM builds
// it with quantization_config None: its Linears stay dense under every preset, with the reason,
// while the target's own Linears are quantized.
TEST(PlanTest, AnEmbeddedDraftVllmBuildsDenseStaysDenseUnderEveryPreset) {
  std::vector<TensorMeta> tensors = QwenLayer("model.layers.0.", 256, 768, 256, 128);
  tensors.push_back(
      {"mtp_dspark.backbone.layers.0.attention.wo.weight", DType::kBF16, {256, 256}, ""});
  tensors.push_back(
      {"mtp_dspark.backbone.layers.0.feed_forward.w1.weight", DType::kBF16, {768, 256}, ""});
  for (Preset preset : {Preset::kAuto, Preset::kNone}) {
    PlanOptions opts;
    opts.preset = preset;
    auto plan = BuildPlan(tensors, Config(R"({"architectures":["MistralForCausalLM"]})"), opts);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    auto a = Actions(*plan);
    EXPECT_EQ(a["model.layers.0.mlp.up_proj.weight"], TensorAction::kQuantize);
    for (const TensorPlan& t : plan->tensors) {
      if (!t.tensor.starts_with("mtp_dspark.")) continue;
      EXPECT_EQ(t.action, TensorAction::kKeep) << t.tensor;
      EXPECT_NE(t.reason.find("MistralLarge4DSparkModel with quantization_config None"),
                std::string::npos)
          << t.reason;
    }
  }
}

// vLLM's validate_fp8_block_shape: the members of a fused GEMM but the last need whole 128-row
// blocks; a lone module or the last member may end in a partial one, unless --tp splits it.
TEST(PlanTest, Fp8BlocksFollowVllmsFusedPartitionRule) {
  const QuantScheme* fp8_block = FindScheme("FP8_BLOCK");
  ASSERT_NE(fp8_block, nullptr);
  auto rule = [&](std::string_view module, std::string_view fused, int64_t out, int tp) {
    return JudgeGemm(*fp8_block, 128,
                     {.module = module, .vllm_module = fused, .out = out, .in = 384}, tp)
        .plan_rule;
  };
  auto k = rule("model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.qkv_proj", 192, 1);
  ASSERT_TRUE(k.has_value());
  EXPECT_NE(k->find("block_n = 128"), std::string::npos) << *k;
  EXPECT_TRUE(rule("model.layers.0.mlp.gate_proj", "model.layers.0.mlp.gate_up_proj", 192, 1));
  EXPECT_FALSE(
      rule("model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.qkv_proj", 192, 1));
  EXPECT_FALSE(rule("model.layers.0.mlp.up_proj", "model.layers.0.mlp.gate_up_proj", 192, 1));
  EXPECT_FALSE(rule("model.layers.0.self_attn.o_proj", "model.layers.0.self_attn.o_proj", 192, 1));
  EXPECT_FALSE(
      rule("model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.qkv_proj", 256, 1));
  EXPECT_TRUE(rule("model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.qkv_proj", 384, 2));
}

// A Qwen-style layer whose q/k/v of 192 + 64 + 64 rows fuse to N 320 (each member a multiple of
// 64), and the options of w8a16-asym, whose only CUDA kernel (Machete) needs N % 128.
std::vector<TensorMeta> QwenLayerWithFusedQkv320() {
  return QwenLayer("model.layers.0.", 256, 768, 192, 64);
}
PlanOptions AsymmetricInt8() {
  PlanOptions asym;
  asym.scheme = FindScheme("w8a16-asym");
  EXPECT_NE(asym.scheme, nullptr);
  return asym;
}

// uint8 with zero points (w8a16-asym) has no CUDA kernel but Machete, which needs the fused GEMM's
// rows a multiple of 128: vLLM 0.34.0 refused DeepSeek MTP's fused_qkv_a_proj (128 + 192 rows)
// quantized so ("Failed to find a kernel that can implement the WNA16 linear layer. Reasons: ...
// MacheteLinearKernel cannot implement due to: Output features size must be divisible by 128"),
// which the plan's Marlin tile rule (each member's rows a multiple of 64) passed and `check` fails.
TEST(PlanTest, AsymmetricInt8KeepsAFusedGemmMacheteRefusesDense) {
  const std::vector<TensorMeta> tensors = QwenLayerWithFusedQkv320();
  PlanOptions asym = AsymmetricInt8();
  auto plan = BuildPlan(tensors, Config("{}"), asym);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto a = Actions(*plan);
  EXPECT_EQ(a["model.layers.0.self_attn.q_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.0.self_attn.v_proj.weight"], TensorAction::kKeep);
  EXPECT_NE(plan->tensors[0].reason.find("Output features size must be divisible by 128"),
            std::string::npos)
      << plan->tensors[0].reason;
  EXPECT_EQ(a["model.layers.0.mlp.gate_proj.weight"], TensorAction::kQuantize);  // fused N 1536
  // Symmetric int8 runs on Marlin, which pads: the same q/k/v are quantized.
  PlanOptions sym;
  sym.scheme = FindScheme("w8a16");
  plan = BuildPlan(tensors, Config("{}"), sym);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Actions(*plan)["model.layers.0.self_attn.q_proj.weight"], TensorAction::kQuantize);
}

// The weights no kernel builds are named in a warning; when they are all the plan would quantize
// (w8a16-asym at group 32: Machete takes groups -1, 64 and 128), quantize refuses rather than
// write a dense copy.
TEST(PlanTest, WeightsNoKernelBuildsAreAWarningAndAllOfThemARefusal) {
  const std::vector<TensorMeta> tensors = QwenLayerWithFusedQkv320();
  PlanOptions asym = AsymmetricInt8();
  auto plan = BuildPlan(tensors, Config("{}"), asym);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("--scheme w8a16-asym --group-size 128: 3 weight(s) kept dense"),
            std::string::npos)
      << plan->warnings[0];
  asym.group_size = 32;
  plan = BuildPlan(tensors, Config("{}"), asym);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUsage);
  EXPECT_NE(plan.status().message().find("nothing would be quantized"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("supported group sizes are: [-1, 64, 128]"),
            std::string::npos)
      << plan.status().message();
}

// vLLM's Llama4 load_weights permutes q/k rows and their scales for its rotary layout, which
// per-block FP8 scales cannot follow: vLLM 0.34.0 raised "RuntimeError: shape '[2, 0, 2, 2]' is
// invalid for input of size 2" loading an EAGLE Llama4 head's FP8-block k_proj scale.
TEST(PlanTest, Llama4KeepsQkvDenseUnderFp8Blocks) {
  const std::vector<TensorMeta> tensors = QwenLayer("model.layers.0.", 256, 768, 256, 128);
  PlanOptions block;
  block.scheme = FindScheme("fp8-block");
  ASSERT_NE(block.scheme, nullptr);
  auto plan = BuildPlan(tensors, Config(R"({"architectures":["EagleLlama4ForCausalLM"]})"), block);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto a = Actions(*plan);
  EXPECT_EQ(a["model.layers.0.self_attn.k_proj.weight"], TensorAction::kKeep);
  EXPECT_EQ(a["model.layers.0.self_attn.v_proj.weight"], TensorAction::kKeep);  // fused with q/k
  EXPECT_NE(plan->tensors[0].reason.find("permute_qk_weight_for_rotary"), std::string::npos)
      << plan->tensors[0].reason;
  EXPECT_EQ(a["model.layers.0.self_attn.o_proj.weight"], TensorAction::kQuantize);
  // Per-channel FP8 scales are permuted with the rows; another architecture is not permuted.
  PlanOptions channel;
  channel.scheme = FindScheme("fp8-dynamic");
  plan = BuildPlan(tensors, Config(R"({"architectures":["EagleLlama4ForCausalLM"]})"), channel);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Actions(*plan)["model.layers.0.self_attn.k_proj.weight"], TensorAction::kQuantize);
  plan = BuildPlan(tensors, Config(R"({"architectures":["Qwen3ForCausalLM"]})"), block);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Actions(*plan)["model.layers.0.self_attn.k_proj.weight"], TensorAction::kQuantize);
}

// A speculators-format EAGLE-3 head keeps its decoder's config in transformer_layer_config: the
// hidden size the first-build rule needs comes from there. vLLM 0.32 refused this head's g128 copy
// ("Weight input_size_per_partition=576 for layer 'model.layers.30.self_attn.qkv_proj' is not
// divisible by group_size=128") while the plan, reading no top-level hidden_size, quantized it.
TEST(PlanTest, SpeculatorsEagle3HeadsFirstBuiltQkvProjUsesTheLayerConfigsHiddenSize) {
  std::vector<TensorMeta> tensors = {
      {"layers.0.self_attn.q_proj.weight", DType::kBF16, {576, 1152}, ""},
      {"layers.0.self_attn.k_proj.weight", DType::kBF16, {192, 1152}, ""},
      {"layers.0.self_attn.v_proj.weight", DType::kBF16, {192, 1152}, ""},
      {"layers.0.mlp.down_proj.weight", DType::kBF16, {576, 1536}, ""},
      {"fc.weight", DType::kBF16, {576, 1728}, ""},
  };
  const ModelConfig config = Config(
      R"({"architectures":["Eagle3DraftModel"],"speculators_model_type":"eagle3",
          "transformer_layer_config":{"model_type":"llama","hidden_size":576}})");
  ASSERT_EQ(config.hidden_size, 576);
  PlanOptions options;  // w4a16, group 128
  auto plan = BuildPlan(tensors, config, options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const TensorPlan& t : plan->tensors) {
    if (t.tensor.find("self_attn") == std::string::npos) continue;
    EXPECT_EQ(t.action, TensorAction::kKeep) << t.tensor;
    EXPECT_NE(t.reason.find("vLLM first builds"), std::string::npos) << t.reason;
  }
  EXPECT_EQ(Actions(*plan)["layers.0.mlp.down_proj.weight"], TensorAction::kQuantize);
}

}  // namespace
}  // namespace spk
