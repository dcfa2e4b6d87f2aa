#include "check/vllm_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/test_util.h"

namespace spk {
namespace {

TEST(UnifiedDiff, OneReplacedLineWithContext) {
  std::vector<std::string> before = {"a", "b", "c", "d", "e", "f", "g", "h"};
  std::vector<std::string> after = before;
  after[4] = "E";
  EXPECT_EQ(UnifiedDiff("x.py", before, after),
            "--- a/x.py\n+++ b/x.py\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n");
}

TEST(UnifiedDiff, InsertionAtTopAndFarChangeGiveTwoHunks) {
  std::vector<std::string> before;
  for (int i = 0; i < 20; ++i) before.push_back("l" + std::to_string(i));
  std::vector<std::string> after = before;
  after.insert(after.begin() + 1, "new");
  after[16] = "changed";  // was l15
  std::string diff = UnifiedDiff("y.py", before, after);
  EXPECT_NE(diff.find("@@ -1,4 +1,5 @@\n l0\n+new\n l1\n l2\n l3\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("@@ -13,7 +14,7 @@\n l12\n l13\n l14\n-l15\n+changed\n l16\n"),
            std::string::npos)
      << diff;
  EXPECT_EQ(UnifiedDiff("y.py", before, before), "");
}

TEST(InspectVllmSource, FindsBothBlockers) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / "spk_vllm_source_test";
  fs::remove_all(root);
  fs::create_directories(root / "vllm/model_executor/models");
  std::ofstream(root / "vllm/model_executor/models/qwen3_dflash.py")
      << "import torch\n\nclass M:\n    def f(self, layers_attn):\n"
         "        kv = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]\n";
  std::ofstream(root / "vllm/model_executor/models/laguna_dflash.py")
      << "import torch\n\nclass L:\n    def g(self, name):\n"
         "        if scale_name := self.quant_config.get_cache_scale(name):\n"
         "            pass\n";
  std::ofstream(root / "vllm/model_executor/models/llama.py") << "x = a.qkv_proj.weight[0]\n";
  auto findings = InspectVllmSource(FileSystem::Default(), root.string());
  ASSERT_TRUE(findings.ok()) << findings.status().ToString();
  ASSERT_EQ(findings->size(), 2u);
  // Files in name order: laguna_dflash.py, then qwen3_dflash.py.
  std::swap((*findings)[0], (*findings)[1]);
  EXPECT_EQ((*findings)[0].code, "vllm-dflash-context-kv");
  EXPECT_EQ((*findings)[0].file, "vllm/model_executor/models/qwen3_dflash.py");
  EXPECT_NE((*findings)[0].fix.find("+        kv = [_spk_dense_weight(a.qkv_proj)[a.q_size :]"),
            std::string::npos)
      << (*findings)[0].fix;
  EXPECT_NE((*findings)[0].fix.find("+def _spk_dense_weight(layer):"), std::string::npos);
  EXPECT_EQ((*findings)[1].code, "vllm-laguna-get-cache-scale");
  EXPECT_NE((*findings)[1].fix.find("getattr(self.quant_config, \"get_cache_scale\""),
            std::string::npos);
  test_util::ExpectError(InspectVllmSource(FileSystem::Default(), (root / "nothing").string()),
                         StatusCode::kNotFound,
                         "nothing: no vllm/model_executor/models folder; pass the folder");
  fs::remove_all(root);
}

TEST(InspectVllmSource, ReadsTheDraftsUnderVllmModelsToo) {
  // vLLM 0.33 keeps some drafts under vllm/models/: beam/nvidia/dflash2.py reads the context K/V
  // weight directly; a guarded read there is not reported.
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / "spk_vllm_models_tree_test";
  fs::remove_all(root);
  fs::create_directories(root / "vllm/model_executor/models");
  fs::create_directories(root / "vllm/models/beam/nvidia");
  fs::create_directories(root / "vllm/models/muse_spark/common");
  std::ofstream(root / "vllm/models/beam/nvidia/dflash2.py")
      << "class B:\n    def f(self, layers):\n"
         "        w = torch.cat([a.qkv_proj.weight[a.q_size :] for a in layers])\n";
  std::ofstream(root / "vllm/models/muse_spark/common/dspark.py")
      << "class S:\n    def f(self, layers):\n"
         "        if all(isinstance(a.qkv_proj.quant_method, UnquantizedLinearMethod) for a in "
         "layers):\n"
         "            w = [a.qkv_proj.weight[a.q_size :] for a in layers]\n";
  auto findings = InspectVllmSource(FileSystem::Default(), root.string());
  ASSERT_TRUE(findings.ok()) << findings.status().ToString();
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_EQ((*findings)[0].code, "vllm-dflash-context-kv");
  EXPECT_EQ((*findings)[0].file, "vllm/models/beam/nvidia/dflash2.py");
  EXPECT_NE((*findings)[0].message.find("line(s) 3 "), std::string::npos) << (*findings)[0].message;
  fs::remove_all(root);
}

}  // namespace
}  // namespace spk
