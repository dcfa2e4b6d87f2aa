#include "vllm/kernel_rules.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>

#include "quant/scheme.h"
#include "vllm/gemm.h"

namespace spk {
namespace {

constexpr std::string_view kQkv = "model.layers.0.self_attn.qkv_proj";
constexpr std::string_view kQ = "model.layers.0.self_attn.q_proj";
constexpr std::string_view kK = "model.layers.0.self_attn.k_proj";
constexpr std::string_view kV = "model.layers.0.self_attn.v_proj";
constexpr std::string_view kO = "model.layers.0.self_attn.o_proj";

const KernelRule& RowOf(std::string_view scheme) { return *KernelRuleFor(*FindScheme(scheme)); }

// JudgeGemm for `scheme` at `group`: what the plan and check ask.
GemmJudgement Judge(std::string_view scheme, std::string_view module, std::string_view vllm_module,
                    int64_t out, int64_t in, int tp, int64_t fused_out = 0, int64_t group = 128) {
  return JudgeGemm(
      *FindScheme(scheme), group,
      {.module = module, .vllm_module = vllm_module, .out = out, .in = in, .fused_out = fused_out},
      tp);
}

// Every scheme row has exactly one row here (a new format has to say what vLLM's kernels do with
// its shapes), and every row names a real scheme; the pack-quantized rows carry vLLM 0.32's
// per-platform rules beside the old Marlin tile rule the plan keeps.
TEST(KernelRules, OneRowPerScheme) {
  std::set<std::string_view> rows;
  for (const KernelRule& row : AllKernelRules()) {
    EXPECT_TRUE(rows.insert(row.scheme).second) << row.scheme;
    ASSERT_NE(FindScheme(row.scheme), nullptr) << row.scheme;
    const QuantScheme& scheme = *FindScheme(row.scheme);
    // A kernel chooser for the 4- and 8-bit integer rows; the other widths have no kernel.
    const bool chooser =
        scheme.format == "pack-quantized" && (scheme.bits == 4 || scheme.bits == 8);
    EXPECT_EQ(chooser, row.cuda_rule != nullptr) << row.scheme;
    EXPECT_EQ(chooser, row.cpu_rule != nullptr) << row.scheme;
    if (scheme.format == "pack-quantized" && !chooser) {
      EXPECT_NE(row.kernels.find("none:"), std::string_view::npos) << row.scheme;
      EXPECT_FALSE(row.cpu_runs_format) << row.scheme;
    }
    EXPECT_FALSE(row.kernels.empty() || row.condition.empty() || row.vllm_source.empty());
    EXPECT_EQ(row.rule != nullptr, !row.kernel.empty()) << row.scheme;
  }
  for (const QuantScheme& s : AllSchemes()) {
    const KernelRule* row = KernelRuleFor(s);
    ASSERT_NE(row, nullptr) << s.name;
    EXPECT_EQ(row->scheme, s.name);
  }
  EXPECT_EQ(rows.size(), AllSchemes().size());
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
// The model card names a scheme's kernels from its scheme row (QuantScheme::kernels); every vLLM
// kernel class it names is one this table lists for the scheme, so the two never disagree.
TEST(KernelRules, TheSchemeRowsKernelsAreThisTablesKernels) {
  for (const QuantScheme& s : AllSchemes()) {
    const KernelRule* row = KernelRuleFor(s);
    const std::string words(s.kernels);
    for (size_t end = words.find("Kernel"); end != std::string::npos;
         end = words.find("Kernel", end + 1)) {
      size_t begin = end;
      while (begin > 0 && std::isalnum(static_cast<unsigned char>(words[begin - 1]))) --begin;
      const std::string kernel = words.substr(begin, end + 6 - begin);
      EXPECT_NE(row->kernels.find(kernel), std::string_view::npos) << s.name << ": " << kernel;
    }
  }
}

TEST(KernelRules, W4afp8NeedsWhole128TilesOfTheFusedGemm) {
  const KernelRule& row = RowOf("w4afp8");
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
  const KernelRule& row = RowOf("fp8-block");
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
  EXPECT_FALSE(Judge("fp8-block", kO, kO, 192, 1024, 2).plan_rule);
  EXPECT_TRUE(Judge("fp8-block", kV, kQkv, 384, 1024, 2, 1792).plan_rule);
}

// The rows without a rule take any shape: vLLM pads or falls back to another kernel.
TEST(KernelRules, PaddingFormatsTakeAnyShape) {
  for (std::string_view scheme : {"w8a8", "fp8-dynamic", "nvfp4a16", "mxfp4a16", "mxfp8a16"}) {
    EXPECT_FALSE(KernelRuleBreak(RowOf(scheme), Part(kK, 8, 96, 104, false, 4))) << scheme;
  }
}

// Through the plan's entry point: a column-parallel GEMM's N splits with --tp, and the fused
// rows decide, not the member's.
TEST(KernelRules, JudgeGemmJudgesTheFusedPartition) {
  EXPECT_FALSE(Judge("w4afp8", kK, kQkv, 64, 1024, 1, 1152).plan_rule);
  EXPECT_TRUE(Judge("w4afp8", kK, kQkv, 64, 1024, 1, 1088).plan_rule);
  EXPECT_TRUE(Judge("w4afp8", kK, kQkv, 64, 1024, 2, 1152).plan_rule);  // N 576
  EXPECT_FALSE(Judge("w4afp8", kK, kQkv, 128, 1024, 2, 2304).plan_rule);
  // o_proj is row-parallel: --tp splits K, never N. (K % 128 is also W4AFP8's group rule.)
  EXPECT_FALSE(Judge("w4afp8", kO, kO, 1024, 1024, 8).plan_rule);
  auto n = Judge("w4afp8", kO, kO, 960, 1024, 2).plan_rule;
  ASSERT_TRUE(n);
  EXPECT_NE(n->find("got (512, 960)"), std::string::npos) << *n;
}

// An EAGLE-3 Llama/Qwen3 head's layer-0 qkv_proj [*, 2H] is first built with H inputs (the decoder
// layer's own, then replaced): vLLM 0.32 refused a W4A16 g128 SmolLM2-135M head (H 576) on that
// first build, so the plan and check judge it too; g32 divides 576 and passes.
TEST(KernelRules, AnEagle3HeadsFirstBuiltQkvProjIsJudgedToo) {
  EXPECT_EQ(FirstBuiltInWidth(ModelFamily::kEagle3, 576, kQkv, 1152), 576);
  EXPECT_EQ(FirstBuiltInWidth(ModelFamily::kEagle3, 576, kO, 1152), 0);    // not qkv_proj
  EXPECT_EQ(FirstBuiltInWidth(ModelFamily::kEagle3, 576, kQkv, 576), 0);   // a later layer
  EXPECT_EQ(FirstBuiltInWidth(ModelFamily::kDFlash, 576, kQkv, 1152), 0);  // not EAGLE-3
  EXPECT_EQ(FirstBuiltInWidth(ModelFamily::kEagle3, std::nullopt, kQkv, 1152), 0);
  auto judge = [](int64_t group) {
    return JudgeGemm(*FindScheme("w4a16"), group,
                     {.module = kQ,
                      .vllm_module = kQkv,
                      .out = 576,
                      .in = 1152,
                      .fused_out = 960,
                      .first_built_in = 576},
                     1);
  };
  const GemmJudgement g128 = judge(128);
  ASSERT_TRUE(g128.plan_rule);
  EXPECT_NE(g128.plan_rule->find("vLLM first builds model.layers.0.self_attn.qkv_proj with "
                                 "in_features 576"),
            std::string::npos)
      << *g128.plan_rule;
  EXPECT_NE(g128.plan_rule->find("not a multiple of the group size 128"), std::string::npos)
      << *g128.plan_rule;
  // At g32 vLLM 0.32's kernels take both builds (576 = 18 x 32); the plan's own rule still keeps
  // Marlin's old 128-column tile for releases before the padding, on the first build as on any
  // 576-column Linear.
  const GemmJudgement g32 = judge(32);
  EXPECT_FALSE(g32.cuda || g32.cpu || g32.split);
  // Without the first build, 1152 = 9 x 128 passes: the rule is the first build's.
  EXPECT_FALSE(
      JudgeGemm(*FindScheme("w4a16"), 128,
                {.module = kQ, .vllm_module = kQkv, .out = 576, .in = 1152, .fused_out = 960}, 1)
          .plan_rule);
}

// vLLM 0.32 on each platform for one pack-quantized Linear; the same cases as
// tests/python/test_kernel_rules.py WNA16_GRID, whose expectations vLLM's own create_weights
// confirms. `out`/`in` are per rank, `full_in` the layer's input columns.
struct Wna16Case {
  int bits;
  bool symmetric;
  int64_t group, out, in, full_in;
  bool row_parallel;
  bool cuda_ok, cpu_ok;
  std::string_view cuda_says, cpu_says;  // a piece of vLLM's message where it refuses
};

constexpr Wna16Case kWna16Grid[] = {
    // out 48/64/96: Marlin pads on CUDA; the CPU build needs multiples of 32.
    {4, true, 128, 48, 256, 256, true, true, false, "",
     "Output size (48) not supported by CPUWNA16, supported sizes are multiples of 32"},
    {4, true, 128, 64, 256, 256, true, true, true, "", ""},
    {4, true, 128, 96, 256, 256, true, true, true, "", ""},
    // in 96/128 channel-wise: both take 96 (CPU needs % 32); 80 fails on the CPU only.
    {4, true, -1, 128, 96, 96, false, true, true, "", ""},
    {4, true, -1, 128, 128, 128, false, true, true, "", ""},
    {4, true, -1, 128, 80, 80, false, true, false, "",
     "Input size (80) not supported by CPUWNA16, supported sizes are multiples of 32"},
    // --tp 2 splitting a group of 128 (in 384 -> 192 per rank): no kernel anywhere.
    // (Hopper's Machete takes the tiles, then create_weights' whole-groups check raises.)
    {4, true, 128, 128, 192, 384, true, false, false,
     "Weight input_size_per_partition=192 for layer", "Weight input_size_per_partition=192"},
    // Group sizes: 16 has no CUDA kernel (Marlin -1/32/64/128, Triton adds 256) but is even for
    // the CPU; 256 runs on Triton W4A16 and the CPU.
    {4, true, 16, 128, 256, 256, true, false, true, "Group size (16) not supported by Marlin", ""},
    {4, true, 256, 128, 256, 256, true, true, true, "", ""},
    // 8-bit: no CPU kernel at all; zero points only on Hopper's Machete (fused N % 128).
    {8, true, 128, 48, 256, 256, true, true, false, "",
     "Quant type (uint8b128) not supported by CPUWNA16"},
    {8, false, 128, 128, 256, 256, true, true, false, "", "Quant type (uint8) not supported"},
    {8, false, 128, 64, 256, 256, true, false, false,
     "Output features size must be divisible by 128", "Quant type (uint8) not supported"},
    {4, false, 128, 48, 256, 256, true, true, false, "", "Output size (48) not supported"},
};

TEST(KernelRules, Wna16PerPlatformAtVllm032) {
  for (const Wna16Case& c : kWna16Grid) {
    const QuantScheme& scheme = *FindSchemeFor("pack-quantized", "int", c.bits, c.symmetric, "");
    const KernelRule& row = *KernelRuleFor(scheme);
    const GemmPartition p{.module = kO,
                          .vllm_module = kO,
                          .out = c.out,
                          .in = c.in,
                          .fused_out = c.out,
                          .full_in = c.full_in,
                          .bits = c.bits,
                          .symmetric = c.symmetric,
                          .group_size = c.group,
                          .row_parallel = c.row_parallel};
    const std::string where = fmt::format("{} {}-bit g{} [{}, {}] of {}", row.scheme, c.bits,
                                          c.group, c.out, c.in, c.full_in);
    auto cuda = row.cuda_rule(p);
    auto cpu = row.cpu_rule(p);
    EXPECT_EQ(!cuda, c.cuda_ok) << where << ": " << cuda.value_or("");
    EXPECT_EQ(!cpu, c.cpu_ok) << where << ": " << cpu.value_or("");
    if (cuda) {
      EXPECT_NE(cuda->find(c.cuda_says), std::string::npos) << where << ": " << *cuda;
    }
    if (cpu) {
      EXPECT_NE(cpu->find(c.cpu_says), std::string::npos) << where << ": " << *cpu;
    }
  }
}

// The plan keeps the old Marlin tiles (out % 64, in % 128) for every width, through the table,
// the widths without a vLLM kernel too.
TEST(KernelRules, PlanKeepsMarlinTilesFromBeforePadding) {
  EXPECT_FALSE(Judge("w4a16", kO, kO, 64, 256, 1).plan_rule);
  auto out = Judge("w4a16", kO, kO, 96, 256, 1).plan_rule;
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "out_features per partition 96 is not a multiple of 64 (Marlin)");
  auto in = Judge("w8a16", kO, kO, 128, 384, 2).plan_rule;  // row-parallel: 192 per rank
  ASSERT_TRUE(in);
  EXPECT_EQ(*in, "in_features per partition 192 is not a multiple of 128 (Marlin)");
  // vLLM 0.32 takes out 96 on both platforms, and an out 48 on CUDA only.
  auto v96 = Judge("w4a16", kO, kO, 96, 256, 1, 96);
  EXPECT_FALSE(v96.split || v96.cuda || v96.cpu);
  auto v48 = Judge("w4a16", kO, kO, 48, 256, 1, 48);
  EXPECT_FALSE(v48.cuda);
  EXPECT_TRUE(v48.cpu);
  // Column-parallel q/k/v at --tp 2: the fused N (q 256 + k 64 + v 64 = 384) splits to 192.
  auto qkv = Judge("w4a16", kQkv, kQkv, 64, 256, 2, 384);
  EXPECT_FALSE(qkv.split || qkv.cuda || qkv.cpu);
  EXPECT_TRUE(Judge("w4a16", kQkv, kQkv, 64, 256, 3, 384).split);
  auto odd = Judge("w3a16", kO, kO, 96, 256, 1);
  ASSERT_TRUE(odd.plan_rule);
  EXPECT_EQ(*odd.plan_rule, "out_features per partition 96 is not a multiple of 64 (Marlin)");
  EXPECT_FALSE(odd.split || odd.cuda || odd.cpu);  // no kernel to ask: check reports the scheme
}

}  // namespace
}  // namespace spk
