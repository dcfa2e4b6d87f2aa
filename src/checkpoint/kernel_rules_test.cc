#include "checkpoint/kernel_rules.h"

#include <gtest/gtest.h>

#include <set>

#include "checkpoint/plan.h"
#include "quant/scheme.h"

namespace spk {
namespace {

constexpr std::string_view kQkv = "model.layers.0.self_attn.qkv_proj";
constexpr std::string_view kQ = "model.layers.0.self_attn.q_proj";
constexpr std::string_view kK = "model.layers.0.self_attn.k_proj";
constexpr std::string_view kV = "model.layers.0.self_attn.v_proj";
constexpr std::string_view kO = "model.layers.0.self_attn.o_proj";

// Every scheme row that is not pack-quantized has exactly one row here (a new format has to say
// what vLLM's kernels do with its shapes), and every row names a real scheme.
TEST(KernelRules, OneRowPerFloatAndActivationScheme) {
  std::set<std::string_view> rows;
  for (const KernelRule& row : AllKernelRules()) {
    EXPECT_TRUE(rows.insert(row.scheme).second) << row.scheme;
    ASSERT_NE(FindScheme(row.scheme), nullptr) << row.scheme;
    EXPECT_NE(FindScheme(row.scheme)->format, "pack-quantized") << row.scheme;
    EXPECT_FALSE(row.kernels.empty() || row.condition.empty() || row.vllm_source.empty());
    EXPECT_EQ(row.rule != nullptr, !row.kernel.empty()) << row.scheme;
  }
  for (const QuantScheme& s : AllSchemes()) {
    EXPECT_EQ(KernelRuleFor(s.name) != nullptr, s.format != "pack-quantized") << s.name;
  }
}

GemmPartition Part(std::string_view module, int64_t out, int64_t in, int64_t fused_out,
                   bool last = true, int tp = 1) {
  return {.module = module,
          .vllm_module = kQkv,
          .out = out,
          .in = in,
          .fused_out = fused_out,
          .last_fused_member = last,
          .rows_split = tp > 1,
          .tp = tp};
}

// CutlassW4A8LinearKernel.can_implement: K and N of the fused GEMM, both multiples of 128.
TEST(KernelRules, W4afp8NeedsWhole128TilesOfTheFusedGemm) {
  const KernelRule& row = *KernelRuleFor("w4afp8");
  EXPECT_FALSE(KernelRuleBreak(row, Part(kK, 64, 1024, 1152)));  // 1024 + 64 + 64
  auto n = KernelRuleBreak(row, Part(kK, 64, 1024, 1088));       // 960 + 64 + 64
  ASSERT_TRUE(n);
  EXPECT_NE(n->find("K and N must be divisible by 128, got (1024, 1088)"), std::string::npos) << *n;
  EXPECT_NE(n->find("CutlassW4A8LinearKernel"), std::string::npos);
  auto k = KernelRuleBreak(row, Part(kO, 1024, 960, 1024));
  ASSERT_TRUE(k);
  EXPECT_NE(k->find("got (960, 1024)"), std::string::npos) << *k;
}

// validate_fp8_block_shape: every merged member but the last, and all at --tp > 1, in 128 rows.
TEST(KernelRules, Fp8BlockRowsPerMergedMemberAndTpShard) {
  const KernelRule& row = *KernelRuleFor("fp8-block");
  auto k = KernelRuleBreak(row, Part(kK, 192, 1024, 1408, /*last=*/false));
  ASSERT_TRUE(k);
  EXPECT_NE(k->find("Weight output_partition_size = 192 is not divisible by weight quantization "
                    "block_n = 128."),
            std::string::npos)
      << *k;
  EXPECT_FALSE(KernelRuleBreak(row, Part(kV, 192, 1024, 1408, /*last=*/true)));
  EXPECT_TRUE(KernelRuleBreak(row, Part(kV, 192, 1024, 1408, /*last=*/true, /*tp=*/2)));
  EXPECT_FALSE(KernelRuleBreak(row, Part(kQ, 256, 1024, 1408, /*last=*/false, /*tp=*/2)));
  // A row-parallel o_proj keeps its rows whole under --tp: vLLM does not check them.
  const QuantScheme& fp8_block = *FindScheme("fp8-block");
  EXPECT_FALSE(SchemeKernelRuleViolation(fp8_block, kO, kO, 192, 1024, 128, 2));
  EXPECT_TRUE(SchemeKernelRuleViolation(fp8_block, kV, kQkv, 384, 1024, 128, 2, 1792));
}

// The rows without a rule take any shape: vLLM pads or falls back to another kernel.
TEST(KernelRules, PaddingFormatsTakeAnyShape) {
  for (std::string_view scheme : {"w8a8", "fp8-dynamic", "nvfp4a16", "mxfp4a16", "mxfp8a16"}) {
    EXPECT_FALSE(KernelRuleBreak(*KernelRuleFor(scheme), Part(kK, 8, 96, 104, false, 4))) << scheme;
  }
}

// Through the plan's entry point: a column-parallel GEMM's N splits with --tp, and the fused
// rows decide, not the member's.
TEST(KernelRules, SchemeKernelRuleViolationJudgesTheFusedPartition) {
  const QuantScheme& w4afp8 = *FindScheme("W4AFP8");
  EXPECT_FALSE(SchemeKernelRuleViolation(w4afp8, kK, kQkv, 64, 1024, 128, 1, 1152));
  EXPECT_TRUE(SchemeKernelRuleViolation(w4afp8, kK, kQkv, 64, 1024, 128, 1, 1088));
  EXPECT_TRUE(SchemeKernelRuleViolation(w4afp8, kK, kQkv, 64, 1024, 128, 2, 1152));  // N 576
  EXPECT_FALSE(SchemeKernelRuleViolation(w4afp8, kK, kQkv, 128, 1024, 128, 2, 2304));
  // o_proj is row-parallel: --tp splits K, never N. (K % 128 is also W4AFP8's group rule.)
  EXPECT_FALSE(SchemeKernelRuleViolation(w4afp8, kO, kO, 1024, 1024, 128, 8));
  auto n = SchemeKernelRuleViolation(w4afp8, kO, kO, 960, 1024, 128, 2);
  ASSERT_TRUE(n);
  EXPECT_NE(n->find("got (512, 960)"), std::string::npos) << *n;
}

}  // namespace
}  // namespace spk
