// The options that choose a quantization plan, shared by `quantize` and `inspect` (and by the
// Python quantize() and inspect(), python/src/api.cc) so that every side describes the same run
// the same way: one row each (tools/option_table.h) gives the CLI flag and the Python parameter.
//
// Errors: ApplyPlanFlags returns Usage for an unknown scheme or preset, or a group size the scheme
// does not take; nothing else fails.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "option_table.h"
#include "quantize/quantize.h"

namespace spk::cli {

// The plan options as given (the CLI's defaults are these initial values).
struct PlanFlags {
  std::string scheme = "w4a16";
  std::optional<int64_t> group_size;  // nullopt: the scheme's default
  std::string preset = "auto";
  std::vector<std::string> ignore;
  int tp = 1;
  std::optional<int64_t> target_layers;  // nullopt (or 0): from config.json
  std::string vllm_version;              // "": the newest module map's release
  std::string target;                    // "": none
  bool allow_unloadable = false;
};

// --scheme, --group-size, --preset, --ignore, --tp, --target-layers, --vllm-version, --target,
// --allow-unloadable.
std::span<const OptionRow<PlanFlags>> PlanOptionRows();

// Registers the rows on `sub` (with the scheme list and the built-in module maps in the help).
void AddPlanFlags(CLI::App* sub, PlanFlags* flags);

// Copies the parsed PlanFlags into `options`.
Status ApplyPlanFlags(const PlanFlags& flags, QuantizeOptions* options);

}  // namespace spk::cli
