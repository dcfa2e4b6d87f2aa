// ParseModuleMap's schema (a map of another schema, or a field missing or of the wrong type, is
// refused with its JSON path) and what a release lacks (ReleaseLacksKind), judged by small maps
// written here.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/test_util.h"
#include "plan/plan.h"
#include "vllm/map_rules.h"
#include "vllm/serve_line.h"
#include "vllm/vllm_build.h"
#include "vllm/vllm_module_map.h"

namespace spk {
namespace {

using Json = nlohmann::json;

// A map of one draft architecture with every field the reader reads.
Json SmallMap() {
  return Json::parse(R"({"schema_version": 3, "vllm_version": "0.34.0",
    "schemes": {
      "pack-quantized": {"base": true, "platform": "CUDA capability 90",
                         "quantization_config": {"format": "pack-quantized"}},
      "float-quantized": {"base": false, "platform": "CUDA capability 90",
                          "quantization_config": {"format": "float-quantized"}}},
    "architectures": {
      "DFlashDraftModel": {"error": null, "role": "draft", "methods": ["dflash"],
        "file": "vllm/model_executor/models/qwen3_dflash.py", "layer_offset": 2,
        "quant_config_from": null, "quant_config_packed_modules_mapping": null,
        "weight_reads": [{"name": "qkv_proj", "file": "qwen3_dflash.py", "line": 7,
                          "code": "w = self.qkv_proj.weight"}],
        "modules": {"model.layers.0.self_attn.qkv_proj": {"prefix": "model.layers.0.self_attn.qkv_proj",
          "class": "QKVParallelLinear", "quantized": true, "weight_read_directly": true,
          "scheme": null, "path": "model.layers.0.self_attn.qkv_proj"}},
        "other_params": ["model.norm.weight"],
        "packed_modules_mapping": {"qkv_proj": ["q_proj", "k_proj", "v_proj"]},
        "scheme_verdicts": {"float-quantized": {"error": null, "modules": {
          "model.layers.0.self_attn.qkv_proj": {"quantized": false, "scheme": null,
            "quant_method": "UnquantizedLinearMethod"}}}}},
      "Eagle3LlamaForCausalLM": {"error": null, "role": "draft", "methods": ["eagle3"],
        "weight_reads": [], "modules": {},
        "scheme_verdicts": {"float-quantized": {"error": "RuntimeError: no kernel",
                                                "error_at": "x.py:1", "modules": {}}}},
      "OldModel": {"error": "ImportError: gone", "role": "draft", "methods": ["eagle"]}},
    "speculators": {"eagle3": {"architectures": {"llama": "Eagle3LlamaForCausalLM"},
                               "speculative_config": {"method": "eagle3"}}},
    "kernels": {"wna16_batch_invariant": {"loads_without_kernel": true, "evidence": "x.py:1"}}})");
}

Status ParseError(const Json& map) { return ParseModuleMap(map.dump(), "M.json").status(); }

TEST(ModuleMapSchemaTest, AWellFormedMapParsesWithItsNulls) {
  Result<ModuleMap> map = ParseModuleMap(SmallMap().dump(), "M.json");
  ASSERT_TRUE(map.ok()) << map.status().message();
  EXPECT_EQ(map->release, "0.34.0");
  EXPECT_EQ(map->version.minor, 34);
  const MappedArchitecture& arch = map->architectures.at("DFlashDraftModel");
  EXPECT_TRUE(arch.layers_follow_target());
  const MappedModule* qkv = FindModule(arch, "layers.0.self_attn.qkv_proj");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->read_at, "qwen3_dflash.py:7");
  EXPECT_EQ(map->not_built.at("OldModel"), "ImportError: gone");
  EXPECT_TRUE(map->batch_invariant.loads_without_kernel);
  // The base verdict, and another format's where vLLM decides otherwise; a format the map does
  // not cover gets the base one.
  EXPECT_TRUE(map->schemes.at("pack-quantized").base);
  EXPECT_EQ(map->schemes.at("float-quantized").platform, "CUDA capability 90");
  EXPECT_TRUE(qkv->quantized);
  EXPECT_TRUE(qkv->QuantizedUnder(""));
  EXPECT_TRUE(qkv->QuantizedUnder("pack-quantized"));
  EXPECT_FALSE(qkv->QuantizedUnder("float-quantized"));
  EXPECT_TRUE(qkv->QuantizedUnder("nvfp4-pack-quantized"));
  EXPECT_TRUE(arch.refused_by_format.empty());
  EXPECT_EQ(map->architectures.at("Eagle3LlamaForCausalLM").refused_by_format.at("float-quantized"),
            "RuntimeError: no kernel");
}

TEST(ModuleMapSchemaTest, AnotherSchemaIsRefused) {
  Json map = SmallMap();
  map.erase("schema_version");
  EXPECT_EQ(ParseError(map).message(),
            "M.json: schema_version: missing, but this sparkulator reads module maps of "
            "schema_version 3 (regenerate the map with this sparkulator's "
            "tools/vllm_module_map/generate.py --print)");
  map["schema_version"] = 2;  // maps without scheme_verdicts
  EXPECT_EQ(ParseError(map).code(), StatusCode::kInvalidInput);
  EXPECT_NE(ParseError(map).message().find("schema_version: is 2, but"), std::string::npos);
  map["schema_version"] = "3";
  EXPECT_NE(ParseError(map).message().find("schema_version: is \"3\", but"), std::string::npos);
}

TEST(ModuleMapSchemaTest, AFieldOfTheWrongTypeIsRefusedWithItsPath) {
  const std::vector<std::pair<std::function<void(Json&)>, std::string>> cases = {
      {[](Json& m) { m["architectures"]["DFlashDraftModel"]["modules"] = "oops"; },
       "M.json: architectures.DFlashDraftModel.modules: expected an object, got a string"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["weight_reads"] = {{"x", 1}};
       },
       "M.json: architectures.DFlashDraftModel.weight_reads: expected an array, got an object"},
      {[](Json& m) { m["architectures"]["DFlashDraftModel"]["weight_reads"][0]["line"] = "7"; },
       "M.json: architectures.DFlashDraftModel.weight_reads[0].line: expected an integer, got a "
       "string"},
      {[](Json& m) { m["architectures"]["DFlashDraftModel"].erase("modules"); },
       "M.json: architectures.DFlashDraftModel.modules: missing"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["modules"]["model.layers.0.self_attn.qkv_proj"]
          ["quantized"] = nullptr;
       },
       "M.json: architectures.DFlashDraftModel.modules[\"model.layers.0.self_attn.qkv_proj\"]."
       "quantized: expected a boolean, got null"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["methods"] = {"dflash", 3};
       },
       "M.json: architectures.DFlashDraftModel.methods[1]: expected a string, got an integer"},
      {[](Json& m) { m["architectures"]["OldModel"]["error"] = 1; },
       "M.json: architectures.OldModel.error: expected a string, got an integer"},
      {[](Json& m) { m["architectures"]["DFlashDraftModel"]["load_fails"] = true; },
       "M.json: architectures.DFlashDraftModel.load_fails: expected a string, got a boolean"},
      {[](Json& m) { m["speculators"]["eagle3"]["architectures"]["llama"] = nullptr; },
       "M.json: speculators.eagle3.architectures.llama: expected a string, got null"},
      {[](Json& m) { m["kernels"]["wna16_batch_invariant"].erase("loads_without_kernel"); },
       "M.json: kernels.wna16_batch_invariant.loads_without_kernel: missing"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["load_weights_takes_only"] = {"weight"};
       },
       "M.json: architectures.DFlashDraftModel.load_weights_takes_only: expected an object, got "
       "an array"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["load_weights_takes_only"] = {
             {"params", "weight"}, {"error", "KeyError: 'x'"}};
       },
       "M.json: architectures.DFlashDraftModel.load_weights_takes_only.params: expected an "
       "array, got a string"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["load_weights_takes_only"] = {
             {"params", {"weight"}}};
       },
       "M.json: architectures.DFlashDraftModel.load_weights_takes_only.error: missing"},
      {[](Json& m) { m.erase("schemes"); }, "M.json: schemes: missing"},
      {[](Json& m) { m["schemes"]["float-quantized"]["base"] = true; },
       "M.json: schemes: 2 base formats, expected one"},
      {[](Json& m) { m["schemes"]["float-quantized"].erase("platform"); },
       "M.json: schemes.float-quantized.platform: missing"},
      {[](Json& m) { m["schemes"]["float-quantized"]["quantization_config"]["format"] = "x"; },
       "M.json: schemes.float-quantized.quantization_config.format: not the scheme's key"},
      {[](Json& m) { m["architectures"]["DFlashDraftModel"].erase("scheme_verdicts"); },
       "M.json: architectures.DFlashDraftModel.scheme_verdicts: missing"},
      {[](Json& m) { m["architectures"]["DFlashDraftModel"]["scheme_verdicts"] = Json::array(); },
       "M.json: architectures.DFlashDraftModel.scheme_verdicts: expected an object, got an "
       "array"},
      {[](Json& m) {
         m["architectures"]["Eagle3LlamaForCausalLM"]["scheme_verdicts"].erase("float-quantized");
       },
       "M.json: architectures.Eagle3LlamaForCausalLM.scheme_verdicts.float-quantized: missing"},
      {[](Json& m) {
         m["architectures"]["Eagle3LlamaForCausalLM"]["scheme_verdicts"]["int-quantized"] =
             Json::object({{"error", nullptr}, {"modules", Json::object()}});
       },
       "M.json: architectures.Eagle3LlamaForCausalLM.scheme_verdicts.int-quantized: not a "
       "non-base format of the map's schemes"},
      {[](Json& m) {
         m["architectures"]["Eagle3LlamaForCausalLM"]["scheme_verdicts"]["float-quantized"]
          ["error"] = 1;
       },
       "M.json: architectures.Eagle3LlamaForCausalLM.scheme_verdicts.float-quantized.error: "
       "expected a string, got an integer"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["scheme_verdicts"]["float-quantized"]["modules"]
          ["model.layers.0.self_attn.qkv_proj"]["quantized"] = "no";
       },
       "M.json: architectures.DFlashDraftModel.scheme_verdicts.float-quantized.modules[\"model."
       "layers.0.self_attn.qkv_proj\"].quantized: expected a boolean, got a string"},
      {[](Json& m) {
         m["architectures"]["DFlashDraftModel"]["scheme_verdicts"]["float-quantized"]["modules"]
          ["model.fc"] = Json::object({{"quantized", false}});
       },
       "M.json: architectures.DFlashDraftModel.scheme_verdicts.float-quantized.modules[\"model."
       "fc\"]: not a module of the architecture's modules"},
      {[](Json& m) { m["vllm_version"] = 34; },
       "M.json: vllm_version: expected a string, got an integer"},
      {[](Json& m) { m["vllm_version"] = "latest"; },
       "M.json: vllm_version: 'latest' is not a vLLM version (use MAJOR.MINOR[.PATCH], e.g. "
       "0.32.0)"},
  };
  for (const auto& [edit, message] : cases) {
    Json map = SmallMap();
    edit(map);
    Status status = ParseError(map);
    EXPECT_EQ(status.code(), StatusCode::kInvalidInput) << message;
    EXPECT_EQ(status.message(), message);
  }
}

TEST(ModuleMapSchemaTest, EveryCompiledInMapIsOfTheSchema) {
  for (const ModuleMap& map : ModuleMaps()) EXPECT_FALSE(map.stand_in) << map.release;
  EXPECT_EQ(DefaultVllmRelease(), ModuleMaps().back().release);
}

// DecideVllmBuild judges by the verdict of the scheme written: the map's DFlash qkv_proj is
// quantized under W4A16 and dense under FP8 (float-quantized), and its Eagle3 architecture was not
// built under FP8; NVFP4, a format the map does not cover, gets the base verdict.
TEST(ModuleMapSchemaTest, TheBuildDecisionUsesTheVerdictOfTheSchemeWritten) {
  Json j = SmallMap();
  j["architectures"]["DFlashDraftModel"]["modules"]["model.layers.0.self_attn.qkv_proj"]
   ["weight_read_directly"] = false;
  Result<ModuleMap> map = ParseModuleMap(j.dump(), "M.json");
  ASSERT_TRUE(map.ok()) << map.status().message();
  auto decide = [&](std::string_view arch, std::string_view scheme, const char* tensor) {
    ModelConfig config = test_util::ConfigFromJson(
        fmt::format(R"({{"architectures":["{}"],"model_type":"llama"}})", arch));
    FamilyDetection family = DetectFamily(config, {tensor}, Preset::kAuto);
    family.family_rules = true;
    family.family = ModelFamily::kLlm;  // no family rule: the map alone decides
    MapContext context = ResolveMapContext(&*map, config, family);
    VllmNaming naming;
    const BuildInputs in{.config = &config,
                         .family = &family,
                         .map = &context,
                         .naming = &naming,
                         .scheme = FindScheme(scheme),
                         .group_size = 128};
    return DecideVllmBuild(in, TensorMeta{tensor, DType::kBF16, {256, 256}, ""});
  };
  const char* qkv = "layers.0.self_attn.qkv_proj.weight";
  EXPECT_EQ(decide("DFlashDraftModel", "w4a16", qkv).built, Built::kQuantizedLinear);
  EXPECT_EQ(decide("DFlashDraftModel", "nvfp4a16", qkv).built, Built::kQuantizedLinear);
  BuildDecision fp8 = decide("DFlashDraftModel", "fp8-dynamic", qkv);
  EXPECT_EQ(fp8.built, Built::kDenseLinear);
  EXPECT_EQ(fp8.by, DenseBy::kMap);
  EXPECT_EQ(fp8.map.verdict, MapVerdict::kNoScheme);
  EXPECT_NE(fp8.reason.find("with no quantization scheme under float-quantized"), std::string::npos)
      << fp8.reason;
  // Eagle3 could not be built under FP8: its W4A16 verdict judges, with the warning.
  const char* down = "layers.0.mlp.down_proj.weight";
  EXPECT_EQ(decide("Eagle3LlamaForCausalLM", "fp8-block", down).map.verdict,
            MapVerdict::kNotListed);
  ModelConfig eagle3 = test_util::ConfigFromJson(R"({"architectures":["Eagle3LlamaForCausalLM"]})");
  FamilyDetection family = DetectFamily(eagle3, {down}, Preset::kAuto);
  MapContext context = ResolveMapContext(&*map, eagle3, family);
  EXPECT_EQ(SchemeNotBuiltWarning(context, "float-quantized"),
            "vLLM 0.34.0's module map could not build Eagle3LlamaForCausalLM () under a "
            "float-quantized quantization config (CUDA capability 90: RuntimeError: no kernel): "
            "its modules are judged by the W4A16 build's verdict, not verified for "
            "float-quantized");
  EXPECT_EQ(SchemeNotBuiltWarning(context, "pack-quantized"), "");
  EXPECT_EQ(SchemeNotBuiltWarning(context, "nvfp4-pack-quantized"), "");
}

// A release whose map lacks P-EAGLE's speculators format, which 0.33.0's has.
ModuleMap MapWithoutPeagle() {
  Json map = SmallMap();
  Result<ModuleMap> parsed = ParseModuleMap(map.dump(), "fixture");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return std::move(*parsed);
}

TEST(ModuleMapLacksTest, ASpeculatorsFormatTheReleaseLacksNamesTheReleaseThatHasIt) {
  const ModuleMap map = MapWithoutPeagle();
  ModelConfig peagle = test_util::ConfigFromJson(R"({"speculators_model_type":"peagle",
      "architectures":["PeagleLlamaForCausalLM"],
      "transformer_layer_config":{"model_type":"llama"}})");
  std::optional<LackedKind> lacked = ReleaseLacksKind(map, peagle);
  ASSERT_TRUE(lacked.has_value());
  EXPECT_EQ(lacked->message,
            "vLLM 0.34.0 does not build PeagleLlamaForCausalLM (removed after 0.33.0): serve it "
            "on 0.33.0, or check/quantize with --vllm-version 0.33.0");
  EXPECT_EQ(lacked->serving_release, "0.33.0");
  // The format the release has, and 0.33.0 itself, lack nothing.
  ModelConfig eagle3 = test_util::ConfigFromJson(R"({"speculators_model_type":"eagle3",
      "transformer_layer_config":{"model_type":"llama"}})");
  EXPECT_FALSE(ReleaseLacksKind(map, eagle3).has_value());
  auto v33 = ChooseModuleMap("0.33.0");
  ASSERT_TRUE(v33.ok());
  EXPECT_FALSE(ReleaseLacksKind(*v33->map, peagle).has_value());
  // The serve line never carries the format's fields where the release lacks the format.
  FamilyDetection family = DetectFamily(peagle, {"fc.weight"}, Preset::kAuto);
  ApplyModuleMap(ResolveMapContext(&map, peagle, family), peagle, &family);
  EXPECT_EQ(ServeLine(family, "d", "t").find("parallel_drafting"), std::string::npos);
}

TEST(ModuleMapLacksTest, AnArchitectureWhoseLoadWeightsAlwaysFailsIsLackedWhereItFails) {
  Json fixture = SmallMap();
  fixture["architectures"]["DFlashDraftModel"]["load_fails"] =
      "AttributeError: 'DFlashDraftModel' object has no attribute 'x'";
  Result<ModuleMap> map = ParseModuleMap(fixture.dump(), "M.json");
  ASSERT_TRUE(map.ok()) << map.status().message();
  ModelConfig dflash = test_util::ConfigFromJson(R"({"architectures":["DFlashDraftModel"]})");
  std::optional<LackedKind> lacked = ReleaseLacksKind(*map, dflash);
  ASSERT_TRUE(lacked.has_value());
  // No newer map has it: the newest older map that builds it and loads it serves it.
  EXPECT_EQ(lacked->serving_release, "0.33.0");
  EXPECT_EQ(
      lacked->message,
      "vLLM 0.34.0 cannot load DFlashDraftModel (vllm/model_executor/models/qwen3_dflash.py): "
      "its load_weights fails for every checkpoint, dense or quantized, with an error no "
      "weight name avoids (\"AttributeError: 'DFlashDraftModel' object has no attribute 'x'\", "
      "on the map's build): serve it on 0.33.0, or check/quantize with --vllm-version 0.33.0");
  // The compiled-in 0.33.0 map: EAGLE Mistral-Large-3's load_weights fails there; 0.34.0, the
  // first newer release that loads it, is named before 0.32.0.
  auto v33 = ChooseModuleMap("0.33.0");
  ASSERT_TRUE(v33.ok());
  ModelConfig ml3 =
      test_util::ConfigFromJson(R"({"architectures":["EagleMistralLarge3ForCausalLM"]})");
  lacked = ReleaseLacksKind(*v33->map, ml3);
  ASSERT_TRUE(lacked.has_value());
  EXPECT_EQ(lacked->serving_release, "0.34.0");
  EXPECT_NE(lacked->message.find("is_fused_shared_expert_enabled"), std::string::npos)
      << lacked->message;
  auto v34 = ChooseModuleMap("0.34.0");
  ASSERT_TRUE(v34.ok());
  EXPECT_FALSE(ReleaseLacksKind(*v34->map, ml3).has_value());
}

TEST(ModuleMapLacksTest, AReleaseOlderThanEveryMapGetsTheUnknownArchitectureSafetyNet) {
  // A DFlash draft's non-standard Linear (fc) stays dense, as for an architecture no map knows.
  std::vector<TensorMeta> tensors = {
      {"fc.weight", DType::kBF16, {256, 512}, ""},
      {"layers.0.mlp.down_proj.weight", DType::kBF16, {256, 256}, ""}};
  ModelConfig config = test_util::ConfigFromJson(
      R"({"architectures":["DFlashDraftModel"],"model_type":"qwen3","num_target_layers":4,
          "dflash_config":{"target_layer_ids":[1,2]}})");
  PlanOptions options;
  options.vllm_version = "0.20.0";
  auto plan = BuildPlan(tensors, config, options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->tensors[0].action, TensorAction::kKeep) << plan->tensors[0].reason;
  EXPECT_EQ(plan->tensors[1].action, TensorAction::kQuantize);
  ASSERT_GE(plan->warnings.size(), 2u);
  EXPECT_NE(plan->warnings[0].find("vLLM 0.20.0 is older than every module map"), std::string::npos)
      << plan->warnings[0];
}

}  // namespace
}  // namespace spk
