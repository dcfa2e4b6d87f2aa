// The draft checks of `sparkulator check` whose outcome depends on the vLLM release or on vLLM's
// defaults: quantized DFlash q/k/v (fails on old vLLM and on Laguna, loads on Qwen3 DFlash with
// vLLM 0.32), a Laguna DFlash draft that stores q/k/v unfused, and an EAGLE-3 head without aux
// layer ids (vLLM's default layers of the target must give fc as many hidden states as it takes).
// The versions and code markers live in one table (check/vllm_rules.h); this file turns what the
// checker saw in the checkpoint (DraftFacts) into Findings.
//
// Pure function over values; thread-safe. No errors: every problem is a Finding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "check/findings.h"
#include "check/vllm_rules.h"
#include "model/model_config.h"
#include "vllm/family.h"

namespace spk {

struct DraftFacts {
  const ModelConfig* config = nullptr;  // REQUIRES: non-null
  FamilyDetection family;
  // Checkpoint modules of attention q/k/v (or fused qkv_proj) that vLLM builds quantized.
  std::vector<std::string> quantized_qkv;
  // Checkpoint modules stored as q_proj/k_proj/v_proj (Laguna DFlash needs qkv_proj).
  std::vector<std::string> unfused_qkv;
  std::optional<std::vector<int64_t>> fc_shape;  // fc.weight [out, in] (dense or weight_shape)
  std::optional<int64_t> target_layers;          // the target's layer count, when known
};

// vLLM's model file for a DFlash draft of this config ("qwen3_dflash.py", "laguna_dflash.py").
std::string DFlashModelFile(const ModelConfig& config);

// The EAGLE-3 aux layer ids the head's config gives vLLM (eagle_aux_hidden_state_layer_ids, top
// level or in eagle_config), empty when none.
std::vector<int64_t> Eagle3AuxLayerIds(const ModelConfig& config);

std::vector<Finding> CheckDraftAgainstVllm(const DraftFacts& facts, const VllmTarget& target);

}  // namespace spk
