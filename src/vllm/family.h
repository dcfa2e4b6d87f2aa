// Draft families and how vLLM names their modules.
//
// DetectFamily reads config.json and the tensor names to tell a DFlash draft (z-lab Qwen3-style or
// poolside Laguna-style), an EAGLE-3 head, a model with MTP layers, or a plain LLM; the preset the
// user picks (--preset) overrides it. VllmNaming turns a checkpoint module name into the name vLLM
// gives the module (the `model.` prefix, the draft's layer offset, fused q/k/v and gate/up; see
// docs/vllm.md and vllm/model_executor/models/qwen3_dflash.py, llama_eagle3.py), which is what
// `ignore` is matched against. Pure functions over values; thread-safe. Errors: ParsePreset returns
// Usage.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"

namespace spk {

struct MappedArchitecture;  // vllm/vllm_module_map.h

enum class ModelFamily { kLlm, kDFlash, kEagle3, kMtp };
std::string_view FamilyName(ModelFamily family);

enum class Preset { kAuto, kLlm, kDFlash, kEagle3, kMtp, kNone };
Result<Preset> ParsePreset(std::string_view name);
std::string_view PresetName(Preset preset);

struct FamilyDetection {
  ModelFamily family = ModelFamily::kLlm;
  bool laguna_style = false;              // fused qkv_proj and g_proj stored in the checkpoint
  bool family_rules = true;               // false for --preset none: only the universal rules apply
  std::string reason;                     // why this family, for `inspect`
  int num_speculative_tokens = 0;         // what the `vllm serve` line uses (NumSpeculativeTokens)
  std::string speculative_tokens_reason;  // where that number comes from
  // From vLLM's module map (map_rules.h ApplyModuleMap), when it knows the architecture:
  std::string vllm_method;  // the --speculative-config method vLLM builds it for ("dspark")
  bool map_draft = false;   // a draft by the map that the markers above call an LLM (EAGLE-1)
  bool map_no_layer_offset = false;  // a draft whose layers vLLM numbers from 0 (Gemma4 DSpark)
  bool map_layers_follow_target = false;  // a draft whose layers vLLM numbers after the target's
  // EAGLE-1's common layout (IsEagle1Layout): served as method "eagle", which vLLM builds as
  // Eagle<architecture> (ResolveMapContext looks that up in the map).
  bool eagle1_layout = false;
  // The other --speculative-config fields the format fixes, as (key, JSON value): a speculators
  // PEAGLE draft is served with {"parallel_drafting", "true"} (the map's SpeculatorsFormat).
  std::vector<std::pair<std::string, std::string>> speculative_config_fields;
};

// `preset` kAuto detects; any other preset is taken as given (and the reason says so).
// `shapes`, parallel to `tensor_names` when given, lets it tell EAGLE-1's fc by its shape.
FamilyDetection DetectFamily(const ModelConfig& config,
                             const std::vector<std::string>& tensor_names, Preset preset,
                             const std::vector<std::vector<int64_t>>* shapes = nullptr);

// EAGLE-1's common layout, which names no Eagle* architecture: a *ForCausalLM config with one
// decoder layer (layers.0 only) and a top-level `fc` whose weight is [H, 2H] (it fuses the
// token embedding with the target's hidden state; stored quantized, only its name is seen).
bool IsEagle1Layout(const ModelConfig& config, const std::vector<std::string>& tensor_names,
                    const std::vector<std::vector<int64_t>>* shapes);

bool IsDraft(ModelFamily family);

struct VllmNaming {
  bool add_model_prefix = false;  // checkpoint names lack vLLM's "model." prefix
  int64_t layer_offset = 0;       // added to "layers.N" (a draft's layers follow the target's)
  bool offset_known = true;       // false: a draft whose target layer count is unknown
  // Before every name: the prefix vLLM's proposer builds a method="draft_model" draft under
  // ("draft_model.", the module map's draft_model_prefix); empty for a model served on its own.
  std::string proposer_prefix;
  // The draft's (or the MTP layers') architecture in the release's module map, where it knows it
  // (AttachModuleMap, vllm/map_rules.h). A module the map lists takes the name vLLM asks
  // the quantization config about there, so that what a model's load_weights renames is
  // followed: MiniMax DSpark's "language_model.model.dspark.layers.N.decoder_layer." is vLLM's
  // "model.layers.M.", an MTP layer's "mtp_block." comes or goes, Nemotron-3.5's "llm." goes.
  // `map_layer_shift` is what vLLM adds to this checkpoint's layer index where the map's tiny
  // model shows it adds one (its target's layer count there). Null: the rules above alone.
  const MappedArchitecture* map_architecture = nullptr;
  int64_t map_layer_shift = 0;
  std::string ToString() const;
};

// Why a draft's per-layer vLLM names are unknown when `offset_known` is false: the plan's error
// and check's finding both start with it.
inline constexpr std::string_view kDraftOffsetUnknownReason =
    "the draft's vLLM layer names depend on the target's layer count, which config.json does not "
    "give";

// `target_layers` (from --target-layers) overrides what the config says.
VllmNaming NamingFor(const FamilyDetection& family, const ModelConfig& config,
                     const std::vector<std::string>& tensor_names,
                     std::optional<int64_t> target_layers);

// vLLM's name of a checkpoint module (no ".weight"), before fusing: "layers.0.mlp.up_proj" ->
// "model.layers.36.mlp.up_proj" for a DFlash draft of a 36-layer target. Where the naming has a
// map architecture listing the module, the map's name with this checkpoint's layer index (a shard
// of a module vLLM fuses keeps its own leaf: "...mtp_block.mlp.gate_proj").
std::string ToVllmModuleName(const VllmNaming& naming, std::string_view checkpoint_module);

// The vLLM module a checkpoint module loads into, after fusing: FusedModuleName of
// ToVllmModuleName, or where the naming's map lists the module, the map's module itself, so that
// a shard vLLM builds as a module of its own stays one (Laguna DFlash's gate_proj and up_proj,
// Gemma4 MTP's q_proj) and a fusion outside the standard ones is followed (Qwen4-exp's
// input_mix_weight_down_block_inject).
std::string ToFusedVllmModuleName(const VllmNaming& naming, std::string_view checkpoint_module);

// The fused module a shard belongs to in vLLM ("...self_attn.q_proj" -> "...self_attn.qkv_proj"),
// or the name itself when it is not a shard.
std::string FusedModuleName(std::string_view vllm_module);

// vLLM's default EAGLE-3 aux layers for a target of `layers` layers when the head names none
// (vllm/model_executor/models/interfaces.py get_eagle3_default_aux_hidden_state_layers, 0.32:
// (2, N // 2, N - 3)), deduplicated and limited to the ids the target collects: 0 (the embedding
// output) to N (after the last layer).
std::vector<int64_t> Eagle3DefaultAuxLayers(int64_t layers);

// Three distinct aux layer ids for a target of `layers` (>= 2) layers: vLLM's default when it gives
// three, else the last three (layers - 2, layers - 1, layers).
std::vector<int64_t> Eagle3AuxLayersFor(int64_t layers);

// The num_speculative_tokens that fits the draft (the `vllm serve` line): DFlash drafts one block,
// the anchor token plus block_size - 1 masked positions (vLLM's DFlash proposer runs 1 + K
// queries), so K = block_size - 1 (block_size at the top level or in dflash_config; 15 when
// absent, the block of 16 the published drafts use); EAGLE-3 the speculators config's
// speculative_tokens, else 3; MTP 1; 0 for an LLM. `why` says where the number comes from.
int NumSpeculativeTokens(ModelFamily family, const ModelConfig& config, std::string* why);

// A speculators-format config's own count (speculators_config.proposal_methods[0].
// speculative_tokens, which vLLM serves it with), or nullopt.
std::optional<int> SpeculatorsSpeculativeTokens(const ModelConfig& config);
inline constexpr std::string_view kSpeculatorsTokensReason =
    "speculators_config.proposal_methods[0].speculative_tokens";

// Layer index of "...layers.N...." if any.
std::optional<int64_t> LayerIndex(std::string_view name);

// The part of vLLM module name `vllm_name` that names its MTP layer ("model.layers.61." or
// "mtp."), or "" when it is not in one.
std::string MtpLayerPrefix(const ModelConfig& config, std::string_view vllm_name);

// Linears of a model's MTP layers quantized to 4 bits or fewer: vLLM loads them, but int4 MTP heads
// have been reported to collapse acceptance where int8 keeps it. `quantized`: vLLM module names
// with their bits. The plan warns with it, `check` raises mtp-layer-low-bits.
struct MtpLowBitsNote {
  std::string message;       // what is stored at how many bits, and the risk
  std::string ignore_flags;  // --ignore 're:...' per MTP layer: requantized with them dense
};
std::optional<MtpLowBitsNote> MtpLayersAtLowBits(
    const ModelConfig& config, const std::vector<std::pair<std::string, int>>& quantized);

}  // namespace spk
