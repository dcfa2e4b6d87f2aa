// MoE checkpoints: the one table of rules for mixture-of-experts tensors, shared by the plan,
// `quantize`, `inspect` and `check` (docs/moe.md says where each rule comes from).
//
// 1. Fused 3-D experts (transformers 5's Qwen3-MoE/Mixtral `mlp.experts.gate_up_proj` [E, 2I, H],
//    `mlp.experts.down_proj` [E, H, I]) are split into per-expert 2-D weights exactly as
//    llm-compressor's model_free_ptq splits them (entrypoints/model_free/converter.py,
//    split_fused_moe_experts): same names, same rows, same bytes. Experts stored hidden-first
//    (Llama4's and gpt-oss's [E, H, 2I]), which the reference splits across the hidden axis, are
//    refused instead.
// 2. Per-expert projections (`...experts.N.{gate,up,down}_proj`, Mixtral's w1/w3/w2) belong to one
//    vLLM module, the layer's RoutedExperts (`...experts`): vLLM loads all of them with the one
//    MoE method it picks from expert 0's scheme (compressed_tensors_moe.py get_moe_method), so
//    they are quantized or kept dense together.
// 3. Routers and gates stay dense, for the reason vLLM gives: the modules vLLM builds with
//    quant_config=None cannot load a quantized weight at all; the ones it builds with the model's
//    quant_config (Qwen2/3-MoE `mlp.gate`) are kept dense and listed in `ignore`, as
//    llm-compressor's MoE examples do (their [experts, hidden] weight also fits no W4A16 kernel for
//    the usual 8-128 experts).
// Pure functions over values; thread-safe. Errors: SplitFusedExperts returns InvalidInput naming
// the tensor where model_free_ptq raises ValueError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace spk {

// One 2-D expert weight cut out of a fused 3-D tensor: rows [row_begin, row_begin + rows) of
// expert `expert`, a contiguous byte range of the source tensor.
struct ExpertSlice {
  std::string name;  // e.g. "model.layers.0.mlp.experts.3.up_proj.weight"
  int64_t expert = 0;
  std::vector<int64_t> shape;  // [rows, cols]
  uint64_t byte_offset = 0;    // into the source tensor's data
};

// The per-expert weights model_free_ptq writes for `name` (dtype, shape): for a 3-D tensor whose
// name contains "gate_up_proj" (split into gate_proj then up_proj, half the rows each) or
// "down_proj" (one down_proj per expert); empty for every other tensor. With the model's
// `hidden_size`, a fused tensor stored hidden-first ([E, H, 2I] gate_up_proj, [E, I, H] down_proj:
// Llama4's and gpt-oss's batched-matmul experts) is refused (InvalidInput) where model_free_ptq
// would split the hidden axis; a shape that cannot tell (2I = H) is split as the reference does.
Result<std::vector<ExpertSlice>> SplitFusedExperts(std::string_view file, std::string_view name,
                                                   DType dtype, const std::vector<int64_t>& shape,
                                                   std::optional<int64_t> hidden_size);

// The RoutedExperts module ("...mlp.experts") that the per-expert projection `module` (a vLLM
// module name without ".weight") is loaded into, or nullopt when it is not an expert projection.
std::optional<std::string> RoutedExpertsModule(std::string_view module);

// Why vLLM needs the router or gate `module` dense (the model file and how it builds it), or
// nullopt when `module` is not a router. `config` gives the architecture.
struct RouterRule {
  std::string reason;
  bool built_without_quant_config = false;  // vLLM passes quant_config=None: quantized never loads
};
std::optional<RouterRule> RouterKeepRule(const ModelConfig& config, std::string_view module);

}  // namespace spk
