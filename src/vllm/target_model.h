// The target model a draft is served with (`--target T` of quantize, inspect and check): its
// config.json, its precision and, for a compressed-tensors target, the scheme and ignore list vLLM
// builds a draft under when the draft takes the target's quantization config
// (MappedArchitecture::takes_target_quant_config). One reading of `--target` for every command.
//
// Value type, no ownership. LoadTargetModel reads through the FileSystem given; errors: NotFound
// for a target that cannot be found, InvalidInput for a config.json (or hf_quant_config.json)
// that does not parse; a quantization_config it cannot read leaves `scheme` unset.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "model/model_config.h"
#include "model/quant_config.h"
#include "model/target_precision.h"
#include "vllm/module_pattern.h"

namespace spk {

// What `--target` means, for every command's help.
inline constexpr std::string_view kTargetFlagHelp =
    "The target model a draft is served with (folder or org/name)";

struct TargetModel {
  std::string spec;  // as given: a folder or org/name
  std::string dir;   // the folder it resolved to
  ModelConfig config;
  // ModelOpt up to 0.29: hf_quant_config.json's "quantization" object, when config.json has none.
  std::optional<nlohmann::ordered_json> side_quant_config;
  TargetPrecision precision;
  std::string label;         // its quantization in words: "compressed-tensors w4a16 (group 128)"
  std::string quant_method;  // quantization_config's quant_method, "" when dense
  // A compressed-tensors target: its first weight group's registry row (nullopt when it has none)
  // and its ignore list as vLLM matches it.
  std::optional<CheckpointScheme> scheme;
  std::vector<ModulePattern> ignore;
};

Result<TargetModel> LoadTargetModel(FileSystem* fs, const std::string& spec);

}  // namespace spk
