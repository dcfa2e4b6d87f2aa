// ParseModuleMap's schema (a map of another schema, or a field missing or of the wrong type, is
// refused with its JSON path) and what a release lacks (ReleaseLacksKind), judged by small maps
// written here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/map_rules.h"
#include "checkpoint/plan.h"
#include "checkpoint/serve_line.h"
#include "checkpoint/test_util.h"
#include "checkpoint/vllm_module_map.h"

namespace spk {
namespace {

using Json = nlohmann::json;

// A map of one draft architecture with every field the reader reads.
Json SmallMap() {
  return Json::parse(R"({"schema_version": 2, "vllm_version": "0.34.0",
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
        "packed_modules_mapping": {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}},
      "Eagle3LlamaForCausalLM": {"error": null, "role": "draft", "methods": ["eagle3"],
        "weight_reads": [], "modules": {}},
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
  EXPECT_TRUE(arch.layers_follow_target);
  const MappedModule* qkv = FindModule(arch, "layers.0.self_attn.qkv_proj");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->read_at, "qwen3_dflash.py:7");
  EXPECT_EQ(map->not_built.at("OldModel"), "ImportError: gone");
  EXPECT_TRUE(map->batch_invariant.loads_without_kernel);
}

TEST(ModuleMapSchemaTest, AnotherSchemaIsRefused) {
  Json map = SmallMap();
  map.erase("schema_version");
  EXPECT_EQ(ParseError(map).message(),
            "M.json: schema_version: missing, but this sparkulator reads module maps of "
            "schema_version 2 (regenerate the map with this sparkulator's "
            "tools/vllm_module_map/generate.py --print)");
  map["schema_version"] = 3;
  EXPECT_EQ(ParseError(map).code(), StatusCode::kInvalidInput);
  EXPECT_NE(ParseError(map).message().find("schema_version: is 3, but"), std::string::npos);
  map["schema_version"] = "2";
  EXPECT_NE(ParseError(map).message().find("schema_version: is \"2\", but"), std::string::npos);
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
      {[](Json& m) { m["speculators"]["eagle3"]["architectures"]["llama"] = nullptr; },
       "M.json: speculators.eagle3.architectures.llama: expected a string, got null"},
      {[](Json& m) { m["kernels"]["wna16_batch_invariant"].erase("loads_without_kernel"); },
       "M.json: kernels.wna16_batch_invariant.loads_without_kernel: missing"},
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

TEST(ModuleMapLacksTest, AReleaseOlderThanEveryMapGetsTheUnknownArchitectureSafetyNet) {
  // A DFlash draft's non-standard Linear (fc) stays dense, as for an architecture no map knows.
  std::vector<TensorMeta> tensors = {
      {"fc.weight", DType::kBF16, {256, 512}, ""},
      {"layers.0.mlp.down_proj.weight", DType::kBF16, {256, 256}, ""}};
  ModelConfig config = test_util::ConfigFromJson(
      R"({"architectures":["DFlashDraftModel"],"model_type":"qwen3","num_target_layers":4,
          "dflash_config":{"target_layer_ids":[1,2]}})");
  PlanOptions options;
  options.vllm_release = "0.20.0";
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
