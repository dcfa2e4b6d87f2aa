// The quantization plan: for every tensor of a checkpoint, quantize or keep dense, with the reason,
// and the `ignore` list that makes vLLM agree.
//
// What vLLM builds for each tensor is DecideVllmBuild's (vllm_build.h: not a Linear, a router, the
// family rules, the module map, a draft under the target's quantization config), the decision
// `check` judges by too; on top, the plan applies --ignore (its reason wins), then the Marlin
// kernel rules per tensor-parallel partition; then fused groups (q/k/v, gate/up) are made
// all-dense if any member is dense. A draft that DecideVllmBuild refuses is refused (Usage).
// BuildPlan then writes the ignore list and proves it with the same matcher that `check` uses
// (VerifyIgnoreList): every dense Linear is ignored under vLLM's naming with and without fused-name
// expansion, no quantized Linear is. It refuses (InvalidInput/Usage) rather than plan a checkpoint
// that vLLM would load wrongly. Pure functions over values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "quant/scheme.h"
#include "tensor/dtype.h"
#include "vllm/family.h"
#include "vllm/map_rules.h"
#include "vllm/target_model.h"
#include "vllm/vllm_build.h"

namespace spk {

struct PlanOptions {
  const QuantScheme* scheme = FindScheme("w4a16");  // a row of quant/scheme.h, never null
  int64_t group_size = 128;                         // -1: channel-wise
  Preset preset = Preset::kAuto;
  std::vector<std::string> ignore;  // --ignore entries, exact or "re:" (vLLM names)
  int tp = 1;                       // tensor-parallel size the kernel rules are checked for
  std::optional<int64_t> target_layers;
  std::string vllm_version;  // the vLLM release whose module map judges the plan; "" = newest
  // --target: the model the draft is served with. A draft vLLM builds under the target's
  // quantization config is planned from it, and refused without it (vllm_build.h).
  std::optional<TargetModel> target;
  // Write a scheme whose layout no vLLM release loads (KernelRule::layout_loads_nowhere), with a
  // warning; false: BuildPlan refuses it (Usage).
  bool allow_unloadable = false;
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

}  // namespace spk
