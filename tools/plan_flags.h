// The flags that choose a quantization plan, shared by `quantize` and `inspect` so that both
// describe the same run the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "quantize/quantize.h"

namespace spk::cli {

struct PlanFlags {
  std::string scheme = "w4a16";
  std::optional<int64_t> group_size;  // nullopt: the scheme's default
  std::string preset = "auto";
  int64_t target_layers = 0;  // 0: from config.json
};

// Registers --scheme, --group-size, --preset, --ignore, --tp, --vllm-version, --target and
// --target-layers on `sub`.
void AddPlanFlags(CLI::App* sub, QuantizeOptions* options, PlanFlags* flags);

// Copies the parsed PlanFlags into `options` (an unknown scheme or preset, a group size the
// scheme does not take: Usage).
Status ApplyPlanFlags(const PlanFlags& flags, QuantizeOptions* options);

}  // namespace spk::cli
