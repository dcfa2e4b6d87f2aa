// check on a LongCat-Flash MTP checkpoint stored quantized: the release's load_weights takes only
// dense parameter names for its Linears (the map's load_weights_takes_only), so each such module
// is an error (vllm-load-weights-dense-only) naming vLLM's refusal; the dense source passes it.
// The checkpoint is written here, quantized with --preset none (the plan's map rules off, as
// another tool would write it: quantize's own plan keeps those Linears dense).
#include <gtest/gtest.h>

#include <fstream>

#include "check/check_test_util.h"

namespace spk {
namespace {

using namespace check_test;  // NOLINT: the test helpers

// A LongCat-Flash checkpoint's MTP layers alone, F16 [256, 256] Linears and a norm.
std::string LongCatMtp(const spk::testing::ScopedTempDir& dir) {
  const std::string src = dir / "src";
  EXPECT_TRUE(FileSystem::Default()->CreateDirectories(src).ok());
  Tensors tensors;
  for (const char* name : {"model.mtp.layers.0.eh_proj.weight",
                           "model.mtp.layers.0.transformer_layer.mlp.down_proj.weight"}) {
    TensorBytes t{{name, DType::kF16, {256, 256}}, std::vector<uint8_t>(256 * 256 * 2)};
    for (size_t i = 0; i < t.bytes.size(); i += 2) t.bytes[i + 1] = 0x20 + (i / 2) % 16;
    tensors[name] = std::move(t);
  }
  tensors["model.mtp.layers.0.enorm.m.weight"] = {
      {"model.mtp.layers.0.enorm.m.weight", DType::kF16, {256}}, std::vector<uint8_t>(512)};
  WriteShard(src + "/model.safetensors", tensors);
  std::ofstream(src + "/config.json") << R"({"architectures": ["LongcatFlashForCausalLM"],
    "model_type": "longcat_flash", "hidden_size": 256, "num_hidden_layers": 2,
    "num_nextn_predict_layers": 1, "torch_dtype": "float16"})";
  return src;
}

TEST(CheckLoadWeights, AQuantizedLongCatMtpLayerFailsWithVllmsRefusal) {
  spk::testing::ScopedTempDir dir;
  const std::string src = LongCatMtp(dir);
  CheckOptions v34;
  v34.vllm_version = "0.34.0";
  EXPECT_FALSE(HasCode(Check(src, v34), "vllm-load-weights-dense-only"));
  std::string q = Quantize(src, dir / "q", Preset::kNone);
  CheckReport r = Check(q, v34);
  auto refused = WithCode(r, "vllm-load-weights-dense-only");
  ASSERT_EQ(refused.size(), 2u) << RenderCheckReport(r);
  EXPECT_EQ(refused[0]->severity, Severity::kError);
  EXPECT_EQ(refused[0]->module, "model.mtp.layers.0.eh_proj");
  EXPECT_EQ(refused[0]->message,
            "stored quantized, but vLLM 0.34.0's load_weights for LongCatFlashMTPModel takes "
            "only .weight and .weight_scale_inv of model.mtp.layers.0.eh_proj, not the "
            ".weight_packed, .weight_scale, .weight_shape that w4a16 stores "
            "(vllm/model_executor/models/longcat_flash_mtp.py:263: KeyError: "
            "'model.mtp.layers.0.eh_proj.weight_packed')");
  EXPECT_FALSE(r.ok());
  // 0.32.0 and 0.33.0 refuse them the same way.
  for (const char* release : {"0.32.0", "0.33.0"}) {
    CheckOptions older;
    older.vllm_version = release;
    CheckReport then = Check(q, older);
    EXPECT_EQ(WithCode(then, "vllm-load-weights-dense-only").size(), 2u) << release;
  }
}

}  // namespace
}  // namespace spk
