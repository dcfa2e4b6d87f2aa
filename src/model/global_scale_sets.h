// Which quantized weights share one NVFP4 weight_global_scale: the fused sets of llm-compressor's
// model_free_ptq (entrypoints/model_free/microscale.py, _DEFAULT_FUSED_MAPPINGS_LIST): attention
// q/k/v (a module path ending in "attn" or "attention"), MLA wq_a/wkv_a_with_mqa, MLP gate/up
// (ending in "mlp") and MoE w1/w3. vLLM fuses these into one Linear whose global scale must be one
// value, so the reference computes it over the partners even when they sit in different shards.
//
// Pure functions over names; thread-safe. No errors.
#pragma once

#include <string>
#include <string_view>

namespace spk {

// The key naming the fused set of checkpoint tensor `weight_name` ("model.layers.0.self_attn."
// "{q,k,v}_proj.weight"), or `weight_name` itself for a weight that fuses with nothing.
std::string GlobalScaleSetKey(std::string_view weight_name);

}  // namespace spk
