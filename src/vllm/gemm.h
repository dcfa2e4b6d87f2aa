// The one judge of a quantized Linear's GEMM: given a scheme row of quant/scheme.h, a group size,
// the Linear's geometry and a --tp, it splits the layer per rank once (row-parallel layers split
// their input columns, column-parallel ones their rows, replicated ones neither) and applies the
// scheme's kernel row (vllm/kernel_rules.h) to that partition: the rule the plan keeps a
// module dense for, and, for pack-quantized rows, what vLLM 0.32's kernel chooser does on a CUDA
// GPU and on its CPU build. The plan (KeepKernelRuleBreaksDense), `check` (the kernel-rule
// findings) and through the plan `inspect` ask it; nothing else splits a layer per rank.
//
// Pure functions over values; thread-safe. No errors: a broken rule is a value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/scheme.h"
#include "vllm/family.h"
#include "vllm/kernel_rules.h"
#include "vllm/vllm_module_map.h"

namespace spk {

// One Linear of a checkpoint as vLLM builds it, over all ranks.
struct GemmGeometry {
  std::string_view module;       // checkpoint module name ("layers.0.self_attn.k_proj")
  std::string_view vllm_module;  // the (fused) vLLM module it loads into (".../qkv_proj")
  int64_t out = 0;               // this module's output rows
  int64_t in = 0;                // input columns
  int64_t fused_out = 0;         // rows of the whole fused GEMM (q+k+v); 0: the module alone
  // How vLLM splits it over --tp, from the module map of its architecture (map_rules.h
  // MapParallelStyle). kUnknown, for an architecture no map knows: by the leaf name, as vLLM's
  // common decoders build them (o_proj, down_proj, out_proj, dense_4h_to_h row-parallel; fc
  // replicated, as in the DFlash and EAGLE-3 drafts; every other Linear column-parallel).
  ParallelStyle parallel = ParallelStyle::kUnknown;
  // The input width vLLM first builds the module with, under the same quantization config, before
  // it replaces the layer by this one (FirstBuiltInWidth); 0: built once. Its rules are judged
  // first, since vLLM fails on the first build.
  int64_t first_built_in = 0;
  // vLLM permutes the module's rows, and its scales' with them, for its rotary layout as it loads
  // it (RowsPermutedForRotary): per-block FP8 scales cannot be permuted so.
  bool rows_permuted = false;
};

// Whether vLLM's load_weights permutes the rows of checkpoint module `module` for its rotary
// layout: Llama4's q_proj and k_proj (llama4.py permute_qk_weight_for_rotary, which EAGLE Llama4's
// load_weights calls too), by config.json's `architectures`.
bool RowsPermutedForRotary(const std::vector<std::string>& architectures, std::string_view module);

// The input width vLLM first builds `vllm_module` (of `in` columns) with, when it then replaces
// the layer; 0 when it builds it once. vLLM's EAGLE-3 Llama and Qwen3 heads (llama_eagle3.py,
// qwen3_eagle3.py): the decoder layer's parent class builds its qkv_proj with in = hidden_size
// under the draft's quantization config, then the head's layer 0 overrides it with a 2 x
// hidden_size one. The first build already checks the group size: vLLM 0.32 refuses a W4A16 g128
// head of SmolLM2-135M (hidden 576) with "input_size_per_partition=576 ... is not divisible by
// group_size=128". (DeepSeek's EAGLE-3 head passes its input width to the attention directly.)
int64_t FirstBuiltInWidth(ModelFamily family, std::optional<int64_t> hidden_size,
                          std::string_view vllm_module, int64_t in);

struct GemmJudgement {
  const KernelRule* row = nullptr;  // the scheme's kernel row (every scheme row has one)
  // The rule the plan applies, broken: the layer does not split over --tp, a partition holds a
  // partial group or FP8 block, or the row's rule fails (for pack-quantized rows Marlin's tile
  // rule from before vLLM padded it, which `check` applies to releases before
  // kFirstPaddedMarlinVllm). nullopt: the plan quantizes the module.
  std::optional<std::string> plan_rule;
  // Pack-quantized rows with a kernel chooser (4 and 8 bits) only, as vLLM 0.32 does it: `split`
  // when the layer or its fused GEMM does not split over --tp; else vLLM's error on a CUDA GPU and
  // on the CPU build (nullopt: a kernel takes the shape).
  std::optional<std::string> split, cuda, cpu;
};

GemmJudgement JudgeGemm(const QuantScheme& scheme, int64_t group_size, const GemmGeometry& gemm,
                        int tp);

}  // namespace spk
