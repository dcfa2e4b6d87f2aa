// CheckCheckpoint on checkpoints written by `sparkulator example` and `quantize`: the findings
// that depend on the vLLM release (DFlash q/k/v, Laguna unfused names, EAGLE-3 aux layers), the
// literal ignore entries vLLM 0.32 misreads, the version the report is judged for, and the
// serve line's num_speculative_tokens. What vLLM 0.32 does with each case was observed on its CPU
// build (docs/check.md); these tests pin check's prediction of it.
#include "check/check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "check/check_test_util.h"

namespace spk {
namespace {

using namespace check_test;  // NOLINT: the test helpers

TEST(CheckVllmVersion, Qwen3DFlashQuantizedQkvLoadsOn032FailsOnOld) {
  spk::testing::ScopedTempDir dir;
  std::string q = Quantize(Example(dir, "src", "dflash"), dir / "q", Preset::kNone);
  CheckReport now = Check(q);
  EXPECT_TRUE(now.ok()) << RenderCheckReport(now);
  // The default is quantize's: the newest module map's release.
  EXPECT_EQ(now.vllm_version, DefaultVllmRelease());
  EXPECT_EQ(now.vllm_version_source, "the newest module map; --vllm-version V for another");
  auto info = WithCode(now, "dflash-qkv-quantized");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0]->severity, Severity::kInfo);
  EXPECT_NE(info[0]->message.find("6 quantized q/k/v"), std::string::npos) << info[0]->message;

  CheckOptions old;
  old.vllm_version = "0.25.1";
  CheckReport then = Check(q, old);
  ExpectErrorCodes(then, {"dflash-qkv-quantized"});
  auto errors = WithCode(then, "dflash-qkv-quantized");
  ASSERT_EQ(errors.size(), 6u);  // q, k, v of two layers, each named
  EXPECT_EQ(errors[0]->severity, Severity::kError);
  EXPECT_EQ(errors[0]->module, "layers.0.self_attn.k_proj");
  EXPECT_NE(errors[0]->message.find("no attribute 'weight'"), std::string::npos);

  CheckOptions between;
  between.vllm_version = "0.29.0";
  CheckReport unsure = Check(q, between);
  EXPECT_TRUE(unsure.ok());
  auto warn = WithCode(unsure, "dflash-qkv-quantized");
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_EQ(warn[0]->severity, Severity::kWarning);
  EXPECT_NE(warn[0]->message.find("not verified"), std::string::npos);

  CheckOptions bad;
  bad.vllm_version = "newest";
  bad.checkpoint = q;
  EXPECT_EQ(CheckCheckpoint(RunContext{}, bad).status().code(), StatusCode::kUsage);
}

void MakeLaguna(const std::string& dir) {
  EditConfig(dir, [](Json& j) { j["architectures"] = Json::array({"DFlashLagunaForCausalLM"}); });
}

TEST(CheckVllmVersion, LagunaUnfusedQkvNamesFailEvenDense) {
  spk::testing::ScopedTempDir dir;
  std::string src = Example(dir, "src", "dflash");
  MakeLaguna(src);
  CheckOptions v32;
  v32.vllm_version = "0.32.0";
  CheckReport r = Check(src, v32);
  ExpectErrorCodes(r, {"laguna-unfused-qkv"});
  auto f = WithCode(r, "laguna-unfused-qkv");
  ASSERT_EQ(f.size(), 1u);
  // vLLM 0.32: KeyError: 'layers.0.self_attn.k_proj.weight' (k sorts first, as vLLM hits it).
  EXPECT_EQ(f[0]->module, "layers.0.self_attn.k_proj (and 5 more)");
  EXPECT_NE(f[0]->message.find("KeyError: 'layers.0.self_attn.k_proj.weight'"), std::string::npos);
  EXPECT_NE(f[0]->fix.find("qkv_proj"), std::string::npos);
  EXPECT_FALSE(HasCode(Check(Example(dir, "qwen3", "dflash"), v32), "laguna-unfused-qkv"));
  // A release newer than the last one seen failing (the default may be one): not verified.
  CheckOptions v40;
  v40.vllm_version = "0.40.0";
  CheckReport newer = Check(src, v40);
  auto unsure = WithCode(newer, "laguna-unfused-qkv");
  ASSERT_EQ(unsure.size(), 1u);
  EXPECT_EQ(unsure[0]->severity, Severity::kWarning);
}

TEST(CheckVllmVersion, LagunaQuantizedQkvFailsOn032) {
  spk::testing::ScopedTempDir dir;
  std::string src = Example(dir, "src", "dflash");
  MakeLaguna(src);
  std::string q = Quantize(src, dir / "q", Preset::kNone);
  CheckOptions v32;
  v32.vllm_version = "0.32.0";
  CheckReport r = Check(q, v32);
  auto f = WithCode(r, "dflash-qkv-quantized");
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0]->severity, Severity::kError);
  EXPECT_NE(f[0]->message.find("laguna_dflash.py"), std::string::npos);
}

TEST(CheckVllmVersion, ExampleEagle3HeadNamesItsAuxLayers) {
  spk::testing::ScopedTempDir dir;
  std::string head = Example(dir, "head", "eagle3", 4);
  auto text = ReadWholeFile(head + "/config.json");
  ASSERT_TRUE(text.ok());
  Json j = Json::parse(*text);
  EXPECT_EQ(j["architectures"][0], "Eagle3Qwen3ForCausalLM");
  EXPECT_EQ(j["eagle_config"]["eagle_aux_hidden_state_layer_ids"], Json::parse("[2, 3, 4]"));
  CheckOptions four;
  four.target_layers = 4;
  CheckReport r = Check(head, four);
  EXPECT_TRUE(r.ok()) << RenderCheckReport(r);
  EXPECT_TRUE(WithCode(r, "eagle3-aux-layers-default").empty());
  // The same head on a 2-layer target: ids 3 and 4 collect nothing.
  CheckOptions two;
  two.target_layers = 2;
  const CheckReport two_report = Check(head, two);
  auto bad = WithCode(two_report, "target-layer-ids");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0]->message.find("holds 3, 4"), std::string::npos) << bad[0]->message;
  EXPECT_NE(r.serve.find("\"num_speculative_tokens\":3"), std::string::npos) << r.serve;
}

TEST(CheckVllmVersion, Eagle3HeadWithoutAuxLayerIds) {
  spk::testing::ScopedTempDir dir;
  std::string head = Example(dir, "head", "eagle3", 4);
  EditConfig(head, [](Json& j) {
    j.erase("eagle_config");
    j.erase("num_target_layers");
  });
  // Target layer count unknown: a warning that says how to check.
  CheckReport unknown = Check(head);
  auto w = WithCode(unknown, "eagle3-aux-layers-default");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0]->severity, Severity::kWarning);
  EXPECT_NE(w[0]->fix.find("--target-layers"), std::string::npos);
  // 4 layers: vLLM's default (2, 2, 1) collects [1, 2], fc takes 3 x 256 (vLLM 0.32: HTTP 500).
  CheckOptions four;
  four.target_layers = 4;
  CheckReport r = Check(head, four);
  ExpectErrorCodes(r, {"eagle3-aux-layers-default"});
  auto e = WithCode(r, "eagle3-aux-layers-default");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0]->message.find("[1, 2]"), std::string::npos) << e[0]->message;
  EXPECT_NE(e[0]->message.find("shape '[-1, 768]'"), std::string::npos);
  EXPECT_NE(e[0]->fix.find("[2, 3, 4]"), std::string::npos) << e[0]->fix;
  // 32 layers: the default (2, 16, 29) gives the three states fc takes.
  CheckOptions many;
  many.target_layers = 32;
  EXPECT_FALSE(HasCode(Check(head, many), "eagle3-aux-layers-default"));
}

// Literal ignore entries for DFlash q/k/v: vLLM 0.32 gives the draft's quant config no fused-name
// mapping, so only vLLM's fused name (or a re: pattern over shard and fused names) keeps q/k/v
// dense; check must keep flagging the others.
TEST(CheckIgnoreLiterals, DFlashQkvLiteralsThatVllmMisses) {
  spk::testing::ScopedTempDir dir;
  std::string q = Quantize(Example(dir, "src", "dflash"), dir / "q", Preset::kAuto);
  ASSERT_TRUE(Check(q).ok());
  auto with_ignore = [&](const std::string& name, std::vector<std::string> ignore,
                         CheckOptions o = {}) {
    std::string d = dir / name;
    std::filesystem::copy(q, d, std::filesystem::copy_options::recursive);
    EditConfig(d, [&](Json& j) {
      Json list = Json::array({"lm_head", "re:.*norm"});
      for (const std::string& e : ignore) list.push_back(e);
      j["quantization_config"]["ignore"] = list;
    });
    return Check(d, o);
  };
  CheckReport checkpoint_names =
      with_ignore("ckpt", {"layers.0.self_attn.q_proj", "layers.0.self_attn.k_proj",
                           "layers.0.self_attn.v_proj", "layers.1.self_attn.q_proj",
                           "layers.1.self_attn.k_proj", "layers.1.self_attn.v_proj"});
  // q/k/v are dense, and with no entry matching its qkv_proj vLLM expects them quantized.
  ExpectErrorCodes(checkpoint_names, {"ignore-matches-nothing", "vllm-expects-quantized"});
  EXPECT_EQ(WithCode(checkpoint_names, "ignore-matches-nothing").size(), 6u);
  CheckReport shard_names =
      with_ignore("shards", {"model.layers.8.self_attn.q_proj", "model.layers.8.self_attn.k_proj",
                             "model.layers.8.self_attn.v_proj", "model.layers.9.self_attn.q_proj",
                             "model.layers.9.self_attn.k_proj", "model.layers.9.self_attn.v_proj"});
  ExpectErrorCodes(shard_names, {"ignore-needs-fused-mapping", "vllm-expects-quantized"});
  auto needs = WithCode(shard_names, "ignore-needs-fused-mapping");
  ASSERT_EQ(needs.size(), 2u);
  EXPECT_EQ(needs[0]->module, "model.layers.8.self_attn.qkv_proj");
  EXPECT_EQ(needs[0]->severity, Severity::kError);
  EXPECT_NE(needs[0]->message.find("no attribute 'data'"), std::string::npos) << needs[0]->message;
  // Judged by what vLLM did when the map was made (its draft quant config held no mapping), not
  // by a line of its source: a release that gives drafts the mapping stops raising it.
  EXPECT_NE(needs[0]->message.find("module map: building DFlashDraftModel, vLLM asked a quant "
                                   "config holding no packed_modules_mapping"),
            std::string::npos)
      << needs[0]->message;
  // vLLM builds the fused modules quantized, and the checkpoint holds q/k/v dense.
  EXPECT_EQ(WithCode(shard_names, "vllm-expects-quantized").size(), 6u);

  // vLLM's fused name, literally: vLLM 0.32 compares exactly that name and keeps q/k/v dense.
  const std::vector<std::string> fused = {"model.layers.8.self_attn.qkv_proj",
                                          "model.layers.9.self_attn.qkv_proj"};
  CheckReport fused_names = with_ignore("fused", fused);
  EXPECT_TRUE(fused_names.ok()) << RenderCheckReport(fused_names);
  EXPECT_TRUE(WithCode(fused_names, "ignore-needs-fused-mapping").empty());
  EXPECT_TRUE(WithCode(fused_names, "vllm-expects-quantized").empty());
  // A re: pattern over the fused name loads too, also one that only the fused name matches.
  CheckReport pattern = with_ignore("re", {"re:.*self_attn\\.(q|k|v|qkv)_proj$"});
  EXPECT_TRUE(pattern.ok()) << RenderCheckReport(pattern);
  EXPECT_TRUE(WithCode(pattern, "ignore-needs-fused-mapping").empty());
  CheckReport fused_only = with_ignore("re_fused", {"re:.*qkv_proj$"});
  EXPECT_TRUE(fused_only.ok()) << RenderCheckReport(fused_only);
  // Releases the no-mapping rule was not verified on: with a mapping, vLLM would compare the
  // shard names, which the pattern misses; it may go either way.
  CheckOptions old;
  old.vllm_version = "0.25.1";
  CheckReport unverified = with_ignore("re_old", {"re:.*qkv_proj$"}, old);
  auto either = WithCode(unverified, "ignore-needs-fused-mapping");
  ASSERT_EQ(either.size(), 2u);
  EXPECT_EQ(either[0]->severity, Severity::kError);
  EXPECT_NE(either[0]->message.find("not verified"), std::string::npos) << either[0]->message;
}

TEST(CheckVllmTree, SourceTreeWithoutVersionIsJudgedByItsCode) {
  spk::testing::ScopedTempDir dir;
  std::string q = Quantize(Example(dir, "src", "dflash"), dir / "q", Preset::kNone);
  std::string models = dir / "tree/vllm/model_executor/models";
  std::filesystem::create_directories(models);
  std::ofstream(models + "/qwen3_dflash.py")
      << "class M:\n    def _build_context_kv_buffers(self, layers_attn):\n"
         "        kv = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]\n";
  CheckOptions o;
  o.vllm_dir = dir / "tree";
  CheckReport r = Check(q, o);
  ExpectErrorCodes(r, {"dflash-qkv-quantized"});
  EXPECT_EQ(r.vllm_tree, dir / "tree");
  EXPECT_NE(r.vllm_version_source.find("judged by its code"), std::string::npos)
      << r.vllm_version_source;
  auto f = WithCode(r, "dflash-qkv-quantized");
  ASSERT_FALSE(f.empty());
  EXPECT_NE(f[0]->message.find("line(s) 3"), std::string::npos) << f[0]->message;
  Json json = CheckReportToJson(r);
  EXPECT_EQ(json["vllm_version"], DefaultVllmRelease());
  EXPECT_TRUE(json.contains("vllm_version_source"));
}

// A rule is reported once, at the level it belongs to: a group size without a kernel is one
// config-level finding, not one per module again as group, scale-shape and kernel findings.
TEST(CheckOnce, UnsupportedGroupSizeIsOneFinding) {
  spk::testing::ScopedTempDir dir;
  std::string q = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto);
  EditConfig(q, [](Json& j) {
    for (auto& [name, group] : j["quantization_config"]["config_groups"].items()) {
      group["weights"]["group_size"] = 96;
    }
  });
  CheckReport r = Check(q);
  ExpectErrorCodes(r, {"group-size-unsupported"});
  ASSERT_EQ(r.findings.size(), 1u) << RenderCheckReport(r);
  EXPECT_EQ(r.findings[0].code, "group-size-unsupported");
}

// One config-level fault per row, planted in a clean `example` + `quantize` LLM, and the finding
// code (and severity) it must give.
struct ConfigFault {
  const char* name;
  std::function<void(Json&)> plant;
  const char* code;
  Severity severity;
};

TEST(CheckCodes, EachConfigFaultGivesItsCode) {
  spk::testing::ScopedTempDir dir;
  std::string clean = Quantize(Example(dir, "src", "llm"), dir / "q", Preset::kAuto);
  ASSERT_TRUE(Check(clean).findings.empty());
  auto weights = [](Json& j) -> Json& {
    return j["quantization_config"]["config_groups"]["group_0"]["weights"];
  };
  const std::vector<ConfigFault> faults = {
      {"format", [](Json& j) { j["quantization_config"]["format"] = "fancy-quantized"; },
       "unknown-format", Severity::kError},
      {"known_format", [](Json& j) { j["quantization_config"]["format"] = "marlin-24"; },
       "format-not-checked", Severity::kWarning},
      {"scheme", [&](Json& j) { weights(j)["type"] = "float"; }, "unknown-scheme",
       Severity::kError},
      {"key", [&](Json& j) { weights(j)["scale_dtype"] = "bfloat16"; }, "quant-args-key",
       Severity::kError},
      {"null_key", [&](Json& j) { weights(j)["zp_dtype"] = nullptr; }, "quant-args-key",
       Severity::kWarning},
      {"asym8",
       [&](Json& j) {
         weights(j)["num_bits"] = 8;
         weights(j)["symmetric"] = false;
       },
       "asym-int8-no-marlin", Severity::kWarning},
      {"width3", [&](Json& j) { weights(j)["num_bits"] = 3; }, "no-vllm-kernel", Severity::kError},
      {"ignore_regex", [](Json& j) { j["quantization_config"]["ignore"] = {"re:(unclosed"}; },
       "ignore-invalid-regex", Severity::kError},
      {"target_regex",
       [](Json& j) {
         j["quantization_config"]["config_groups"]["group_0"]["targets"] = {"re:[bad"};
       },
       "target-invalid-regex", Severity::kError},
      {"activations",
       [](Json& j) {
         j["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {
             {"num_bits", 8}, {"type", "int"}};
       },
       "not-weight-only", Severity::kWarning},
      {"ignore_nothing",
       [](Json& j) {
         j["quantization_config"]["ignore"] = {"lm_head", "model.nothing"};
       },
       "ignore-matches-nothing", Severity::kWarning},
      {"ignored_packed",
       [](Json& j) {
         j["quantization_config"]["ignore"] = {"lm_head", "model.layers.0.mlp.down_proj"};
       },
       "vllm-expects-dense", Severity::kError},
      {"no_quant_config", [](Json& j) { j.erase("quantization_config"); }, "vllm-expects-dense",
       Severity::kError},
      {"quant_config_shape", [&](Json& j) { weights(j)["num_bits"] = "four"; },
       "quant-config-invalid", Severity::kError},
      {"other_method",
       [](Json& j) {
         j["quantization_config"] = {{"quant_method", "fp8"}};
       },
       "quant-method-not-checked", Severity::kWarning},
  };
  for (const ConfigFault& fault : faults) {
    std::string d = dir / fault.name;
    std::filesystem::copy(clean, d, std::filesystem::copy_options::recursive);
    EditConfig(d, fault.plant);
    CheckReport r = Check(d);
    auto found = WithCode(r, fault.code);
    ASSERT_FALSE(found.empty()) << fault.name << ":\n" << RenderCheckReport(r);
    EXPECT_EQ(found[0]->severity, fault.severity) << fault.name;
  }
  // The folder itself.
  std::string broken = dir / "broken";
  std::filesystem::copy(clean, broken, std::filesystem::copy_options::recursive);
  ASSERT_TRUE(WriteWholeFile(broken + "/config.json", "{not json").ok());
  EXPECT_TRUE(HasCode(Check(broken), "config-invalid"));
  std::filesystem::remove(broken + "/config.json");
  EXPECT_TRUE(HasCode(Check(broken), "config-missing"));
  std::string empty = dir / "empty";
  std::filesystem::create_directories(empty);
  ASSERT_TRUE(WriteWholeFile(empty + "/config.json", "{}").ok());
  EXPECT_TRUE(HasCode(Check(empty), "no-safetensors"));
  // Kernel rules per --tp: o_proj is row-parallel, 256 in splits into 64 at --tp 4.
  CheckOptions tp4;
  tp4.tp = 4;
  const CheckReport tp4_report = Check(clean, tp4);  // WithCode points into the report
  auto kernel = WithCode(tp4_report, "kernel-rule");
  ASSERT_FALSE(kernel.empty());
  EXPECT_EQ(kernel[0]->module.find("o_proj") != std::string::npos ||
                kernel[0]->module.find("down_proj") != std::string::npos,
            true)
      << kernel[0]->module;
}

TEST(CheckCodes, DraftOffsetUnknownAndTargetPairing) {
  spk::testing::ScopedTempDir dir;
  std::string draft = Example(dir, "draft", "dflash");
  EditConfig(draft, [](Json& j) { j.erase("num_target_layers"); });
  EXPECT_TRUE(HasCode(Check(draft), "draft-offset-unknown"));
  // A target with another hidden size and too few layers for target_layer_ids 1, 3, 5.
  std::string target = Example(dir, "target", "llm");
  EditConfig(target, [](Json& j) {
    j["hidden_size"] = 512;
    j["num_hidden_layers"] = 4;
  });
  CheckOptions o;
  o.target = target;
  CheckReport r = Check(Example(dir, "draft2", "dflash"), o);
  EXPECT_FALSE(WithCode(r, "target-hidden-size").empty());
  EXPECT_FALSE(WithCode(r, "target-layer-count").empty());
  EXPECT_FALSE(WithCode(r, "target-layer-ids").empty());
}

TEST(CheckCodes, AnArchitectureTheReleaseLacksIsAnError) {
  spk::testing::ScopedTempDir dir;
  std::string medusa = Example(dir, "medusa", "llm");
  EditConfig(medusa, [](Json& j) { j["architectures"] = Json::array({"MedusaModel"}); });
  CheckOptions v33;
  v33.vllm_version = "0.33.0";
  CheckReport r = Check(medusa, v33);
  auto lacks = WithCode(r, "vllm-release-lacks-architecture");
  ASSERT_EQ(lacks.size(), 1u) << RenderCheckReport(r);
  EXPECT_EQ(lacks[0]->message,
            "vLLM 0.33.0 does not build MedusaModel (removed after 0.32.0): serve it on 0.32.0, or "
            "check/quantize with --vllm-version 0.32.0");
  CheckOptions v32;
  v32.vllm_version = "0.32.0";
  EXPECT_FALSE(HasCode(Check(medusa, v32), "vllm-release-lacks-architecture"));

  std::string xpress = Example(dir, "xpress", "llm");
  EditConfig(xpress, [](Json& j) { j["architectures"] = Json::array({"Qwen3XPressModel"}); });
  CheckReport old = Check(xpress, v32);
  lacks = WithCode(old, "vllm-release-lacks-architecture");
  ASSERT_EQ(lacks.size(), 1u) << RenderCheckReport(old);
  EXPECT_NE(lacks[0]->message.find("first appears in 0.33.0"), std::string::npos)
      << lacks[0]->message;
  EXPECT_FALSE(HasCode(Check(xpress, v33), "vllm-release-lacks-architecture"));
}

// A release whose map (here a small one written by the test) lacks P-EAGLE's speculators format,
// which 0.33.0's has: the kind is named with the release that serves it, never as an unknown
// format, and the serve line carries no parallel_drafting.
TEST(CheckCodes, ASpeculatorsFormatTheReleaseLacksIsAnError) {
  spk::testing::ScopedTempDir dir;
  std::string peagle = Example(dir, "peagle", "eagle3-speculators");
  EditConfig(peagle, [](Json& j) {
    j["speculators_model_type"] = "peagle";
    j["architectures"] = Json::array({"PeagleQwen3ForCausalLM"});
  });
  std::ofstream(dir / "v34.json") << R"({"schema_version": 3, "vllm_version": "0.34.0",
    "schemes": {"pack-quantized": {"base": true, "platform": "CUDA capability 90",
      "quantization_config": {"format": "pack-quantized"}}},
    "architectures": {"Eagle3LlamaForCausalLM": {"error": null, "role": "draft",
      "methods": ["eagle3"], "weight_reads": [], "modules": {}, "scheme_verdicts": {}}},
    "speculators": {"eagle3": {"architectures": {"llama": "Eagle3LlamaForCausalLM"},
                               "speculative_config": {"method": "eagle3"}}}})";
  CheckOptions v34;
  v34.vllm_module_map = dir / "v34.json";
  CheckReport r = Check(peagle, v34);
  auto lacks = WithCode(r, "vllm-release-lacks-architecture");
  ASSERT_EQ(lacks.size(), 1u) << RenderCheckReport(r);
  EXPECT_EQ(lacks[0]->message,
            "vLLM 0.34.0 does not build PeagleQwen3ForCausalLM (removed after 0.33.0): serve it "
            "on 0.33.0, or check/quantize with --vllm-version 0.33.0");
  EXPECT_FALSE(HasCode(r, "vllm-speculators-format-unknown")) << RenderCheckReport(r);
  EXPECT_EQ(r.serve.find("parallel_drafting"), std::string::npos) << r.serve;
  // An unknown format lists the formats of the release judged.
  EditConfig(peagle, [](Json& j) { j["speculators_model_type"] = "qeagle"; });
  CheckReport qeagle = Check(peagle, v34);
  auto unknown = WithCode(qeagle, "vllm-speculators-format-unknown");
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0]->message,
            "vLLM 0.34.0 does not read speculators_model_type 'qeagle' (it reads 'eagle3'): it "
            "stops with ValueError before loading");
}

TEST(CheckServeLine, DFlashTokensFollowBlockSize) {
  spk::testing::ScopedTempDir dir;
  std::string src = Example(dir, "src", "dflash");
  EditConfig(src, [](Json& j) { j["block_size"] = 4; });
  CheckReport r = Check(src);
  EXPECT_NE(r.serve.find("\"num_speculative_tokens\":3"), std::string::npos) << r.serve;
}

}  // namespace
}  // namespace spk
