// The quantization plan: for every tensor of a checkpoint, quantize or keep dense, with the reason,
// and the `ignore` list that makes vLLM agree.
//
// The rules, in order (first that applies wins): non-float or non-2-D tensors, embeddings, lm_head,
// index tensors and norms stay as they are; --ignore; routers; the family preset keeps the modules
// vLLM needs dense (docs/vllm.md: DFlash q/k/v and g_proj, EAGLE-3/MTP heads); vLLM's module map
// of the release judged keeps what vLLM does not load quantized (map_rules.h: heads built without
// the quant config, weights read in the forward, modules it does not list); the group rule;
// the Marlin kernel rules per tensor-parallel partition; then fused groups (q/k/v, gate/up) are
// made all-dense if any member is dense. BuildPlan then writes the ignore list and proves it with
// the same matcher that `check` uses (VerifyIgnoreList): every dense Linear is ignored under vLLM's
// naming with and without fused-name expansion, no quantized Linear is. It refuses
// (InvalidInput/Usage) rather than plan a checkpoint that vLLM would load wrongly. Pure functions
// over values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "checkpoint/family.h"
#include "checkpoint/map_rules.h"
#include "checkpoint/model_config.h"
#include "quant/scheme.h"
#include "tensor/dtype.h"

namespace spk {

struct TensorMeta {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  // The fused 3-D expert tensor this 2-D weight was split from (checkpoint/moe.h), else empty.
  std::string split_from;
  // Bytes of the tensor's data. REQUIRES: a shape the safetensors parser (or the plan) validated,
  // so the product cannot overflow.
  uint64_t nbytes() const;
};

struct PlanOptions {
  const QuantScheme* scheme = FindScheme("w4a16");  // a row of quant/scheme.h, never null
  int64_t group_size = 128;                         // -1: channel-wise
  Preset preset = Preset::kAuto;
  std::vector<std::string> ignore;  // --ignore entries, exact or "re:" (vLLM names)
  int tp = 1;                       // tensor-parallel size the kernel rules are checked for
  std::optional<int64_t> target_layers;
  std::string vllm_release;  // the vLLM release whose module map judges the plan; "" = newest
};

enum class TensorAction { kKeep, kQuantize };

struct TensorPlan {
  std::string tensor;       // checkpoint tensor name
  std::string vllm_module;  // vLLM module (fused name) for Linear weights, else empty
  bool is_linear = false;   // a weight vLLM builds as a Linear layer (targets: ["Linear"])
  TensorAction action = TensorAction::kKeep;
  std::string reason;
  int64_t out_features = 0, in_features = 0;  // for Linear weights
};

struct QuantPlan {
  FamilyDetection family;
  VllmNaming naming;
  PlanOptions options;
  std::vector<TensorPlan> tensors;          // same order as the input tensors
  std::vector<std::string> ignore_entries;  // to write into quantization_config.ignore
  bool has_lm_head = false;
  MapContext map;                     // vLLM's module map of the release judged (map_rules.h)
  std::vector<std::string> warnings;  // for the user: what the plan could not verify
  size_t quantized_count() const;
};

Result<QuantPlan> BuildPlan(const std::vector<TensorMeta>& tensors, const ModelConfig& config,
                            const PlanOptions& options);

// Checks `ignore` against the plan's Linear modules under vLLM's rules (see module_pattern.h):
// every dense Linear ignored, with and without fused-name expansion; no quantized one. The message
// names the first module that vLLM would get wrong and what it would do.
Status VerifyIgnoreList(const QuantPlan& plan, const std::vector<std::string>& ignore);

// Why vLLM never builds the tensor `t` of checkpoint module `module` (its name without ".weight")
// as a quantizable Linear (embedding, lm_head, norm, router, non-float or non-2-D), or nullopt for
// a Linear weight. Shared by the plan and by `check`.
std::optional<std::string> NotALinearReason(const TensorMeta& t, std::string_view module);

// Why the draft family keeps the Linear `module` dense (DFlash q/k/v and g_proj, MTP eh_proj), or
// nullopt. Always nullopt when the family rules are off (--preset none).
std::optional<std::string> FamilyKeepReason(const FamilyDetection& family, std::string_view module);

// FamilyKeepReason where the module map knows better: an MTP layer's Linear that the map shows vLLM
// builds quantized (Qwen3-Next, Qwen3.5, Exaone MTP's `mtp.fc`, a ColumnParallelLinear with a
// scheme) is not kept dense by the MTP rule, which is for the `eh_proj` vLLM builds as a plain
// nn.Linear. The DFlash rules stay: they keep q/k/v dense for the releases that read them directly.
std::optional<std::string> FamilyKeepReason(const FamilyDetection& family, const MapContext& map,
                                            std::string_view module);

}  // namespace spk
