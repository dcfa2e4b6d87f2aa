#include "vllm/vllm_module_map.h"

#include <gtest/gtest.h>

#include <map>

#include "model/test_util.h"
#include "plan/plan.h"
#include "vllm/map_rules.h"
#include "vllm/serve_line.h"
#include "vllm/vllm_version.h"

namespace spk {
namespace {

ModelConfig Config(std::string_view json) { return test_util::ConfigFromJson(json); }

const ModuleMap& Map(std::string_view release) {
  auto choice = ChooseModuleMap(release);
  EXPECT_TRUE(choice.ok() && choice->map != nullptr) << release;
  return *choice->map;
}

std::map<std::string, TensorPlan> ByTensor(const QuantPlan& plan) {
  std::map<std::string, TensorPlan> out;
  for (const TensorPlan& t : plan.tensors) out[t.tensor] = t;
  return out;
}

std::vector<TensorMeta> Square(const std::vector<std::string>& names, int64_t n = 256) {
  std::vector<TensorMeta> out;
  for (const std::string& name : names) out.push_back({name, DType::kBF16, {n, n}, ""});
  return out;
}

TEST(ModuleMapTest, EveryMapParsesOldestFirst) {
  const auto& maps = ModuleMaps();
  ASSERT_GE(maps.size(), 2u);
  for (size_t i = 1; i < maps.size(); ++i) {
    EXPECT_LT(CompareVllmVersions(maps[i - 1].version, maps[i].version), 0);
  }
  for (const ModuleMap& map : maps) {
    EXPECT_GT(map.architectures.size(), 20u) << map.release;
    EXPECT_TRUE(map.architectures.count("Qwen3ForCausalLM")) << map.release;
  }
}

TEST(ModuleMapTest, ReleasesChooseTheirMapAndNewerOnesWarn) {
  auto newest = ChooseModuleMap("");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->map, &ModuleMaps().back());
  EXPECT_EQ(newest->warning, "");
  auto exact = ChooseModuleMap("0.32.0");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->map->release, "0.32.0");
  EXPECT_EQ(exact->warning, "");
  auto later = ChooseModuleMap("0.99.1");
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->map, &ModuleMaps().back());
  EXPECT_NE(later->warning.find("not verified for vLLM 0.99.1: judged by the map of vLLM " +
                                ModuleMaps().back().release),
            std::string::npos)
      << later->warning;
  auto between = ChooseModuleMap("0.32.4");
  ASSERT_TRUE(between.ok());
  EXPECT_EQ(between->map->release, "0.32.0");
  EXPECT_NE(between->warning, "");
  // Builds of a release are judged by its map, as check judges them.
  for (const char* build : {"0.32.0+cpu", "v0.32.0", "0.32.0rc1.dev5+g1a2b"}) {
    auto cpu = ChooseModuleMap(build);
    ASSERT_TRUE(cpu.ok()) << build;
    EXPECT_EQ(cpu->map->release, "0.32.0") << build;
    EXPECT_EQ(cpu->warning, "") << build;
  }
  // Older than every map: a stand-in that knows no architecture, with a warning.
  auto older = ChooseModuleMap("0.26.0");
  ASSERT_TRUE(older.ok());
  ASSERT_NE(older->map, nullptr);
  EXPECT_TRUE(older->map->stand_in);
  EXPECT_TRUE(older->map->architectures.empty());
  EXPECT_EQ(older->map->release, "0.26.0");
  EXPECT_EQ(older->warning,
            "vLLM 0.26.0 is older than every module map this sparkulator has (the oldest is " +
                ModuleMaps().front().release +
                "): judged as an architecture no map knows (standard decoder Linears only for a "
                "draft)");
  EXPECT_EQ(ChooseModuleMap("latest").status().message(),
            "'latest' is not a vLLM version (use MAJOR.MINOR[.PATCH], e.g. 0.32.0)");
}

TEST(ModuleMapTest, NamesNormalizeAcrossModelSizes) {
  EXPECT_EQ(NormalizedModuleName("model.layers.37.mlp.experts.5.up_proj"),
            "layers.#.mlp.experts.#.up_proj");
  EXPECT_EQ(NormalizedModuleName("layers.0.self_attn.q_proj"), "layers.#.self_attn.q_proj");
  EXPECT_EQ(NormalizedModuleName("midlayer.self_attn.q_proj"), "layers.#.self_attn.q_proj");
  EXPECT_EQ(NormalizedModuleName("model.markov_head.markov_w2"), "markov_head.markov_w2");
  EXPECT_EQ(NormalizedModuleName("layers.10a.x"), "layers.10a.x");
}

TEST(ModuleMapTest, DSparkMarkovHeadIsNotAQuantizedLinear) {
  const ModuleMap& map = Map("0.33.0");
  const MappedArchitecture& dspark = map.architectures.at("Qwen3DSparkModel");
  EXPECT_EQ(dspark.method(), "dspark");
  EXPECT_TRUE(dspark.layers_follow_target());
  const MappedModule* head = FindModule(dspark, "markov_head.markov_w2");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->module_class, "ParallelLMHead");
  EXPECT_FALSE(head->quantized);
  EXPECT_TRUE(IsPlainParam(dspark, "model.markov_head.markov_w1.weight"));
  // qwen3_dflash.py reads qkv_proj.weight only under `if all(isinstance(..., Unquantized...))`.
  const MappedModule* q = FindModule(dspark, "layers.7.self_attn.q_proj");
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(q->quantized);
  EXPECT_FALSE(q->read_directly);
  EXPECT_NE(FindModule(dspark, "layers.7.mlp.down_proj"), nullptr);
}

TEST(ModuleMapTest, AnUnguardedWeightReadIsKnownWithItsLine) {
  const MappedArchitecture& gemma = Map("0.33.0").architectures.at("Gemma4DSparkModel");
  const MappedModule* k = FindModule(gemma, "model.layers.3.self_attn.k_proj");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->read_directly);
  EXPECT_NE(k->read_at.find("gemma4_dspark.py:"), std::string::npos) << k->read_at;
  EXPECT_FALSE(gemma.layers_follow_target());
  EXPECT_TRUE(gemma.layers_from_zero());
}

TEST(ModuleMapPlanTest, Gemma4DSparkNamesItsLayersWithoutTheTargetsOffset) {
  std::vector<TensorMeta> tensors = Square({"model.layers.0.mlp.down_proj.weight"});
  ModelConfig config = Config(R"({"architectures":["Gemma4DSparkModel"],"num_target_layers":30,
      "dflash_config":{"block_size":4}})");
  PlanOptions beside_dense;
  beside_dense.target = TargetModel{};  // vLLM builds Gemma4 DSpark under the target's config
  auto plan = BuildPlan(tensors, config, beside_dense);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tensors[0].vllm_module, "model.layers.0.mlp.down_proj");
  auto qwen = BuildPlan(tensors, Config(R"({"architectures":["Qwen3DSparkModel"],
      "num_target_layers":30,"dflash_config":{"block_size":4}})"),
                        PlanOptions{});
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->tensors[0].vllm_module, "model.layers.30.mlp.down_proj");
}

TEST(ModuleMapPlanTest, ADraftBuiltUnderTheTargetsConfigIsPlannedFromTheTarget) {
  // gemma4_dspark.py builds with vllm_config.quant_config (the target's); qwen3_dspark.py asks
  // the draft's own, and MTP layers are the target checkpoint's own.
  EXPECT_TRUE(Map("0.33.0").architectures.at("Gemma4DSparkModel").built_under_target_config);
  EXPECT_FALSE(Map("0.33.0").architectures.at("Qwen3DSparkModel").built_under_target_config);
  std::vector<TensorMeta> tensors = Square({"model.layers.0.mlp.down_proj.weight"});
  const ModelConfig gemma = Config(R"({"architectures":["Gemma4DSparkModel"],
      "num_target_layers":30,"dflash_config":{"block_size":4}})");
  PlanOptions options;
  options.vllm_version = "0.33.0";
  // Without --target nothing says what vLLM builds: refused, never written and then failed.
  auto refused = BuildPlan(tensors, gemma, options);
  ASSERT_EQ(refused.status().code(), StatusCode::kUsage);
  EXPECT_EQ(refused.status().message(),
            "vLLM 0.33.0 builds Gemma4DSparkModel (vllm/model_executor/models/gemma4_dspark.py) "
            "under the target's quantization config and never reads the draft's own: pass "
            "--target T (the target it is served with): beside a dense target its Linears stay "
            "dense, beside a compressed-tensors target they take the target's scheme");
  // Beside a dense target its Linears are built dense.
  options.target = TargetModel{};
  options.target->label = "unquantized (bfloat16)";
  auto dense = BuildPlan(tensors, gemma, options);
  ASSERT_TRUE(dense.ok()) << dense.status().message();
  EXPECT_EQ(dense->quantized_count(), 0u);
  EXPECT_EQ(dense->tensors[0].reason,
            "vLLM 0.33.0 builds Gemma4DSparkModel (vllm/model_executor/models/gemma4_dspark.py) "
            "under the target's quantization config and never reads the draft's own, and the "
            "target is unquantized (bfloat16): vLLM builds the draft's Linears dense");
  // Beside a w4a16 target: the target's scheme, and only it.
  options.target->precision.quantized = true;
  options.target->label = "compressed-tensors w4a16";
  options.target->scheme = CheckpointScheme{FindScheme("w4a16"), QuantParams{}};
  auto quantized = BuildPlan(tensors, gemma, options);
  ASSERT_TRUE(quantized.ok()) << quantized.status().message();
  EXPECT_EQ(quantized->quantized_count(), 1u);
  options.scheme = FindScheme("w8a16");
  auto other = BuildPlan(tensors, gemma, options);
  ASSERT_EQ(other.status().code(), StatusCode::kUsage);
  EXPECT_NE(other.status().message().find(", and the target is compressed-tensors w4a16: the "
                                          "draft's Linears load only with that scheme: pass "
                                          "--scheme w4a16 --group-size 128"),
            std::string::npos)
      << other.status().message();
  auto qwen = BuildPlan(tensors, Config(R"({"architectures":["Qwen3DSparkModel"],
      "num_target_layers":30,"dflash_config":{"block_size":4}})"),
                        PlanOptions{});
  ASSERT_TRUE(qwen.ok());
  EXPECT_TRUE(qwen->warnings.empty());
}

TEST(ModuleMapTest, ExpertsLoadIntoTheirLayersExpertsModule) {
  const ModuleMap& map = Map("0.33.0");
  const MappedArchitecture& moe = map.architectures.at("Qwen3MoeForCausalLM");
  const MappedModule* expert = FindModule(moe, "model.layers.40.mlp.experts.17.gate_proj");
  ASSERT_NE(expert, nullptr);
  EXPECT_TRUE(expert->quantized);
  EXPECT_EQ(FindModule(moe, "model.layers.40.mlp.nonsense"), nullptr);
}

TEST(ModuleMapPlanTest, DSparkDraftQuantizesItsLayersOnlyAndServesWithDspark) {
  std::vector<TensorMeta> tensors =
      Square({"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
              "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
              "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
              "model.layers.0.mlp.down_proj.weight", "model.fc.weight",
              "model.markov_head.markov_w1.weight", "model.markov_head.markov_w2.weight"});
  ModelConfig config = Config(R"({"architectures":["Qwen3DSparkModel"],"num_target_layers":36,
      "dflash_config":{"block_size":8,"target_layer_ids":[1,2,3]}})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto t = ByTensor(*plan);
  EXPECT_EQ(t["model.layers.0.mlp.down_proj.weight"].action, TensorAction::kQuantize);
  EXPECT_EQ(t["model.fc.weight"].action, TensorAction::kQuantize);
  EXPECT_EQ(t["model.layers.0.self_attn.q_proj.weight"].action, TensorAction::kKeep);
  EXPECT_NE(t["model.layers.0.self_attn.q_proj.weight"].reason.find("DFlash: q/k/v stay dense"),
            std::string::npos);  // the family rule, which says why on every vLLM
  EXPECT_EQ(t["model.markov_head.markov_w2.weight"].action, TensorAction::kKeep);
  EXPECT_NE(t["model.markov_head.markov_w2.weight"].reason.find("ParallelLMHead"),
            std::string::npos)
      << t["model.markov_head.markov_w2.weight"].reason;
  EXPECT_EQ(t["model.markov_head.markov_w1.weight"].action, TensorAction::kKeep);
  EXPECT_NE(t["model.markov_head.markov_w1.weight"].reason.find("plain parameter"),
            std::string::npos);
  EXPECT_EQ(plan->family.vllm_method, "dspark");
  std::string serve = ServeLine(plan->family, "draft", "target");
  EXPECT_NE(serve.find(R"("method":"dspark")"), std::string::npos) << serve;
  // vLLM's default for dspark is block_size itself (config/speculative.py), not DFlash's - 1.
  EXPECT_NE(serve.find(R"("num_speculative_tokens":8)"), std::string::npos) << serve;
  EXPECT_NE(plan->family.speculative_tokens_reason.find("method dspark"), std::string::npos);
}

TEST(ModuleMapPlanTest, XPressHeadStaysDenseEveryWeight) {
  std::vector<TensorMeta> tensors =
      Square({"model.layers.0.mlp.down_proj.weight", "model.xpress_head.w1.weight",
              "model.xpress_head.w2.weight", "model.xpress_head.in_proj.weight",
              "model.xpress_head.down_g.weight"});
  ModelConfig config = Config(R"({"architectures":["Qwen3XPressModel"],"num_target_layers":36,
      "dflash_config":{"block_size":8}})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto t = ByTensor(*plan);
  EXPECT_EQ(t["model.layers.0.mlp.down_proj.weight"].action, TensorAction::kQuantize);
  for (const char* head : {"model.xpress_head.w1.weight", "model.xpress_head.w2.weight",
                           "model.xpress_head.in_proj.weight", "model.xpress_head.down_g.weight"}) {
    EXPECT_EQ(t[head].action, TensorAction::kKeep) << head;
  }
  EXPECT_NE(t["model.xpress_head.w2.weight"].reason.find("qwen3_xpress.py:"), std::string::npos)
      << t["model.xpress_head.w2.weight"].reason;
}

TEST(ModuleMapPlanTest, MiMoMtpInputProjectionStaysDense) {
  std::vector<TensorMeta> tensors =
      Square({"model.layers.0.mlp.down_proj.weight", "model.mtp_layers.0.input_proj.weight",
              "model.mtp_layers.0.mtp_block.mlp.down_proj.weight"});
  ModelConfig config = Config(R"({"architectures":["MiMoForCausalLM"],
      "num_nextn_predict_layers":1})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_NE(plan->map.mtp, nullptr);
  EXPECT_EQ(plan->map.mtp->name, "MiMoMTPModel");
  auto t = ByTensor(*plan);
  EXPECT_EQ(t["model.mtp_layers.0.input_proj.weight"].action, TensorAction::kKeep);
  EXPECT_NE(t["model.mtp_layers.0.input_proj.weight"].reason.find("no quantization scheme"),
            std::string::npos);
  EXPECT_EQ(t["model.mtp_layers.0.mtp_block.mlp.down_proj.weight"].action, TensorAction::kQuantize);
  EXPECT_EQ(t["model.layers.0.mlp.down_proj.weight"].action, TensorAction::kQuantize);
}

TEST(ModuleMapPlanTest, AMappedQuantizedLinearNamedLikeAnEmbeddingIsQuantized) {
  // vLLM 0.33 builds Qwen4-exp MTP's fc_embedding as a ColumnParallelLinear with a scheme: the
  // map, not the "embed" in its name, decides; the real embedding stays dense. The MTP weights
  // carry the checkpoint's "mtp." names, the only ones its load_weights takes (qwen4_exp/mtp.py
  // maps "mtp." to "model." and skips a "model.fc_embedding").
  std::vector<TensorMeta> tensors =
      Square({"model.embed_tokens.weight", "mtp.fc_embedding.weight", "mtp.fc_hidden.weight"});
  ModelConfig config = Config(R"({"architectures":["Qwen4ExpForCausalLM"],
      "num_nextn_predict_layers":1})");
  PlanOptions options;
  options.vllm_version = "0.33.0";
  auto plan = BuildPlan(tensors, config, options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_NE(plan->map.mtp, nullptr);
  EXPECT_EQ(plan->map.mtp->name, "Qwen4ExpMTP");
  auto t = ByTensor(*plan);
  EXPECT_EQ(t["mtp.fc_embedding.weight"].action, TensorAction::kQuantize)
      << t["mtp.fc_embedding.weight"].reason;
  EXPECT_EQ(t["mtp.fc_hidden.weight"].action, TensorAction::kQuantize);
  EXPECT_EQ(t["model.embed_tokens.weight"].action, TensorAction::kKeep);
  EXPECT_FALSE(t["model.embed_tokens.weight"].is_linear);
}

TEST(ModuleMapPlanTest, UnknownDraftArchitectureQuantizesStandardLinearsOnlyAndWarns) {
  std::vector<TensorMeta> tensors =
      Square({"layers.0.mlp.down_proj.weight", "layers.0.self_attn.o_proj.weight",
              "candidate_head.weight"});
  ModelConfig config = Config(R"({"architectures":["NoSuchDFlashDraft"],"num_target_layers":8,
      "dflash_config":{"block_size":4}})");
  auto plan = BuildPlan(tensors, config, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto t = ByTensor(*plan);
  EXPECT_EQ(t["layers.0.mlp.down_proj.weight"].action, TensorAction::kQuantize);
  EXPECT_EQ(t["candidate_head.weight"].action, TensorAction::kKeep);
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("does not know architecture NoSuchDFlashDraft"),
            std::string::npos);
  EXPECT_NE(plan->warnings[0].find("stay dense (candidate_head)"), std::string::npos)
      << plan->warnings[0];
  // --preset none: only the universal rules, every Linear weight quantized.
  PlanOptions none;
  none.preset = Preset::kNone;
  auto all = BuildPlan(tensors, config, none);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->quantized_count(), 3u);
  EXPECT_TRUE(all->warnings.empty());
}

TEST(ModuleMapPlanTest, UnknownPlainModelKeepsModelFreePtqsRuleAndWarns) {
  std::vector<TensorMeta> tensors =
      Square({"model.layers.0.mlp.down_proj.weight", "model.layers.0.self_attn.g_proj.weight"});
  auto plan =
      BuildPlan(tensors, Config(R"({"architectures":["NoSuchForCausalLM"]})"), PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->quantized_count(), 2u);
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("every Linear weight is quantized, as model_free_ptq does, but "
                                   "1 of them are not standard decoder Linears and are not "
                                   "verified (model.layers.0.self_attn.g_proj)"),
            std::string::npos)
      << plan->warnings[0];
}

TEST(ModuleMapPlanTest, AReleaseNewerThanEveryMapWarnsInThePlan) {
  std::vector<TensorMeta> tensors = Square({"model.layers.0.mlp.down_proj.weight"});
  PlanOptions options;
  options.vllm_version = "0.99.0";
  auto plan = BuildPlan(tensors, Config(R"({"architectures":["Qwen3ForCausalLM"]})"), options);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("not verified for vLLM 0.99.0"), std::string::npos);
  options.vllm_version = "newest";
  EXPECT_FALSE(
      BuildPlan(tensors, Config(R"({"architectures":["Qwen3ForCausalLM"]})"), options).ok());
}

TEST(ModuleMapPlanTest, AnArchitectureTheReleaseLacksIsRefusedInThePlan) {
  ModelConfig medusa = Config(R"({"architectures":["MedusaModel"]})");
  auto lacked = ReleaseLacksKind(Map("0.33.0"), medusa);
  ASSERT_TRUE(lacked.has_value());
  EXPECT_EQ(lacked->when, "removed after 0.32.0");
  EXPECT_EQ(lacked->serving_release, "0.32.0");
  ModelConfig xpress = Config(R"({"architectures":["Qwen3XPressModel"]})");
  ASSERT_TRUE(ReleaseLacksKind(Map("0.32.0"), xpress).has_value());
  EXPECT_EQ(ReleaseLacksKind(Map("0.32.0"), xpress)->when, "first appears in 0.33.0");
  EXPECT_FALSE(ReleaseLacksKind(Map("0.32.0"), medusa).has_value());
  EXPECT_FALSE(
      ReleaseLacksKind(Map("0.33.0"), Config(R"({"architectures":["NoSuchModel"]})")).has_value());
  std::vector<TensorMeta> tensors = Square({"blocks.0.layers.0.weight"});
  PlanOptions options;
  options.vllm_version = "0.33.0";
  auto plan = BuildPlan(tensors, medusa, options);
  EXPECT_EQ(plan.status().code(), StatusCode::kUsage);
  EXPECT_EQ(plan.status().message(),
            "vLLM 0.33.0 does not build MedusaModel (removed after 0.32.0): serve it on 0.32.0, or "
            "check/quantize with --vllm-version 0.32.0");
  // 0.32.0 has it, but builds its Linears with no quantization scheme: nothing to quantize.
  options.vllm_version = "0.32.0";
  plan = BuildPlan(tensors, medusa, options);
  EXPECT_EQ(plan.status().code(), StatusCode::kUsage);
  EXPECT_NE(plan.status().message().find("vLLM 0.32.0 builds no Linear of MedusaModel ("),
            std::string::npos)
      << plan.status().message();
}

TEST(ModuleMapTest, ASpeculatorsDSparkDraftIsNeverTakenForDeepSeekV4sClass) {
  // speculators 0.9.0's DSpark trainer writes architectures ["DSparkDraftModel"], the name of
  // DeepSeek-V4's DSpark class in the registry (built in 0.33's map); vLLM's speculators reader
  // builds Qwen3DSparkModel for it, keeping only an architecture the format builds.
  const ModuleMap& map = Map("0.33.0");
  ASSERT_TRUE(map.architectures.count("DSparkDraftModel"));
  ModelConfig trained = Config(R"({"speculators_model_type":"dspark",
      "architectures":["DSparkDraftModel"], "transformer_layer_config":{"model_type":"qwen3"}})");
  const MappedArchitecture* arch = FindArchitecture(map, trained);
  ASSERT_NE(arch, nullptr);
  EXPECT_EQ(arch->name, "Qwen3DSparkModel");
  // Without the speculators format, the name is the registry's DeepSeek-V4 class.
  EXPECT_EQ(FindArchitecture(map, Config(R"({"architectures":["DSparkDraftModel"]})"))->name,
            "DSparkDraftModel");
}

TEST(ModuleMapTest, SpeculatorsFormatsComeFromTheMap) {
  // vLLM's speculators package names the architecture per transformer_layer_config model_type
  // and fixes the method; "eagle" is no format vLLM registers (it refuses such a config).
  const ModuleMap& map = Map("0.32.0");
  ModelConfig peagle = Config(R"({"speculators_model_type":"peagle",
      "transformer_layer_config":{"model_type":"qwen3"}})");
  const MappedArchitecture* arch = FindArchitecture(map, peagle);
  ASSERT_NE(arch, nullptr);
  EXPECT_EQ(arch->name, "PeagleQwen3ForCausalLM");
  const SpeculatorsFormat* format = FindSpeculatorsFormat(map, peagle);
  ASSERT_NE(format, nullptr);
  EXPECT_EQ(format->method, "eagle3");
  EXPECT_EQ(format->fields,
            (std::vector<std::pair<std::string, std::string>>{{"parallel_drafting", "true"}}));
  ModelConfig llama = Config(R"({"speculators_model_type":"peagle",
      "transformer_layer_config":{"model_type":"llama"}})");
  EXPECT_EQ(FindArchitecture(map, llama)->name, "PeagleLlamaForCausalLM");
  ModelConfig gemma = Config(R"({"speculators_model_type":"eagle3",
      "transformer_layer_config":{"model_type":"gemma4_text"}})");
  EXPECT_EQ(SpeculatorsArchitecture(*FindSpeculatorsFormat(map, gemma), gemma), "");
  EXPECT_EQ(FindSpeculatorsFormat(map, Config(R"({"speculators_model_type":"eagle"})")), nullptr);
  EXPECT_EQ(FindSpeculatorsFormat(map, Config(R"({"architectures":["LlamaForCausalLM"]})")),
            nullptr);
}

TEST(ModuleMapPlanTest, PeagleServesWithItsFormatsFieldsAndTokenCount) {
  std::vector<TensorMeta> tensors =
      Square({"fc.weight", "layers.0.self_attn.q_proj.weight", "layers.0.mlp.down_proj.weight"});
  ModelConfig config = Config(R"({"speculators_model_type":"peagle",
      "transformer_layer_config":{"model_type":"qwen3","num_hidden_layers":1},
      "speculators_config":{"proposal_methods":[{"speculative_tokens":5}]}})");
  // P-EAGLE is 0.33's (vLLM 0.34.0 removed it: no Peagle* architecture, no "peagle" format).
  PlanOptions options;
  options.vllm_version = "0.33.0";
  auto plan = BuildPlan(tensors, config, options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->family.family, ModelFamily::kEagle3);
  std::string serve = ServeLine(plan->family, "draft", "target");
  EXPECT_NE(serve.find(R"("method":"eagle3","model":"draft","num_speculative_tokens":5,)"
                       R"("parallel_drafting":true})"),
            std::string::npos)
      << serve;
  EXPECT_EQ(ByTensor(*plan)["fc.weight"].action, TensorAction::kQuantize);
  options.vllm_version = "0.34.0";
  EXPECT_EQ(BuildPlan(tensors, config, options).status().message(),
            "vLLM 0.34.0 does not build PeagleQwen3ForCausalLM (removed after 0.33.0): serve it on "
            "0.33.0, or check/quantize with --vllm-version 0.33.0");
}

TEST(ModuleMapTest, AnOwnCheckpointMtpDraftIsFoundByItsModelType) {
  // Gemma4's assistant names Gemma4AssistantForCausalLM, which no registry lists: vLLM's
  // hf_config_override rewrites model_type gemma4_assistant to Gemma4MTPModel, and the map
  // records that rewrite for the architecture.
  ModelConfig assistant = Config(R"({"architectures":["Gemma4AssistantForCausalLM"],
      "model_type":"gemma4_assistant"})");
  for (const ModuleMap& map : ModuleMaps()) {
    const MappedArchitecture* arch = FindArchitecture(map, assistant);
    ASSERT_NE(arch, nullptr) << map.release;
    EXPECT_EQ(arch->name, "Gemma4MTPModel");
    EXPECT_EQ(arch->method(), "mtp");
  }
  // The rewrite of a target's model_type into its MTP layers' architecture (deepseek_v3 ->
  // DeepSeekMTPModel) is not a way in: those layers live in the target's checkpoint.
  EXPECT_EQ(FindArchitecture(Map("0.33.0"), Config(R"({"architectures":["UnknownForCausalLM"],
      "model_type":"deepseek_v3"})")),
            nullptr);
  // A mapped architecture wins over the model_type.
  EXPECT_EQ(FindArchitecture(Map("0.33.0"), Config(R"({"architectures":["Qwen3ForCausalLM"],
      "model_type":"gemma4_assistant"})"))
                ->name,
            "Qwen3ForCausalLM");
}

TEST(ModuleMapPlanTest, AnOwnCheckpointMtpDraftServesWithItsModel) {
  std::vector<TensorMeta> tensors = Square({"model.layers.0.self_attn.q_proj.weight"});
  auto plan = BuildPlan(tensors, Config(R"({"architectures":["Gemma4AssistantForCausalLM"],
      "model_type":"gemma4_assistant"})"),
                        PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const std::string& w : plan->warnings) {
    EXPECT_EQ(w.find("does not know architecture"), std::string::npos) << w;
  }
  std::string serve = ServeLine(plan->family, "draft", "target");
  EXPECT_NE(
      serve.find(R"(vllm serve target --speculative-config '{"method":"mtp","model":"draft",)"),
      std::string::npos)
      << serve;
}

// Step-3.5's MTP layers: the map records (by loading, not from source) that Step3p5MTP's
// load_weights wants the KV-cache parameters a compressed-tensors attention holds, so every
// compressed-tensors checkpoint is refused; vLLM's message names one of them.
ModelConfig Step3p5() {
  return Config(R"({"architectures":["Step3p5ForCausalLM"],"model_type":"step3p5",
      "num_hidden_layers":2,"num_nextn_predict_layers":1})");
}

TEST(ModuleMapTest, AnMtpLayerThatWantsKvCacheParamsIsRefusedUnlessTheyAreStored) {
  for (const ModuleMap& map : ModuleMaps()) {
    const MappedArchitecture* mtp = FindMtpArchitecture(map, Step3p5());
    ASSERT_NE(mtp, nullptr) << map.release;
    EXPECT_EQ(mtp->name, "Step3p5MTP");
    MapContext context;
    context.map = &map;
    context.mtp = mtp;
    auto refusal = RefusalForUnstoredParams(context, [](const std::string&) { return false; });
    // vLLM 0.34.0's step3p5_mtp.py dropped load_weights' MTP completeness check: it loads.
    if (CompareVllmReleases(*ParseVllmVersion(map.release), *ParseVllmVersion("0.34.0")) >= 0) {
      EXPECT_FALSE(refusal.has_value()) << map.release;
      continue;
    }
    ASSERT_TRUE(refusal.has_value()) << map.release;
    EXPECT_NE(refusal->message.find("Some parameters like model.layers.2.mtp_block.self_attn."
                                    "attn."),
              std::string::npos)
        << refusal->message;
    EXPECT_EQ(refusal->message.find("{param}"), std::string::npos) << refusal->message;
    EXPECT_NE(refusal->message.find("k_zero_point"), std::string::npos) << refusal->message;
    // A checkpoint that stores them (an asymmetric kv_cache_scheme) is not refused.
    EXPECT_FALSE(
        RefusalForUnstoredParams(context, [](const std::string&) { return true; }).has_value());
    // Storing some is not enough: the ones left are named.
    auto partly = RefusalForUnstoredParams(
        context, [](const std::string& n) { return n.ends_with("_scale"); });
    ASSERT_TRUE(partly.has_value());
    for (const std::string& m : partly->missing) EXPECT_TRUE(m.ends_with("_zero_point")) << m;
  }
}

TEST(ModuleMapPlanTest, AStep3p5CheckpointIsRefusedAsVllmRefusesItsMtpLayers) {
  // Any compressed-tensors Step3p5 checkpoint lacks the KV-cache parameters its MTP layers'
  // load_weights requires: written, it would fail check (vllm-refuses-unstored-params) and vLLM.
  std::vector<TensorMeta> tensors =
      Square({"model.layers.0.self_attn.q_proj.weight", "model.layers.2.self_attn.q_proj.weight",
              "model.layers.2.eh_proj.weight"});
  PlanOptions options;
  options.vllm_version = "0.33.0";
  auto plan = BuildPlan(tensors, Step3p5(), options);
  ASSERT_EQ(plan.status().code(), StatusCode::kUsage);
  EXPECT_NE(plan.status().message().find("refuses to load Step3p5MTP"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("without --speculative-config"), std::string::npos)
      << plan.status().message();
  // A model the map shows loading without them is planned, with no such warning.
  auto qwen = BuildPlan(Square({"model.layers.0.self_attn.q_proj.weight"}),
                        Config(R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3"})"),
                        PlanOptions{});
  ASSERT_TRUE(qwen.ok());
  for (const std::string& w : qwen->warnings) {
    EXPECT_EQ(w.find("refuses to load"), std::string::npos) << w;
  }
}

TEST(ModuleMapTest, ServeOptionsAreTheReleasesAndAcceptedPerDraft) {
  // The release's option with its values; per draft only those vLLM's SpeculativeConfig accepted.
  constexpr std::string_view kMap = R"({"schema_version": 3, "vllm_version": "0.33.0",
    "schemes": {"pack-quantized": {"base": true, "platform": "CUDA capability 90",
      "quantization_config": {"format": "pack-quantized"}}},
    "serve_options": {"draft_lm_head_quantization": {"values": ["fp8", "nvfp4"],
      "defined_at": "vllm/config/speculative.py:484", "doc": "Quantize the drafter's copy."}},
    "architectures": {
      "EagleX": {"role": "draft", "methods": ["eagle"], "error": null, "modules": {},
        "weight_reads": [], "scheme_verdicts": {},
        "serve_options": {"draft_lm_head_quantization": {"values": ["fp8", "nvfp4"],
                                                         "accepted": true,
                                                         "has_own_lm_head": true}}},
      "DSparkX": {"role": "draft", "methods": ["dspark"], "error": null, "modules": {},
        "weight_reads": [], "scheme_verdicts": {},
        "serve_options": {"draft_lm_head_quantization": {"values": ["fp8", "nvfp4"],
                                                         "accepted": false,
                                                         "error": "not for dspark"}}}}})";
  Result<ModuleMap> map = ParseModuleMap(kMap, "test");
  ASSERT_TRUE(map.ok()) << map.status().message();
  ASSERT_EQ(map->serve_options.count("draft_lm_head_quantization"), 1u);
  const ServeOption& option = map->serve_options.at("draft_lm_head_quantization");
  EXPECT_EQ(option.values, (std::vector<std::string>{"fp8", "nvfp4"}));
  EXPECT_EQ(option.defined_at, "vllm/config/speculative.py:484");
  const MappedArchitecture& eagle = map->architectures.at("EagleX");
  EXPECT_EQ(eagle.serve_options.at("draft_lm_head_quantization"),
            (std::vector<std::string>{"fp8", "nvfp4"}));
  EXPECT_TRUE(eagle.has_own_lm_head);
  EXPECT_TRUE(map->architectures.at("DSparkX").serve_options.empty());
  // The compiled-in maps: 0.32 has no such option, 0.33 has it for its MTP drafts.
  EXPECT_TRUE(Map("0.32.0").serve_options.empty());
  EXPECT_EQ(Map("0.33.0").serve_options.count("draft_lm_head_quantization"), 1u);
  EXPECT_EQ(Map("0.33.0")
                .architectures.at("DeepSeekMTPModel")
                .serve_options.count("draft_lm_head_quantization"),
            1u);
  EXPECT_TRUE(Map("0.33.0").architectures.at("Qwen3DSparkModel").serve_options.empty());
}

}  // namespace
}  // namespace spk
