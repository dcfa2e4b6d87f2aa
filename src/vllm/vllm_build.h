// What vLLM builds for one stored tensor: the one decision that the plan (what quantize writes),
// `check` (what it judges a checkpoint by) and `inspect` share, so that they cannot disagree.
//
// DecideVllmBuild answers, for a tensor of a checkpoint served by the release of `map` with the
// weights of `scheme`: a quantized Linear; a dense Linear, and why (a router vLLM builds without
// the quant config, the draft family's rule, the module map's verdict, the target's quantization
// config); not a Linear at all (an embedding, a norm, a head, a buffer); or refused, with what
// vLLM says (a draft built under the target's quantization config that the target cannot give
// it). The rules, first that applies wins: non-weights and what vLLM never builds as a Linear
// (where the map lists the module as a quantized Linear, the map decides: Qwen4-exp MTP's
// mtp.fc_embedding); the target's config for a draft that takes it; routers; the family rules;
// the module map (map_rules.h), whose verdict is vLLM's under the compressed-tensors format of
// `scheme` (the map's scheme_verdicts: MapContext::scheme_format), so a module vLLM builds dense
// under FP8 but quantized under W4A16 is planned and checked dense for FP8 only (where the map
// could not build the architecture under that format, the W4A16 verdict, with
// SchemeNotBuiltWarning). Right after the target's config: a Linear whose load_weights takes
// only dense parameter names (the map's load_weights_takes_only: LongCat MTP) is dense under
// any scheme that stores another name. The user's --ignore and the kernel rules
// (gemm.h) are the plan's, on top. A draft embedded in its target that vLLM builds dense
// (EmbeddedDraftKeepReason) is decided right after the non-Linears, ahead of the target's config.
//
// Pure functions over values; thread-safe. No errors: every tensor gets a decision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_config.h"
#include "model/tensor_meta.h"
#include "quant/scheme.h"
#include "tensor/dtype.h"
#include "vllm/family.h"
#include "vllm/map_rules.h"
#include "vllm/target_model.h"

namespace spk {

// What the decision reads about the checkpoint; every pointer outlives the call.
struct BuildInputs {
  const ModelConfig* config = nullptr;      // never null
  const FamilyDetection* family = nullptr;  // never null; with ApplyModuleMap's additions
  const MapContext* map = nullptr;          // never null; empty when no map applies
  const VllmNaming* naming = nullptr;       // never null
  const QuantScheme* scheme = nullptr;      // the weights' scheme; null when unknown
  int64_t group_size = 0;
  const TargetModel* target = nullptr;  // --target, or null
};

enum class Built { kQuantizedLinear, kDenseLinear, kNotALinear, kRefused };
// Which rule made a Linear dense (or refused it).
enum class DenseBy { kNone, kRouter, kFamily, kMap, kTargetConfig, kEmbeddedDraft, kLoadWeights };

struct BuildDecision {
  Built built = Built::kNotALinear;
  DenseBy by = DenseBy::kNone;
  std::string reason;  // why not a quantized Linear; for kRefused what vLLM does and the fix
  // What the map says of it and what the family keeps dense, whatever rule decided: check reports
  // a quantized module against each with its own finding code.
  MapJudgement map;
  std::optional<std::string> family_keep;
  // Why the release's load_weights cannot take the module stored as the scheme stores it
  // (LoadWeightsRefusal, map_rules.h), whatever rule decided: check fails it stored quantized.
  std::optional<std::string> load_weights_refusal;
  bool is_linear() const {
    return built == Built::kQuantizedLinear || built == Built::kDenseLinear ||
           built == Built::kRefused;
  }
};

// `t.name` is the stored name of the weight ("....weight"); for a module stored quantized, check
// passes its name with ".weight" and a 2-D float shape (what it was before quantization).
BuildDecision DecideVllmBuild(const BuildInputs& in, const TensorMeta& t);

// Why vLLM never builds the tensor `t` of checkpoint module `module` (its name without ".weight")
// as a quantizable Linear (embedding, lm_head, norm, non-float or non-2-D), by the name rule alone,
// or nullopt for a Linear weight. DecideVllmBuild applies it with the map's override.
std::optional<std::string> NotALinearReason(const TensorMeta& t, std::string_view module);

// Why vLLM builds the Linear `module` dense as part of a draft embedded in its target's checkpoint
// that vLLM builds with quantization_config None (Mistral Large 4's DSpark draft, `mtp_dspark.*`),
// or nullopt. It holds for every family and preset (what vLLM builds, not a recipe), and ahead of
// the target's own quantization config: the draft never reads it.
std::optional<std::string> EmbeddedDraftKeepReason(std::string_view module);

// Why the draft family keeps the Linear `module` dense (DFlash q/k/v and g_proj, MTP eh_proj), or
// nullopt. Always nullopt when the family rules are off (--preset none).
std::optional<std::string> FamilyKeepReason(const FamilyDetection& family, std::string_view module);

// FamilyKeepReason where the module map knows better: an MTP layer's Linear that the map shows vLLM
// builds quantized (Qwen3-Next, Qwen3.5, Exaone MTP's `mtp.fc`, a ColumnParallelLinear with a
// scheme) is not kept dense by the MTP rule, which is for the `eh_proj` vLLM builds as a plain
// nn.Linear. The DFlash rules stay: they keep q/k/v dense for the releases that read them directly.
std::optional<std::string> FamilyKeepReason(const FamilyDetection& family, const MapContext& map,
                                            std::string_view module);

// "vLLM R builds A (file) under the target's quantization config and never reads the draft's
// own", or "" when the map's architecture reads its own: the sentence the plan's refusal and
// check's vllm-map-draft-takes-target-config finding share.
std::string TargetConfigOwner(const MapContext& map);

}  // namespace spk
