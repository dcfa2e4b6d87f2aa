#include "vllm/gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "base/strings.h"
#include "vllm/module_pattern.h"

namespace spk {
namespace {

// The split of a Linear no module map describes, by its leaf name (gemm.h GemmGeometry).
ParallelStyle StyleByName(std::string_view module) {
  std::string_view leaf = Leaf(module);
  if (leaf == "o_proj" || leaf == "down_proj" || leaf == "out_proj" || leaf == "dense_4h_to_h") {
    return ParallelStyle::kRow;
  }
  return leaf == "fc" ? ParallelStyle::kReplicated : ParallelStyle::kColumn;
}

ParallelStyle StyleOf(const GemmGeometry& g) {
  return g.parallel != ParallelStyle::kUnknown ? g.parallel : StyleByName(g.vllm_module);
}

// The [out, in] one --tp partition of a layer split `style` holds, or the reason it does not split.
std::optional<std::string> SplitForTp(ParallelStyle style, int tp, int64_t* out, int64_t* in) {
  if (style == ParallelStyle::kRow) {
    if (*in % tp != 0) return fmt::format("in_features {} does not split over --tp {}", *in, tp);
    *in /= tp;
  } else if (style != ParallelStyle::kReplicated) {
    if (*out % tp != 0) return fmt::format("out_features {} does not split over --tp {}", *out, tp);
    *out /= tp;
  }
  return std::nullopt;
}

// True unless `module` is a shard of a fused module other than its last (q or k of q/k/v, gate of
// gate/up): vLLM concatenates the shards in the order of StandardFusedMapping.
bool IsLastFusedShardOrAlone(std::string_view module) {
  const std::string_view leaf = Leaf(module);
  for (const auto& [fused, shards] : StandardFusedMapping()) {
    auto it = std::find(shards.begin(), shards.end(), leaf);
    if (it != shards.end()) return std::next(it) == shards.end();
  }
  return true;
}

// The layer on one rank: its own rows and columns and the rows of its whole fused GEMM, with why
// --tp does not split the layer (`split`) or its fused GEMM (`fused_split`).
struct RankPartition {
  int64_t out = 0, in = 0, fused_out = 0;
  std::optional<std::string> split, fused_split;
};

RankPartition PartitionForRank(const GemmGeometry& g, int tp) {
  RankPartition p;
  p.out = g.out;
  p.in = g.in;
  p.fused_out = g.fused_out > 0 ? g.fused_out : g.out;
  p.split = SplitForTp(StyleOf(g), tp, &p.out, &p.in);
  int64_t unused_in = g.in;
  p.fused_split = SplitForTp(StyleOf(g), tp, &p.fused_out, &unused_in);
  return p;
}

// Pack-quantized: a Marlin group size, whole groups over all ranks and on each, and the row's
// Marlin tile rule from before vLLM padded it (kernel_rules.h says why the plan keeps it), judged
// per member: the fused GEMM's split is vLLM 0.32's question (JudgeGemm's `split`).
std::optional<std::string> PackedPlanRule(const KernelRule& row, int64_t group_size,
                                          const GemmGeometry& g, const RankPartition& p) {
  if (group_size != kChannelWise && !IsMarlinGroupSize(group_size)) {
    return fmt::format("group size {} has no Marlin kernel (use {})", group_size,
                       GroupSizeList(kMarlinGroupSizes));
  }
  if (group_size > 0 && g.in % group_size != 0) {
    return fmt::format("in_features {} is not a multiple of the group size {}", g.in, group_size);
  }
  if (p.split) return p.split;
  if (auto broken = row.rule(GemmPartition{
          .module = g.vllm_module, .vllm_module = g.vllm_module, .out = p.out, .in = p.in})) {
    return broken;
  }
  if (group_size > 0 && p.in % group_size != 0) {
    return fmt::format("in_features per partition {} is not a multiple of the group size {}", p.in,
                       group_size);
  }
  return std::nullopt;
}

// The float and int8 formats: a tensor-parallel shard holds whole groups (FP8 blocks may be
// partial in the rows only: vLLM's block kernels need whole column blocks, compressed-tensors'
// initialize.py says so, and model_free_ptq fails to save a weight with a partial column block),
// then the row's vLLM kernel rule on the fused GEMM's partition.
std::optional<std::string> FormatPlanRule(const QuantScheme& scheme, const KernelRule& row,
                                          int64_t group_size, const GemmGeometry& g,
                                          const RankPartition& p, int tp) {
  if (p.split) return p.split;
  const bool block = scheme.strategy == WeightStrategy::kBlock;
  const int64_t width = block ? 128 : group_size;
  if (width > 0 && p.in % width != 0) {
    return block
               ? fmt::format(
                     "in_features per partition {} is not a multiple of the 128-column block", p.in)
               : fmt::format(
                     "in_features per partition {} is not a multiple of the group "
                     "size {}",
                     p.in, width);
  }
  if (p.fused_split) return p.fused_split;
  if (block && g.rows_permuted) {
    // vLLM 0.34.0 raised "RuntimeError: shape '[2, 0, 2, 2]' is invalid for input of size 2"
    // loading an EAGLE Llama4 head's FP8-block k_proj scale (llama4.py:836).
    return fmt::format(
        "vLLM's Llama4 load_weights permutes {}'s rows for its rotary layout, scales too, which "
        "per-block scales cannot follow (llama4.py permute_qk_weight_for_rotary: \"permutations "
        "are not feasible only for per-block (e.g. DeepSeek 128x128). For per-block "
        "quantization, consider not quantizing q/k_proj.\")",
        g.module);
  }
  return KernelRuleBreak(row,
                         GemmPartition{.module = g.module,
                                       .vllm_module = g.vllm_module,
                                       .out = p.out,
                                       .in = p.in,
                                       .fused_out = p.fused_out,
                                       .last_fused_member = IsLastFusedShardOrAlone(g.module),
                                       .rows_split = tp > 1 && StyleOf(g) == ParallelStyle::kColumn,
                                       .tp = tp});
}

}  // namespace

int64_t FirstBuiltInWidth(ModelFamily family, std::optional<int64_t> hidden_size,
                          std::string_view vllm_module, int64_t in) {
  if (family != ModelFamily::kEagle3 || !hidden_size || Leaf(vllm_module) != "qkv_proj") return 0;
  return in == 2 * *hidden_size ? *hidden_size : 0;
}

bool RowsPermutedForRotary(const std::vector<std::string>& architectures, std::string_view module) {
  const std::string_view leaf = Leaf(module);
  if (leaf != "q_proj" && leaf != "k_proj" && leaf != "wq" && leaf != "wk") return false;
  return std::any_of(architectures.begin(), architectures.end(),
                     [](const std::string& a) { return a.find("Llama4") != std::string::npos; });
}

GemmJudgement JudgeGemm(const QuantScheme& scheme, int64_t group_size, const GemmGeometry& g,
                        int tp) {
  if (g.first_built_in > 0 && g.first_built_in != g.in) {
    GemmGeometry first = g;
    first.in = g.first_built_in;
    first.first_built_in = 0;
    GemmJudgement j = JudgeGemm(scheme, group_size, first, tp);
    if (j.plan_rule || j.split || j.cuda || j.cpu) {
      for (std::optional<std::string>* s : {&j.plan_rule, &j.split, &j.cuda, &j.cpu}) {
        if (*s) {
          **s = fmt::format(
              "vLLM first builds {} with in_features {} (the decoder layer's own, which the "
              "EAGLE-3 head then replaces by its {}-column one), and {}",
              g.vllm_module, first.in, g.in, **s);
        }
      }
      return j;
    }
  }
  GemmJudgement j;
  j.row = KernelRuleFor(scheme);
  const RankPartition p = PartitionForRank(g, tp);
  if (scheme.format != "pack-quantized") {
    j.plan_rule = FormatPlanRule(scheme, *j.row, group_size, g, p, tp);
    return j;
  }
  j.plan_rule = PackedPlanRule(*j.row, group_size, g, p);
  if (j.row->cuda_rule == nullptr) return j;
  j.split = p.split ? p.split : p.fused_split;
  if (j.split) return j;
  const GemmPartition rank{.module = g.vllm_module,
                           .vllm_module = g.vllm_module,
                           .out = p.out,
                           .in = p.in,
                           .fused_out = p.fused_out,
                           .tp = tp,
                           .full_in = g.in,
                           .bits = scheme.bits,
                           .symmetric = scheme.symmetric,
                           .group_size = group_size,
                           .row_parallel = StyleOf(g) == ParallelStyle::kRow};
  j.cuda = j.row->cuda_rule(rank);
  j.cpu = j.row->cpu_rule(rank);
  return j;
}

}  // namespace spk
