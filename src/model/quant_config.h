// config.json `quantization_config` for compressed-tensors checkpoints: writing the exact form of
// docs/formats.md ("config.json quantization_config"; valid for compressed-tensors 0.11 through
// 0.20, whose QuantizationArgs forbid unknown keys), and reading one back for `inspect` and
// `check`.
//
// Values only; thread-safe. Errors: ParseQuantizationConfig returns InvalidInput naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "quant/scheme.h"

namespace spk {

// The compressed-tensors release we write for and test against: the one llm-compressor 0.14.0.1
// pins, whose model_free_ptq writes it into quantization_config.version. tests/requirements.txt
// installs it and tests/python/test_quant_interop.py asserts that the two agree.
inline constexpr const char* kCompressedTensorsVersion = "0.19.0";

struct WeightQuantArgs {
  int num_bits = 4;
  bool symmetric = true;
  std::optional<int64_t> group_size;  // nullopt for channel-wise
  std::string strategy = "group";     // "group", "channel", "block" or "tensor_group"
  std::string type = "int";
  std::string format;  // the config group's format, else quantization_config.format
};

struct ConfigGroup {
  std::string name;  // "group_0"
  std::vector<std::string> targets;
  std::optional<WeightQuantArgs> weights;
  bool has_input_activations = false;
  std::string format;
};

struct QuantizationConfigView {
  std::string quant_method;
  std::string format;
  std::vector<ConfigGroup> groups;
  std::vector<std::string> ignore;
  std::vector<std::string> unknown_weight_keys;  // keys older compressed-tensors releases reject
};

// The quantization_config object for one scheme of the registry (quant/scheme.h) targeting Linear
// layers, at `group_size` (kChannelWise: strategy "channel"), with the row's activation arguments.
nlohmann::ordered_json MakeQuantizationConfig(const QuantScheme& scheme, int64_t group_size,
                                              const std::vector<std::string>& ignore);

Result<QuantizationConfigView> ParseQuantizationConfig(std::string_view file_label,
                                                       const nlohmann::ordered_json& config_json);

// The registry row a parsed weight scheme is (by type, num_bits and symmetric), or nullptr.
const QuantScheme* FindSchemeFor(const WeightQuantArgs& args);

// For display: the row's name and the grouping, "w4a16 (group 128)", "w8a16-asym (channel)"; a
// scheme with no row says what it is instead, "float 8-bit (channel), not a sparkulator scheme".
std::string SchemeLabel(const WeightQuantArgs& args);
std::string SchemeLabel(const QuantScheme& scheme, int64_t group_size);

// The scheme a quantized checkpoint was written with: its registry row and kernel parameters.
struct CheckpointScheme {
  const QuantScheme* scheme = nullptr;
  QuantParams params;
};
// The scheme of the first config group with weights of `config`'s quantization_config. Errors:
// InvalidInput naming `file_label` (config.json) when there is none, or it has no registry row, or
// a strategy other than group/channel. Any positive group size is read (llm-compressor writes
// others than the ones we write, and they dequantize the same way).
Result<CheckpointScheme> SchemeFromConfig(const std::string& file_label, const ModelConfig& config);

}  // namespace spk
